"""Adopting a cluster that OLM v0 runs: how long `reconciler adopt` takes and how many API requests it makes.

  python -m bench.adopt [--installs 50] [--repeat 3] [--corpus ../shared/corpus/operators] [--packages P ...]
                        [--copied-csvs]

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
"""

from __future__ import annotations

import argparse
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


def bundles(corpus: Path, count: int, only: tuple[str, ...] = ()) -> list[tuple[Path, str, str]]:
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
            fit = _fits(version, yamlio, render, ReconcilerError, InstallSettings)
            if fit is not None:
                out.append((version, *fit))
                break
        if len(out) == count:
            return out
    raise SystemExit(f"the corpus has {len(out)} packages with a bundle that fits, not {count}")


def _fits(version: Path, yamlio, render, error, settings) -> tuple[str, str] | None:
    """(CSV name, install mode) when OLM installs the bundle alone and the reconciler converts it, else None."""
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
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}")
    chosen = bundles(args.corpus, args.installs, args.packages)

    from bench.peers import opm
    from reconciler.localcluster import ControlPlane, ensure_binaries
    from reconciler.localcluster.olmv0 import ensure_olm
    from tests.olm.adoption import GROUP, Case, custom, settle, subscribe
    from tests.support.repo import git
    from tests.olm.support import write_catalog_of

    with tempfile.TemporaryDirectory(prefix="bench-adopt-") as tmp:
        work = Path(tmp)
        plane = ControlPlane(work / "plane", ensure_binaries(log=print), olm=ensure_olm(log=print))
        plane.start(timeout=240)
        try:
            write_catalog_of([d for d, _, _ in chosen], work / "catalog")
            cases = [Case(f"{d.parent.name}/{d.name}", name, f"{'AllNamespaces' if mode == 'AllNamespaces' else 'Own'}{i}")
                     for i, (d, name, mode) in enumerate(chosen)]
            with opm.serve(work / "catalog", work / "serve") as address, plane.admin_client() as api:
                if not args.copied_csvs:
                    copied_csvs_off(api)
                start = time.perf_counter()
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
                                 image=lambda d: f"file://bundles/{d.parent.name}/{d.name}")
                git(repo, "init", "-q", "-b", "main")
                git(repo, "add", "-A")
                git(repo, "commit", "-q", "-m", "catalog")
                rows = [measure(plane, repo, work / f"run{i}") for i in range(args.repeat)]
        finally:
            plane.stop()
    seconds = [r[0] for r in rows]
    requests = [r[1] for r in rows]
    print(f"\n{'scenario':<44} {'median s':>9} {'min s':>7} {'requests':>9} {'adopted':>8}")
    print(f"{f'adopt, {args.installs} OLM v0 installs':<44} {statistics.median(seconds):>9.2f} "
          f"{min(seconds):>7.2f} {statistics.median(requests):>9.0f} {rows[0][2]:>8}")
    print(f"(runs: {', '.join(f'{s:.2f}s/{n}' for s, n, _ in rows)}; no peer: nothing else adopts OLM v0 installs)")


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
