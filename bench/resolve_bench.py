"""Resolution benchmarks: how long SatResolver takes once catalogs are loaded.

  python -m bench.resolve_bench            # all scenarios
  python -m bench.resolve_bench --quick    # smaller sizes, for a smoke run
  python -m bench.resolve_bench --kube 1.28.0   # with a cluster version: minKubeVersion is checked
  python -m bench.resolve_bench --quick --kube 1.28.0 --objects   # (a) bundles as olm.bundle.object
                                          # manifests (20 kB each: 600 MB at 30,000 bundles without --quick)

(a) 50 Operators against synthetic catalogs of 3,000 / 10,000 / 30,000 bundles
    (10 versions per package, replaces chains, every fifth package requiring
    the API of the next one, so dependency chains run several packages deep);
(b) every package of every catalog in ../shared/corpus/catalogs, one
    Operator per package (skipped when the corpus is absent);
(c) a random problem in the shape of deppy's solver benchmark: 256
    variables, 10% mandatory, 15% with dependencies, 5% with conflicts.

There is no peer to compare with: operator-controller does not resolve
dependencies, and OLM v0's resolver only runs inside its controller.
Catalog loading is not timed here (see the catalog benchmarks); the timed
part is building the candidate universe, encoding and solving.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import time
from pathlib import Path
from typing import Callable

from reconciler.catalog import load_catalog
from reconciler.errors import ResolutionError
from reconciler.model.catalog import Bundle, Catalog, Channel, ChannelEntry, Package, Property
from reconciler.model.declarations import CatalogSelector, Constraint, OperatorDecl, Origin
from reconciler.resolve import ResolutionRequest, SatResolver

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "catalogs"


def _bundle(pkg: str, version: str, props: list[Property]) -> Bundle:
    return Bundle(pkg, f"{pkg}.v{version}", f"registry.invalid/{pkg}:v{version}",
                  (Property("olm.package", {"packageName": pkg, "version": version}), *props), "synthetic")


def _objects(pkg: str, version: str, kind: str) -> list[Property]:
    """A CSV (about 20 kB, as community CSVs are) and a CRD, as ``olm.bundle.object`` properties."""
    csv = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
           "metadata": {"name": f"{pkg}.v{version}", "annotations": {"alm-examples": "[]", "capabilities": "Basic"}},
           "spec": {"description": "An operator. " * 1500, "displayName": pkg, "version": version,
                    "minKubeVersion": "1.20.0", "installModes": [{"type": "AllNamespaces", "supported": True}],
                    "install": {"strategy": "deployment", "spec": {"deployments": [{"name": pkg, "spec": {}}]}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"{kind.lower()}s.bench.example.com"},
           "spec": {"group": "bench.example.com", "names": {"kind": kind, "plural": f"{kind.lower()}s"},
                    "scope": "Namespaced", "versions": [{"name": "v1", "served": True, "storage": True}]}}
    return [Property("olm.bundle.object", {"data": base64.b64encode(json.dumps(o, sort_keys=True).encode()).decode()})
            for o in (crd, csv)]


def synthetic_catalog(bundles: int, versions: int = 10, seed: int = 1, objects: bool = False) -> Catalog:
    """``bundles / versions`` packages; package i provides API Kind<i>; every fifth requires Kind<i+1>.

    With ``objects``, each bundle also carries its manifests as ``olm.bundle.object`` properties.
    """
    rng = random.Random(seed)
    packages, channels, out = {}, {}, {}
    count = bundles // versions
    for i in range(count):
        pkg = f"pkg{i:05d}"
        packages[pkg] = Package(pkg, "stable", "synthetic")
        entries = []
        for v in range(versions):
            version = f"1.{v}.0"
            props = [Property("olm.gvk", {"group": "bench.example.com", "version": "v1", "kind": f"Kind{i}"})]
            if i % 5 == 0 and i + 1 < count and rng.random() < 0.9:
                props.append(Property("olm.gvk.required",
                                      {"group": "bench.example.com", "version": "v1", "kind": f"Kind{i + 1}"}))
            b = _bundle(pkg, version, props + (_objects(pkg, version, f"Kind{i}") if objects else []))
            out[(pkg, b.name)] = b
            entries.append(ChannelEntry(b.name, f"{pkg}.v1.{v - 1}.0" if v else None))
        channels[(pkg, "stable")] = Channel(pkg, "stable", tuple(entries), "synthetic")
    return Catalog("synthetic", "synthetic", packages, channels, out)


def operators(n: int, catalog: Catalog, seed: int = 2) -> tuple[OperatorDecl, ...]:
    rng = random.Random(seed)
    pkgs = sorted(rng.sample(sorted(catalog.packages), n))
    return tuple(OperatorDecl(name=f"op-{p}", origin=Origin("bench.yaml"),
                              catalog=CatalogSelector(catalog.name, p, "stable")) for p in pkgs)


def deppy_shaped(variables: int = 256, seed: int = 3) -> tuple[Catalog, tuple[OperatorDecl, ...]]:
    """One bundle per package; 10% mandatory (Inputs by name), 15% depend on 1-3 others, 5% conflict in pairs."""
    rng = random.Random(seed)
    names = [f"v{i:03d}" for i in range(variables)]
    conflicting = set(rng.sample(range(variables), variables * 5 // 100))
    packages, channels, bundles = {}, {}, {}
    for i, pkg in enumerate(names):
        props: list[Property] = []
        if rng.random() < 0.15:
            options = rng.sample([n for n in names if n != pkg], rng.randint(1, 3))
            props.append(Property("olm.constraint", {"any": {"constraints": [
                {"package": {"packageName": o, "versionRange": ">=0.0.0"}} for o in options]}}))
        if i in conflicting:  # pairs of conflicting variables share an API: at most one may be chosen
            props.append(Property("olm.gvk", {"group": "c.example.com", "version": "v1", "kind": f"K{i // 2}"}))
        b = _bundle(pkg, "1.0.0", props)
        bundles[(pkg, b.name)] = b
        packages[pkg] = Package(pkg, "stable", "synthetic")
        channels[(pkg, "stable")] = Channel(pkg, "stable", (ChannelEntry(b.name),), "synthetic")
    catalog = Catalog("random", "synthetic", packages, channels, bundles)
    mandatory = rng.sample(names, variables // 10)
    decls = tuple(OperatorDecl(name=f"in-{m}", origin=Origin("bench.yaml"), kind="Input",
                               constraints=(Constraint("olm.name", f"{m}.v1.0.0"),)) for m in sorted(mandatory))
    return catalog, decls


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object, float]:
    """(median of the repeats after the first, result, first run); the first run builds the closure's candidates."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            result = fn()
        except ResolutionError as exc:
            result = exc
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:] or times), result, times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--kube", metavar="VERSION", help="the cluster's Kubernetes version (checks minKubeVersion)")
    parser.add_argument("--objects", action="store_true",
                        help="(a) bundles carry their CSV and CRD as olm.bundle.object, not olm.csv.metadata")
    args = parser.parse_args()
    rows = []
    sizes = (1_000, 3_000) if args.quick else (3_000, 10_000, 30_000)
    for size in sizes:
        catalog = synthetic_catalog(size, objects=args.objects)
        decls = operators(50, catalog)
        request = ResolutionRequest(decls, {"synthetic": catalog}, kube_version=args.kube)
        seconds, result, first = timed(lambda: SatResolver().resolve(request), args.repeat)
        chosen = len(result.selections) if hasattr(result, "selections") else "unsat"
        rows.append((f"(a) 50 Operators, {size:,} bundles", f"{seconds * 1000:.0f} ms",
                     f"{chosen} bundles chosen; first run {first * 1000:.0f} ms (builds the closure's candidates)"))
    if CORPUS.is_dir():
        total, ok, unsat, count = 0.0, 0, 0, 0
        for path in sorted(CORPUS.glob("*/*/catalog.yaml")):
            cat = load_catalog(path.parent.name, path.parent, str(path.parent))
            for pkg in sorted(cat.packages):
                decl = OperatorDecl(name="op", origin=Origin("bench.yaml"), catalog=CatalogSelector(cat.name, pkg))
                seconds, result, _ = timed(
                    lambda: SatResolver().resolve(
                        ResolutionRequest((decl,), {cat.name: cat}, kube_version=args.kube)), 1)
                total += seconds
                count += 1
                ok += hasattr(result, "selections")
                unsat += not hasattr(result, "selections")
        rows.append((f"(b) corpus: {count} packages, one at a time", f"{total * 1000:.0f} ms total",
                     f"{ok} resolved, {unsat} unsatisfiable (missing dependencies)"))
    else:
        rows.append(("(b) corpus", "skipped", f"{CORPUS} is absent"))
    catalog, decls = deppy_shaped()
    request = ResolutionRequest(decls, {"random": catalog}, kube_version=args.kube)
    seconds, result, _ = timed(lambda: SatResolver().resolve(request), args.repeat)
    outcome = f"{len(result.selections)} chosen" if hasattr(result, "selections") else "unsatisfiable, explained"
    rows.append(("(c) deppy-shaped random, 256 variables", f"{seconds * 1000:.1f} ms", outcome))
    width = max(len(r[0]) for r in rows)
    print(f"{'scenario'.ljust(width)}  {'median time':>14}  result")
    for name, t, note in rows:
        print(f"{name.ljust(width)}  {t:>14}  {note}")


if __name__ == "__main__":
    main()
