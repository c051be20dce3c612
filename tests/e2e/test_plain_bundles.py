"""A plain+v0 bundle's objects that name no namespace are installed into their Operator's namespace (as Helm
installs a chart's into its release's), and one whose kind only the cluster knows is refused with what to do."""

from __future__ import annotations

import time

import pytest
from tests.support.repo import GitOpsRepo

from .support import get, managed, reconcile
from .test_seed_kinds import TRUSTED_CLASS

pytestmark = pytest.mark.cluster

DECLARATIONS = TRUSTED_CLASS + """\
---
kind: Bundle
metadata:
  name: settings.v1
spec:
  class: trusted
  refs:
  - file://bundles/settings
---
kind: Instance
metadata:
  name: settings
spec:
  bundle:
    name: settings.v1
"""

PLAIN = "annotations: {operators.operatorframework.io.bundle.mediatype.v1: plain+v0}\n"


def _repo(tmp_path, *objects: str) -> GitOpsRepo:
    repo = GitOpsRepo(tmp_path / "repo")
    repo.remove("operators/plumbus.yaml")
    repo.write("bundles/settings/manifests/objects.yaml", "---\n".join(objects))
    repo.write("bundles/settings/metadata/annotations.yaml", PLAIN)
    repo.write("operators/settings.yaml", DECLARATIONS)
    repo.commit("a plain bundle")
    return repo


def test_objects_without_a_namespace_go_to_the_install_namespace(tmp_path, kc, k8s, capsys):
    repo = _repo(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n")
    preview = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert preview.code == 1, preview.out + preview.err
    assert "+ ConfigMap operators/settings  would be created" in preview.out
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.out + run.err
        assert "+ ConfigMap operators/settings  created" in run.out
        assert "settings: healthy (1 component, " in run.out   # one component, said as one
        assert get(k8s, "v1", "ConfigMap", "settings", "operators")["data"] == {"a": "b"}
        assert get(k8s, "v1", "ConfigMap", "settings", "default") is None
    finally:
        repo.remove("operators/settings.yaml")
        repo.write("reconciler.yaml", "allowEmpty: true\n")
        repo.commit("uninstall")
        assert reconcile(repo, kc, capsys=capsys).code == 0
        assert managed(k8s, "settings") == set()


def test_a_namespaced_kind_only_the_cluster_knows_needs_a_namespace(tmp_path, kc, k8s, capsys):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.plain.example.com"},
           "spec": {"group": "plain.example.com", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    info = k8s.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    k8s.apply(info, crd, field_manager="user", dry_run=False)
    try:
        for _ in range(100):   # the new kind is served once the CRD is established
            if k8s.resource("plain.example.com/v1", "Gadget") is not None:
                break
            time.sleep(0.1)
        repo = _repo(tmp_path, "apiVersion: plain.example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2, run.out + run.err
        assert "1 object of a namespaced kind names no namespace" in run.err and "Gadget.plain.example.com g (Operator settings)" in run.err
        assert "set metadata.namespace on each in its bundle" in run.err
        assert managed(k8s, "settings") == set()
    finally:
        k8s.delete(info, "", "gadgets.plain.example.com")
