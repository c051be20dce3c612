"""plain+v0: a namespaced object that names no namespace is placed in the install namespace; nothing else moves."""

from __future__ import annotations

from reconciler.bundle import render
from reconciler.model.declarations import InstallSettings
from tests.unit.helpers import write_docs


def _crd(kind: str, scope: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.lower()}s.plain.example.com"},
            "spec": {"group": "plain.example.com", "scope": scope,
                     "names": {"plural": f"{kind.lower()}s", "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True}]}}


def _object(api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_namespaced_objects_without_a_namespace_go_to_the_install_namespace(tmp_path):
    write_docs(tmp_path / "bundles/plain", "manifests/objects.yaml",
               {**_object("v1", "ConfigMap", "settings"), "data": {"a": "1"}},
               {**_object("v1", "ConfigMap", "elsewhere", "kube-public"), "data": {"a": "2"}},
               {**_object("rbac.authorization.k8s.io/v1", "ClusterRole", "reader"), "rules": []},
               _crd("Gadget", "Namespaced"), _crd("Site", "Cluster"),
               _object("plain.example.com/v1", "Gadget", "g"), _object("plain.example.com/v1", "Site", "s"),
               _object("unknown.example.com/v1", "Thing", "t"))
    write_docs(tmp_path / "bundles/plain", "metadata/annotations.yaml", {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "plain+v0"}})
    out = render("file://bundles/plain", tmp_path, InstallSettings("widgets", None), "operators")
    placed = {(o["kind"], o["metadata"]["name"]): o["metadata"].get("namespace") for o in out.objects}
    assert out.namespace == "widgets"
    assert placed == {("ConfigMap", "settings"): "widgets", ("ConfigMap", "elsewhere"): "kube-public",
                      ("ClusterRole", "reader"): None, ("CustomResourceDefinition", "gadgets.plain.example.com"): None,
                      ("CustomResourceDefinition", "sites.plain.example.com"): None,
                      ("Gadget", "g"): "widgets", ("Site", "s"): None,
                      ("Thing", "t"): None}   # unknown here: the cluster's discovery judges it when planning
