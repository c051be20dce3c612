"""The install strategy read as OLM reads it, through typed structs: keys matched case-insensitively,
unknown fields dropped, each with a note; the API server shows the objects as written are refused."""

from __future__ import annotations

import copy

import pytest

from reconciler.bundle import render
from reconciler.cluster.kube import ApiError, Kube
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import FIELD_MANAGER
from tests.unit.helpers import by_kind, crd_doc, csv_doc, deployment, write_bundle

CSV_FILE = "manifests/demo.clusterserviceversion.yaml"
NAMESPACE = "typed-system"

RULES = [{"apigroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
         {"apiGroups": ["apps"], "attributeRestrictions": None, "resources": ["deployments"], "verbs": ["list"]},
         {"apiGroups": ["old"], "APIGroups": ["batch"], "resources": ["jobs"], "Verbs": ["watch"]}]

CASE = "(OLM's typed decoding matches keys case-insensitively)"


def _deployment() -> dict:
    d = deployment("demo-controller", "demo-sa")
    template = d["spec"]["template"]
    template["containers"] = copy.deepcopy(template["spec"]["containers"])   # one level too high
    d["spec"]["Replicas"] = 2
    d["spec"]["minreadyseconds"] = 5
    d["spec"]["templateGeneration"] = 3
    d["spec"]["template"]["spec"]["runAsNonRoot"] = True   # belongs in the securityContext
    d["spec"]["template"]["spec"]["containers"][0]["ImagePullPolicy"] = "Always"
    return d


def _render(tmp_path, mode=None):
    csv = csv_doc(permissions=[{"serviceAccountName": "demo-sa", "rules": copy.deepcopy(RULES)}],
                  cluster_permissions=[{"serviceAccountName": "demo-sa", "rules": copy.deepcopy(RULES[1:2])}],
                  deployments=[_deployment()])
    ref = write_bundle(tmp_path, "bundles/demo", csv)
    return render(ref, tmp_path, InstallSettings(NAMESPACE, mode), "operators")


READ_RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
              {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
              {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["watch"]}]


def test_rules_and_deployment_specs_are_read_as_olm_reads_them(tmp_path):
    out = _render(tmp_path, (NAMESPACE,))
    roles = by_kind(out.objects, "Role")
    assert roles and all(r["rules"] == READ_RULES for r in roles)
    cluster_role = [r for r in by_kind(out.objects, "ClusterRole")]
    assert [r["rules"] for r in cluster_role] == [READ_RULES[1:2]]
    (dep,) = by_kind(out.objects, "Deployment")
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["minReadySeconds"] == 5
    assert "templateGeneration" not in dep["spec"] and "Replicas" not in dep["spec"]
    assert set(dep["spec"]["template"]) == {"metadata", "spec"}
    assert dep["spec"]["template"]["spec"]["containers"][0] == {
        "name": "manager", "image": "registry.example.com/demo:v0.1.0", "imagePullPolicy": "Always"}
    assert "runAsNonRoot" not in dep["spec"]["template"]["spec"]
    where = f"{CSV_FILE}: ClusterServiceVersion demo.v0.1.0"
    rules = "spec.install.spec.permissions[0].rules"
    spec = "spec.install.spec.deployments[0].spec"
    for note in (f"{where}: {rules}[0].apigroups read as apiGroups {CASE}",
                 f"{where}: {rules}[1].attributeRestrictions is not a field of an RBAC PolicyRule and was dropped, "
                 f"as OLM's typed decoding drops it (server-side apply refuses unknown fields)",
                 f"{where}: {rules}[2].APIGroups read as apiGroups {CASE}",
                 f"{where}: spec.install.spec.clusterPermissions[0].rules[0].attributeRestrictions is not a field "
                 f"of an RBAC PolicyRule and was dropped, as OLM's typed decoding drops it (server-side apply "
                 f"refuses unknown fields)",
                 f"{where} deployment demo-controller: {spec}.Replicas read as replicas {CASE}",
                 f"{where} deployment demo-controller: {spec}.templateGeneration is not a field of a DeploymentSpec "
                 f"and was dropped, as OLM's typed decoding drops it (server-side apply refuses unknown fields)",
                 f"{where} deployment demo-controller: {spec}.template.containers is not a field of a "
                 f"PodTemplateSpec and was dropped, as OLM's typed decoding drops it (server-side apply refuses "
                 f"unknown fields)",
                 f"{where} deployment demo-controller: {spec}.template.spec.runAsNonRoot is not a field of a "
                 f"PodSpec and was dropped, as OLM's typed decoding drops it (server-side apply refuses unknown "
                 f"fields)",
                 f"{where} deployment demo-controller: {spec}.template.spec.containers[0].ImagePullPolicy read as "
                 f"imagePullPolicy {CASE}"):
        assert note in out.warnings
    assert len(out.warnings) == 11   # each repair once (minreadyseconds too), though rules are read for every namespace


def test_a_clean_strategy_is_passed_on_as_written(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo", csv_doc())
    out = render(ref, tmp_path, InstallSettings(NAMESPACE, None), "operators")
    assert out.warnings == ()


def test_the_read_objects_apply_where_the_written_ones_are_refused(tmp_path, control_plane):
    out = _render(tmp_path, (NAMESPACE,))
    with control_plane.admin_client() as api:
        kube = Kube(api)
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        kube.apply(kube.require_resource(ns), ns, field_manager=FIELD_MANAGER, dry_run=False)
        role = by_kind(out.objects, "Role")[0]
        (dep,) = by_kind(out.objects, "Deployment")
        written_role = dict(copy.deepcopy(role), rules=copy.deepcopy(RULES))
        written_dep = copy.deepcopy(dep)
        written_dep["spec"]["template"]["containers"] = written_dep["spec"]["template"]["spec"]["containers"]
        written_pod = copy.deepcopy(dep)
        written_pod["spec"]["template"]["spec"]["runAsNonRoot"] = True
        for written in (written_role, written_dep, written_pod):
            with pytest.raises(ApiError, match="field not declared in schema"):
                kube.apply(kube.require_resource(written), written, field_manager=FIELD_MANAGER, dry_run=True)
        for obj in (role, dep):
            kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=True)


def _crd() -> dict:
    crd = crd_doc()
    crd["spec"]["version"] = "v1"   # a v1beta1 leftover
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            # property names are names, not fields: "value" and "Type" stay
            "value": {"type": "string"},
            "Type": {"Type": "string", "Description": "read as description"},
            "label": {"type": "object", "properties": {"key": {"type": "string", "value": {"type": "string"}}}},
            "tags": {"type": "array", "items": {"type": "string", "examples": ["a"]}},
        }}}}
    return crd


READ_SCHEMA = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {
        "value": {"type": "string"},
        "Type": {"type": "string", "description": "read as description"},
        "label": {"type": "object", "properties": {"key": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    }}}}


def test_crds_are_read_as_olm_reads_them(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo", csv_doc(), _crd())
    out = render(ref, tmp_path, InstallSettings(NAMESPACE, None), "operators")
    (crd,) = by_kind(out.objects, "CustomResourceDefinition")
    assert "version" not in crd["spec"]
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == READ_SCHEMA
    where = "manifests/extra-0.yaml: CustomResourceDefinition widgets.demo.example.com"
    root = "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties"
    dropped = "and was dropped, as OLM's typed decoding drops it (server-side apply refuses unknown fields)"
    assert sorted(out.warnings) == sorted([
        f"{where}: spec.version is not a field of a v1 CustomResourceDefinitionSpec {dropped}",
        f"{where}: {root}.Type.Type read as type {CASE}",
        f"{where}: {root}.Type.Description read as description {CASE}",
        f"{where}: {root}.label.properties.key.value is not a field of a JSONSchemaProps {dropped}",
        f"{where}: {root}.tags.items.examples is not a field of a JSONSchemaProps {dropped}"])


def test_the_read_crd_applies_where_the_written_one_is_refused(tmp_path, control_plane):
    ref = write_bundle(tmp_path, "bundles/demo", csv_doc(), _crd())
    (crd,) = by_kind(render(ref, tmp_path, InstallSettings(NAMESPACE, None), "operators").objects,
                     "CustomResourceDefinition")
    with control_plane.admin_client() as api:
        kube = Kube(api)
        with pytest.raises(ApiError, match="field not declared in schema"):
            kube.apply(kube.require_resource(crd), dict(crd, spec=dict(crd["spec"], version="v1")),
                       field_manager=FIELD_MANAGER, dry_run=True)
        written = copy.deepcopy(crd)
        written["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = _crd()["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"]
        with pytest.raises(ApiError, match="field not declared in schema"):
            kube.apply(kube.require_resource(written), written, field_manager=FIELD_MANAGER, dry_run=True)
        kube.apply(kube.require_resource(crd), crd, field_manager=FIELD_MANAGER, dry_run=True)


@pytest.mark.parametrize("path,definition,fields", [
    ("/openapi/v3/apis/rbac.authorization.k8s.io/v1", "io.k8s.api.rbac.v1.PolicyRule", "POLICY_RULE"),
    ("/openapi/v3/apis/apps/v1", "io.k8s.api.apps.v1.DeploymentSpec", "DEPLOYMENT_SPEC"),
    ("/openapi/v3/apis/apps/v1", "io.k8s.api.core.v1.PodTemplateSpec", "POD_TEMPLATE_SPEC"),
    ("/openapi/v3/apis/apps/v1", "io.k8s.api.core.v1.PodSpec", "POD_SPEC"),
    ("/openapi/v3/apis/apps/v1", "io.k8s.api.core.v1.Container", "CONTAINER"),
    ("/openapi/v3/apis/apiextensions.k8s.io/v1",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec", "CRD_SPEC"),
    ("/openapi/v3/apis/apiextensions.k8s.io/v1",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps", "JSON_SCHEMA_PROPS"),
])
def test_the_field_lists_are_the_api_servers(control_plane, path, definition, fields):
    """A field missing here would be dropped from a valid bundle: the lists must be exactly the API's."""
    from reconciler.bundle import typed

    with control_plane.admin_client() as api:
        doc = Kube(api).request("GET", path)
    assert set(getattr(typed, fields)) == set(doc["components"]["schemas"][definition]["properties"])
