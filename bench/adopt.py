"""Adopting a cluster that OLM v0 runs: how long `reconciler adopt` takes and how many API requests it makes.

  python -m bench.adopt [--installs 50] [--repeat 3] [--corpus ../shared/corpus/operators] [--packages P ...]
                        [--copied-csvs] [--takeover] [--one-namespace NS] [--synthetic]
                        [--olm-interval SECONDS]

A local control plane with the real OLM v0 (``ControlPlane(olm=...)``) is
started here; ``--installs`` corpus packages (``bundles``: one bundle per
package, with no dependency, that the reconciler converts, in OwnNamespace or
else AllNamespaces) are installed by OLM, each in a namespace of its own
with its CatalogSource, OperatorGroup and Subscription, all served by one opm
on loopback (a package is installed once per cluster, so they are distinct).
OLM copies the CSV of every AllNamespaces install into every namespace; those
copies are switched off (OLMConfig ``disableCopiedCSVs``, as large clusters
run) unless ``--copied-csvs``, and ``adopt`` skips them either way, after
listing them. Then ``adopt`` of a repository holding that catalog runs in this
process ``--repeat`` times into fresh copies of the repository (the first
also fills the catalog cache): wall-clock time, and the requests sent to the
API server, counted at the one place the reconciler sends them
(``Kube.request``). There is no peer: nothing else adopts OLM v0 installs.

``--takeover`` then commits the last adoption and runs ``reconcile`` of it
once, in this process, with OLM still running: the takeover's wall-clock
time and requests, the ReplicaSets it made (a new one is a pod restarted;
there should be none), and the longest time any CRD that had a conversion
webhook, or any APIService, went unserved while it ran (watched every 0.1 s;
it should be zero). ``--one-namespace NS`` installs every package in the
one namespace ``NS`` under one AllNamespaces OperatorGroup
(``global-operators``), as OpenShift's ``openshift-operators`` holds them,
instead of each in a namespace of its own (only packages that support
AllNamespaces are chosen). ``--synthetic`` installs bundles made for the
benchmark instead (``synthetic``: one CRD, one Deployment, a Role each), for
the sizes the corpus cannot reach (it holds 44 packages that fit one
namespace); the requests of the takeover are also counted by verb and
resource.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "operators"


def _version_key(directory: Path) -> tuple:
    """A version directory's order: numeric parts as numbers (0.11.0 after 0.9.0), a pre-release before its release."""
    core, _, pre = directory.name.partition("-")
    return tuple(int(p) if p.isdigit() else -1 for p in core.split(".")), pre == "", pre


# Packages OLM v0 does not install here, with why: a benchmark of adopt counts only installs that run.
OLM_FAILS = {
    "3scale-community-operator": "its InstallPlan fails on the local control plane",
    "argocd-operator": "catalog-operator cannot write its InstallPlan: etcdserver: request is too large (the "
                       "catalog carries the bundle's objects inline)",
    "observability-operator": "catalog-operator keeps making InstallPlans for it and none completes here",
    "ncn-operator": "its Deployment's node affinity asks for a control-plane node; the kwok nodes are not",
    "socmmd": "its Deployment's node affinity asks for a control-plane node; the kwok nodes are not",
}
# What a bundle's metadata/properties.yaml may say that makes it need another package (OLM reads a
# `dependencies:` list there too).
DEPENDENCY_PROPERTIES = ("olm.package", "olm.gvk", "olm.constraint")


def bundles(corpus: Path, count: int, only: tuple[str, ...] = (), *,
            all_namespaces: bool = False) -> list[tuple[Path, str, str]]:
    """``count`` corpus bundles OLM installs alone and the reconciler converts: (dir, CSV name, install mode).

    One bundle per package (the reconciler installs a package once per
    cluster, so a second install of one is not an adoption): its newest
    version with no dependency and no admission webhook on kinds beyond its
    own (``_intercepts_others``), in OwnNamespace, or AllNamespaces when it
    does not support OwnNamespace or serves webhooks (OLM v0 serves those
    for every namespace).
    """
    from reconciler import yamlio
    from reconciler.bundle import render
    from reconciler.errors import ReconcilerError
    from reconciler.model.declarations import InstallSettings

    out = []
    for package in sorted(p for p in corpus.iterdir() if p.is_dir() and (not only or p.name in only)):
        if package.name in OLM_FAILS and not only:
            continue
        versions = sorted((v for v in package.iterdir() if (v / "manifests").is_dir()), key=_version_key,
                          reverse=True)
        for version in versions:
            fit = _fits(version, yamlio, render, ReconcilerError, InstallSettings, all_namespaces)
            if fit is not None:
                out.append((version, *fit))
                break
        if len(out) == count:
            return out
    raise SystemExit(f"the corpus has {len(out)} packages with a bundle that fits, not {count}")


def synthetic(directory: Path, count: int, *, all_namespaces: bool = False) -> list[tuple[Path, str, str]]:
    """``count`` small registry+v1 bundles made for sizes the corpus cannot reach (it holds 44 packages that fit
    one namespace): each its own package ``bench-NNN`` with one CRD, one Deployment and a Role for it, in
    OwnNamespace and AllNamespaces; as ``bundles`` lists them."""
    from tests.olm.support import write_bundle

    out = []
    for i in range(count):
        package, group = f"bench-{i:03d}", f"bench{i:03d}.example.com"
        csv_name = f"{package}.v1.0.0"
        bundle = directory / package / "1.0.0"
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"widgets.{group}"},
               "spec": {"group": group, "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}
        deployment = {"name": f"{package}-controller", "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": package}},
            "template": {"metadata": {"labels": {"app": package}}, "spec": {
                "serviceAccountName": package,
                "containers": [{"name": "manager", "image": f"registry.example.com/{package}:1.0.0"}]}}}}
        csv = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": csv_name},
               "spec": {"displayName": package, "version": "1.0.0",
                        "installModes": [{"type": t, "supported": t in ("OwnNamespace", "AllNamespaces")}
                                         for t in ("OwnNamespace", "SingleNamespace", "MultiNamespace",
                                                   "AllNamespaces")],
                        "customresourcedefinitions": {"owned": [{"name": f"widgets.{group}", "version": "v1",
                                                                 "kind": "Widget"}]},
                        "install": {"strategy": "deployment", "spec": {
                            "deployments": [deployment],
                            "permissions": [{"serviceAccountName": package, "rules": [
                                {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]}]}}}}
        write_bundle(bundle, package, {f"widgets.{group}.crd.yaml": crd,
                                       f"{package}.clusterserviceversion.yaml": csv})
        out.append((bundle, csv_name, "AllNamespaces" if all_namespaces else "OwnNamespace"))
    return out


def _fits(version: Path, yamlio, render, error, settings, all_namespaces: bool = False) -> tuple[str, str] | None:
    """(CSV name, install mode) when OLM installs the bundle alone and the reconciler converts it, else None
    (``all_namespaces``: in AllNamespaces only)."""
    metadata = version / "metadata"
    if (metadata / "dependencies.yaml").exists() or (
            (metadata / "properties.yaml").exists()
            and any(p in (metadata / "properties.yaml").read_text() for p in DEPENDENCY_PROPERTIES)):
        return None
    csvs = list((version / "manifests").glob("*clusterserviceversion*"))
    if len(csvs) != 1:
        return None
    try:
        csv = yamlio.read_all(csvs[0])[0]
    except error:
        return None
    if _intercepts_others(csv):
        return None
    modes = {m.get("type") for m in csv["spec"].get("installModes") or [] if m.get("supported")}
    order = ("AllNamespaces", "OwnNamespace") if csv["spec"].get("webhookdefinitions") else \
        ("OwnNamespace", "AllNamespaces")
    if all_namespaces:
        order = ("AllNamespaces",)
    for mode in (m for m in order if m in modes):
        try:
            render(f"file://{version}", Path("/"), settings("bench", ("",) if mode == "AllNamespaces" else ("bench",)),
                   "operators")
        except error:
            continue
        return csv["metadata"]["name"], mode
    return None


def _intercepts_others(csv: dict) -> bool:
    """Whether an admission webhook of the CSV acts on kinds outside its own CRDs' groups (every Pod, say).

    kwok runs no webhook server, so such a webhook, failing closed, would
    refuse those objects cluster-wide: every other install's pods among them.
    """
    spec = csv.get("spec") or {}
    owned = {str(c.get("name", "")).partition(".")[2]
             for c in (spec.get("customresourcedefinitions") or {}).get("owned") or []}
    return any(group not in owned
               for w in spec.get("webhookdefinitions") or [] if w.get("type") != "ConversionWebhook"
               for rule in w.get("rules") or [] for group in rule.get("apiGroups") or [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--packages", nargs="*", default=(),
                        help="only these corpus packages (by default every fitting one but those OLM_FAILS names)")
    parser.add_argument("--copied-csvs", action="store_true",
                        help="leave OLM's copies of AllNamespaces CSVs on (OLM's default): adopt lists them too")
    parser.add_argument("--takeover", action="store_true",
                        help="then commit the last adoption and reconcile it once: the takeover's time, requests, "
                             "new ReplicaSets and the longest time a conversion webhook or APIService was unserved")
    parser.add_argument("--synthetic", action="store_true",
                        help="install --installs bundles made for the benchmark (``synthetic``) instead of the "
                             "corpus's: the sizes the corpus cannot reach")
    parser.add_argument("--olm-interval", type=float, metavar="SECONDS",
                        help="OLM's controllers resync every SECONDS (their --interval) instead of their defaults "
                             "(5 and 15 minutes): OLM acts more often during the takeover, and a large InstallPlan "
                             "is seen Complete sooner")
    parser.add_argument("--one-namespace", metavar="NS",
                        help="every install in namespace NS under one AllNamespaces OperatorGroup (global-operators)")
    args = parser.parse_args()
    if not args.synthetic and not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}")
    made = Path(tempfile.mkdtemp(prefix="bench-adopt-bundles-"))
    chosen = synthetic(made, args.installs, all_namespaces=bool(args.one_namespace)) if args.synthetic else \
        bundles(args.corpus, args.installs, args.packages, all_namespaces=bool(args.one_namespace))

    from bench.peers import opm
    from reconciler.localcluster import ControlPlane, ensure_binaries
    from reconciler.localcluster.olmv0 import ensure_olm
    from tests.olm.adoption import GROUP, Case, custom, settle, subscribe
    from tests.support.repo import git
    from tests.olm.support import write_catalog_of

    with tempfile.TemporaryDirectory(prefix="bench-adopt-") as tmp, _removed(made):
        work = Path(tmp)
        plane = ControlPlane(work / "plane", ensure_binaries(log=print), olm=ensure_olm(log=print),
                             olm_interval=args.olm_interval)
        plane.start(timeout=240)
        try:
            write_catalog_of([d for d, _, _ in chosen], work / "catalog")
            cases = [Case(f"{d.parent.name}/{d.name}", name, f"{'AllNamespaces' if mode == 'AllNamespaces' else 'Own'}{i}")
                     for i, (d, name, mode) in enumerate(chosen)]
            for c in cases if args.one_namespace else ():
                c.namespace = c.watched = args.one_namespace
            with opm.serve(work / "catalog", work / "serve") as address, plane.admin_client() as api:
                if not args.copied_csvs:
                    copied_csvs_off(api)
                start = time.perf_counter()
                if args.one_namespace:
                    subscribe_together(api, cases, args.one_namespace, address, lambda c: settle(api, c, plane))
                else:
                    for c in cases:
                        subscribe(api, c, address)
                    for c in cases:
                        settle(api, c, plane)
                modes = {m: sum(1 for *_, x in chosen if x == m) for m in ("OwnNamespace", "AllNamespaces")}
                print(f"OLM v0 installed {len(cases)} Subscriptions ({modes['OwnNamespace']} OwnNamespace, "
                      f"{modes['AllNamespaces']} AllNamespaces) in {time.perf_counter() - start:.1f}s; "
                      f"{count_csvs(api)} CSVs in the cluster")
                assert len(custom(api).list_cluster_custom_object(GROUP, "v1alpha1", "subscriptions")["items"]) \
                    == len(cases)
                repo = work / "repo"
                repo.mkdir()
                for d, _, _ in chosen:
                    shutil.copytree(d, repo / "bundles" / d.parent.name / d.name)
                write_catalog_of([d for d, _, _ in chosen], repo / "catalogs" / "corpus",
                                 image=lambda d: f"file://bundles/{d.parent.name}/{d.name}", by_opm=False)
                git(repo, "init", "-q", "-b", "main")
                git(repo, "add", "-A")
                git(repo, "commit", "-q", "-m", "catalog")
                rows = [measure(plane, repo, work / f"run{i}") for i in range(args.repeat)]
                taken = takeover(plane, api, work / f"run{args.repeat - 1}") if args.takeover else None
        finally:
            plane.stop()
    seconds = [r[0] for r in rows]
    requests = [r[1] for r in rows]
    print(f"\n{'scenario':<44} {'median s':>9} {'min s':>7} {'requests':>9} {'adopted':>8}")
    print(f"{f'adopt, {args.installs} OLM v0 installs':<44} {statistics.median(seconds):>9.2f} "
          f"{min(seconds):>7.2f} {statistics.median(requests):>9.0f} {rows[0][2]:>8}")
    print(f"(runs: {', '.join(f'{s:.2f}s/{n}' for s, n, _ in rows)}; no peer: nothing else adopts OLM v0 installs)")
    if taken is not None:
        where = f"in {args.one_namespace}" if args.one_namespace else "each in a namespace of its own"
        print(f"\ntakeover by reconcile of the {rows[0][2]} adopted installs ({where}), OLM running: "
              f"{taken['seconds']:.1f}s, {taken['requests']} requests, exit {taken['exit']}; "
              f"{taken['new_replica_sets']} new ReplicaSets; longest unserved: {taken['unserved']:.1f}s "
              f"({taken['watched']} CRDs with a conversion webhook and APIServices watched)")
        print("its requests, most first: " + ", ".join(f"{n} {what}" for what, n in taken["by"].most_common(15)))


@contextlib.contextmanager
def _removed(directory: Path):
    try:
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


BATCH = 10   # Subscriptions made at once in one namespace (``subscribe_together``)


def subscribe_together(api, cases: list, namespace: str, address: str, settle) -> None:
    """Every case's Subscription in ``namespace``, beside one CatalogSource and the AllNamespaces OperatorGroup
    ``global-operators``, as OpenShift's ``openshift-operators`` holds them; ``BATCH`` at a time, each batch
    installed (``settle(case)``) before the next, as a cluster's installs come one after another. All at once,
    catalog-operator plans them in one InstallPlan, and at 100 it had not been seen to sync that plan Complete
    after 10 minutes (no --interval given), its passes over the namespace failing on conflicts as they updated
    the Subscriptions' status."""
    import kubernetes.client

    from tests.olm.adoption import GROUP, custom

    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    c = custom(api)
    c.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "catalogsources", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": "corpus"},
        "spec": {"sourceType": "grpc", "address": address}})
    c.create_namespaced_custom_object(GROUP, "v1", namespace, "operatorgroups", {
        "apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "global-operators"}, "spec": {}})
    for first in range(0, len(cases), BATCH):
        batch = cases[first:first + BATCH]
        for case in batch:
            c.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "subscriptions", {
                "apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription", "metadata": {"name": case.package},
                "spec": {"name": case.package, "source": "corpus", "sourceNamespace": namespace,
                         "installPlanApproval": "Automatic"}})
        for case in batch:
            settle(case)


def _served(api) -> dict[str, bool]:
    """Each CRD with a conversion webhook (by name) and each APIService (``apiservice/NAME``): whether it is
    served now (the webhook with its caBundle; the APIService Available)."""
    import kubernetes.client

    out = {}
    for crd in kubernetes.client.ApiextensionsV1Api(api).list_custom_resource_definition().items:
        conversion = crd.spec.conversion
        if conversion is not None and conversion.strategy == "Webhook":
            config = conversion.webhook.client_config if conversion.webhook else None
            out[crd.metadata.name] = bool(config and config.ca_bundle)
        else:
            out[crd.metadata.name] = False
    for svc in kubernetes.client.ApiregistrationV1Api(api).list_api_service().items:
        if svc.spec.service is not None:   # the cluster's own groups are served locally
            out[f"apiservice/{svc.metadata.name}"] = any(
                c.type == "Available" and c.status == "True" for c in (svc.status.conditions or []))
    return out


def takeover(plane, api, repo: Path) -> dict:
    """Commit the adoption in ``repo`` and reconcile it once in this process: seconds, requests (at
    ``Kube.request``), its exit code, the ReplicaSets it made, and the longest time any CRD that served a
    conversion webhook before (or APIService that was Available) was unserved while it ran."""
    import io
    import threading

    import kubernetes.client

    from reconciler.cli.parser import main as cli
    from reconciler.kube.client import Kube
    from tests.support.repo import git

    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Adopt what OLM v0 runs")
    apps = kubernetes.client.AppsV1Api(api)
    replica_sets = {rs.metadata.uid for rs in apps.list_replica_set_for_all_namespaces().items}
    before = _served(api)
    watched = sorted(k for k, ok in before.items() if ok)
    gaps = {k: 0.0 for k in watched}
    down_since: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            now = time.monotonic()
            state = _served(api)
            for k in watched:
                if not state.get(k, False):
                    down_since.setdefault(k, now)
                elif k in down_since:
                    gaps[k] = max(gaps[k], now - down_since.pop(k))
            done.wait(0.1)
        now = time.monotonic()
        for k, since in down_since.items():
            gaps[k] = max(gaps[k], now - since)

    sent = [0]
    by: collections.Counter = collections.Counter()
    real = Kube.request

    def counted(self, method, path, *args, **kwargs):
        sent[0] += 1
        by[_request_kind(method, path, kwargs.get("query"))] += 1
        return real(self, method, path, *args, **kwargs)

    printed = io.StringIO()
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    Kube.request = counted
    start = time.perf_counter()
    try:
        code = cli(["reconcile", str(repo), "--kubeconfig", str(plane.kubeconfig_path), "-q"], printed)
    finally:
        seconds = time.perf_counter() - start
        Kube.request = real
        done.set()
        thread.join()
    if code not in (0, 1):
        print(printed.getvalue()[-3000:])
    made = [rs for rs in apps.list_replica_set_for_all_namespaces().items if rs.metadata.uid not in replica_sets]
    return {"seconds": seconds, "requests": sent[0], "exit": code, "new_replica_sets": len(made),
            "unserved": max(gaps.values(), default=0.0), "watched": len(watched), "by": by}


def _request_kind(method: str, path: str, query) -> str:
    """A request as its verb and resource: ``GET list deployments (selector)``, ``PATCH subscriptions``."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    parts = parts[3:] if parts[:1] == ["apis"] else parts[2:]   # past /apis/GROUP/VERSION or /api/v1
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    resource = parts[0] if parts else "discovery"
    one = len(parts) > 1
    sub = f"/{parts[2]}" if len(parts) > 2 else ""
    selector = any(k in ("labelSelector", "fieldSelector") for k, _ in query or [])
    verb = method if method != "GET" or one else "LIST"
    return f"{verb} {resource}{sub}" + (" (selector)" if selector else "")


def copied_csvs_off(api) -> None:
    """OLMConfig ``cluster`` with ``spec.features.disableCopiedCSVs``: OLM keeps no copy of a CSV per namespace."""
    from kubernetes.client.rest import ApiException

    from tests.olm.adoption import GROUP, custom

    spec = {"features": {"disableCopiedCSVs": True}}
    try:
        custom(api).patch_cluster_custom_object(GROUP, "v1", "olmconfigs", "cluster", {"spec": spec})
    except ApiException as exc:
        if exc.status != 404:
            raise
        custom(api).create_cluster_custom_object(GROUP, "v1", "olmconfigs", {
            "apiVersion": f"{GROUP}/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}, "spec": spec})


def count_csvs(api) -> str:
    """How many CSVs the cluster holds, and how many of them are OLM's copies: what adopt lists."""
    from tests.olm.adoption import GROUP, custom

    items = custom(api).list_cluster_custom_object(GROUP, "v1alpha1", "clusterserviceversions")["items"]
    copies = sum(1 for c in items if "olm.copiedFrom" in (c["metadata"].get("labels") or {}))
    return f"{len(items)} ({copies} copies)"


def measure(plane, repo: Path, copy: Path) -> tuple[float, int, int]:
    """One ``adopt`` of a fresh copy of ``repo``: seconds, API requests, Operators adopted."""
    from reconciler.adopt import adopt
    from reconciler.kube.client import Kube, load_api_client

    class Counted(Kube):
        sent = 0

        def request(self, *args, **kwargs):
            Counted.sent += 1
            return super().request(*args, **kwargs)

    shutil.copytree(repo, copy)
    kube = Counted(load_api_client(str(plane.kubeconfig_path)))
    start = time.perf_counter()
    result = adopt(copy, kube, dry_run=False)
    return time.perf_counter() - start, Counted.sent, len(result.adopted)


if __name__ == "__main__":
    main()
