"""The everyday paths as a user runs them: one ``reconciler`` process per run, beside its peers.

  python -m bench.reconcile_bench [--repeat 5] [--rows dry-run offline noop apply roles] [--kubeconfig FILE]
                                  [--corpus ../shared/corpus/operators] [--no-peers]

Rows (the reconciler as a wheel installs it, see ``startup_bench.installed``; a
cache directory of the run's own, filled by the first run of each row):

  dry-run    ``reconcile --dry-run`` of examples/gitops-repo with no cluster configured (no peer)
  offline    ``resolve --offline`` of the same repository (no peer)
  noop       ``reconcile`` (default ``--wait``) of a repository declaring the five corpus operators with the most
             manifest bytes, once applied: nothing to change. Peers on the same objects: ``kubectl apply
             --server-side`` and the Flux SSA peer (``bench/peers/fluxssa``: ``ApplyAllStaged`` then ``WaitForSet``)
  apply      the first ``reconcile`` of 10 Operators of 100 objects each (a ServiceAccount, a Service, 24 Roles,
             24 RoleBindings and 50 ConfigMaps in the Operator's namespace), every object applied as its
             Operator's installer; peer: ``kubectl apply --server-side`` of the same objects into other
             namespaces. Runs alternate, each into fresh namespaces, medians
  roles      the same with 24 Roles per Operator and nothing else (240 Roles)
  unused     a no-op ``reconcile`` of examples/gitops-repo, alternately without and with an unused
             30,000-bundle catalog (``bench.gen_catalog``, 2,000 packages) beside its own: what a catalog
             nobody declares from costs, in time and peak RSS (no peer)
  signed     a no-op ``reconcile`` of examples/gitops-repo with its catalog as an image on a loopback registry,
             alternately without and with ``verify`` requiring the image's cosign v3.1.3 signature (a Sigstore
             bundle, signed with the offline flags): on the distribution registry (found under the referrers
             tag schema's tag) and on go-containerregistry's (found through the referrers API); no peer
  watch      ``watch`` of that repository with the unused catalog, ``--interval 1``, for ``--watch-seconds``:
             its resident memory, sampled from /proc every 0.2 s (peak and at the end), and how many
             reconciles it ran (no peer; operator-controller's alert fires at 100 MB)

Against the cluster of ``--kubeconfig`` (an admin's), or a local control plane
started here. Timings are wall clock of whole processes, so the interpreter's
and the Go runtime's start-up count on both sides; the load average at the
end of the run is printed with the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loop_support import ALLOW_ALL, allow_all
from bench.startup_bench import command, installed

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gitops-repo"
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "operators"
ROWS = ("dry-run", "offline", "noop", "apply", "roles", "unused", "signed", "watch")


def timed(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds


def measured(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB, from the child's rusage) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{err[-3000:]}")
    return seconds, usage.ru_maxrss / 1024


# --- repositories --------------------------------------------------------------------------------------------



def declare(repo: Path, name: str, ref: str, namespace: str | None = None) -> None:
    """An Operator installing the bundle at ``ref`` directly, approved by class (its installer still applies it)."""
    install = f"\n  install:\n    namespace: {namespace}" if namespace else ""
    (repo / "operators" / f"{name}.yaml").write_text(
        f"apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: {name}\nspec:\n"
        f"  provisionerClassName: bench-allow-all\n  bundle:\n    name: {name}\n    spec:\n"
        f"      refs: [{ref}]{install}\n")


def new_repo(path: Path) -> Path:
    """A repository of its own reconciler instance, whose Operators are approved by class."""
    (path / "operators").mkdir(parents=True)
    (path / "operators" / "provisioner-class.yaml").write_text(ALLOW_ALL)
    (path / "reconciler.yaml").write_text(f"instance: {path.name}\n")
    return path


def real_operators_repo(path: Path, corpus: Path, kube: Any, count: int = 5) -> tuple[Path, list[str]]:
    """The ``count`` corpus operators with the most manifest bytes that convert and dry-run cleanly."""
    from bench.cluster_bench import largest_real_bundles

    new_repo(path)
    names = []
    for root, op in largest_real_bundles(corpus, kube, count):
        shutil.copytree(root, path / "bundles" / op.name)
        declare(path, op.name, f"file://bundles/{op.name}")
        names.append(op.name)
    return path, names


def plain_bundle(path: Path, namespace: str, roles: int, configmaps: int) -> list[dict]:
    """A plain+v0 bundle of one namespace's objects; the objects, for the peer."""
    objs: list[dict] = []
    if configmaps:
        objs.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "worker", "namespace": namespace}})
        objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": namespace},
                     "spec": {"selector": {"app": "worker"}, "ports": [{"port": 8080, "targetPort": 8080}]}})
    for j in range(roles):
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": f"role{j:02d}", "namespace": namespace},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                                "verbs": ["get", "list", "watch"]},
                               {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
                               {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                "verbs": ["get", "create", "update"]}]})
        if configmaps:
            objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": f"role{j:02d}", "namespace": namespace},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"role{j:02d}"},
                         "subjects": [{"kind": "ServiceAccount", "name": "worker", "namespace": namespace}]})
    for j in range(configmaps):
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"config{j:02d}", "namespace": namespace},
                     "data": {"index": str(j), "payload": "x" * 200}})
    from reconciler import yamlio

    (path / "manifests").mkdir(parents=True)
    (path / "manifests" / "objects.yaml").write_text(yamlio.dump_all(objs))
    (path / "metadata").mkdir()
    (path / "metadata" / "annotations.yaml").write_text(
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n"
        "  operators.operatorframework.io.bundle.package.v1: " + path.name + "\n")
    return objs


# --- peers ---------------------------------------------------------------------------------------------------


def peers(kubeconfig: Path, want: bool) -> dict[str, Any]:
    if not want:
        return {}
    from bench.peers.kubectl import kubectl_binary

    out: dict[str, Any] = {"kubectl": kubectl_binary()}
    try:
        from bench.peers.fluxssa import fluxssa_binary

        out["flux"] = fluxssa_binary()
    except Exception as exc:  # noqa: BLE001 - a peer that cannot be built leaves its column empty
        print(f"the Flux SSA peer is not available: {exc}")
    return out


def write_objects(objs: list[dict], path: Path) -> Path:
    from reconciler import yamlio

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yamlio.dump_all(objs))
    return path


# --- rows ----------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    ap.add_argument("--kubeconfig", type=Path, help="an admin kubeconfig; by default a control plane is started")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--watch-seconds", type=float, default=30.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-reconcile-"))
    python, env = installed(tmp)
    ours = command(python)
    env["RECONCILER_CACHE_DIR"] = str(tmp / "cache")
    rows: list[tuple[str, float, dict[str, float], str]] = []
    plane = None
    try:
        offline_env = {**env, "KUBECONFIG": "", "HOME": str(tmp / "home")}
        (tmp / "home").mkdir()
        repo = tmp / "example"
        shutil.copytree(EXAMPLE, repo)
        if "dry-run" in args.rows:
            first = timed([ours, "reconcile", "--dry-run", str(repo)], offline_env, ok=(1,))
            times = [timed([ours, "reconcile", "--dry-run", str(repo)], offline_env, ok=(1,))
                     for _ in range(args.repeat)]
            rows.append(("reconcile --dry-run, example repository, no cluster", statistics.median(times), {},
                         f"first run (empty cache) {first:.3f} s"))
        if "offline" in args.rows:
            times = [timed([ours, "resolve", "--offline", "--no-write", str(repo)], offline_env)
                     for _ in range(args.repeat)]
            rows.append(("resolve --offline, example repository", statistics.median(times), {}, ""))
        cluster_rows = [r for r in args.rows if r in ("noop", "apply", "roles", "unused", "signed", "watch")]
        if cluster_rows:
            from reconciler.kube.client import Kube, load_api_client

            if args.kubeconfig is None:
                from bench.loop_support import start_plane

                plane = start_plane()
                kubeconfig = Path(plane.kubeconfig_path)
            else:
                kubeconfig = args.kubeconfig
            kube = Kube(load_api_client(str(kubeconfig)))
            tools = peers(kubeconfig, not args.no_peers and any(r in args.rows for r in ("noop", "apply", "roles")))
            cenv = {**env, "KUBECONFIG": str(kubeconfig)}
            if "noop" in args.rows:
                rows.append(noop_row(tmp, args, kube, cenv, ours, tools, kubeconfig))
            for row in ("apply", "roles"):
                if row in args.rows:
                    rows.append(apply_row(tmp, args, row, cenv, ours, tools, kubeconfig))
            if "unused" in args.rows or "watch" in args.rows:
                rows.extend(unused_catalog_rows(tmp, args, cenv, ours))
            if "signed" in args.rows:
                rows.extend(signed_catalog_rows(tmp, args, cenv, ours))
    finally:
        if plane is not None:
            plane.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print(f"\neveryday paths, one process per run, median of {args.repeat}; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| path | reconciler s | kubectl s | ratio | Flux SSA s | ratio | notes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, ours_s, peer_s, note in rows:
        k, f = peer_s.get("kubectl"), peer_s.get("flux")
        print(f"| {label} | {ours_s:.3f} | {f'{k:.3f}' if k else '-'} | {f'{ours_s / k:.2f}' if k else '-'} | "
              f"{f'{f:.3f}' if f else '-'} | {f'{ours_s / f:.2f}' if f else '-'} | {note} |")
    print("\nratio = reconciler / peer (at most 1: as fast as the peer or faster).")


def noop_row(tmp: Path, args: argparse.Namespace, kube: Any, env: dict[str, str], ours: str,
             tools: dict[str, Any], kubeconfig: Path) -> tuple[str, float, dict[str, float], str]:
    repo, names = real_operators_repo(tmp / "real-operators", args.corpus, kube)
    timed([ours, "reconcile", str(repo)], env)             # the first install, waited for until healthy
    timed([ours, "reconcile", str(repo)], env)             # certificates reused from the cluster from now on
    times = [timed([ours, "reconcile", str(repo)], env) for _ in range(args.repeat)]
    objs = applied_objects(kube, names)
    path = write_objects(objs, tmp / "noop-peer" / "objects.yaml")
    peer: dict[str, float] = {}
    # The peers apply the same objects under the reconciler's field manager: nothing changes for them either.
    if "kubectl" in tools:
        peer["kubectl"] = statistics.median(
            timed([str(tools["kubectl"]), f"--kubeconfig={kubeconfig}", "apply", "--server-side",
                   "--field-manager=reconciler", "-f", str(path)], env) for _ in range(args.repeat))
    if "flux" in tools:
        peer["flux"] = statistics.median(
            timed([str(tools["flux"]), f"-kubeconfig={kubeconfig}", "-field-manager=reconciler", "-wait", str(path)],
                  env) for _ in range(args.repeat))
    return (f"no-op reconcile, {len(names)} real operators ({len(objs)} objects), default --wait",
            statistics.median(times), peer, ", ".join(names))


def applied_objects(kube: Any, operators: list[str]) -> list[dict]:
    """What the reconciler applied for these Operators, as a peer would apply it: the live objects without what
    the server sets (status, uid, resourceVersion, managedFields, timestamps)."""
    from reconciler.cluster.status import objects as status_objects

    out = []
    records = status_objects.read_all(kube)
    for name in operators:
        for ref in records[name].inventory:
            info = kube.resource(ref.api_version, ref.kind)
            live = kube.get(info, ref.namespace, ref.name) if info else None
            if live is None:
                continue
            meta = {k: v for k, v in live["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
            out.append({**{k: v for k, v in live.items() if k not in ("metadata", "status")}, "metadata": meta})
    return out


def apply_row(tmp: Path, args: argparse.Namespace, row: str, env: dict[str, str], ours: str,
              tools: dict[str, Any], kubeconfig: Path) -> tuple[str, float, dict[str, float], str]:
    """Each attempt: a fresh repository of 10 Operators, then the same objects into other namespaces by each
    peer (kubectl as the admin; no peer applies as an installer), alternating so load hits every side."""
    roles, configmaps = (24, 50) if row == "apply" else (24, 0)
    operators = 10
    times: dict[str, list[float]] = {"ours": [], "kubectl": [], "flux": []}
    objects = 0
    for attempt in range(args.repeat):
        repo = new_repo(tmp / f"{row}-{attempt}")
        copies: dict[str, list[dict]] = {"kubectl": [], "flux": []}
        for i in range(operators):
            name = f"{row}{attempt}-op{i}"
            objs = plain_bundle(repo / "bundles" / name, f"{name}-ours", roles, configmaps)
            declare(repo, name, f"file://bundles/{name}", f"{name}-ours")
            objects = len(objs) * operators
            for tool, bucket in copies.items():
                bucket.extend(in_namespace(objs, f"{name}-{tool}"))
        times["ours"].append(timed([ours, "reconcile", "--no-wait", str(repo)], env))
        if "kubectl" in tools:
            path = write_objects(copies["kubectl"], tmp / f"{row}-{attempt}-kubectl" / "objects.yaml")
            times["kubectl"].append(timed([str(tools["kubectl"]), f"--kubeconfig={kubeconfig}", "apply",
                                           "--server-side", "--field-manager=bench", "-f", str(path)], env))
        if "flux" in tools:
            path = write_objects(copies["flux"], tmp / f"{row}-{attempt}-flux" / "objects.yaml")
            times["flux"].append(timed([str(tools["flux"]), f"-kubeconfig={kubeconfig}", "-field-manager=bench",
                                        str(path)], env))
    label = (f"first apply, {operators} Operators x {objects // operators} objects ({objects}), as installers"
             if row == "apply" else f"first apply, {objects} Roles ({operators} Operators), as installers")
    peer = {tool: statistics.median(t) for tool, t in times.items() if tool != "ours" and t}
    return label, statistics.median(times["ours"]), peer, "peers write as the admin"


def unused_catalog_rows(tmp: Path, args: argparse.Namespace, env: dict[str, str],
                        ours: str) -> list[tuple[str, float, dict[str, float], str]]:
    """The example repository's no-op reconcile without and with an unused 30,000-bundle catalog (alternating,
    the catalog moved in and out: its cache stays warm, keyed by content), then ``watch`` with it."""
    from bench.gen_catalog import generate

    repo = tmp / "unused-catalog"
    shutil.copytree(EXAMPLE, repo)
    allow_all(repo)
    parked = tmp / "parked" / "unused"
    generate(parked, 2000, 30000)
    timed([ours, "reconcile", str(repo)], env)                       # the first install
    shutil.move(str(parked), repo / "catalogs" / "unused")
    timed([ours, "reconcile", str(repo)], env)                       # fills the catalog cache
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for present in (False, True):
            here = repo / "catalogs" / "unused"
            if present != here.exists():
                shutil.move(str(parked if present else here), here if present else parked)
            runs[present].append(measured([ours, "reconcile", str(repo)], env))
    out = []
    if "unused" in args.rows:
        without = statistics.median(t for t, _ in runs[False]), max(m for _, m in runs[False])
        with_it = statistics.median(t for t, _ in runs[True]), max(m for _, m in runs[True])
        out.append(("no-op reconcile, example repository, no unused catalog", without[0], {},
                    f"peak RSS {without[1]:.0f} MiB"))
        out.append(("no-op reconcile, example repository + unused 30,000-bundle catalog", with_it[0], {},
                    f"+{with_it[0] - without[0]:.3f} s, peak RSS {with_it[1]:.0f} MiB "
                    f"(+{with_it[1] - without[1]:.0f} MiB)"))
    if "watch" in args.rows:
        if not (repo / "catalogs" / "unused").exists():
            shutil.move(str(parked), repo / "catalogs" / "unused")
        out.append(watch_row(repo, env, ours, args.watch_seconds))
    return out


def signed_catalog_rows(tmp: Path, args: argparse.Namespace, env: dict[str, str],
                        ours: str) -> list[tuple[str, float, dict[str, float], str]]:
    """The example's no-op reconcile with its catalog as an image, unverified and verified (alternating), from each
    registry (the same image, so the same install): what checking a cosign v3 bundle adds (the referrers listed,
    the bundle's manifest and blob read, one ECDSA signature checked) to a run that changes nothing."""
    from bench.peers import stop
    from bench.peers.ggcrregistry import ggcrregistry_binary
    from bench.peers.registry import registry_binary
    from reconciler import oci, yamlio
    from tests.bundle.oci_registry import start_referrers_registry, start_registry
    from tests.signing import Cosign

    cosign = Cosign(tmp / "cosign")
    key, pub = cosign.key_pair("catalog")
    repo = tmp / "signed"
    shutil.copytree(EXAMPLE, repo)
    allow_all(repo)
    fs = tmp / "catalog-fs"
    shutil.move(str(repo / "catalogs" / "community"), fs / "configs")
    layout = oci.build_layout(fs, tmp / "catalog-layout", {}).path
    (repo / "keys").mkdir()
    shutil.copyfile(pub, repo / "keys" / "catalog.pub")
    base = yamlio.load_one((repo / "reconciler.yaml").read_text(), "reconciler.yaml")
    verify = {"verify": {"provider": "cosign", "keys": ["keys/catalog.pub"]}}
    started = [start_registry(registry_binary(), tmp / "registry-tag"),
               start_referrers_registry(ggcrregistry_binary(), tmp / "registry-api")]
    out = []
    try:
        refs = []
        for _, registry in started:
            ref = registry.ref("bench/catalog", "v1")
            digest = oci.push_layout(layout, ref)
            cosign.sign(f"{registry.host}/bench/catalog@{digest}", key)
            refs.append(ref)

        def settings(ref: str, verified: bool) -> str:
            return yamlio.dump({**base, "catalogs": {"community": {"image": ref, **(verify if verified else {})}}})

        (repo / "reconciler.yaml").write_text(settings(refs[0], True))
        timed([ours, "reconcile", str(repo)], env)                      # the first install, verified
        for kind, ref in zip(("referrers tag schema", "referrers API"), refs):
            runs: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.repeat):
                for verified in (False, True):
                    (repo / "reconciler.yaml").write_text(settings(ref, verified))
                    runs[verified].append(timed([ours, "reconcile", str(repo)], env))
            without, with_it = statistics.median(runs[False]), statistics.median(runs[True])
            out.append((f"no-op reconcile, example repository, catalog image ({kind}), not verified", without, {},
                        ""))
            out.append((f"no-op reconcile, example repository, catalog image ({kind}), cosign v3 bundle verified",
                        with_it, {}, f"+{(with_it - without) * 1000:.0f} ms"))
    finally:
        for proc, _ in started:
            stop(proc)
    return out


def watch_row(repo: Path, env: dict[str, str], ours: str, seconds: float) -> tuple[str, float, dict[str, float], str]:
    """``watch --interval 1`` for ``seconds``: peak and final resident memory, and the reconciles it ran."""
    log = repo.parent / "watch.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen([ours, "watch", str(repo), "--interval", "1", "--log-format", "json"],
                                stdout=sink, stderr=subprocess.STDOUT, env=env)
        peak = last = 0.0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                fields = dict(line.split(":", 1) for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                              if ":" in line)
                last = int(fields["VmRSS"].split()[0]) / 1024
                peak = max(peak, int(fields["VmHWM"].split()[0]) / 1024)
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    steps = text.count("step ")
    return (f"watch, example repository + unused catalog, --interval 1, {seconds:.0f} s", last, {},
            f"this row's figure is MiB resident at the end, not seconds; peak {peak:.0f} MiB; {steps} steps run")


def in_namespace(objs: list[dict], namespace: str) -> list[dict]:
    """The objects moved to ``namespace`` (created first), for a peer."""
    out: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    for o in objs:
        o = {**o, "metadata": {**o["metadata"], "namespace": namespace}}
        if o["kind"] == "RoleBinding":
            o["subjects"] = [{**s, "namespace": namespace} for s in o["subjects"]]
        out.append(o)
    return out


if __name__ == "__main__":
    main()
