"""An installer (ServiceAccount ``install-<name>`` and its RBAC) exists only while its Operator is desired and
approved: every way an Operator ends removes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cluster.ownership import installer
from reconciler.kube.client import Kube
from reconciler.model.kube import LABEL_INSTANCE
from tests.support.repo import GitOpsRepo

from .support import approve, get, reconcile
from tests.loop.conftest import hand_over

pytestmark = pytest.mark.cluster

NS = "reconciler-system"


def installer_objects(k8s: Kube, operator: str) -> set[str]:
    """Every live object of ``operator``'s installer, as kind/name."""
    out = set()
    for api, kind in (("v1", "ServiceAccount"), (installer.RBAC_V1, "ClusterRole"),
                      (installer.RBAC_V1, "ClusterRoleBinding"), (installer.RBAC_V1, "Role"),
                      (installer.RBAC_V1, "RoleBinding")):
        for item in k8s.list(k8s.resource(api, kind), label_selector=f"{installer.LABEL_INSTALLER}={operator}"):
            out.add(f"{kind}/{item['metadata']['name']}")
    return out


def _empty(repo: GitOpsRepo, kc: Path, capsys) -> None:
    for p in (repo.path / "operators").glob("*.yaml"):
        p.unlink()
    settings = (repo.path / "reconciler.yaml").read_text() if (repo.path / "reconciler.yaml").exists() else ""
    repo.write("reconciler.yaml", settings + "allowEmpty: true\n")
    repo.commit("nothing declared")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err


@pytest.fixture
def repo(gitops: GitOpsRepo, kc: Path, k8s: Kube, capsys: pytest.CaptureFixture[str]):
    """The example repository; afterwards what it installed is uninstalled and its installers checked gone."""
    yield gitops
    if (gitops.path / "operators").is_dir() and any((gitops.path / "operators").glob("*.yaml")):
        _empty(gitops, kc, capsys)
    for name in ("plumbus", "plumbus-renamed"):
        assert installer_objects(k8s, name) == set()


def test_an_installed_operator_has_its_installer_and_withdrawing_it_removes_it(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert "ServiceAccount/install-plumbus" in installer_objects(k8s, "plumbus")
    sa = get(k8s, "v1", "ServiceAccount", "install-plumbus", NS)
    assert sa["metadata"]["labels"][LABEL_INSTANCE] == "default"
    _empty(repo, kc, capsys)
    assert installer_objects(k8s, "plumbus") == set()


def test_a_first_install_refused_at_planning_leaves_no_installer(repo, kc, k8s, capsys):
    # A foreign object in the way: the plan refuses before anything of plumbus is written or recorded.
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plumbus-system"}},
              field_manager="user", dry_run=False)
    sa = k8s.resource("v1", "ServiceAccount")
    k8s.apply(sa, {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system"}},
              field_manager="someone", dry_run=False)
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2 and "was not created by the reconciler" in run.err, run.err
        assert installer_objects(k8s, "plumbus") == set()
        assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None
        _empty(repo, kc, capsys)   # withdrawn afterwards: still nothing left
        assert installer_objects(k8s, "plumbus") == set()
    finally:
        k8s.delete(sa, "plumbus-system", "plumbus-controller")


def test_an_operator_waiting_for_approval_has_no_installer_until_approved(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert installer_objects(k8s, "plumbus")
    repo.remove("approvals/plumbus.yaml")   # the approval is withdrawn: what runs stays, nothing is applied
    repo.commit("withdraw the approval")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.err
    assert installer_objects(k8s, "plumbus") == set()
    assert get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system") is not None
    assert approve(repo, "plumbus", capsys=capsys).code == 0
    repo.commit("approve again")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert "ServiceAccount/install-plumbus" in installer_objects(k8s, "plumbus")


def test_a_renamed_operator_takes_a_new_installer_and_the_old_one_goes(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    text = (repo.path / "operators/plumbus.yaml").read_text().replace("name: plumbus\n", "name: plumbus-renamed\n", 1)
    repo.remove("operators/plumbus.yaml")
    repo.write("operators/plumbus-renamed.yaml", text)
    repo.commit("rename")
    assert approve(repo, "plumbus-renamed", capsys=capsys).code == 0
    repo.commit("approve the new name")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert installer_objects(k8s, "plumbus") == set()
    assert "ServiceAccount/install-plumbus-renamed" in installer_objects(k8s, "plumbus-renamed")


def test_an_operator_handed_to_another_instance_leaves_no_installer_of_the_first(repo, tmp_path, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource("reconciler.dev/v1alpha1", "Operator")
    k8s.request("PATCH", info.path("", "plumbus"), content_type="application/merge-patch+json",
                body={"metadata": {"labels": {LABEL_INSTANCE: "team-b"}}})
    _empty(repo, kc, capsys)   # the first instance, with nothing left of its own
    assert installer_objects(k8s, "plumbus") == set()
    other = GitOpsRepo(tmp_path / "team-b")
    other.write("reconciler.yaml", "instance: team-b\n")
    other.commit("team b")
    hand_over(k8s, f"file://{other.path.resolve()}", instance="team-b")
    assert reconcile(other, kc, capsys=capsys).code == 0
    sa = get(k8s, "v1", "ServiceAccount", "install-plumbus", NS)
    assert sa["metadata"]["labels"][LABEL_INSTANCE] == "team-b"
    _empty(other, kc, capsys)
    assert installer_objects(k8s, "plumbus") == set()


def test_an_installer_from_before_instances_with_no_operator_is_removed(repo, kc, k8s, capsys):
    from reconciler.model.permissions import CLUSTER, PermissionSet, Rule

    stray = installer.installer_objects(NS, "plumbus-gone", PermissionSet.of(
        [Rule(scope=CLUSTER, api_groups=("",), resources=("configmaps",), verbs=("get",))]))
    for obj in stray:
        obj["metadata"]["labels"] = {k: v for k, v in obj["metadata"]["labels"].items() if k != LABEL_INSTANCE}
        k8s.apply(k8s.require_resource(obj), obj, field_manager="reconciler", dry_run=False)
    assert installer_objects(k8s, "plumbus-gone")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert installer_objects(k8s, "plumbus-gone") == set()
    assert installer_objects(k8s, "plumbus")
