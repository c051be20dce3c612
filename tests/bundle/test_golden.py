"""Golden tests: each converter scenario renders to the YAML checked in under tests/bundle/golden/.

Run with RECONCILER_UPDATE_GOLDEN=1 to rewrite the files after an intended
change, then review the diff. Webhook scenarios use the cert-manager
provider, whose output is deterministic; the self-signed provider is tested
by property in test_certs.py.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.bundle import render
from reconciler.bundle.certs import CertManagerProvider
from reconciler.errors import UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from reconciler.model.deployconfig import DeploymentConfig
from tests.unit.helpers import crd_doc, csv_doc, deployment, write_docs, write_bundle

GOLDEN = Path(__file__).with_name("golden")


def check_golden(name: str, rendered) -> None:
    text = yamlio.dump_all([{"namespace": rendered.namespace, "targetNamespaces": list(rendered.target_namespaces),
                             "mediatype": rendered.mediatype}, *rendered.objects])
    path = GOLDEN / f"{name}.yaml"
    if os.environ.get("RECONCILER_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}; run with RECONCILER_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from {path}"


def _render(tmp_path, csv, *extra, namespace="demo-ns", targets=None, **kw):
    ref = write_bundle(tmp_path, "bundles/demo", csv, *extra, **kw)
    return render(ref, tmp_path, InstallSettings(namespace, targets), "operators", CertManagerProvider())


@pytest.mark.parametrize("mode, targets", [("all-namespaces", None), ("own-namespace", ("demo-ns",)),
                                           ("single-namespace", ("team-a",)),
                                           ("multi-namespace", ("team-b", "team-a"))])
def test_install_modes(tmp_path, mode, targets):
    csv = csv_doc(modes=("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"))
    check_golden(f"install-mode-{mode}", _render(tmp_path, csv, crd_doc(), targets=targets))


def _webhook_csv():
    dep = deployment("demo-webhook", "demo-sa")
    dep["spec"]["template"]["spec"]["volumes"] = [{"name": "cert", "secret": {"secretName": "stale"}}]
    dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"}]
    common = {"deploymentName": "demo-webhook", "admissionReviewVersions": ["v1"], "sideEffects": "None",
              "failurePolicy": "Fail", "containerPort": 443, "targetPort": 9443}
    rules = [{"apiGroups": ["demo.example.com"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["widgets"]}]
    return csv_doc(deployments=[dep, deployment("demo-controller", "demo-sa")], webhookdefinitions=[
        {**common, "type": "ValidatingAdmissionWebhook", "generateName": "vwidget.demo.example.com",
         "webhookPath": "/validate", "rules": rules},
        {**common, "type": "MutatingAdmissionWebhook", "generateName": "mwidget.demo.example.com",
         "webhookPath": "/mutate", "rules": rules, "reinvocationPolicy": "IfNeeded"},
        {**common, "type": "ConversionWebhook", "generateName": "cwidget.demo.example.com",
         "webhookPath": "/convert", "conversionCRDs": ["widgets.demo.example.com"]},
    ])


def test_webhooks_all_types(tmp_path):
    check_golden("webhooks-all-types", _render(tmp_path, _webhook_csv(), crd_doc()))


def test_admission_webhooks_scoped_to_target_namespaces(tmp_path):
    csv = _webhook_csv()
    csv["spec"]["webhookdefinitions"] = csv["spec"]["webhookdefinitions"][:2]
    check_golden("webhooks-own-namespace", _render(tmp_path, csv, crd_doc(), targets=("demo-ns",)))


def test_conversion_webhook_needs_all_namespaces(tmp_path):
    with pytest.raises(UnsupportedBundleError, match="conversion webhook, which needs the AllNamespaces install "
                                                     "mode .* but this install is OwnNamespace"):
        _render(tmp_path, _webhook_csv(), crd_doc(), targets=("demo-ns",))


def test_conversion_webhook_for_missing_crd(tmp_path):
    with pytest.raises(UnsupportedBundleError, match=r"conversion webhook for CRDs \['widgets.demo.example.com'\]"):
        _render(tmp_path, _webhook_csv())


def test_api_service(tmp_path):
    csv = csv_doc(apiservicedefinitions={"owned": [
        {"group": "metrics.demo.example.com", "version": "v1beta1", "kind": "Metric", "name": "metrics",
         "deploymentName": "demo-controller", "containerPort": 6443}]})
    check_golden("apiservice", _render(tmp_path, csv))


def _v1beta1_crd():
    return {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.demo.example.com"},
            "spec": {"group": "demo.example.com", "version": "v1alpha1",
                     "names": {"kind": "Gadget", "plural": "gadgets", "listKind": "GadgetList"},
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Age", "type": "date",
                                                   "JSONPath": ".metadata.creationTimestamp"}],
                     "validation": {"openAPIV3Schema": {"properties": {
                         "metadata": {"properties": {"name": {"maxLength": 40, "type": "string"},
                                                     "labels": {"maxProperties": 3}}},
                         "spec": {"properties": {"size": {"type": "integer", "minimum": 1},
                                                 "tags": {"type": "array", "uniqueItems": True},
                                                 "port": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                                                 "free": {"description": "anything"}}}}}}},
            "status": {"acceptedNames": {"kind": "", "plural": ""}, "conditions": [], "storedVersions": []}}


def test_v1beta1_crd(tmp_path):
    check_golden("crd-v1beta1", _render(tmp_path, csv_doc(), _v1beta1_crd()))


def _shadow_crd(kind: str, plural: str) -> dict:
    crd = crd_doc(plural=plural, group="shadow.example.com")
    crd["spec"]["names"]["kind"] = kind
    return crd


def test_custom_kinds_shadowing_core_kinds(tmp_path):
    core_secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo-config"},
                   "stringData": {"k": "v"}}
    core_service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "demo-metrics"},
                    "spec": {"ports": [{"port": 8443}], "selector": {"app": "demo-controller"}}}
    rbac_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
                 "rules": []}
    out = _render(tmp_path, csv_doc(), _shadow_crd("Role", "roles"), _shadow_crd("Secret", "secrets"),
                  _shadow_crd("Service", "services"), core_secret, core_service, rbac_role, targets=("demo-ns",))
    check_golden("shadow-kinds", out)


@pytest.mark.parametrize("kind", ["Role", "Secret", "Service"])
def test_custom_resource_named_like_a_core_kind_is_refused(tmp_path, kind):
    cr = {"apiVersion": "shadow.example.com/v1", "kind": kind, "metadata": {"name": "sample"}}
    with pytest.raises(UnsupportedBundleError) as err:
        _render(tmp_path, csv_doc(), _shadow_crd(kind, kind.lower() + "s"), cr)
    assert err.value.message == (f"{kind} 'sample' in API group shadow.example.com is a custom resource of the "
                                 f"bundle's own CRDs; a registry+v1 bundle may not carry custom resources")
    assert err.value.path == "manifests/extra-1.yaml"


# The console's plugin (cluster-scoped) and a NetworkPolicy (namespaced), which OLM v0 installs since v0.46
# (pkg/controller/operators/catalog/supportedresources.go): the NetworkPolicy goes to the install namespace.
CONSOLE_PLUGIN = {"apiVersion": "console.openshift.io/v1", "kind": "ConsolePlugin", "metadata": {"name": "demo-plugin"},
                  "spec": {"displayName": "Demo", "backend": {"type": "Service", "service": {
                      "name": "demo-plugin", "namespace": "demo-ns", "port": 9443, "basePath": "/"}}}}
NETWORK_POLICY = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                  "metadata": {"name": "demo-plugin", "namespace": "elsewhere"},
                  "spec": {"podSelector": {"matchLabels": {"app": "demo-controller"}}, "policyTypes": ["Ingress"],
                           "ingress": [{"ports": [{"port": 9443, "protocol": "TCP"}], "from": [{
                               "namespaceSelector": {"matchLabels": {
                                   "kubernetes.io/metadata.name": "openshift-console"}}}]}]}}


def test_console_plugin_and_network_policy(tmp_path):
    out = _render(tmp_path, csv_doc(), CONSOLE_PLUGIN, NETWORK_POLICY, targets=("demo-ns",))
    check_golden("console-plugin-network-policy", out)
    kinds = {o["kind"]: o for o in out.objects}
    assert "namespace" not in kinds["ConsolePlugin"]["metadata"]
    assert kinds["NetworkPolicy"]["metadata"]["namespace"] == "demo-ns"


def test_plain_v0(tmp_path):
    root = tmp_path / "bundles" / "plain"
    write_docs(root, "manifests/all.yaml",
               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain-ns"}},
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "plain-ns"},
                "data": {"a": "1"}})
    out = render("file://bundles/plain", tmp_path, InstallSettings(), "operators")
    check_golden("plain-v0", out)


# An Operator's spec.config, merged into every Deployment after the serving certificates are mounted, as OLM v0
# merges a Subscription's: a variable and a mount replace theirs by name, the rest are appended.
CONFIG = DeploymentConfig.of({
    "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "WATCH_NAMESPACE", "value": "override"}],
    "envFrom": [{"configMapRef": {"name": "proxy-settings"}}],
    "volumes": [{"name": "cache", "emptyDir": {}}], "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
    "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "50m"}},
    "nodeSelector": {"node-role.kubernetes.io/infra": ""},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
    "annotations": {"team": "ops", "olm.targetNamespaces": "not-this"},
})


def test_spec_config(tmp_path):
    csv = _webhook_csv()
    csv["spec"]["install"]["spec"]["deployments"][1]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}},
        {"name": "OTHER", "value": "kept"}]
    ref = write_bundle(tmp_path, "bundles/demo", csv, crd_doc())
    out = render(ref, tmp_path, InstallSettings("demo-ns", None, config=CONFIG), "operators", CertManagerProvider())
    check_golden("spec-config", out)


def test_spec_config_is_refused_for_a_plain_bundle(tmp_path):
    write_docs(tmp_path / "bundles" / "plain", "manifests/all.yaml",
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
    with pytest.raises(UnsupportedBundleError) as err:
        render("file://bundles/plain", tmp_path, InstallSettings(config=CONFIG), "operators")
    assert "a plain+v0 bundle is applied as its manifests are written, and spec.config has no meaning" in \
        err.value.message
    assert "remove spec.config from the Operator" in (err.value.hint or "")


def test_rendering_is_deterministic_with_cert_manager(tmp_path):
    a = _render(tmp_path, _webhook_csv(), crd_doc())
    b = _render(tmp_path, copy.deepcopy(_webhook_csv()), crd_doc())
    assert a.objects == b.objects
