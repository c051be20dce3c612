"""The cluster stage: a no-op sync, and apply throughput beside ``kubectl apply --server-side``.

  python -m bench.cluster_bench [--operators 10 50] [--repeat 5] [--apply-sizes 100 1000 5000] [--apply-repeat 3]
                                [--corpus ../shared/corpus/operators] [--no-kubectl]

Against a control plane started here (kube-apiserver and etcd at the pinned
version), in-process, through ``reconciler.cluster.ownership.sync``:

  no-op, N Operators x 40 objects   N synthetic Operators (a CRD, RBAC, a Deployment, a Service,
                                    Secrets and ConfigMaps each) are applied once, then synced again
                                    --repeat times with nothing changed
  no-op, 5 large real operators     the five corpus operators with the most manifest bytes (big CRDs),
                                    converted by the bundle layer, applied once, then synced again
  apply, K ConfigMaps               K new ConfigMaps in a fresh namespace, applied by one sync: an
                                    Operator's first install (inside the namespace the run makes: created, validated as written);
                                    --apply-repeat runs alternating with kubectl's, medians

Requests are read from the API server's own counter (``apiserver_request_total``
on /metrics) before and after, by verb; the reading of /metrics itself is
subtracted, and so are the API server's own lease renewals and watches. A no-op must make no write: any POST, PUT, PATCH, APPLY or DELETE
that is not a dry-run fails the benchmark, and the generation, digest annotation and our managedFields entry of every
object is compared as well. The peer of a no-op is ``kubectl diff
--server-side`` on the same objects (what a tool that dry-runs every object
pays); the peer of an apply is ``kubectl apply --server-side`` of the same
objects into another fresh namespace. kubectl is built at the cluster's
version by bench/peers/kubectl.py.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.loop_support import start_plane
from reconciler import yamlio
from reconciler.cluster.apply import ANNOTATION_DIGEST, Action, DesiredOperator
from reconciler.cluster.ownership import Request, SyncResult, sync
from reconciler.kube.client import Kube
from reconciler.model.kube import LABEL_OPERATOR, Manifest, ownership_labels

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "operators"
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE"}
# The API server's own housekeeping (its identity lease, the endpoints of the kubernetes Service) and what the
# cluster's controllers and kwok do with the Deployments we apply (ReplicaSets, Pods, Events, LimitRanger's
# lists, status updates), not ours. Our own status objects' status subresource still counts.
_BACKGROUND = {"leases", "endpoints", "endpointslices", "pods", "replicasets", "events", "limitranges",
               "resourcequotas", "nodes"}
_SAMPLE = re.compile(r'^apiserver_request_total\{([^}]*)\}\s+([0-9.e+]+)$')


# --- requests, as the API server counts them ---------------------------------------------------


def request_counts(kube: Kube, by_resource: bool = False) -> Counter[str]:
    """apiserver_request_total summed by verb; dry-run requests counted apart ("PATCH dry-run")."""
    text = kube.transport.send("GET", "/metrics", query=[], headers={"Accept": "text/plain"}, body=None,
                               timeout=kube.timeout).data.decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels.get("resource") in _BACKGROUND or labels.get("verb") == "WATCH":
            continue
        if labels.get("subresource") and labels.get("resource") != "operators":
            continue
        verb = labels.get("verb", "?") + (" dry-run" if labels.get("dry_run") else "")
        if by_resource:
            verb += f" {labels.get('resource', '')}"
        counts[verb] += int(float(match.group(2)))
    return counts


def delta(before: Counter[str], after: Counter[str]) -> Counter[str]:
    out = Counter({k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)})
    out["GET"] -= 1  # the /metrics read that took `before`
    return +out


def writes(counts: Counter[str]) -> int:
    return sum(n for verb, n in counts.items() if verb.split(" ")[0] in WRITE_VERBS and "dry-run" not in verb)


def show(counts: Counter[str], runs: int = 1) -> str:
    return " ".join(f"{verb} {n / runs:.0f}" for verb, n in sorted(counts.items())) or "none"


# --- desired state ------------------------------------------------------------------------------


def _stamp(obj: Manifest, operator: str) -> Manifest:
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **ownership_labels(operator)}
    return out


def synthetic(i: int) -> DesiredOperator:
    """One Operator of 40 objects: a CRD, RBAC, a Deployment and Service, 2 Secrets and 30 ConfigMaps."""
    name, ns, group = f"synth{i:02d}", f"synth{i:02d}-system", f"s{i:02d}.bench.example"
    props = {f"field{j}": {"type": "string", "description": f"setting {j} of the widget"} for j in range(40)}
    objs: list[Manifest] = [
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "metadata": {"name": f"widgets.{group}"},
         "spec": {"group": group, "scope": "Namespaced",
                  "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                  "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                      "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{name}-manager"},
         "rules": [{"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{name}-manager"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{name}-manager"},
         "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": ns}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "leader", "namespace": ns},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "leader", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leader"},
         "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": ns}]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "namespace": ns},
         "spec": {"selector": {"app": name}, "ports": [{"name": "metrics", "port": 8443, "targetPort": 8443}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "controller", "namespace": ns},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": {
                      "serviceAccountName": "controller",
                      "containers": [{"name": "manager", "image": "example.invalid/widget:1.0",
                                      "args": ["--leader-elect", "--metrics-bind-address=:8443"],
                                      "ports": [{"containerPort": 8443, "name": "metrics"}],
                                      "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}}}]}}}},
    ]
    objs += [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"key{j}", "namespace": ns},
              "type": "Opaque", "stringData": {"key": f"value-{j}"}} for j in range(2)]
    objs += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"config{j:02d}", "namespace": ns},
              "data": {f"key{k}": f"value {k} of config {j}" for k in range(5)}} for j in range(30)]
    return DesiredOperator(name, tuple(_stamp(o, name) for o in objs), (ns,), {"package": name},
                           {"name": f"{name}.v1.0.0"})


def configmaps(name: str, ns: str, count: int) -> DesiredOperator:
    objs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{j:05d}", "namespace": ns},
             "data": {"index": str(j), "payload": "x" * 200}} for j in range(count)]
    return DesiredOperator(name, tuple(_stamp(o, name) for o in objs), (ns,), {"package": name},
                           {"name": f"{name}.v1.0.0"})


def largest_real(corpus: Path, kube: Kube, count: int = 5) -> list[DesiredOperator]:
    """The ``count`` corpus operators (newest bundle each) with the most manifest bytes that convert cleanly."""
    return [op for _, op in largest_real_bundles(corpus, kube, count)]


def largest_real_bundles(corpus: Path, kube: Kube, count: int = 5) -> list[tuple[Path, DesiredOperator]]:
    """``largest_real``, with each operator's bundle directory."""
    from bench.bundle_corpus import convert_one, find_bundles, install_stand_ins

    install_stand_ins(kube)
    bundles, _ = find_bundles(corpus)
    newest: dict[str, Path] = {}
    for root in bundles:  # sorted by path; the last of a package is as good a pick as any
        newest[root.relative_to(corpus).parts[0]] = root
    sized = sorted(newest.values(), key=lambda r: -sum(f.stat().st_size for f in (r / "manifests").glob("*")))
    out: list[tuple[Path, DesiredOperator]] = []
    for root in sized:
        outcome = convert_one(corpus, root)
        if outcome.status != "converted" or outcome.rendered is None:
            continue
        rendered = outcome.rendered
        name = rendered.package or root.relative_to(corpus).parts[0]
        op = DesiredOperator(name, tuple(_stamp(o, name) for o in rendered.objects),
                             tuple(dict.fromkeys((rendered.namespace, *rendered.target_namespaces))),
                             {"package": name}, {"name": rendered.name})
        try:
            sync(kube, Request([op], dry_run=True, allow_empty=True))
        except Exception as exc:  # noqa: BLE001 - a bundle this API server refuses is not a benchmark subject
            print(f"  skipping {root.relative_to(corpus)}: {str(exc).splitlines()[0][:100]}")
            continue
        out.append((root, op))
        if len(out) == count:
            break
    return out


# --- measurements -------------------------------------------------------------------------------


def resource_versions(kube: Kube, desired: list[DesiredOperator]) -> dict[str, Any]:
    """Per object, what a write of ours would move: its generation, digest annotation and our managedFields
    entry (the resourceVersion also moves when a controller updates a Deployment's status or annotations)."""
    kinds = {(o["apiVersion"], o["kind"]) for op in desired for o in op.objects}
    kinds.add(("reconciler.dev/v1alpha1", "Operator"))
    out = {}
    for api_version, kind in sorted(kinds):
        info = kube.resource(api_version, kind)
        for item in kube.list(info, label_selector=LABEL_OPERATOR) if info else ():
            m = item["metadata"]
            ours = [e for e in m.get("managedFields") or [] if e.get("manager") in ("reconciler", "bench")]
            out[f"{kind}/{m.get('namespace', '')}/{m['name']}"] = (m.get("generation"), (m.get("annotations") or {}).get(ANNOTATION_DIGEST), ours)
    return out


def timed_sync(kube: Kube, desired: list[DesiredOperator]) -> tuple[float, SyncResult]:
    """One sync of ``desired``; Operators installed by other scenarios are held (neither applied nor pruned)."""
    from reconciler.cluster.status import objects as status_objects

    others = frozenset(status_objects.read_all(kube)) - {op.name for op in desired}
    start = time.perf_counter()
    result = sync(kube, Request(desired, dry_run=False, allow_empty=True, revision="bench", held=others))
    return time.perf_counter() - start, result


def noop(plane: Any, desired: list[DesiredOperator], repeat: int) -> tuple[float, Counter[str], int]:
    """Apply once, then the median wall time and the requests of ``repeat`` no-op syncs (a fresh client each)."""
    admin = Kube(plane.admin_client())
    _, first = timed_sync(Kube(plane.admin_client()), desired)
    assert first.changed, "the first sync should have created the objects"
    before_versions = resource_versions(admin, desired)
    times = []
    before, detail = request_counts(admin), request_counts(admin, by_resource=True)
    for _ in range(repeat):
        seconds, result = timed_sync(Kube(plane.admin_client()), desired)  # cold discovery, as the CLI has it
        assert not result.changed, [str(c) for c in result.changes if c.action.value != "unchanged"][:5]
        times.append(seconds)
    counts = delta(before, request_counts(admin))
    assert writes(counts) == 0, f"a no-op sync wrote: {show(delta(detail, request_counts(admin, True)))}"
    after_versions = resource_versions(admin, desired)
    assert after_versions == before_versions, \
        f"a no-op sync changed {[k for k in after_versions if after_versions[k] != before_versions.get(k)][:5]}"
    objects = sum(len(op.objects) for op in desired)
    return statistics.median(times), +Counter({k: v // repeat for k, v in counts.items()}), objects


def write_files(desired: list[DesiredOperator], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "objects.yaml"
    path.write_text(yamlio.dump_all([o for op in desired for o in op.objects]))
    return path


def kubectl_run(kubectl: Path, kubeconfig: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True)
    return time.perf_counter() - start, proc


def kubectl_diff(kubectl: Path, kubeconfig: Path, path: Path) -> float:
    seconds, proc = kubectl_run(kubectl, kubeconfig, "diff", "--server-side", "--field-manager=reconciler",
                                "--force-conflicts", "-f", str(path))
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"kubectl diff failed: {proc.stderr[-2000:]}")
    return seconds


def kubectl_apply(kubectl: Path, kubeconfig: Path, path: Path) -> float:
    seconds, proc = kubectl_run(kubectl, kubeconfig, "apply", "--server-side", "--field-manager=bench",
                                "-f", str(path))
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {proc.stderr[-2000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, nargs="*", default=[10, 50], help="sizes of the synthetic no-op rows")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--apply-sizes", type=int, nargs="*", default=[100, 1000, 5000])
    ap.add_argument("--apply-repeat", type=int, default=3, help="alternating runs of each apply, median")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--no-kubectl", action="store_true", help="leave out the kubectl column")
    args = ap.parse_args()
    kubectl = None
    if not args.no_kubectl:
        from bench.peers.kubectl import kubectl_binary
        kubectl = kubectl_binary()
    plane = start_plane()
    rows: list[tuple[str, int, float, str, float | None]] = []
    try:
        kubeconfig = Path(plane.kubeconfig_path)
        tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
        scenarios = [(f"no-op, {n} Operators x 40 objects", [synthetic(i) for i in range(n)])
                     for n in args.operators]
        if args.corpus.is_dir():
            real = largest_real(args.corpus, Kube(plane.admin_client()))
            scenarios.append((f"no-op, {len(real)} large real operators ({', '.join(op.name for op in real)})",
                              real))
        else:
            print(f"{args.corpus} is absent: the real-operator row is left out")
        for index, (label, desired) in enumerate(scenarios):
            seconds, counts, objects = noop(plane, desired, args.repeat)
            peer = kubectl_diff(kubectl, kubeconfig, write_files(desired, tmp / f"noop{index}")) \
                if kubectl else None
            rows.append((label, objects, seconds, show(counts), peer))
            print(f"{label}: {seconds:.3f}s, requests {show(counts)}")
        for size in args.apply_sizes:
            # Alternating runs, each into fresh namespaces, so a burst of load from elsewhere hits both sides.
            ours_times: list[float] = []
            peer_times: list[float] = []
            for attempt in range(args.apply_repeat):
                name = f"apply{size}-{attempt}"
                ours = [configmaps(name, f"apply-{size}-{attempt}-ours", size)]
                admin = Kube(plane.admin_client())
                before = request_counts(admin)
                seconds, result = timed_sync(Kube(plane.admin_client()), ours)
                assert result.count(Action.CREATED) == size + 1, result.notes  # the namespace too
                counts = delta(before, request_counts(admin))
                ours_times.append(seconds)
                if kubectl:
                    ns = f"apply-{size}-{attempt}-kubectl"
                    path = write_files([DesiredOperator("ns", ({"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": ns}},), (), {}, {}),
                                        configmaps(name, ns, size)], tmp / f"apply{size}-{attempt}")
                    peer_times.append(kubectl_apply(kubectl, kubeconfig, path))
                print(f"apply {size}: {seconds:.3f}s (kubectl {peer_times[-1] if peer_times else '-'})")
            peer = statistics.median(peer_times) if peer_times else None
            rows.append((f"apply, {size} new ConfigMaps (first install)", size, statistics.median(ours_times),
                         show(counts), peer))
    finally:
        plane.stop()
    print(f"\ncluster stage, in-process, median of {args.repeat} no-op syncs and of {args.apply_repeat} alternating "
          f"applies (requests per sync, by verb, from apiserver_request_total)\n")
    print("| scenario | objects | reconciler s | kubectl s | ratio | requests (reconciler) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label, objects, seconds, counts_text, peer in rows:
        ratio = f"{peer / seconds:.2f}" if peer else "-"
        print(f"| {label} | {objects} | {seconds:.3f} | {f'{peer:.3f}' if peer else '-'} | {ratio} | "
              f"{counts_text} |")
    print("\nratio = kubectl time / reconciler time (above 1: the reconciler is faster). The no-op peer is "
          "`kubectl diff --server-side` (one GET and one dry-run per object); the apply peer is "
          "`kubectl apply --server-side`.")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
