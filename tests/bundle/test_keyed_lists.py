"""Keyed lists with duplicate entries: normalised where OLM v0 installs them, refused where nothing can.

The real API server decides both sides: server-side apply refuses the object as the bundle wrote
it, and applies the normalised one; what its validation refuses on a plain create (the way OLM v0
writes objects) is refused here before anything is applied.
"""

from __future__ import annotations

import copy

import pytest

from reconciler.bundle import render
from reconciler.kube.client import ApiError, Kube
from reconciler.errors import UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import FIELD_MANAGER
from tests.bundle.test_k8s_v1 import _bundle, _docs
from tests.unit.helpers import csv_doc, deployment, write_bundle, write_docs

NAMESPACE = "keyed-system"
CSV_FILE = "manifests/demo.clusterserviceversion.yaml"
PATH = "spec.install.spec.deployments[0].spec.template.spec"


def _pod(**container) -> dict:
    d = deployment("demo-controller", "demo-sa")
    d["spec"]["template"]["spec"]["containers"][0].update(container)
    return d


DUPLICATES = _pod(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)"}, {"name": "A", "value": "2"}],
                  ports=[{"containerPort": 8080}, {"containerPort": 8080, "protocol": "TCP", "name": "metrics"},
                         {"containerPort": 8080, "protocol": "UDP"}])
DUPLICATES["spec"]["template"]["spec"]["imagePullSecrets"] = [{"name": "pull"}, {"name": "pull"}]
SERVICE_ACCOUNT = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "demo-sa"},
                   "imagePullSecrets": [{"name": "pull"}, {"name": "other"}, {"name": "pull"}]}


def _render(tmp_path, deployments, *extra):
    write_bundle(tmp_path, "b", csv_doc(deployments=deployments), *extra)
    return render("file://b", tmp_path, InstallSettings(NAMESPACE), "operators")


def _kind(rendered, kind):
    return next(o for o in rendered.objects if o["kind"] == kind)


def test_duplicates_the_peers_install_are_normalised_with_a_note(tmp_path):
    out = _render(tmp_path, [DUPLICATES], SERVICE_ACCOUNT)
    pod = _kind(out, "Deployment")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    # env: the kubelet's value (the last), in the place of the first
    assert c["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "$(A)"}]
    # ports: the first of each containerPort/protocol (TCP by default), completed by the later one
    assert c["ports"] == [{"containerPort": 8080, "protocol": "TCP", "name": "metrics"},
                          {"containerPort": 8080, "protocol": "UDP"}]
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    assert _kind(out, "ServiceAccount")["imagePullSecrets"] == [{"name": "pull"}, {"name": "other"}]
    notes = [w for w in out.warnings if "server-side apply refuses duplicates" in w]
    assert len(notes) == 4, out.warnings
    assert any(w.startswith(f"{CSV_FILE}: ClusterServiceVersion demo.v0.1.0 deployment demo-controller: "
                            f"{PATH}.containers[0].env has 2 entries for 'A' (env[0], env[2])") for w in notes)
    assert any(f"{PATH}.containers[0].ports has 2 entries for 8080/TCP (ports[0], ports[1])" in w for w in notes)
    assert any(w.startswith("manifests/extra-0.yaml: ServiceAccount demo-sa: imagePullSecrets has 2 entries")
               for w in notes)


def test_normalised_objects_apply_where_the_written_ones_are_refused(tmp_path, control_plane):
    out = _render(tmp_path, [DUPLICATES], SERVICE_ACCOUNT)
    with control_plane.admin_client() as api:
        kube = Kube(api)
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        kube.apply(kube.require_resource(ns), ns, field_manager=FIELD_MANAGER, dry_run=False)
        written = _kind(out, "Deployment")
        as_written = copy.deepcopy(written)
        as_written["spec"]["template"]["spec"]["containers"][0]["env"] = DUPLICATES["spec"]["template"]["spec"][
            "containers"][0]["env"]
        with pytest.raises(ApiError, match="duplicate entries for key"):
            kube.apply(kube.require_resource(as_written), as_written, field_manager=FIELD_MANAGER, dry_run=True)
        for obj in (_kind(out, "ServiceAccount"), written):
            kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=False)
        live = kube.get(kube.require_resource(written), NAMESPACE, "demo-controller")
        assert live is not None
        assert live["spec"]["template"]["spec"]["containers"][0]["env"] == [
            {"name": "A", "value": "2"}, {"name": "B", "value": "$(A)"}]


REFUSED = [
    ("two containers of one name",
     {"containers": [{"name": "manager", "image": "x"}, {"name": "manager", "image": "y"}]},
     f"{PATH}.containers has 2 entries for the container name 'manager'"),
    ("two mounts at one path",
     {"containers": [{"name": "manager", "image": "x", "volumeMounts": [{"name": "a", "mountPath": "/data"},
                                                                       {"name": "b", "mountPath": "/data"}]}],
      "volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]},
     f"{PATH}.containers[0].volumeMounts has 2 entries for the mount path '/data'"),
    ("two volumes of one name",
     {"containers": [{"name": "manager", "image": "x"}],
      "volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "configMap": {"name": "c"}}]},
     f"{PATH}.volumes has 2 entries for the volume name 'a'"),
]


@pytest.mark.parametrize("why,pod,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_duplicates_the_api_server_refuses_are_refused_before_applying(tmp_path, control_plane, why, pod, message):
    d = deployment("demo-controller", "demo-sa")
    d["spec"]["template"]["spec"] = pod
    with pytest.raises(UnsupportedBundleError) as err:
        _render(tmp_path, [d])
    assert message in err.value.message and err.value.path == CSV_FILE
    # the way OLM v0 writes it (a plain create) is refused by the API server's validation too
    with control_plane.admin_client() as api:
        kube = Kube(api)
        obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "refused", "namespace": "default"},
               "spec": d["spec"]}
        with pytest.raises(ApiError) as refused:
            kube.request("POST", kube.require_resource(obj).path("default"), query=[("dryRun", "All")], body=obj)
        assert refused.value.status == 422


def test_a_service_with_two_ports_alike_is_refused(tmp_path):
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"},
           "spec": {"ports": [{"port": 8443, "name": "a"}, {"port": 8443, "protocol": "TCP", "name": "b"}]}}
    with pytest.raises(UnsupportedBundleError) as err:
        _render(tmp_path, [deployment("demo-controller", "demo-sa")], svc)
    assert "Service metrics: spec.ports has 2 entries for the port/protocol 8443/TCP" in err.value.message
    assert err.value.path == "manifests/extra-0.yaml"


def test_plain_and_k8s_v1_bundles_name_their_own_files(tmp_path):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
               "metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": "x", "env": [{"name": "A", "value": "1"},
                                                                            {"name": "A", "value": "2"}]}]}}}}
    write_docs(tmp_path / "plain", "manifests/web.yaml", dep)
    out = render("file://plain", tmp_path, InstallSettings("web"), "operators")
    assert _kind(out, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}]
    assert any(w.startswith("manifests/web.yaml: Deployment web: spec.template.spec.containers[0].env has 2")
               for w in out.warnings), out.warnings

    docs = _docs()
    docs[0]["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"},
                                                                   {"name": "A", "value": "2"}]
    _bundle(tmp_path, docs)
    out = render("file://gizmo", tmp_path, InstallSettings("gizmo-system"), "operators")
    assert _kind(out, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}]
    assert any(w.startswith("manifests/all.yaml: Deployment gizmo: spec.template.spec.containers[0].env has 2")
               for w in out.warnings), out.warnings
