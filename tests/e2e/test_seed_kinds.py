"""The design documents' direct installs, reconciled against the local cluster: an Install (seed 001), a Bundle
named by an Instance (seed 004) and a BundleDeployment (seed 003), each in its document's shape, each installed,
approved as its mapping says, reported and pruned like an Operator (docs/declarations.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import oci
from reconciler.kube.client import Kube
from tests.bundle.oci_registry import oci_registry  # noqa: F401  (fixture)
from tests.unit.helpers import write, write_docs
from tests.support.repo import GitOpsRepo

from .support import approve, get, managed, reconcile

pytestmark = pytest.mark.cluster


def _plain_image(tmp_path: Path, registry, name: str, namespace: str) -> str:
    """A plain+v0 bundle image holding one ConfigMap ``name``, pushed by digest."""
    src = tmp_path / f"{name}-src"
    meta = {"name": name, "namespace": namespace}
    write_docs(src, "manifests/cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                          "data": {"from": name}})
    write(src, "metadata/annotations.yaml", "annotations: {operators.operatorframework.io.bundle.mediatype.v1: "
                                            "plain+v0}\n")
    layout = oci.build_layout(src, tmp_path / f"{name}-layout", {})
    ref = registry.ref(f"seed/{name}", "v1")
    oci.push_layout(layout.path, ref)
    return f"{ref.rsplit(':', 1)[0]}@{layout.digest}"


INSTALL = """\
apiVersion: operators.coreos.com/v2alpha1
kind: Install
metadata:
  name: plumbus-plan
spec:
 namespaces:
 - from: default
   to: operators

 approval: {approval}

 content: # must specify at least one thing to install
  - type: ManifestImage # union type
    manifestImage: {image}

 status:
  serviceAccountRef:
    name: plumbus-plan
    namespace: olm
"""

TRUSTED_CLASS = """\
kind: ProvisionerClass
apiVersion: rukpak.io/v1
metadata:
  name: trusted
provisioner: operators.coreos.com/operators
parameters:
  approval: AllowAll
"""

BUNDLE_AND_INSTANCE = TRUSTED_CLASS + """\
---
kind: Bundle
metadata:
  name: plumbus-operator.v1.0.0
spec:
  class: trusted
  refs:
  - file://bundles/plumbus/1.0.0
---
kind: Instance
metadata:
  name: plumbus
spec:
  selector:
    matchLabels:
      subscription: plumbus
  bundle:
    name: plumbus-operator.v1.0.0
status:
  conditions:
  - type: Approved
    status: True
"""

BUNDLE_DEPLOYMENT = """\
apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: my-bundle-deployment
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    metadata:
      labels:
        app: my-bundle
    spec:
      source:
        type: image
        image:
          ref: {image}
      provisionerClassName: core-rukpak-io-plain
"""


def _configmap(k8s: Kube, name: str, namespace: str) -> dict | None:
    return get(k8s, "v1", "ConfigMap", name, namespace)


def test_install_instance_and_bundle_deployment_are_reconciled(tmp_path, kc, k8s, oci_registry, capsys):  # noqa: F811
    repo = GitOpsRepo(tmp_path / "repo")
    repo.remove("operators/plumbus.yaml")
    planned = _plain_image(tmp_path, oci_registry, "planned", "default")
    deployed = _plain_image(tmp_path, oci_registry, "deployed", "operators")
    repo.write("operators/install.yaml", INSTALL.format(approval="Unapproved", image=planned))
    repo.write("operators/instance.yaml", BUNDLE_AND_INSTANCE)
    repo.write("operators/bundle-deployment.yaml", BUNDLE_DEPLOYMENT.format(image=deployed))
    repo.commit("seed kinds")
    try:
        run = reconcile(repo, kc, capsys=capsys)
        # the Instance's Bundle class approves everything; the Install is Unapproved; RukPak's plain class is
        # Android here, so the BundleDeployment's first install waits too
        assert run.code == 4, run.out + run.err
        assert "plumbus-plan: planned WAITS FOR APPROVAL" in run.out and "the declaration asks for manual approval" in run.out
        assert "my-bundle-deployment: my-bundle-deployment WAITS FOR APPROVAL" in run.out and "(core-rukpak-io-plain, Android): first " \
            "install of" in run.out, run.out
        assert "plumbus: plumbus-operator.v1.0.0 approved (trusted, AllowAll)" in run.out
        assert any(m.startswith("Deployment ") for m in managed(k8s, "plumbus")), managed(k8s, "plumbus")
        assert _configmap(k8s, "planned", "operators") is None and _configmap(k8s, "deployed", "operators") is None
        assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is not None   # its status object

        # The Install's approval is its committed record; the BundleDeployment is approved like any Operator.
        repo.write("operators/install.yaml", INSTALL.format(approval="Approved", image=planned))
        repo.commit("Approve the plan")
        assert approve(repo, "my-bundle-deployment", capsys=capsys).code == 0
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.out + run.err
        planned_cm = _configmap(k8s, "planned", "operators")
        assert planned_cm is not None and planned_cm["data"] == {"from": "planned"}   # default -> operators
        assert _configmap(k8s, "planned", "default") is None
        assert _configmap(k8s, "deployed", "operators") is not None
        assert get(k8s, "v1", "ServiceAccount", "install-plumbus-plan", "reconciler-system") is not None
    finally:
        for rel in ("operators/install.yaml", "operators/instance.yaml", "operators/bundle-deployment.yaml"):
            if (repo.path / rel).exists():
                repo.remove(rel)
        repo.write("reconciler.yaml", (repo.path / "reconciler.yaml").read_text() + "allowEmpty: true\n")
        repo.commit("withdraw")
        run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert _configmap(k8s, "planned", "operators") is None and _configmap(k8s, "deployed", "operators") is None
    assert managed(k8s, "plumbus") == set()
