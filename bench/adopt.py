"""Adopting a cluster that OLM v0 runs: how long `reconciler adopt` takes and how many API requests it makes.

  python -m bench.adopt [--installs 50] [--repeat 3] [--corpus ../shared/corpus/operators] [--packages P ...]

A local control plane with the real OLM v0 (``ControlPlane(olm=...)``) is
started here; ``--installs`` corpus packages (each one's newest bundle that
supports OwnNamespace and has no webhook and no dependency, and that the
reconciler converts) are installed by OLM, each in a namespace of its own
with its CatalogSource, OperatorGroup and Subscription, all served by one opm
on loopback (a package is installed once per cluster, so they are distinct). Then ``adopt`` of a repository holding that catalog runs in this
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


def bundles(corpus: Path, count: int, only: tuple[str, ...] = ()) -> list[tuple[Path, str]]:
    """``count`` corpus bundles OLM installs alone in OwnNamespace and the reconciler converts: (dir, CSV name)."""
    from reconciler import yamlio
    from reconciler.bundle import render
    from reconciler.errors import ReconcilerError
    from reconciler.model.declarations import InstallSettings

    out = []
    for package in sorted(p for p in corpus.iterdir() if p.is_dir() and (not only or p.name in only)):
        versions = sorted((v for v in package.iterdir() if (v / "manifests").is_dir()), key=_version_key)
        if not versions or (versions[-1] / "metadata" / "dependencies.yaml").exists():
            continue
        newest = versions[-1]
        csvs = list((newest / "manifests").glob("*clusterserviceversion*"))
        if len(csvs) != 1:
            continue
        csv = yamlio.read_all(csvs[0])[0]
        modes = {m.get("type") for m in csv["spec"].get("installModes") or [] if m.get("supported")}
        if "OwnNamespace" not in modes or csv["spec"].get("webhookdefinitions"):
            continue
        try:
            render(f"file://{newest}", Path("/"), InstallSettings("bench", ("bench",)), "operators")
        except ReconcilerError:
            continue
        out.append((newest, csv["metadata"]["name"]))
        if len(out) == count:
            return out
    raise SystemExit(f"the corpus has {len(out)} bundles that fit, not {count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--packages", nargs="*", default=(),
                        help="only these corpus packages (OLM v0 cannot install every one: 3scale-community-operator's "
                             "InstallPlan fails here)")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}")
    chosen = bundles(args.corpus, args.installs, args.packages)

    from bench.peers import opm
    from reconciler.localcluster import ControlPlane, ensure_binaries
    from reconciler.localcluster.olmv0 import ensure_olm
    from tests.olm.adoption import GROUP, Case, custom, git, settle, subscribe
    from tests.olm.support import write_catalog_of

    with tempfile.TemporaryDirectory(prefix="bench-adopt-") as tmp:
        work = Path(tmp)
        plane = ControlPlane(work / "plane", ensure_binaries(log=print), olm=ensure_olm(log=print))
        plane.start(timeout=240)
        try:
            write_catalog_of([d for d, _ in chosen], work / "catalog")
            cases = [Case(f"{d.parent.name}/{d.name}", name, f"Own{i}") for i, (d, name) in enumerate(chosen)]
            with opm.serve(work / "catalog", work / "serve") as address, plane.admin_client() as api:
                start = time.perf_counter()
                for c in cases:
                    subscribe(api, c, address)
                for c in cases:
                    settle(api, c, plane)
                print(f"OLM v0 installed {len(cases)} Subscriptions in {time.perf_counter() - start:.1f}s")
                assert len(custom(api).list_cluster_custom_object(GROUP, "v1alpha1", "subscriptions")["items"]) \
                    == len(cases)
                repo = work / "repo"
                repo.mkdir()
                for d, _ in chosen:
                    shutil.copytree(d, repo / "bundles" / d.parent.name / d.name)
                write_catalog_of([d for d, _ in chosen], repo / "catalogs" / "corpus",
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


def measure(plane, repo: Path, copy: Path) -> tuple[float, int, int]:
    """One ``adopt`` of a fresh copy of ``repo``: seconds, API requests, Operators adopted."""
    from reconciler.adopt import adopt
    from reconciler.cluster.kube import Kube, load_api_client

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
