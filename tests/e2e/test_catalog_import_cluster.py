"""`catalog import` reading a cluster: its ImageDigestMirrorSets and ImageTagMirrorSets on request
(``--mirrors-from-cluster``), and a pull Secret named with ``--pull-secret`` (or missing).

The local cluster is not OpenShift: the two kinds are registered here from a CustomResourceDefinition of their
group, version, names and scope (the fields the import reads are ``spec.imageDigestMirrors`` and
``spec.imageTagMirrors``), and removed again at the end.
"""

from __future__ import annotations

import base64
import json
import socket

import kubernetes.client
import pytest

from reconciler import yamlio
from tests.bundle.oci_registry import LOGIN, oci_registry, oci_registry_with_login  # noqa: F401
from tests.catalog.test_import import push_index
from tests.support.wait import wait_until

pytestmark = pytest.mark.cluster


def _crd(kind: str, plural: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.config.openshift.io"},
            "spec": {"group": "config.openshift.io", "scope": "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def mirror_sets(kube):
    ext = kubernetes.client.ApiextensionsV1Api(kube)
    kinds = [("ImageDigestMirrorSet", "imagedigestmirrorsets"), ("ImageTagMirrorSet", "imagetagmirrorsets")]
    for kind, plural in kinds:
        ext.create_custom_resource_definition(_crd(kind, plural))
    for _, plural in kinds:
        wait_until(lambda: any(c.type == "Established" and c.status == "True" for c in (
            ext.read_custom_resource_definition(f"{plural}.config.openshift.io").status.conditions or [])),
            f"{plural} established", timeout=60, every=0.2)
    try:
        yield kubernetes.client.CustomObjectsApi(kube)
    finally:
        for _, plural in kinds:
            ext.delete_custom_resource_definition(f"{plural}.config.openshift.io")


def _cli(*argv: str, capsys) -> tuple[int, str, str]:
    import io

    from reconciler.cli.parser import main

    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_mirrors_from_the_cluster_are_used_on_request(tmp_path, control_plane, mirror_sets, oci_registry, capsys,
                                                      monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{s.getsockname()[1]}"   # the source registry: nothing listens there
    push_index(tmp_path, oci_registry, "mirrored/catalogs/index", "v1", {"gamma": ("2.0.0",)})
    mirror_sets.create_cluster_custom_object("config.openshift.io", "v1", "imagetagmirrorsets", {
        "apiVersion": "config.openshift.io/v1", "kind": "ImageTagMirrorSet", "metadata": {"name": "catalogs"},
        "spec": {"imageTagMirrors": [{"source": gone, "mirrors": [f"{oci_registry.host}/mirrored"]}]}})
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    kubeconfig = str(control_plane.kubeconfig_path)
    index = f"{gone}/catalogs/index:v1"
    code, out, err = _cli("catalog", "import", str(repo), "--image", index, "--package", "gamma", capsys=capsys)
    assert code == 2 and f"cannot reach registry {gone}" in err, err   # without the cluster's mirrors: the source
    code, out, err = _cli("catalog", "import", str(repo), "--image", index, "--package", "gamma",
                          "--mirrors-from-cluster", "--kubeconfig", kubeconfig, capsys=capsys)
    assert code == 0, out + err
    record = yamlio.load_one((repo / "catalogs/index/import.yaml").read_text(), "import.yaml")
    assert record["source"]["image"] == index   # the source, never the mirror

    # A digest reference is never pulled through a tag mirror: an ImageDigestMirrorSet says where digests come from.
    # (A fresh cache: the digest is cached by now, and a cached digest needs no registry at all.)
    monkeypatch.setenv("RECONCILER_OCI_CACHE_DIR", str(tmp_path / "fresh-cache"))
    pinned = f"{gone}/catalogs/index@{record['source']['digest']}"
    code, out, err = _cli("catalog", "import", str(repo), "--image", pinned, "--name", "pinned", "--package", "gamma",
                          "--mirrors-from-cluster", "--kubeconfig", kubeconfig, capsys=capsys)
    assert code == 2 and f"cannot reach registry {gone}" in err, err
    mirror_sets.create_cluster_custom_object("config.openshift.io", "v1", "imagedigestmirrorsets", {
        "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "catalogs"},
        "spec": {"imageDigestMirrors": [{"source": gone, "mirrors": [f"{oci_registry.host}/mirrored"],
                                         "mirrorSourcePolicy": "NeverContactSource"}]}})
    code, out, err = _cli("catalog", "import", str(repo), "--image", pinned, "--name", "pinned", "--package", "gamma",
                          "--mirrors-from-cluster", "--kubeconfig", kubeconfig, capsys=capsys)
    assert code == 0, out + err


def test_a_pull_secret_named_on_the_command_line_logs_in(tmp_path, control_plane, kube, oci_registry_with_login,
                                                         capsys, monkeypatch):
    from reconciler.oci import auth

    token = base64.b64encode(f"{LOGIN[0]}:{LOGIN[1]}".encode()).decode()
    login = {"auths": {oci_registry_with_login.host: {"auth": token}}}
    with auth.pull_secrets([("the test's login", login)]):
        index = push_index(tmp_path, oci_registry_with_login, "private/pull-secret-index", "v1", {"gamma": ("2.0.0",)})
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    core = kubernetes.client.CoreV1Api(kube)
    namespace = "import-pull-secret"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": "pull-secret"}, "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(login).encode()).decode()}})
    repo = tmp_path / "repo"
    repo.mkdir()
    kubeconfig = str(control_plane.kubeconfig_path)
    try:
        code, out, err = _cli("catalog", "import", str(repo), "--image", index, "--package", "gamma", capsys=capsys)
        assert code == 2 and "requires a login" in err and "--pull-secret NAMESPACE/NAME" in err, err
        code, out, err = _cli("catalog", "import", str(repo), "--image", index, "--package", "gamma", "--pull-secret",
                              f"{namespace}/missing", "--kubeconfig", kubeconfig, capsys=capsys)
        assert code == 3, out + err
        assert f"Secret {namespace}/missing (--pull-secret) does not exist" in err
        assert "kubectl create secret docker-registry" in err
        code, out, err = _cli("catalog", "import", str(repo), "--image", index, "--package", "gamma", "--pull-secret",
                              f"{namespace}/pull-secret", "--kubeconfig", kubeconfig, capsys=capsys)
        assert code == 0, out + err
        assert token not in out + err
    finally:
        core.delete_namespace(namespace)
