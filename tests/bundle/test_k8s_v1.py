"""k8s+v1 bundles: required manifests and olm.yaml, API inference, wildcard RBAC, CSV synthesis, export."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.bundle import fetch, k8s_v1, read_content, render
from reconciler.bundle.certs import CertManagerProvider
from reconciler.cli.parser import main
from reconciler.errors import BundleError, UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from tests.bundle.test_golden import check_golden
from tests.unit.helpers import crd_doc, write_docs

OLM_YAML = {"name": "gizmo.v1.0.0", "version": "1.0.0", "minKubeVersion": "1.25.0", "displayName": "Gizmo",
            "installModes": [{"type": "AllNamespaces", "supported": True},
                             {"type": "OwnNamespace", "supported": True}]}
RBAC = "rbac.authorization.k8s.io/v1"


def _docs() -> list[dict]:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gizmo", "labels": {"app": "gizmo"}},
           "spec": {"selector": {"matchLabels": {"app": "gizmo"}},
                    "template": {"metadata": {"labels": {"app": "gizmo"}},
                                 "spec": {"serviceAccountName": "gizmo",
                                          "containers": [{"name": "m", "image": "example.com/gizmo:1"}]}}}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gizmo"}}
    subject = [{"kind": "ServiceAccount", "name": "gizmo", "namespace": "x"}]
    cr = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "gizmo"}, "rules": [
        {"apiGroups": ["demo.example.com"], "resources": ["widgets"], "verbs": ["get", "list"]},
        {"apiGroups": ["monitoring.coreos.com"], "resources": ["servicemonitors"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    crb = {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "gizmo"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gizmo"},
           "subjects": subject}
    opt = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "gizmo-opt"}, "rules": [
        {"apiGroups": ["route.openshift.io"], "resources": ["routes"], "verbs": ["get"]}]}
    optb = {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
            "metadata": {"name": "gizmo-opt", "annotations": {k8s_v1.OPTIONAL_DEPENDENCY: "optional"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gizmo-opt"},
            "subjects": subject}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gizmo-webhook"},
           "spec": {"selector": {"app": "gizmo"}, "ports": [{"port": 443, "targetPort": 9443}]}}
    vwh = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": "gizmo"}, "webhooks": [{
               "name": "vgizmo.demo.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"name": "gizmo-webhook", "namespace": "x", "path": "/validate",
                                            "port": 443}},
               "rules": [{"apiGroups": ["demo.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                          "resources": ["widgets"]}]}]}
    return [dep, sa, cr, crb, opt, optb, svc, vwh, crd_doc()]


def _bundle(tmp_path: Path, docs=None, olm=OLM_YAML, name="gizmo") -> Path:
    root = tmp_path / name
    write_docs(root, "manifests/all.yaml", *(docs if docs is not None else _docs()))
    write_docs(root, "metadata/annotations.yaml", {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "k8s+v1",
        "operators.operatorframework.io.bundle.package.v1": "gizmo"}})
    if olm is not None:
        write_docs(root, "metadata/olm.yaml", olm)
    return root


def test_k8s_v1_renders_through_a_synthesized_csv(tmp_path):
    _bundle(tmp_path)
    out = render("file://gizmo", tmp_path, InstallSettings("gizmo-system"), "operators", CertManagerProvider())
    assert (out.mediatype, out.name, out.version, out.package) == ("k8s+v1", "gizmo.v1.0.0", "1.0.0", "gizmo")
    check_golden("k8s-v1", out)


def test_inferred_apis(tmp_path):
    content = read_content(fetch("file://gizmo", _bundle(tmp_path).parent))
    converted, apis = k8s_v1.synthesize(content)
    assert apis.provided == ("Widget.demo.example.com/v1",)
    assert apis.required == ("servicemonitors.monitoring.coreos.com",)
    assert apis.optional == ("routes.route.openshift.io",)
    assert apis.native == ("/metrics",)
    csv = converted.manifests[0].obj
    assert csv["spec"]["customresourcedefinitions"]["owned"] == [
        {"name": "widgets.demo.example.com", "kind": "Widget", "version": "v1"}]
    assert csv["spec"]["webhookdefinitions"][0]["deploymentName"] == "gizmo"
    assert json.loads(csv["metadata"]["annotations"]["reconciler.dev/inferred-apis"])["required"] == [
        "servicemonitors.monitoring.coreos.com"]


def test_wildcard_rule_bound_to_the_operator_is_rejected(tmp_path):
    docs = _docs()
    docs[2]["rules"][1] = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}
    _bundle(tmp_path, docs)
    with pytest.raises(UnsupportedBundleError) as err:
        render("file://gizmo", tmp_path, InstallSettings(), "operators")
    assert err.value.message.startswith("ClusterRole gizmo rule 1 uses a wildcard in apiGroups, resources "
                                        '({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]})')


def test_wildcard_rule_not_bound_to_the_operator_is_allowed(tmp_path):
    docs = _docs()
    docs.append({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "admin-aggregate"},
                 "rules": [{"apiGroups": ["demo.example.com"], "resources": ["*"], "verbs": ["*"]}]})
    _bundle(tmp_path, docs)
    out = render("file://gizmo", tmp_path, InstallSettings(), "operators")
    assert "admin-aggregate" in [o["metadata"]["name"] for o in out.objects]


@pytest.mark.parametrize("olm, message", [
    (None, "a k8s+v1 bundle needs metadata/olm.yaml"),
    ({k: v for k, v in OLM_YAML.items() if k not in ("version", "minKubeVersion")},
     "olm.yaml lacks the required fields version, minKubeVersion"),
    ({**OLM_YAML, "installModes": "all"}, "olm.yaml installModes must be a list of {type, supported}"),
])
def test_olm_yaml_required(tmp_path, olm, message):
    _bundle(tmp_path, olm=olm)
    with pytest.raises(BundleError) as err:
        render("file://gizmo", tmp_path, InstallSettings(), "operators")
    assert err.value.message == message


def test_deployment_required(tmp_path):
    _bundle(tmp_path, _docs()[1:])
    with pytest.raises(BundleError, match="a k8s\\+v1 bundle needs a Deployment for the operator"):
        render("file://gizmo", tmp_path, InstallSettings(), "operators")


def test_webhook_service_required(tmp_path):
    docs = [d for d in _docs() if d["kind"] != "Service"]
    _bundle(tmp_path, docs)
    with pytest.raises(BundleError, match="ValidatingWebhookConfiguration gizmo references Service 'gizmo-webhook', "
                                          "which the bundle does not contain"):
        render("file://gizmo", tmp_path, InstallSettings(), "operators")


def test_convert_to_registry_v1(tmp_path):
    src = _bundle(tmp_path)
    out = io.StringIO()
    assert main(["bundle", "convert", str(src), "--to", "registry+v1", "-o", str(tmp_path / "out")], out) == 0
    assert out.getvalue() == f"wrote registry+v1 bundle {tmp_path / 'out'}\n"
    ann = yamlio.read_all(tmp_path / "out" / "metadata" / "annotations.yaml")[0]["annotations"]
    assert ann["operators.operatorframework.io.bundle.mediatype.v1"] == "registry+v1"
    assert ann["operators.operatorframework.io.bundle.package.v1"] == "gizmo"
    files = sorted(p.name for p in (tmp_path / "out" / "manifests").iterdir())
    assert files[-1] == "gizmo.v1.0.0.clusterserviceversion.yaml"
    # the exported bundle installs to the same objects as the k8s+v1 bundle it came from
    a = render("file://gizmo", tmp_path, InstallSettings("ns"), "operators", CertManagerProvider())
    b = render("file://out", tmp_path, InstallSettings("ns"), "operators", CertManagerProvider())
    assert a.objects == b.objects and b.mediatype == "registry+v1"
    assert main(["bundle", "convert", str(src), "-o", str(tmp_path / "out")], io.StringIO()) == 2


def test_converted_bundle_is_accepted_by_opm(tmp_path):
    """opm, the legacy tooling, renders the exported registry+v1 bundle into a catalog entry."""
    import json
    import subprocess

    from bench.peers.opm import opm_binary

    src = _bundle(tmp_path)
    assert main(["bundle", "convert", str(src), "--to", "registry+v1", "-o", str(tmp_path / "out")],
                io.StringIO()) == 0
    done = subprocess.run([str(opm_binary()), "render", str(tmp_path / "out"), "-o", "json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    blob = json.loads(done.stdout)
    assert (blob["schema"], blob["package"], blob["name"]) == ("olm.bundle", "gizmo", "gizmo.v1.0.0")
    assert {"type": "olm.package", "value": {"packageName": "gizmo", "version": "1.0.0"}} in blob["properties"]



def test_status_requires_what_rbac_needs_from_other_operators(tmp_path):
    """The synthesized CSV lists no required CRDs; the status names the group and resource RBAC needs."""
    docs = _docs()
    docs[2]["rules"].append({"apiGroups": ["monitoring.coreos.com"], "resources": ["servicemonitors/status"],
                             "verbs": ["get"]})
    _bundle(tmp_path, docs=docs)
    out = render("file://gizmo", tmp_path, InstallSettings("gizmo-system"), "operators", CertManagerProvider())
    assert out.metadata["apis"]["requires"] == [{"group": "monitoring.coreos.com", "version": "", "kind": "",
                                                 "plural": "servicemonitors", "singular": ""}]
    assert [a["kind"] for a in out.metadata["apis"]["provides"]] == ["Widget"]


def _with_api_service(docs: list[dict]) -> list[dict]:
    """The gizmo bundle serving metrics.k8sop.example.com/v1beta1 through an APIService; RBAC names two resources."""
    docs[2]["rules"].append({"apiGroups": ["metrics.k8sop.example.com"], "resources": ["podmetrics", "nodemetrics",
                                                                                        "podmetrics/status"],
                             "verbs": ["get"]})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gizmo-api"},
                 "spec": {"selector": {"app": "gizmo"}, "ports": [{"port": 443, "targetPort": 6443}]}})
    docs.append({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                 "metadata": {"name": "v1beta1.metrics.k8sop.example.com"},
                 "spec": {"group": "metrics.k8sop.example.com", "version": "v1beta1",
                          "service": {"name": "gizmo-api", "namespace": "x"},
                          "groupPriorityMinimum": 100, "versionPriority": 10}})
    return docs


def test_an_api_service_provides_the_resources_rbac_names_never_a_kind_made_of_its_group(tmp_path):
    from reconciler.authoring.render import render_bundle_dir

    _bundle(tmp_path, _with_api_service(_docs()))
    content = read_content(fetch("file://gizmo", tmp_path))
    csv = k8s_v1.synthesize(content)[0].manifests[0].obj
    group = "metrics.k8sop.example.com"
    assert [(a["group"], a["version"], a["kind"], a["name"], a["deploymentName"], a["containerPort"])
            for a in csv["spec"]["apiservicedefinitions"]["owned"]] == [
        (group, "v1beta1", "", "nodemetrics", "gizmo", 6443), (group, "v1beta1", "", "podmetrics", "gizmo", 6443)]
    out = render("file://gizmo", tmp_path, InstallSettings("gizmo-system"), "operators", CertManagerProvider())
    assert [o["metadata"]["name"] for o in out.objects if o["kind"] == "APIService"] == [f"v1beta1.{group}"]
    assert [(a["kind"], a["plural"]) for a in out.metadata["apis"]["provides"] if a["group"] == group] == [
        ("", "nodemetrics"), ("", "podmetrics")]
    gvks = [p["value"] for p in render_bundle_dir(tmp_path / "gizmo")["properties"] if p["type"] == "olm.gvk"]
    assert {"group": group, "kind": "", "version": "v1beta1"} in gvks
    assert all(g["kind"] != g["group"] for g in gvks)


def test_two_deployments_cannot_serve_one_api_service(tmp_path):
    from tests.unit.helpers import csv_doc, deployment, write_bundle

    csv = csv_doc(deployments=[deployment("a", "sa"), deployment("b", "sa")])
    csv["spec"]["apiservicedefinitions"] = {"owned": [
        {"group": "m.example.com", "version": "v1", "kind": "A", "name": "as", "deploymentName": "a"},
        {"group": "m.example.com", "version": "v1", "kind": "B", "name": "bs", "deploymentName": "b"}]}
    ref = write_bundle(tmp_path, "bundles/demo", csv)
    with pytest.raises(UnsupportedBundleError, match="spec.apiservicedefinitions.owned\\[1\\] \\(v1.m.example.com\\) "
                                                     "is served by deployment 'b', but an earlier entry"):
        render(ref, tmp_path, InstallSettings("ns"), "operators")


SEED_000 = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "000_febd3aa71be13dec.txt"


def _seed_olm_yaml() -> str | None:
    """The olm.yaml example of seed 000 as printed (between its ```yaml fence and the closing one)."""
    if not SEED_000.is_file():
        return None
    text = SEED_000.read_text(encoding="utf-8")
    start = text.index("```yaml", text.index("Ex. _olm.yaml_")) + len("```yaml\n")
    return text[start:text.index("```", start)]


@pytest.mark.parametrize("text", [
    "name: gizmo.v1.0.0\nversion: 1.0.0\nminKubeVersion: 1.25.0\n"
    "installModes: [{type: AllNamespaces, supported: true}]\nprovider:\nname: Example Inc\n",
    pytest.param(_seed_olm_yaml(), id="seed-000", marks=pytest.mark.seeds(
        missing=_seed_olm_yaml() is None, reason="../shared/seeds is absent"))])
def test_an_olm_yaml_with_a_key_written_twice_is_refused(tmp_path, text):
    root = _bundle(tmp_path, olm=None)
    (root / "metadata" / "olm.yaml").write_text(text)
    with pytest.raises(BundleError) as err:
        render("file://gizmo", tmp_path, InstallSettings(), "operators")
    assert err.value.path == "metadata/olm.yaml"
    assert err.value.message.startswith("duplicate key 'name' (line ")
    assert "it is first set on line 1" in err.value.message


def test_manifests_are_read_through_their_api_types_naming_their_own_files(tmp_path):
    docs = _docs()
    docs[0]["spec"]["selector"]["app"] = "gizmo"                                  # beside matchLabels
    docs[0]["spec"]["template"]["spec"]["volumes"] = [{"name": "certs", "secretName": "gizmo-certs"}]
    docs[6]["spec"]["ports"][0]["TargetPort"] = docs[6]["spec"]["ports"][0].pop("targetPort")
    _bundle(tmp_path, docs)
    out = render("file://gizmo", tmp_path, InstallSettings("gizmo-system"), "operators", CertManagerProvider())
    (dep,) = [o for o in out.objects if o["kind"] == "Deployment"]
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "gizmo"}}
    assert {"name": "certs"} in dep["spec"]["template"]["spec"]["volumes"]
    dropped = "and was dropped, as OLM's typed decoding drops it (server-side apply refuses unknown fields)"
    assert out.warnings == (
        f"manifests/all.yaml: Deployment gizmo: spec.selector.app is not a field of meta/v1 LabelSelector {dropped}",
        f"manifests/all.yaml: Deployment gizmo: spec.template.spec.volumes[0].secretName is not a field of core/v1 "
        f"Volume {dropped}",
        "manifests/all.yaml: Service gizmo-webhook: spec.ports[0].TargetPort read as targetPort (OLM's typed "
        "decoding matches keys case-insensitively)")
