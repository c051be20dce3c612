"""Bundles like community bundles outside the corpus, each with the defects those carry (fields OLM's typed
decoding drops, keys in the wrong case, at every level of every kind a bundle holds), convert in every install
mode they support and pass a server-side dry-run with no refusal: the corpus proof, on bundles it lacks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bench import bundle_corpus as bc
from reconciler.kube.client import Kube
from tests.unit.helpers import crd_doc, csv_doc, deployment, write_bundle, write_docs

pytestmark = pytest.mark.cluster

ALL_FOUR = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")


def _queue_operator() -> tuple[dict, list[dict]]:
    """A key beside matchLabels in the deployment's selector (as a message-queue operator ships it), and webhook
    definitions with keys their Go types lack."""
    d = deployment("queue-operator", "queue-operator")
    d["spec"]["selector"]["app.kubernetes.io/name"] = "queue-operator"
    d["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 9443, "name": "webhook",
                                                                "Protocol": "TCP"}]
    hooks = [{"generateName": f"{kind[0].lower()}queue.heldout.example.com", "type": kind,
              "deploymentName": "queue-operator", "containerPort": 9443, "sideEffects": "None",
              "admissionReviewVersions": ["v1"], "webhookPath": f"/{kind[0].lower()}",
              "objectSelector": {"matchLabels": {"queue": "managed"}, "queue": "managed"},
              "rules": [{"apiGroups": ["heldout.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                         "resources": ["widgets"], "namespaced": True}]}
             for kind in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]
    csv = csv_doc("queue-operator.v2.21.1", version="2.21.1", modes=ALL_FOUR, deployments=[d],
                  permissions=[{"serviceAccountName": "queue-operator", "rules": [
                      {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}],
                  cluster_permissions=[], webhookdefinitions=hooks)
    return csv, [crd_doc(group="heldout.example.com")]


def _subscription_operator() -> tuple[dict, list[dict]]:
    """``secretName``/``defaultMode`` at the level of a volume (as a subscription operator ships it), and their kin
    in the strategy, the mounts and the rules."""
    d = deployment("subscription-operator", "subscription-operator")
    spec = d["spec"]
    spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "partition": 0}}
    pod = spec["template"]["spec"]
    pod["volumes"] = [{"name": "certs", "secretName": "subscription-certs", "defaultMode": 420},
                      {"name": "tmp", "emptyDir": {}, "readOnly": True}]
    pod["containers"][0]["volumeMounts"] = [{"name": "certs", "mountPath": "/certs", "readonly": True},
                                            {"name": "tmp", "mountPath": "/tmp"}]
    pod["containers"][0]["resources"] = {"limits": {"cpu": "500m"}, "request": {"cpu": "100m"}}
    csv = csv_doc("subscription-operator.v0.4.1", version="0.4.1", modes=ALL_FOUR, deployments=[d],
                  permissions=[{"serviceAccountName": "subscription-operator", "rules": [
                      {"apiGroups": [""], "attributeRestrictions": None, "resources": ["secrets"], "verbs": ["get"]}]}],
                  cluster_permissions=[{"serviceAccountName": "subscription-operator", "rules": [
                      {"apigroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]}])
    return csv, []


def _metrics_operator() -> tuple[dict, list[dict]]:
    """An aggregated API server whose definitions and pod carry keys in the wrong case."""
    d = deployment("metrics-operator", "metrics-operator")
    container = d["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace",
                                                                  "APIVersion": "v1"}}}]
    container["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": 8443, "Scheme": "HTTPS"},
                                   "periodSeconds": 10, "timeout": 3}
    csv = csv_doc("metrics-operator.v1.0.0", version="1.0.0", modes=("AllNamespaces",), deployments=[d],
                  permissions=[], cluster_permissions=[{"serviceAccountName": "metrics-operator", "rules": [
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "Verbs": ["list", "watch"]}]}],
                  apiservicedefinitions={"owned": [{"group": "metrics.heldout.example.com", "version": "v1beta1",
                                                    "kind": "PodMetric", "name": "podmetrics",
                                                    "DeploymentName": "metrics-operator", "containerPort": 8443,
                                                    "displayName": "Pod metrics"}]})
    return csv, []


def _extras_operator() -> tuple[dict, list[dict]]:
    """Optional objects of every built-in kind, each with a field its type lacks or a key in the wrong case."""
    objs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "extras-metrics"},
         "spec": {"selector": {"app": "extras-operator"}, "ports": [{"port": 8443, "TargetPort": 8443, "tls": True}]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extras-config"}, "Data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "extras-secret"}, "stringData": {"a": "1"},
         "Type": "Opaque"},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "extras-reader"}, "automount": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "extras-view"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "attributeRestrictions": None}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "RoleBinding", "metadata": {"name": "extras-view"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "extras-view"},
         "subjects": [{"kind": "ServiceAccount", "name": "extras-reader", "Namespace": "ignored"}]},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "extras"},
         "spec": {"MinAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "extras-operator"}}}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "extras-high"},
         "value": 1000, "Description": "dropped by the API server, whose decoding is case-sensitive"},
    ]
    csv = csv_doc("extras-operator.v0.3.0", version="0.3.0", modes=("OwnNamespace", "AllNamespaces"),
                  deployments=[deployment("extras-operator", "extras-operator")])
    return csv, objs


def _schema_operator() -> tuple[dict, list[dict]]:
    """CRDs whose spec and schema nodes carry keys apiextensions v1 lacks, one of them still v1beta1."""
    v1 = crd_doc("gadgets", "heldout.example.com")
    v1["spec"]["version"] = "v1"
    version = v1["spec"]["versions"][0]
    version["additionalPrinterColumns"] = [{"name": "Age", "type": "date", "JSONPath": ".metadata.creationTimestamp"}]
    version["schema"]["openAPIV3Schema"] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "examples": [1]},
        "mode": {"type": "string", "Enum": ["a", "b"]},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "value": "x"}}}}}}
    old = crd_doc("sprockets", "heldout.example.com", api_version="apiextensions.k8s.io/v1beta1")
    old["spec"].pop("versions")
    old["spec"]["version"] = "v1alpha1"
    old["spec"]["names"]["kind"] = "Sprocket"
    old["spec"]["validation"] = {"openAPIV3Schema": {"properties": {"spec": {"properties": {
        "teeth": {"type": "integer", "examples": [12]}}}}}}
    csv = csv_doc("schema-operator.v1.2.0", version="1.2.0", modes=("OwnNamespace", "AllNamespaces"),
                  deployments=[deployment("schema-operator", "schema-operator")])
    return csv, [v1, old]


HELD_OUT = {"queue-operator/2.21.1": _queue_operator, "subscription-operator/0.4.1": _subscription_operator,
            "metrics-operator/1.0.0": _metrics_operator, "extras-operator/0.3.0": _extras_operator,
            "schema-operator/1.2.0": _schema_operator}


def _k8s_v1(root: Path) -> None:
    """A k8s+v1 bundle with the same kind of defects in its plain manifests."""
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gadget"},
           "spec": copy.deepcopy(deployment("gadget", "gadget")["spec"])}
    dep["spec"]["selector"]["app"] = "gadget"
    dep["spec"]["template"]["spec"]["volumes"] = [{"name": "certs", "secretName": "gadget-certs"}]
    write_docs(root, "manifests/all.yaml", dep, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                "metadata": {"name": "gadget"}, "automount": False})
    write_docs(root, "metadata/annotations.yaml", {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "k8s+v1",
        "operators.operatorframework.io.bundle.package.v1": "gadget-operator"}})
    write_docs(root, "metadata/olm.yaml", {"name": "gadget-operator.v1.0.0", "version": "1.0.0",
                                           "minKubeVersion": "1.25.0",
                                           "installModes": [{"type": "AllNamespaces", "supported": True}]})


@pytest.fixture(scope="module")
def held_out(tmp_path_factory) -> Path:
    corpus = tmp_path_factory.mktemp("held-out")
    for rel, make in HELD_OUT.items():
        csv, extra = make()
        write_bundle(corpus, rel, csv, *extra, package=rel.split("/")[0])
    _k8s_v1(corpus / "gadget-operator" / "1.0.0")
    return corpus


def test_held_out_bundles_convert_in_every_mode_and_pass_server_side_dry_run(held_out, control_plane):
    bundles, others = bc.find_bundles(held_out)
    assert len(bundles) == 6 and not others
    default = bc.convert_all(held_out, bundles)
    modes = [o for b in bundles for o in bc.convert_every_mode(held_out, b, beyond_default=True)]
    outcomes = default + modes
    assert [o.bundle for o in outcomes if o.status != "converted"] == [], [o.message for o in outcomes]
    assert len(modes) == 3 + 3 + 1 + 1   # the modes beyond the default each CSV supports
    for o in default:   # each bundle really carries what it was made for, and says what was read
        assert o.rendered is not None
        assert any("is not a field of" in w for w in o.rendered.warnings), (o.bundle, o.rendered.warnings)
    with control_plane.admin_client() as api:
        bc.dry_run_all(Kube(api), outcomes)
    refused = {o.bundle: o.message for o in outcomes if o.status == "dry-run failed"}
    assert refused == {}, "\n".join(f"{b}: {m[:400]}" for b, m in refused.items())
