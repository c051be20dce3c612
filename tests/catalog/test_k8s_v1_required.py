"""A k8s+v1 bundle's required APIs (inferred from its RBAC) in a catalog, resolved like any other.

The gizmo bundle's operator may create ``servicemonitors`` of ``monitoring.coreos.com``, a group
neither it nor Kubernetes provides. Rendered with the catalog that holds the provider, the
resource maps to the kind the provider's CRD names, and resolving gizmo pulls in the provider's
package. Rendered without it, the requirement is on the group, with a warning, and still resolves.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
from pathlib import Path

import pytest

from reconciler import pipeline, yamlio
from reconciler.authoring.render import APIKinds, api_kinds, api_kinds_of_objects, render_bundle_dir
from reconciler.cli.parser import main
from reconciler.model.catalog import Bundle, Property
from reconciler.repo import read_repository
from tests.bundle.test_k8s_v1 import _bundle
from tests.catalog.test_corpus import opm   # at import, as there: opm is found before the tests' cache moves
from tests.unit.helpers import crd_doc, csv_doc, write_bundle, write_docs
from tests.support.parts import not_tested

DECLARATION = {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": "gizmo"},
               "spec": {"catalog": {"name": "community", "package": "gizmo"}}}


def _monitoring_crd(kind: str = "ServiceMonitor", plural: str = "servicemonitors") -> dict:
    crd = crd_doc(plural, "monitoring.coreos.com")
    crd["spec"]["names"].update(kind=kind, singular=kind.lower())
    crd["spec"]["versions"] = [
        {"name": "v1alpha1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}]
    return crd


def _package(blob: dict) -> list[dict]:
    return [{"schema": "olm.package", "name": blob["package"], "defaultChannel": "stable"},
            {"schema": "olm.channel", "package": blob["package"], "name": "stable",
             "entries": [{"name": blob["name"]}]}, blob]


def _render(*args: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = main(["catalog", "render", *args], out)
    return code, json.loads(out.getvalue()) if code == 0 else {}


def _provider_catalog(tmp_path: Path) -> Path:
    write_bundle(tmp_path, "prom-bundle", csv_doc("prom.v0.70.0", version="0.70.0"), _monitoring_crd(),
                 package="prom")
    code, prom = _render(str(tmp_path / "prom-bundle"), "--image", "registry.invalid/prom-bundle:0.70.0")
    assert code == 0
    write_docs(tmp_path / "providers", "catalog.yaml", *_package(prom))
    return tmp_path / "providers"


def _resolve_gizmo(tmp_path: Path, providers: Path, gizmo: dict) -> dict[str, str]:
    repo = tmp_path / "repo"
    prom = [b for b in yamlio.load_all((providers / "catalog.yaml").read_text(), "catalog.yaml")]
    write_docs(repo / "catalogs" / "community", "catalog.yaml", *prom, *_package(gizmo))
    write_docs(repo, "declarations/gizmo.yaml", DECLARATION)
    resolution = pipeline.resolve(read_repository(repo))
    return {s.owner: s.bundle_name for s in resolution.selections}


def test_required_api_becomes_olm_gvk_required_and_pulls_in_its_provider(tmp_path):
    providers = _provider_catalog(tmp_path)
    _bundle(tmp_path)
    code, gizmo = _render(str(tmp_path / "gizmo"), "--image", "registry.invalid/gizmo-bundle:1.0.0",
                          "--catalog", str(providers))
    assert code == 0
    props = [(p["type"], p["value"]) for p in gizmo["properties"]]
    # the provider's CRD maps the plural to its kind; its highest version is the one required
    assert ("olm.gvk.required", {"group": "monitoring.coreos.com", "kind": "ServiceMonitor",
                                 "version": "v1"}) in props
    assert not [t for t, _ in props if t == "olm.constraint"]
    # built-in APIs (configmaps) and the bundle's own (widgets) are never required; nor optional ones (routes)
    assert [v for t, v in props if t == "olm.gvk.required"] == [
        {"group": "monitoring.coreos.com", "kind": "ServiceMonitor", "version": "v1"}]
    assert ("olm.bundle.mediatype", "k8s+v1") in props
    # its objects: the synthesized CSV (which took in the Deployment and the RBAC) and what remains
    kinds = sorted(json.loads(base64.b64decode(v["data"]))["kind"] for t, v in props if t == "olm.bundle.object")
    assert kinds == ["ClusterServiceVersion", "CustomResourceDefinition", "ServiceAccount"]
    assert _resolve_gizmo(tmp_path, providers, gizmo) == {"gizmo": "gizmo.v1.0.0", "prom": "prom.v0.70.0"}


def test_without_the_providers_catalog_the_group_is_required_with_a_warning(tmp_path, capsys):
    providers = _provider_catalog(tmp_path)
    _bundle(tmp_path)
    code, gizmo = _render(str(tmp_path / "gizmo"), "--image", "registry.invalid/gizmo-bundle:1.0.0")
    assert code == 0
    err = capsys.readouterr().err
    assert "servicemonitors.monitoring.coreos.com" in err and "--catalog" in err and "gizmo" in err
    constraints = [p["value"] for p in gizmo["properties"] if p["type"] == "olm.constraint"]
    assert len(constraints) == 1 and "monitoring.coreos.com" in constraints[0]["cel"]["rule"]
    assert not [p for p in gizmo["properties"] if p["type"] == "olm.gvk.required"]
    assert _resolve_gizmo(tmp_path, providers, gizmo) == {"gizmo": "gizmo.v1.0.0", "prom": "prom.v0.70.0"}
    (providers / "catalog.yaml").write_text("")   # nothing provides the group: resolution says which
    from reconciler.errors import ResolutionError
    with pytest.raises(ResolutionError) as err:
        _resolve_gizmo(tmp_path / "again", providers, gizmo)
    assert "servicemonitors.monitoring.coreos.com" in err.value.render()


def test_an_unprovided_required_api_makes_resolution_fail_naming_it(tmp_path):
    providers = _provider_catalog(tmp_path)
    _bundle(tmp_path)
    gizmo = render_bundle_dir(tmp_path / "gizmo", "registry.invalid/gizmo-bundle:1.0.0",
                              providers=api_kinds_of_objects([_monitoring_crd()]))
    assert {"type": "olm.gvk.required", "value": {"group": "monitoring.coreos.com", "kind": "ServiceMonitor",
                                                  "version": "v1"}} in gizmo["properties"]
    (providers / "catalog.yaml").write_text("")   # no provider in the catalog
    from reconciler.errors import ResolutionError
    with pytest.raises(ResolutionError) as err:
        _resolve_gizmo(tmp_path, providers, gizmo)
    assert "ServiceMonitor" in err.value.render()


def _bundle_with(*props: tuple[str, object]) -> Bundle:
    return Bundle("p", "p.v1", "", tuple(Property(t, v) for t, v in props), "catalog.yaml")


def test_plural_to_kind_from_crds_csv_metadata_and_guesses():
    crd = _monitoring_crd("Mouse", "mice")
    objects = _bundle_with(("olm.bundle.object", {"data": base64.b64encode(json.dumps(crd).encode()).decode()}),
                           ("olm.gvk", {"group": "monitoring.coreos.com", "kind": "Mouse", "version": "v1"}))
    described = _bundle_with(("olm.csv.metadata", {"crdDescriptions": {"owned": [
        {"name": "geese.farm.io", "kind": "Goose", "version": "v2"}]}}),
        ("olm.gvk", {"group": "farm.io", "kind": "Goose", "version": "v2"}))
    guessed = _bundle_with(("olm.gvk", {"group": "zoo.io", "kind": "Policy", "version": "v1beta1"}))

    class Cat:
        def __init__(self, *bundles):
            self.bundles = {(b.package, str(i)): b for i, b in enumerate(bundles)}

    kinds = api_kinds([Cat(objects, described), Cat(guessed)])
    assert kinds.lookup("monitoring.coreos.com", "mice") == ("Mouse", frozenset({"v1alpha1", "v1"}))
    assert kinds.lookup("monitoring.coreos.com", "mouses") is None       # the CRD's plural, not a guess
    assert kinds.lookup("farm.io", "geese") == ("Goose", frozenset({"v2"}))
    assert kinds.lookup("zoo.io", "policies") == ("Policy", frozenset({"v1beta1"}))
    assert APIKinds({}).lookup("zoo.io", "policies") is None


def test_a_template_maps_required_apis_through_its_catalog_option(tmp_path):
    providers = _provider_catalog(tmp_path)
    _bundle(tmp_path)
    write_docs(tmp_path, "template.yaml", {"schema": "olm.template.basic", "entries": [
        {"schema": "olm.package", "name": "gizmo", "defaultChannel": "stable"},
        {"schema": "olm.channel", "package": "gizmo", "name": "stable", "entries": [{"name": "gizmo.v1.0.0"}]},
        {"schema": "olm.bundle", "image": "gizmo"}]})
    out = io.StringIO()
    assert main(["catalog", "template", "basic", str(tmp_path / "template.yaml"), "-o", "json",
                 "--catalog", str(providers)], out) == 0
    blobs = [json.loads(b) for b in out.getvalue().replace("}\n{", "}\x00{").split("\x00")]
    gizmo = next(b for b in blobs if b["schema"] == "olm.bundle")
    types = {p["type"] for p in gizmo["properties"]}
    assert {"type": "olm.gvk.required", "value": {"group": "monitoring.coreos.com", "kind": "ServiceMonitor",
                                                  "version": "v1"}} in gizmo["properties"]
    assert "olm.csv.metadata" in types and "olm.bundle.object" not in types


def test_the_exported_registry_v1_bundle_carries_the_same_requirements_through_opm(tmp_path):
    """bundle convert writes them to metadata/dependencies.yaml, which opm turns into the same properties."""
    providers = _provider_catalog(tmp_path)
    docs = _bundle(tmp_path)
    # a second required resource nobody defines: required by its group
    cr = yamlio.load_all((docs / "manifests" / "all.yaml").read_text(), "all.yaml")
    role = next(d for d in cr if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gizmo")
    role["rules"].append({"apiGroups": ["acme.io"], "resources": ["anvils"], "verbs": ["get"]})
    write_docs(docs, "manifests/all.yaml", *cr)
    assert main(["bundle", "convert", str(docs), "-o", str(tmp_path / "out"), "--catalog", str(providers)],
                io.StringIO()) == 0
    ours = render_bundle_dir(docs, providers=api_kinds([_load(providers)]))
    wanted = {"olm.gvk.required", "olm.constraint"}
    required = [p for p in ours["properties"] if p["type"] in wanted]
    assert [p["type"] for p in required] == ["olm.constraint", "olm.gvk.required"]
    exe = opm()
    if exe is None:
        not_tested("opm", "opm is not built (run `make peers` or `python -m bench.catalog_bench` once) and not on PATH")
    done = subprocess.run([exe, "render", str(tmp_path / "out"), "-o", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert [p for p in json.loads(done.stdout)["properties"] if p["type"] in wanted] == required


def _load(directory: Path):
    from reconciler.catalog import load_catalog
    return load_catalog("providers", directory)
