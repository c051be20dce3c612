"""Approval end to end: every policy, approval by commit, and least privilege enforced by the API server."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from kubernetes import client

from reconciler.cluster.ownership import installer
from reconciler.cluster.ownership import Request, sync
from reconciler.kube.client import Kube
from reconciler.errors import ClusterError

from tests.unit.helpers import DESIGN_DOC_V2ALPHA1
from tests.support.repo import GitOpsRepo

from .support import approve, get, managed, reconcile

pytestmark = pytest.mark.cluster

EXTRA_RULE = """            - apiGroups: [""]
              resources: [secrets]
              verbs: [get, list]
"""


@pytest.fixture
def repo(gitops: GitOpsRepo, kc: Path, k8s: Kube, capsys: pytest.CaptureFixture[str]):
    """The example repository without its approvals, plus plumbus 1.2.0 (one more rule) and a package fleeb."""
    r = gitops
    shutil.rmtree(r.path / "approvals")
    _add_fleeb(r)
    _add_plumbus_120(r)
    r.commit("no approvals yet; plumbus 1.2.0; fleeb")
    yield r
    r.withdraw_all()
    run = reconcile(r, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == set() and managed(k8s, "fleeb") == set()
    assert get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system") is None


def _add_plumbus_120(repo: GitOpsRepo) -> None:
    src, dst = repo.path / "bundles/plumbus/1.1.0", repo.path / "bundles/plumbus/1.2.0"
    shutil.copytree(src, dst)
    csv = dst / "manifests/plumbus.clusterserviceversion.yaml"
    text = csv.read_text().replace("1.1.0", "1.2.0").replace("replaces: plumbus.v1.0.0", "replaces: plumbus.v1.1.0")
    marker = "              verbs: [get, create, update]\n"
    assert marker in text
    csv.write_text(text.replace(marker, marker + EXTRA_RULE, 1))
    catalog = repo.path / "catalogs/community/plumbus.yaml"
    catalog.write_text(catalog.read_text().replace(
        "  - name: plumbus.v1.1.0\n    replaces: plumbus.v1.0.0\n",
        "  - name: plumbus.v1.1.0\n    replaces: plumbus.v1.0.0\n  - name: plumbus.v1.2.0\n    replaces: plumbus.v1.1.0\n")
        + "---\nschema: olm.bundle\npackage: plumbus\nname: plumbus.v1.2.0\nimage: file://bundles/plumbus/1.2.0\n"
          "properties:\n  - type: olm.package\n    value: {packageName: plumbus, version: 1.2.0}\n"
          "  - type: olm.gvk\n    value: {group: how.theydoit.com, kind: Plumbus, version: v1alpha1}\n")


def _add_fleeb(repo: GitOpsRepo) -> None:
    """A second, unrelated package made from plumbus's files."""
    def rename(text: str) -> str:
        return (text.replace("how.theydoit.com", "fleeb.theydoit.com").replace("plumbai", "fleebs")
                .replace("Plumbus", "Fleeb").replace("plumbus", "fleeb"))
    for f in (repo.path / "bundles/plumbus").rglob("*"):
        if f.is_file():
            target = repo.path / rename(f.relative_to(repo.path).as_posix())
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rename(f.read_text()))
    repo.write("catalogs/community/fleeb.yaml", rename((repo.path / "catalogs/community/plumbus.yaml").read_text()))
    repo.write("operators/fleeb.yaml", rename((repo.path / "operators/plumbus.yaml").read_text()))


def _declare(repo: GitOpsRepo, name: str, version: str, extra: str = "") -> None:
    text = (repo.path / f"operators/{name}.yaml").read_text()
    lines = [f'  version: "{version}"' if ln.startswith("  version:") else ln for ln in text.splitlines()
             if not ln.startswith(("  provisionerClassName:", "  approver:"))]
    repo.write(f"operators/{name}.yaml", "\n".join(lines) + "\n" + extra)


def _status(k8s: Kube, name: str) -> dict:
    return get(k8s, "reconciler.dev/v1alpha1", "Operator", name)["status"]


def _approve_and_apply(repo: GitOpsRepo, kc: Path, k8s: Kube, capsys, bundle: str) -> None:
    """`reconciler approve` plumbus, committed, then a reconcile that installs ``bundle``."""
    assert approve(repo, "plumbus", capsys=capsys).code == 0
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert _status(k8s, "plumbus")["bundle"]["name"] == bundle


def _condition(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_android_first_install_waits_then_upgrades_within_the_approval_and_escalations_wait(repo, kc, k8s, capsys):
    _declare(repo, "plumbus", "1.0.0")
    _declare(repo, "fleeb", "1.0.0")
    repo.commit("install plumbus and fleeb 1.0.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.err
    assert "plumbus: plumbus.v1.0.0 WAITS FOR APPROVAL (olm.resolveset, Android): first install" in run.out
    assert f"approve with: reconciler approve {repo.path} plumbus" in run.out
    assert managed(k8s, "plumbus") == set()
    status = _status(k8s, "plumbus")
    cond = _condition(status, "InstallPendingApproval")
    assert cond["status"] == "True" and cond["reason"] == "PrivilegeEscalationRequired"
    assert {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "delete", "patch", "update"],
            "namespaces": ["plumbus-system"]} in status["pending"]["permissions"]
    assert _condition(status, "Ready")["status"] == "False"

    # The approval is a commit.
    run = approve(repo, "plumbus", "fleeb", capsys=capsys)
    assert run.code == 0 and "plumbus: approved plumbus.v1.0.0" in run.out, run.err
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert any(s.startswith("Deployment ") for s in managed(k8s, "plumbus"))
    assert "pending" not in _status(k8s, "plumbus")
    assert _condition(_status(k8s, "plumbus"), "InstallPendingApproval")["status"] == "False"
    # Applied as the Operator's own installer, bound to exactly what was approved.
    assert get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system") is not None
    # Nothing changed: the installer's RBAC is read, not rewritten.
    role = get(k8s, "rbac.authorization.k8s.io/v1", "ClusterRole", installer.role_name("plumbus"))
    assert reconcile(repo, kc, capsys=capsys).code == 0
    again = get(k8s, "rbac.authorization.k8s.io/v1", "ClusterRole", installer.role_name("plumbus"))
    assert again["metadata"]["resourceVersion"] == role["metadata"]["resourceVersion"]

    # 1.1.0 needs nothing beyond 1.0.0's approval: applied without a new one.
    _declare(repo, "plumbus", "1.1.0")
    repo.commit("plumbus 1.1.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "plumbus: plumbus.v1.1.0 approved (olm.resolveset, Android): plumbus.v1.1.0 needs no permission " \
           "beyond those approved in approvals/plumbus.yaml" in run.out
    assert _status(k8s, "plumbus")["bundle"]["name"] == "plumbus.v1.1.0"

    # 1.2.0 reads secrets: only that escalation waits; plumbus stays at 1.1.0, fleeb still upgrades.
    _declare(repo, "plumbus", "1.2.0")
    _declare(repo, "fleeb", "1.1.0")
    repo.commit("plumbus 1.2.0, fleeb 1.1.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.out + run.err
    pending = _status(k8s, "plumbus")["pending"]
    assert pending["bundle"]["name"] == "plumbus.v1.2.0"
    assert pending["permissions"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]
    assert "        get,list  secrets (core)" in run.out
    assert _status(k8s, "plumbus")["bundle"]["name"] == "plumbus.v1.1.0"
    assert _condition(_status(k8s, "plumbus"), "Ready")["status"] == "True"
    assert _status(k8s, "fleeb")["bundle"]["name"] == "fleeb.v1.1.0"

    _approve_and_apply(repo, kc, k8s, capsys, "plumbus.v1.2.0")
    role = get(k8s, "rbac.authorization.k8s.io/v1", "ClusterRole", installer.role_name("plumbus"))
    assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]} in role["rules"]


def test_deny_all_waits_for_every_bundle_and_an_approval_binds_name_and_digest(repo, kc, k8s, capsys):
    repo.write("operators/classes.yaml", "apiVersion: rukpak.io/v1\nkind: ProvisionerClass\nmetadata:\n"
               "  name: careful\nprovisioner: operators.coreos.com/operators\nparameters:\n  approval: DenyAll\n"
               "  maxObjectSize: 10mb\n")
    repo.remove("operators/fleeb.yaml")
    _declare(repo, "plumbus", "1.0.0", "  provisionerClassName: careful\n")
    repo.commit("plumbus under DenyAll")
    assert reconcile(repo, kc, capsys=capsys).code == 4
    assert approve(repo, "plumbus", capsys=capsys).code == 0
    assert reconcile(repo, kc, capsys=capsys).code == 0
    # An upgrade that needs nothing new still waits under DenyAll.
    _declare(repo, "plumbus", "1.1.0", "  provisionerClassName: careful\n")
    repo.commit("1.1.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4 and "approves nothing by itself (DenyAll)" in run.out, run.out
    assert "note: ProvisionerClass careful (operators/classes.yaml): parameters maxObjectSize are kept but " \
           "have no effect here" in run.out
    assert "no new permissions" in run.out
    assert _status(k8s, "plumbus")["bundle"]["name"] == "plumbus.v1.0.0"
    assert approve(repo, "plumbus", capsys=capsys).code == 0
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert _status(k8s, "plumbus")["bundle"]["name"] == "plumbus.v1.1.0"
    # The same name with other content is another bundle: the approval does not carry over.
    csv = repo.path / "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"
    csv.write_text(csv.read_text().replace("Plumbus keeps", "Plumbus, now rebuilt, keeps"))
    (repo.path / "olm.lock").unlink()
    repo.commit("same name, new content")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4 and "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL" in run.out, run.out + run.err


def test_user_permission_asks_the_api_server_about_the_approver(repo, kc, k8s, control_plane, capsys):
    rbac = client.RbacAuthorizationV1Api(control_plane.admin_client())
    rbac.create_cluster_role_binding({
        "metadata": {"name": "approval-test-alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": "approval-test-bob"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]})
    try:
        repo.remove("operators/fleeb.yaml")
        _declare(repo, "plumbus", "1.0.0", "  provisionerClassName: olm.bundle\n  approver: {user: bob}\n")
        repo.commit("bob approves")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 4, run.out + run.err
        assert "bob may not do" in run.out
        assert "    denied: " in run.out
        assert "        create,delete,patch,update  customresourcedefinitions (apiextensions.k8s.io)" in run.out
        assert managed(k8s, "plumbus") == set()
        _declare(repo, "plumbus", "1.0.0", "  provisionerClassName: olm.bundle\n  approver: {user: alice}\n")
        repo.commit("alice approves")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.out + run.err
        assert "alice may create every object of plumbus.v1.0.0" in run.out
    finally:
        rbac.delete_cluster_role_binding("approval-test-alice")
        rbac.delete_cluster_role_binding("approval-test-bob")


def test_the_api_server_refuses_an_object_beyond_the_approval(repo, kc, k8s, capsys):
    """Least privilege is enforced by the server: the installer identity cannot write what was not approved."""
    repo.remove("operators/fleeb.yaml")
    repo.commit("plumbus only")
    assert reconcile(repo, kc, capsys=capsys).code == 4
    assert approve(repo, "plumbus", capsys=capsys).code == 0
    assert reconcile(repo, kc, capsys=capsys).code == 0
    from reconciler import pipeline
    from reconciler.pipeline.desired import desired_state

    prepared = pipeline.prepare(repo.path, k8s)
    desired = desired_state(prepared.installs, prepared.resolution, prepared.decisions)
    assert len(desired) == 1
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "smuggled", "namespace": "plumbus-system", "labels": {"reconciler.dev/operator": "plumbus"}},
        "stringData": {"k": "v"}}
    # As if a bug in our own check let an unapproved object through: the server still says no.
    tampered = dataclasses.replace(desired[0], objects=desired[0].objects + (secret,))
    with pytest.raises(ClusterError) as caught:
        sync(k8s, Request([tampered], dry_run=False))
    message = caught.value.message
    assert "Secret plumbus-system/smuggled" in message and "forbidden" in message.lower()
    assert "applied as system:serviceaccount:reconciler-system:install-plumbus" in message
    assert get(k8s, "v1", "Secret", "smuggled", "plumbus-system") is None


ADMIN_BINDING = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: fleeb-is-admin
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: fleeb-controller
    namespace: fleeb-system
"""


def test_a_guardrail_violation_holds_back_only_its_operator(repo, kc, k8s, capsys):
    repo.write("bundles/fleeb/1.1.0/manifests/admin-binding.yaml", ADMIN_BINDING)
    repo.commit("fleeb 1.1.0 binds itself to cluster-admin")
    run = approve(repo, "plumbus", capsys=capsys)
    assert run.code == 0, run.err
    run = approve(repo, "fleeb", capsys=capsys)
    assert run.code == 2
    assert ("fleeb: fleeb.v1.1.0 violates guardrail no-cluster-admin-binding: ClusterRoleBinding fleeb-is-admin: "
            "policy no-cluster-admin-binding ((default) no-cluster-admin-binding.yaml): binds to cluster-admin") \
        in run.err
    assert "--waive no-cluster-admin-binding" in run.err
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 2, run.out + run.err
    assert "fleeb: fleeb.v1.1.0 WAITS FOR APPROVAL" in run.out and "violates: ClusterRoleBinding fleeb-is-admin" in run.out
    assert any(s.startswith("Deployment ") for s in managed(k8s, "plumbus"))   # the other Operator is applied
    assert managed(k8s, "fleeb") == set()
    assert _condition(_status(k8s, "fleeb"), "InstallPendingApproval")["reason"] == "PolicyViolation"
    assert get(k8s, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "fleeb-is-admin") is None

    # A reviewed exception for this exact bundle, recorded in git.
    capsys.readouterr()
    from reconciler.cli.parser import main
    assert main(["approve", str(repo.path), "fleeb", "--offline", "--waive", "no-cluster-admin-binding"]) == 0
    assert "waivedPolicies: [no-cluster-admin-binding]" in (repo.path / "approvals/fleeb.yaml").read_text()
    repo.commit("Approve fleeb with its cluster-admin binding")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert get(k8s, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "fleeb-is-admin") is not None


def test_in_git_only_a_committed_approval_counts_and_a_dry_run_previews_one_saying_so(repo, kc, k8s, capsys):
    from .support import cli

    repo.remove("operators/fleeb.yaml")
    repo.commit("only plumbus")
    code, out, err = cli("approve", str(repo.path), "plumbus", "--offline", capsys=capsys)
    assert code == 0, err
    assert "Commit to approve (a reconcile counts only committed approvals): git add approvals/plumbus.yaml" in out
    not_counted = "approvals/plumbus.yaml: uncommitted changes, not counted: a reconcile counts only committed"
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.out + run.err
    assert "plumbus: plumbus.v1.2.0 WAITS FOR APPROVAL" in run.out and not_counted in run.out
    assert managed(k8s, "plumbus") == set()
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 1, run.out + run.err
    assert "plumbus: plumbus.v1.2.0 approved" in run.out
    assert "approvals/plumbus.yaml: uncommitted changes, counted by this dry run as if committed" in run.out
    assert "once approved" not in run.out
    # Running approve again writes nothing new, and still says what needs a commit.
    code, out, _ = cli("approve", str(repo.path), "plumbus", "--offline", capsys=capsys)
    assert code == 0 and "nothing of its own waits" in out and "git add approvals/plumbus.yaml" in out

    repo.commit("Approve plumbus")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "uncommitted" not in run.out and any(s.startswith("Deployment ") for s in managed(k8s, "plumbus"))
    # Withdrawing the approval in the working tree does not withdraw it either, until committed.
    repo.remove("approvals/plumbus.yaml")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0 and "approvals/plumbus.yaml: uncommitted changes, not counted" in run.out, run.out


MANUAL = DESIGN_DOC_V2ALPHA1.replace("plumbus.v2.0.0", "plumbus.v1.0.0").replace("Automatic", "Manual") + \
    '  version: "{version}"\n  install:\n    namespace: plumbus-system\n'


def test_seed_001_manual_approval_holds_every_upgrade_until_it_is_approved(repo, kc, k8s, capsys):
    """Seed 001's v2alpha1 Operator with ``approval: Manual``: the first install and then an upgrade that needs no
    new permission (which Android would take by itself) each wait, with the installed bundle left as it is, until
    `reconciler approve` is committed."""
    repo.remove("operators/fleeb.yaml")
    repo.write("operators/plumbus.yaml", MANUAL.format(version="1.0.0"))
    repo.commit("plumbus 1.0.0, approved by hand")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4 and "the declaration asks for manual approval" in run.out, run.out + run.err
    assert managed(k8s, "plumbus") == set()
    _approve_and_apply(repo, kc, k8s, capsys, "plumbus.v1.0.0")

    repo.write("operators/plumbus.yaml", MANUAL.format(version="1.1.0"))
    repo.commit("plumbus 1.1.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.out + run.err
    assert "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL (olm.resolveset, DenyAll): plumbus.v1.1.0 waits for " \
           "approval: the declaration asks for manual approval" in run.out
    assert _status(k8s, "plumbus")["bundle"]["name"] == "plumbus.v1.0.0"
    assert _status(k8s, "plumbus")["pending"]["bundle"]["name"] == "plumbus.v1.1.0"
    deployment = get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system")   # 1.0.0's
    assert [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [
        "registry.example.com/plumbus/controller:v1.0.0"]
    assert get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system") is None   # 1.1.0's
    _approve_and_apply(repo, kc, k8s, capsys, "plumbus.v1.1.0")
