"""A bundle's CSV fields: from ``olm.csv.metadata``, else from the CSV among its ``olm.bundle.object`` properties.

Resolution reads ``minKubeVersion`` there; catalogs rendered without opm's
csv-metadata migration carry the CSV only as a bundle object. The CSV is
decoded on first read, and only for the bundles resolution looks at.
"""

from __future__ import annotations

import base64
import pickle
import json

import pytest

from reconciler.errors import ResolutionError
from reconciler.model.catalog import (
    Bundle, Catalog, Channel, ChannelEntry, Package, Property, embedded_csv,
)
from reconciler.model.declarations import CatalogSelector, OperatorDecl, Origin
from reconciler.resolve import ResolutionRequest, SatResolver

CSV = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
       "metadata": {"name": "gizmo.v1.0.0", "annotations": {"capabilities": "Basic Install"},
                    "labels": {"operatorframework.io/arch.amd64": "supported"}},
       "spec": {"displayName": "Gizmo", "description": "Makes gizmos.", "minKubeVersion": "1.29.0",
                "version": "1.0.0", "maturity": "stable", "keywords": [], "provider": {"name": "Acme"},
                "customresourcedefinitions": {"owned": [{"name": "gizmos.acme.io", "kind": "Gizmo",
                                                         "version": "v1"}]},
                "installModes": [{"type": "AllNamespaces", "supported": True}],
                "install": {"strategy": "deployment", "spec": {"deployments": []}}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "gizmos.acme.io"},
       "spec": {"group": "acme.io", "names": {"kind": "Gizmo", "plural": "gizmos"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": True, "storage": True}]}}


def obj(o: dict, **dumps) -> Property:
    return Property("olm.bundle.object", {"data": base64.b64encode(json.dumps(o, **dumps).encode()).decode()})


def bundle(*props: Property, package: str = "gizmo", version: str = "1.0.0") -> Bundle:
    return Bundle(package, f"{package}.v{version}", f"registry.invalid/{package}:v{version}",
                  (Property("olm.package", {"packageName": package, "version": version}), *props), "catalog.yaml")


def test_fields_of_the_embedded_csv_are_those_olm_csv_metadata_would_hold():
    fields = bundle(obj(CRD, sort_keys=True), obj(CSV, sort_keys=True)).csv_fields
    assert fields == {"annotations": {"capabilities": "Basic Install"}, "apiServiceDefinitions": {},
                      "labels": {"operatorframework.io/arch.amd64": "supported"},
                      "displayName": "Gizmo", "description": "Makes gizmos.", "minKubeVersion": "1.29.0",
                      "maturity": "stable", "provider": {"name": "Acme"},
                      "crdDescriptions": CSV["spec"]["customresourcedefinitions"],
                      "installModes": [{"type": "AllNamespaces", "supported": True}]}


def test_olm_csv_metadata_wins_over_the_embedded_csv():
    b = bundle(Property("olm.csv.metadata", {"minKubeVersion": "1.20.0"}), obj(CSV))
    assert b.csv_fields == {"minKubeVersion": "1.20.0"}


def test_a_csv_written_with_kind_late_and_spaces_is_found():
    late = {"metadata": CSV["metadata"], "spec": CSV["spec"], "apiVersion": CSV["apiVersion"], "kind": CSV["kind"]}
    assert bundle(obj(CRD), obj(late, indent=2)).csv_fields["minKubeVersion"] == "1.29.0"


def test_no_csv_no_fields_and_broken_objects_are_passed_over():
    broken = Property("olm.bundle.object", {"data": "not base64 at all!"})
    not_json = Property("olm.bundle.object", {"data": base64.b64encode(b'{"kind":"ClusterServiceVersion",').decode()})
    assert bundle(obj(CRD), broken, not_json).csv_fields == {}
    assert bundle().csv_fields == {}
    assert embedded_csv([{"ref": "manifests/csv.yaml"}, broken.value, obj(CSV).value]) == CSV


def test_a_cached_bundle_reads_the_same_fields_once():
    shelved = pickle.loads(pickle.dumps(_catalog(bundle(obj(CRD), obj(CSV))).shelved()))
    b = shelved.bundle("gizmo", "gizmo.v1.0.0")
    assert b.csv_fields["minKubeVersion"] == "1.29.0"
    assert b.csv_fields is b.csv_fields and shelved.bundle("gizmo", "gizmo.v1.0.0") is b


def _catalog(*bundles: Bundle) -> Catalog:
    packages = {b.package: Package(b.package, "stable", "catalog.yaml") for b in bundles}
    channels = {(p, "stable"): Channel(p, "stable", tuple(ChannelEntry(b.name) for b in bundles if b.package == p),
                                       "catalog.yaml") for p in packages}
    return Catalog("community", "catalogs/community", packages, channels, {(b.package, b.name): b for b in bundles})


def _decl(package: str) -> OperatorDecl:
    return OperatorDecl(name=package, origin=Origin("operators/op.yaml"),
                        catalog=CatalogSelector("community", package))


def test_resolution_reads_embedded_csvs_of_the_bundles_it_considers_only():
    newer = {**CSV, "spec": {**CSV["spec"], "minKubeVersion": "1.31.0"}}
    old, new = bundle(obj(CRD), obj(CSV)), bundle(obj(CRD), obj(newer), version="1.1.0")
    other = bundle(obj(newer), package="other")
    cat = _catalog(old, new, other)
    resolution = SatResolver().resolve(ResolutionRequest((_decl("gizmo"),), {"community": cat},
                                                         kube_version="1.30.0"))
    assert [s.bundle_name for s in resolution.selections] == ["gizmo.v1.0.0"]
    assert "csv_fields" in old.__dict__ and "csv_fields" in new.__dict__
    assert "csv_fields" not in other.__dict__   # never decoded: no declaration or dependency reaches it


def test_without_a_cluster_version_nothing_is_decoded():
    newer = {**CSV, "spec": {**CSV["spec"], "minKubeVersion": "1.31.0"}}
    b = bundle(obj(newer))
    resolution = SatResolver().resolve(ResolutionRequest((_decl("gizmo"),), {"community": _catalog(b)}))
    assert [s.bundle_name for s in resolution.selections] == ["gizmo.v1.0.0"]
    assert "csv_fields" not in b.__dict__


def test_the_refusal_names_operator_bundle_and_both_versions():
    newer = {**CSV, "spec": {**CSV["spec"], "minKubeVersion": "1.31.0"}}
    with pytest.raises(ResolutionError) as err:
        SatResolver().resolve(ResolutionRequest((_decl("gizmo"),), {"community": _catalog(bundle(obj(newer)))},
                                                kube_version="1.30.0"))
    text = err.value.render()
    assert "Operator gizmo" in text
    assert "gizmo.v1.0.0 needs Kubernetes 1.31.0 or newer (minKubeVersion), but the cluster runs 1.30.0" in text
