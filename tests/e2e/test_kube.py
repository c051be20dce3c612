"""The thin REST layer against the real API server: every content type sends the body once."""

from __future__ import annotations

import pytest

from reconciler.kube.client import ApiError, Kube

pytestmark = pytest.mark.cluster


def test_json_post_apply_patch_and_errors(control_plane):
    kube = Kube(control_plane.admin_client())
    info = kube.resource("v1", "ConfigMap")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-layer", "namespace": "default"},
          "data": {"a": "1"}}
    created = kube.request("POST", info.path("default"), body=cm)
    assert created["data"] == {"a": "1"}
    applied = kube.apply(info, {**cm, "data": {"a": "2"}}, field_manager="test", dry_run=False)
    assert applied["data"] == {"a": "2"}
    with pytest.raises(ApiError) as err:
        kube.request("POST", info.path("default"), body=cm)
    assert err.value.status == 409
    kube.delete(info, "default", "kube-layer")
    assert kube.get(info, "default", "kube-layer") is None


def test_apply_sends_characters_outside_the_bmp_as_written(control_plane):
    kube = Kube(control_plane.admin_client())
    info = kube.resource("v1", "ConfigMap")
    text = "plumbus \U0001F680 ünïcode \u2603"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-emoji", "namespace": "default"},
          "data": {"description": text}}
    try:
        assert kube.apply(info, cm, field_manager="test", dry_run=True)["data"] == {"description": text}
        assert kube.apply(info, cm, field_manager="test", dry_run=False)["data"] == {"description": text}
        assert kube.get(info, "default", "kube-emoji")["data"]["description"] == text
    finally:
        kube.delete(info, "default", "kube-emoji")


def test_discovery_reads_every_group_at_once_then_a_new_group_on_its_own(control_plane):
    """Aggregated discovery: the first lookup costs two requests for all groups; a kind found nowhere (a CRD
    applied since) is looked up in its own group/version, once per lookup."""
    from tests.e2e.support import RecordingKube

    kube = RecordingKube(control_plane.admin_client())
    for api_version, kind, plural in [("v1", "ConfigMap", "configmaps"), ("apps/v1", "Deployment", "deployments"),
                                      ("rbac.authorization.k8s.io/v1", "Role", "roles"),
                                      ("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                       "customresourcedefinitions"), ("batch/v1", "Job", "jobs")]:
        info = kube.resource(api_version, kind)
        assert info is not None and info.plural == plural
    assert kube.resource("v1", "Namespace").namespaced is False
    assert [p for _, p, _ in kube.calls] == ["/api", "/apis"]
    assert kube.resource("nowhere.example.com/v1", "Gadget") is None
    assert [p for _, p, _ in kube.calls][2:] == ["/apis/nowhere.example.com/v1"]   # read once: just read, not again
    assert kube.resource("nowhere.example.com/v1", "Gadget") is None   # a later lookup reads it again (a CRD since?)
    assert [p for _, p, _ in kube.calls][2:] == ["/apis/nowhere.example.com/v1"] * 2
