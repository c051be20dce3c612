"""Manifests as the API server and OLM read them: repaired with a warning naming the file, or refused first."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reconciler.bundle import render
from reconciler.cli.parser import main
from reconciler.errors import BundleError
from reconciler.model.declarations import InstallSettings
from tests.unit.helpers import by_kind, crd_doc, csv_doc, write, write_bundle, write_docs


def _render(tmp_path: Path, csv=None, *extra):
    ref = write_bundle(tmp_path, "bundles/demo", csv, *extra)
    return render(ref, tmp_path, InstallSettings("demo-ns", None), "operators")


def test_keys_match_case_insensitively_with_a_warning(tmp_path):
    cm = {"ApiVersion": "v1", "Kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}}
    out = _render(tmp_path, None, cm)
    assert [o["metadata"]["name"] for o in by_kind(out.objects, "ConfigMap")] == ["settings"]
    assert "manifests/extra-0.yaml: key 'ApiVersion' read as 'apiVersion' (Kubernetes matches keys " \
           "case-insensitively)" in out.warnings
    assert "manifests/extra-0.yaml: key 'Kind' read as 'kind' (Kubernetes matches keys case-insensitively)" \
        in out.warnings


def test_the_csv_is_found_by_kind_whatever_its_group(tmp_path):
    csv = {**csv_doc(), "apiVersion": "binding.operators.coreos.com/v1alpha1"}
    out = _render(tmp_path, csv)
    assert out.name == "demo.v0.1.0" and by_kind(out.objects, "Deployment")
    assert out.warnings == ("manifests/demo.clusterserviceversion.yaml: ClusterServiceVersion with apiVersion "
                            "'binding.operators.coreos.com/v1alpha1' read as operators.coreos.com/v1alpha1 "
                            "(a CSV is found by its kind)",)


def test_a_manifest_without_api_version_of_an_obvious_kind_is_read(tmp_path):
    role = {"kind": "ClusterRole", "metadata": {"name": "extra-reader"}, "rules": []}
    out = _render(tmp_path, None, role)
    assert [o["apiVersion"] for o in out.objects if o["metadata"]["name"] == "extra-reader"] == [
        "rbac.authorization.k8s.io/v1"]
    assert "manifests/extra-0.yaml: ClusterRole without apiVersion read as rbac.authorization.k8s.io/v1" \
        in out.warnings


def test_a_manifest_without_api_version_of_an_unknown_kind_is_refused(tmp_path):
    with pytest.raises(BundleError) as err:
        _render(tmp_path, None, {"kind": "Widget", "metadata": {"name": "w"}})
    assert "every manifest needs apiVersion and kind" in err.value.render()
    assert "manifests/extra-0.yaml" in err.value.render()


def test_a_csv_that_installs_nothing_warns_naming_the_bundle(tmp_path, capsys):
    csv = csv_doc(deployments=[], permissions=[], cluster_permissions=[])
    out = _render(tmp_path, csv)
    assert out.objects == ()
    assert out.warnings == ("manifests/demo.clusterserviceversion.yaml: ClusterServiceVersion demo.v0.1.0 has no "
                            "deployments and the bundle file://bundles/demo yields no other object: it installs "
                            "nothing",)
    code = main(["bundle", "render", str(tmp_path / "bundles/demo")], out=io.StringIO())
    assert code == 0   # OLM installs such a CSV: a warning, not an error
    assert "installs nothing" in capsys.readouterr().err


def test_the_flat_layout_gets_its_own_message(tmp_path):
    root = tmp_path / "bundles" / "flat"
    write_docs(root, "demo.clusterserviceversion.yaml", csv_doc())
    write_docs(root, "widgets.crd.yaml", crd_doc())
    write(root, "demo.package.yaml", "packageName: demo\nchannels: [{name: stable, currentCSV: demo.v0.1.0}]\n")
    with pytest.raises(BundleError) as err:
        render("file://bundles/flat", tmp_path, InstallSettings("demo-ns", None), "operators")
    text = err.value.render()
    assert "manifests at its top level (demo.clusterserviceversion.yaml)" in text
    assert "community 'flat' (package manifest) layout" in text and "metadata/annotations.yaml" in text


@pytest.mark.parametrize("name,text,schema", [
    ("basic.yaml", "entries:\n  - schema: olm.package\n    name: demo\n  - schema: olm.bundle\n"
                   "    image: quay.io/demo/bundle:v1\nschema: olm.template.basic\n", "olm.template.basic"),
    ("semver.yaml", "Schema: olm.semver\nStable:\n  Bundles:\n    - Image: quay.io/demo/bundle:v1\n", "olm.semver"),
    ("catalog.json", '{"schema": "olm.package", "name": "demo"}\n', "olm.package"),
])
def test_a_catalog_or_template_directory_is_named_as_such_not_as_the_flat_layout(tmp_path, name, text, schema):
    """Community packages keep catalog templates beside their bundles; passed as a bundle, say what they are."""
    write(tmp_path / "catalog-templates", name, text)
    with pytest.raises(BundleError) as err:
        render("file://catalog-templates", tmp_path, InstallSettings("demo-ns", None), "operators")
    message = err.value.render()
    assert f"file-based catalog or catalog template documents, not a bundle ({name} has schema {schema})" \
        in message
    assert "flat" not in message and "reconciler catalog template" in message


def test_a_bundle_nested_one_level_down_is_pointed_at(tmp_path):
    write_bundle(tmp_path, "bundles/demo/certification")
    with pytest.raises(BundleError) as err:
        render("file://bundles/demo", tmp_path, InstallSettings("demo-ns", None), "operators")
    assert "bundle has no manifests/ directory, but its subdirectory certification/ holds manifests/ and " \
           "metadata/" in err.value.render()
    assert err.value.hint == "pass the directory certification/ as the bundle"
    code = main(["bundle", "validate", str(tmp_path / "bundles/demo/certification")], out=io.StringIO())
    assert code == 0


def _crd(**spec_changes):
    crd = crd_doc()
    crd["spec"].update(spec_changes)
    return crd


def test_jsonpath_in_a_v1_crd_is_read_as_json_path(tmp_path):
    crd = crd_doc()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [{"name": "Age", "type": "date",
                                                               "JSONPath": ".metadata.creationTimestamp"}]
    out = _render(tmp_path, None, crd)
    [got] = by_kind(out.objects, "CustomResourceDefinition")
    assert got["spec"]["versions"][0]["additionalPrinterColumns"] == [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    assert out.warnings == ("manifests/extra-0.yaml: CustomResourceDefinition widgets.demo.example.com: "
                            "spec.versions[0].additionalPrinterColumns[0].JSONPath read as jsonPath (OLM's typed "
                            "decoding matches keys case-insensitively)",)


def test_a_v1beta1_crd_without_scope_becomes_namespaced(tmp_path):
    crd = crd_doc(api_version="apiextensions.k8s.io/v1beta1")
    crd["spec"]["scope"] = ""
    [got] = by_kind(_render(tmp_path, None, crd).objects, "CustomResourceDefinition")
    assert got["spec"]["scope"] == "Namespaced"


@pytest.mark.parametrize("crd, message", [
    (_crd(scope=None), "CustomResourceDefinition widgets.demo.example.com has no spec.scope"),
    ({**crd_doc(group="widgets.k8s.io"), "metadata": {"name": "widgets.widgets.k8s.io"}},
     "is in the protected group widgets.k8s.io but has no api-approved.kubernetes.io annotation"),
])
def test_crds_the_api_server_refuses_are_refused_before_applying(tmp_path, crd, message):
    if crd["spec"].get("scope") is None:
        del crd["spec"]["scope"]
    with pytest.raises(BundleError) as err:
        _render(tmp_path, None, crd)
    assert message in err.value.render() and "manifests/extra-0.yaml" in err.value.render()
    assert err.value.exit_code == 2


def test_a_protected_group_with_the_approval_annotation_is_accepted(tmp_path):
    crd = crd_doc(group="widgets.k8s.io")
    crd["metadata"] = {"name": "widgets.widgets.k8s.io",
                       "annotations": {"api-approved.kubernetes.io": "unapproved, experimental"}}
    assert by_kind(_render(tmp_path, None, crd).objects, "CustomResourceDefinition")


def test_an_install_namespace_mapping_replaces_every_namespace_field(tmp_path):
    """An Install's spec.namespaces: the install namespace and every namespace field of the objects."""
    csv = csv_doc(annotations={"operatorframework.io/suggested-namespace": "default"})
    ref = write_bundle(tmp_path, "bundles/demo", csv)
    out = render(ref, tmp_path, InstallSettings(namespace_map=(("default", "operators"),)), "elsewhere")
    assert out.namespace == "operators"
    namespaces = {str(o.get("metadata", {}).get("namespace")) for o in out.objects} - {"None"}
    assert namespaces == {"operators"}
    subjects = [s["namespace"] for o in out.objects for s in o.get("subjects") or []]
    assert subjects and set(subjects) == {"operators"}
    (dep,) = by_kind(out.objects, "Deployment")
    assert dep["spec"]["template"]["metadata"]["annotations"]["olm.operatorNamespace"] == "operators"
