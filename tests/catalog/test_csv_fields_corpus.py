"""The CSV fields resolution reads, from the CSV embedded as ``olm.bundle.object``, on the real catalogs.

The community catalogs in ../shared/corpus/catalogs carry ``olm.csv.metadata``
for every bundle; a catalog rendered without the csv-metadata migration
carries the CSV itself instead. Both must give the same ``minKubeVersion``
and the same resolution. Skipped when the corpus is absent.
"""

from __future__ import annotations

import base64
import json

import pytest

from reconciler.catalog import load
from reconciler.authoring.render import render_bundle_dir
from reconciler.errors import ResolutionError
from reconciler.model.catalog import Bundle, Catalog, Property
from reconciler.model.declarations import CatalogSelector, OperatorDecl, Origin
from reconciler.resolve import ResolutionRequest, SatResolver
from tests.catalog.helpers import CORPUS

CATALOGS = sorted((CORPUS / "catalogs").glob("v4.*/*/catalog.yaml"))
pytestmark = pytest.mark.corpus(missing=not CATALOGS, reason="../shared/corpus is absent")


@pytest.fixture(scope="module")
def catalogs() -> list[Catalog]:
    loaded = [load(p.parent, p.parent.name, str(p.parent), use_cache=False) for p in CATALOGS]
    assert not any(x.errors for x in loaded)
    return [x.catalog for x in loaded]


def test_csvs_rendered_as_bundle_objects_give_the_catalogs_csv_metadata(catalogs: list[Catalog]):
    """A corpus bundle directory a catalog lists with a minKubeVersion, one a package, rendered unmigrated."""
    from bench.bundle_corpus import find_bundles

    listed = {b.name: b for cat in catalogs for b in cat.bundles.values()}
    wanted = {(b.package, str(b.version)) for b in listed.values() if b.csv_fields.get("minKubeVersion")}
    roots, _ = find_bundles(CORPUS / "operators")
    one = {tuple(r.relative_to(CORPUS / "operators").parts[:2])[0]: r for r in roots
           if tuple(r.relative_to(CORPUS / "operators").parts[:2]) in wanted}   # rendering is slow: one a package
    compared, with_mkv = 0, 0
    for root in one.values():
        blob = render_bundle_dir(root)
        if blob["name"] not in listed:
            continue
        assert not any(p["type"] == "olm.csv.metadata" for p in blob["properties"])
        rendered = Bundle(blob["package"], blob["name"], "", tuple(Property(p["type"], p["value"])
                                                                   for p in blob["properties"]), str(root))
        want = listed[blob["name"]].csv_fields
        got = rendered.csv_fields
        # crdDescriptions differ in form only: opm passes them through Go types (empty lists dropped, names kept)
        assert {k: v for k, v in got.items() if k != "crdDescriptions"} == \
            {k: v for k, v in want.items() if k != "crdDescriptions"}, root
        compared += 1
        with_mkv += bool(want.get("minKubeVersion"))
    assert compared >= 3 and with_mkv == compared, (compared, with_mkv)


def _as_objects(b: Bundle) -> Bundle:
    """The bundle as an unmigrated catalog has it: its CSV an ``olm.bundle.object``, no ``olm.csv.metadata``."""
    meta = next(v for v in b.properties_of("olm.csv.metadata"))
    spec_key = {"apiServiceDefinitions": "apiservicedefinitions", "crdDescriptions": "customresourcedefinitions"}
    csv = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
           "metadata": {"name": b.name, **{k: meta[k] for k in ("annotations", "labels") if k in meta}},
           "spec": {spec_key.get(k, k): v for k, v in meta.items() if k not in ("annotations", "labels")}}
    data = base64.b64encode(json.dumps(csv, sort_keys=True, separators=(",", ":")).encode()).decode()
    props = tuple(p for p in b.properties if p.type != "olm.csv.metadata")
    return b.replace(properties=props + (Property("olm.bundle.object", {"data": data}),))


def _outcome(cat: Catalog, package: str, kube: str | None) -> str:
    decl = OperatorDecl(name="op", origin=Origin("operators/op.yaml"), catalog=CatalogSelector(cat.name, package))
    try:
        resolution = SatResolver().resolve(ResolutionRequest((decl,), {cat.name: cat}, kube_version=kube))
    except ResolutionError as exc:
        return exc.render()
    return " ".join(sorted(s.bundle_name for s in resolution.selections))


def test_unmigrated_corpus_catalogs_resolve_as_the_published_ones(catalogs: list[Catalog]):
    kube = "1.24.0"   # between the corpus's minKubeVersions (1.16.0 .. 1.31.0)
    refused = 0
    for cat in catalogs:
        objects = cat.replace(bundles={k: _as_objects(b) for k, b in cat.bundles.items()})
        assert not any(b.properties_of("olm.csv.metadata") for b in objects.bundles.values())
        for package in sorted(cat.packages):
            published = _outcome(cat, package, kube)
            assert _outcome(objects, package, kube) == published, (cat.name, package)
            refused += published != _outcome(cat, package, None)
    assert refused >= 1   # the cluster version decides something in this corpus, so the comparison means something
