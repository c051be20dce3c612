"""Bundle objects read as OLM reads them, through the API types of the pinned Kubernetes: keys matched
case-insensitively, unknown fields dropped, each with a note; the API server refuses the objects as written."""

from __future__ import annotations

import copy
import json
import time

import pytest

from reconciler.bundle import render
from reconciler.kube.client import ApiError, Kube
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import FIELD_MANAGER
from tests.unit.helpers import by_kind, crd_doc, csv_doc, deployment, write_bundle

CSV_FILE = "manifests/demo.clusterserviceversion.yaml"
NAMESPACE = "typed-system"

RULES = [{"apigroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
         {"apiGroups": ["apps"], "attributeRestrictions": None, "resources": ["deployments"], "verbs": ["list"]},
         {"apiGroups": ["old"], "APIGroups": ["batch"], "resources": ["jobs"], "Verbs": ["watch"]}]

CASE = "(OLM's typed decoding matches keys case-insensitively)"
DROPPED = "and was dropped, as OLM's typed decoding drops it (server-side apply refuses unknown fields)"


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
                 f"{where}: {rules}[1].attributeRestrictions is not a field of rbac/v1 PolicyRule {DROPPED}",
                 f"{where}: {rules}[2].APIGroups read as apiGroups {CASE}",
                 f"{where}: spec.install.spec.clusterPermissions[0].rules[0].attributeRestrictions is not a field "
                 f"of rbac/v1 PolicyRule {DROPPED}",
                 f"{where}: {spec}.Replicas read as replicas {CASE}",
                 f"{where}: {spec}.templateGeneration is not a field of apps/v1 DeploymentSpec {DROPPED}",
                 f"{where}: {spec}.template.containers is not a field of core/v1 PodTemplateSpec {DROPPED}",
                 f"{where}: {spec}.template.spec.runAsNonRoot is not a field of core/v1 PodSpec {DROPPED}",
                 f"{where}: {spec}.template.spec.containers[0].ImagePullPolicy read as imagePullPolicy {CASE}"):
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
    assert sorted(out.warnings) == sorted([
        f"{where}: spec.version is not a field of apiextensions/v1 CustomResourceDefinitionSpec {DROPPED}",
        f"{where}: {root}.Type.Type read as type {CASE}",
        f"{where}: {root}.Type.Description read as description {CASE}",
        f"{where}: {root}.label.properties.key.value is not a field of apiextensions/v1 JSONSchemaProps {DROPPED}",
        f"{where}: {root}.tags.items.examples is not a field of apiextensions/v1 JSONSchemaProps {DROPPED}"])


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


# --- the whole Deployment, webhook and APIService definitions, optional objects -----------------------------

def _held_out_deployment() -> dict:
    """Defects of community bundles outside the corpus, one of each place they were found (and their kin)."""
    d = deployment("demo-controller", "demo-sa")
    spec = d["spec"]
    spec["selector"]["app"] = "demo-controller"              # beside matchLabels (a rabbitmq-cluster-operator)
    spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "partition": 2}}
    pod = spec["template"]["spec"]
    pod["volumes"] = [{"name": "certs", "secretName": "demo-certs", "defaultMode": 420},   # a volume source's
                      {"name": "data", "emptyDir": {"medium": "Memory", "size": "1Gi"}}]   # fields one level up
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"], "weight": 1}]}]}}}
    container = pod["containers"][0]
    container["env"] = [{"name": "WATCH", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace",
                                                                    "APIVersion": "v1"}}}]
    container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                    "runAsNonRoot": True, "readOnly": True}
    container["volumeMounts"] = [{"name": "certs", "mountPath": "/certs", "readonly": True}]
    return d


READ_SPEC = {
    "selector": {"matchLabels": {"app": "demo-controller"}},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
}


def _held_out_csv() -> dict:
    csv = csv_doc(deployments=[_held_out_deployment()])
    csv["spec"]["webhookdefinitions"] = [{
        "generateName": "vwidget.demo.example.com", "type": "ValidatingAdmissionWebhook",
        "deploymentName": "demo-controller", "containerPort": 9443, "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "FailurePolicy": "Fail",
        "namespaceSelector": {"matchLabels": {"team": "a"}},       # OLM's WebhookDescription has none
        "objectSelector": {"matchLabels": {"x": "y"}, "x": "y"},
        "rules": [{"apiGroups": ["demo.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["widgets"], "scope": "Namespaced", "namespaced": True}]}]
    return csv


def test_the_whole_deployment_and_the_webhook_definitions_are_read_as_olm_reads_them(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo", _held_out_csv())
    out = render(ref, tmp_path, InstallSettings(NAMESPACE, None), "operators")
    (dep,) = by_kind(out.objects, "Deployment")
    assert {k: dep["spec"][k] for k in READ_SPEC} == READ_SPEC
    pod = dep["spec"]["template"]["spec"]
    assert pod["volumes"][:2] == [{"name": "certs"}, {"name": "data", "emptyDir": {"medium": "Memory"}}]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] \
        == [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]
    container = pod["containers"][0]
    assert container["env"] == [{"name": "WATCH", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace",
                                                                             "apiVersion": "v1"}}}]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                            "runAsNonRoot": True}
    assert container["volumeMounts"][0] == {"name": "certs", "mountPath": "/certs", "readOnly": True}
    (hook,) = by_kind(out.objects, "ValidatingWebhookConfiguration")[0]["webhooks"]
    assert hook["failurePolicy"] == "Fail" and hook["objectSelector"] == {"matchLabels": {"x": "y"}}
    assert "namespaceSelector" not in hook   # AllNamespaces: OLM sets none, whatever the CSV says
    assert hook["rules"] == [{"apiGroups": ["demo.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["widgets"], "scope": "Namespaced"}]
    where = f"{CSV_FILE}: ClusterServiceVersion demo.v0.1.0"
    spec = "spec.install.spec.deployments[0].spec"
    for note in (
            f"{where}: {spec}.selector.app is not a field of meta/v1 LabelSelector {DROPPED}",
            f"{where}: {spec}.strategy.rollingUpdate.partition is not a field of apps/v1 RollingUpdateDeployment "
            f"{DROPPED}",
            f"{where}: {spec}.template.spec.volumes[0].secretName is not a field of core/v1 Volume {DROPPED}",
            f"{where}: {spec}.template.spec.volumes[0].defaultMode is not a field of core/v1 Volume {DROPPED}",
            f"{where}: {spec}.template.spec.volumes[1].emptyDir.size is not a field of core/v1 "
            f"EmptyDirVolumeSource {DROPPED}",
            f"{where}: {spec}.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            f"nodeSelectorTerms[0].matchExpressions[0].weight is not a field of core/v1 NodeSelectorRequirement "
            f"{DROPPED}",
            f"{where}: {spec}.template.spec.containers[0].env[0].valueFrom.fieldRef.APIVersion read as apiVersion "
            f"{CASE}",
            f"{where}: {spec}.template.spec.containers[0].securityContext.readOnly is not a field of core/v1 "
            f"SecurityContext {DROPPED}",
            f"{where}: {spec}.template.spec.containers[0].volumeMounts[0].readonly read as readOnly {CASE}",
            f"{where}: spec.webhookdefinitions[0].FailurePolicy read as failurePolicy {CASE}",
            f"{where}: spec.webhookdefinitions[0].namespaceSelector is not a field of OLM's WebhookDescription "
            f"and was dropped, as OLM's typed decoding drops it",
            f"{where}: spec.webhookdefinitions[0].objectSelector.x is not a field of meta/v1 LabelSelector {DROPPED}",
            f"{where}: spec.webhookdefinitions[0].rules[0].namespaced is not a field of admissionregistration/v1 "
            f"RuleWithOperations {DROPPED}"):
        assert note in out.warnings
    assert len(out.warnings) == 13


def test_apiservice_definitions_are_read_as_olm_reads_them(tmp_path):
    csv = csv_doc()
    csv["spec"]["apiservicedefinitions"] = {"Owned": [{"group": "metrics.demo.example.com", "version": "v1beta1",
                                                       "kind": "PodMetric", "name": "podmetrics",
                                                       "DeploymentName": "demo-controller"}]}
    out = render(write_bundle(tmp_path, "bundles/demo", csv), tmp_path, InstallSettings(NAMESPACE, None),
                 "operators")
    assert [o["metadata"]["name"] for o in by_kind(out.objects, "APIService")] == ["v1beta1.metrics.demo.example.com"]
    where = f"{CSV_FILE}: ClusterServiceVersion demo.v0.1.0"
    assert out.warnings == (f"{where}: spec.apiservicedefinitions.Owned read as owned {CASE}",
                            f"{where}: spec.apiservicedefinitions.owned[0].DeploymentName read as deploymentName "
                            f"{CASE}")


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "Labels": {"a": "b"}},
           "spec": {"selector": {"app": "demo-controller"}, "ports": [{"port": 8443, "TargetPort": 8443,
                                                                       "nodePort": None, "tls": True}]}}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "demo"},
       "spec": {"MinAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "demo-controller"}}}}


def test_optional_objects_are_read_as_olm_creates_them(tmp_path):
    """OLM decodes a Service into its Go type (keys matched case-insensitively); a PodDisruptionBudget it creates
    as written, and the API server's case-sensitive decoding drops what its type lacks."""
    ref = write_bundle(tmp_path, "bundles/demo", csv_doc(), SERVICE, PDB)
    out = render(ref, tmp_path, InstallSettings(NAMESPACE, None), "operators")
    (svc,) = by_kind(out.objects, "Service")
    assert svc["metadata"] == {"name": "metrics", "labels": {"a": "b"}, "namespace": NAMESPACE}
    assert svc["spec"]["ports"] == [{"port": 8443, "targetPort": 8443, "nodePort": None}]
    (pdb,) = by_kind(out.objects, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "demo-controller"}}}
    server = "and was dropped, as the API server drops it when OLM creates the object (server-side apply " \
             "refuses unknown fields)"
    assert out.warnings == (
        f"manifests/extra-0.yaml: Service metrics: metadata.Labels read as labels {CASE}",
        f"manifests/extra-0.yaml: Service metrics: spec.ports[0].TargetPort read as targetPort {CASE}",
        f"manifests/extra-0.yaml: Service metrics: spec.ports[0].tls is not a field of core/v1 ServicePort {DROPPED}",
        f"manifests/extra-1.yaml: PodDisruptionBudget demo: spec.MinAvailable is not a field of policy/v1 "
        f"PodDisruptionBudgetSpec {server}")


def test_a_plain_bundle_with_unknown_fields_is_refused_naming_them(tmp_path):
    """plain+v0 is applied as kubectl applies it, whose strict validation refuses unknown fields: before anything
    is applied, every one is named."""
    from reconciler.errors import UnsupportedBundleError
    from tests.unit.helpers import write_docs

    root = tmp_path / "bundles" / "plain"
    write_docs(root, "manifests/objects.yaml", SERVICE, PDB, {"apiVersion": "v1", "kind": "ConfigMap",
                                                              "metadata": {"name": "fine"}, "data": {"a": "1"}})
    write_docs(root, "metadata/annotations.yaml", {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "plain+v0"}})
    with pytest.raises(UnsupportedBundleError) as err:
        render("file://bundles/plain", tmp_path, InstallSettings(NAMESPACE, None), "operators")
    assert err.value.render().splitlines()[:5] == [
        "file://bundles/plain: 4 fields that the API types lack (objects are applied as written, and kubectl apply "
        "and server-side apply refuse unknown fields):",
        "  manifests/objects.yaml: Service metrics: metadata.Labels is not a field of meta/v1 ObjectMeta",
        "  manifests/objects.yaml: Service metrics: spec.ports[0].TargetPort is not a field of core/v1 ServicePort",
        "  manifests/objects.yaml: Service metrics: spec.ports[0].tls is not a field of core/v1 ServicePort",
        "  manifests/objects.yaml: PodDisruptionBudget demo: spec.MinAvailable is not a field of policy/v1 "
        "PodDisruptionBudgetSpec"]


def test_what_olm_reads_applies_where_what_was_written_is_refused(tmp_path, control_plane):
    """Server-side dry-run: every object as the bundle wrote it is refused, every object as read is accepted."""
    ref = write_bundle(tmp_path, "bundles/demo", _held_out_csv(), SERVICE, PDB)
    out = render(ref, tmp_path, InstallSettings(NAMESPACE, (NAMESPACE,)), "operators")
    written_dep = dict(by_kind(out.objects, "Deployment")[0])
    written_dep["spec"] = dict(written_dep["spec"], selector=_held_out_deployment()["spec"]["selector"])
    written_pod = copy.deepcopy(by_kind(out.objects, "Deployment")[0])
    written_pod["spec"]["template"]["spec"]["volumes"][0] = {"name": "certs", "secretName": "demo-certs"}
    written_hook = copy.deepcopy(by_kind(out.objects, "ValidatingWebhookConfiguration")[0])
    written_hook["webhooks"][0]["rules"][0]["namespaced"] = True
    written = [written_dep, written_pod, written_hook,
               dict(SERVICE, metadata={"name": "metrics", "namespace": NAMESPACE}),
               dict(PDB, metadata={"name": "demo", "namespace": NAMESPACE})]
    with control_plane.admin_client() as api:
        kube = Kube(api)
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        kube.apply(kube.require_resource(ns), ns, field_manager=FIELD_MANAGER, dry_run=False)
        for obj in written:
            with pytest.raises(ApiError, match="field not declared in schema"):
                kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=True)
        for obj in out.objects:
            kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=True)


# --- the field table ---------------------------------------------------------------------------------------------

def test_the_field_table_is_what_the_pinned_api_server_serves(control_plane):
    """A field missing from the table would be dropped from a valid bundle: it must be exactly the server's
    (whatever custom resources other tests have installed in the shared cluster)."""
    from reconciler.bundle import apitypes

    with control_plane.admin_client() as api:
        kube = Kube(api)
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gizmos.typed.example.com"},
               "spec": {"group": "typed.example.com", "scope": "Namespaced",
                        "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo", "listKind": "GizmoList"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"spec": {"type": "object"}}}}}]}}
        kube.apply(kube.require_resource(crd), crd, field_manager=FIELD_MANAGER, dry_run=False)
        try:
            for _ in range(150):   # until the API server publishes the custom resource's schema too
                if "apis/typed.example.com/v1" in kube.request("GET", "/openapi/v3").get("paths", {}):
                    break
                time.sleep(0.2)
            else:
                pytest.fail("the CRD's OpenAPI schema was never published")
            served = apitypes.build(apitypes.from_server(kube), str(kube.request("GET", "/version")["gitVersion"]))
        finally:
            kube.delete(kube.require_resource(crd), "", crd["metadata"]["name"])
    committed = json.loads(apitypes.TABLE.read_text())
    assert committed["kubernetes"] == served["kubernetes"]
    assert committed["kinds"] == served["kinds"]
    assert committed["types"] == served["types"]


def test_every_kind_a_bundle_installs_is_in_the_table_and_olm_types_name_table_types():
    from reconciler.bundle import registry_v1, typed

    kinds = [f"{'/'.join(filter(None, (g, 'v1')))} {k}" for (g, k) in registry_v1.OPTIONAL_KINDS
             if g in ("", "rbac.authorization.k8s.io", "policy", "scheduling.k8s.io")]
    kinds += ["apps/v1 Deployment", "apiextensions.k8s.io/v1 CustomResourceDefinition",
              "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration",
              "admissionregistration.k8s.io/v1 MutatingWebhookConfiguration", "apiregistration.k8s.io/v1 APIService"]
    assert all(typed.kind_type(*k.split(" ")) for k in kinds), [k for k in kinds if not typed.kind_type(*k.split(" "))]
    table = typed._table()[1]
    for fields in typed.OLM_TYPES.values():
        assert all(ref.lstrip("[{?") in table for ref in fields.values() if ref)


def test_the_table_notation_of_an_openapi_document():
    """``apitypes.build`` on a small schema: structs, lists and maps of them, either-shaped types, leaves."""
    from reconciler.bundle import apitypes

    def ref(name: str) -> dict:
        return {"allOf": [{"$ref": f"#/components/schemas/{name}"}]}
    props = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
    meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"
    doc = {"components": {"schemas": {
        "io.k8s.api.demo.v1.Widget": {
            "x-kubernetes-group-version-kind": [{"group": "demo.example.com", "version": "v1", "kind": "Widget"}],
            "properties": {"apiVersion": {"type": "string"}, "metadata": ref(meta),
                           "parts": {"type": "array", "items": ref("io.k8s.api.demo.v1.Part")},
                           "byName": {"type": "object", "additionalProperties": ref("io.k8s.api.demo.v1.Part")},
                           "size": ref(quantity), "schema": {"$ref": "#/components/schemas/" + props + "OrArray"}}},
        "io.k8s.api.demo.v1.WidgetList": {
            "x-kubernetes-group-version-kind": [{"group": "demo.example.com", "version": "v1", "kind": "WidgetList"}],
            "properties": {"items": {"type": "array", "items": ref("io.k8s.api.demo.v1.Widget")}}},
        "io.k8s.api.demo.v1.Part": {"properties": {"name": {"type": "string"}}},
        meta: {"properties": {"name": {"type": "string"}}},
        quantity: {"type": "string"},
        props: {"properties": {"type": {"type": "string"}}},
        props + "OrArray": {"description": "either"}}}}
    table = apitypes.build([doc], "v9.9.9")
    assert table["kinds"] == {"demo.example.com/v1 Widget": "demo.v1.Widget"}
    assert table["types"]["demo.v1.Widget"] == {
        "apiVersion": "", "byName": "{demo.v1.Part", "metadata": "meta.v1.ObjectMeta", "parts": "[demo.v1.Part",
        "schema": "?apiextensions.v1.JSONSchemaProps", "size": ""}
    assert set(table["types"]) == {"demo.v1.Widget", "demo.v1.Part", "meta.v1.ObjectMeta",
                                   "apiextensions.v1.JSONSchemaProps"}
