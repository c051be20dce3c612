"""Approval decisions, one policy at a time, without a cluster; and a real bundle pair from the corpus."""

from __future__ import annotations


import pytest

from reconciler.approve import decide, required_permissions
from reconciler.model.permissions import CLUSTER, PermissionSet, Rule
from reconciler.model.approvals import ApprovalRecord, ApprovedBundle, parse_record, render_record
from reconciler.approve.required import Requirements
from reconciler.errors import DeclarationError, InputError
from reconciler.model.provisioner import BUILTIN_CLASSES, Identity, ProvisionerClass, parse_provisioner_class
from tests.support.paths import CORPUS as SHARED_CORPUS
from tests.support.parts import not_tested

NS = "ops"
READ_PODS = Rule.make(NS, verbs=["get", "list"], api_groups=[""], resources=["pods"])
DELETE_PODS = Rule.make(NS, verbs=["delete"], api_groups=[""], resources=["pods"])
MANAGE = Rule.make(NS, verbs=["create", "delete", "patch", "update"], api_groups=["apps"], resources=["deployments"])
V1 = Requirements(PermissionSet.of([READ_PODS]), PermissionSet.of([MANAGE]))
V2 = Requirements(PermissionSet.of([READ_PODS, DELETE_PODS]), PermissionSet.of([MANAGE]))
ANDROID = BUILTIN_CLASSES["olm.resolveset"]


def record(*bundles: tuple[str, str, Requirements]) -> ApprovalRecord:
    return ApprovalRecord("op", "approvals/op.yaml",
                          tuple(ApprovedBundle(n, d, r.all) for n, d, r in bundles))


def cls(approval: str, approver: Identity | None = None) -> ProvisionerClass:
    return ProvisionerClass("c", approval, approver=approver)


def test_allow_all_approves_without_a_record() -> None:
    d = decide("op", "op.v2", "sha256:2", V2, cls("AllowAll"), None)
    assert d.approved and d.reason == "AllowAll" and d.granted == V2.all


def test_android_first_install_waits_for_everything() -> None:
    d = decide("op", "op.v1", "sha256:1", V1, ANDROID, None)
    assert not d.approved and d.reason == "PrivilegeEscalationRequired" and d.pending == V1.all


def test_android_upgrade_within_the_approval_is_approved_and_an_escalation_waits_for_the_delta_only() -> None:
    approved = record(("op.v1", "sha256:1", V1))
    same = decide("op", "op.v1b", "sha256:9", V1, ANDROID, approved)
    assert same.approved and same.reason == "CoveredByEarlierApproval"
    more = decide("op", "op.v2", "sha256:2", V2, ANDROID, approved)
    assert not more.approved and more.pending == PermissionSet.of([DELETE_PODS])


def test_a_recorded_approval_is_bound_to_name_and_digest() -> None:
    approved = record(("op.v2", "sha256:2", V2))
    assert decide("op", "op.v2", "sha256:2", V2, cls("DenyAll"), approved).reason == "Approved"
    other = decide("op", "op.v2", "sha256:other", V2, cls("DenyAll"), approved)
    assert not other.approved and other.reason == "ApprovalRequired"


def test_a_recorded_approval_that_no_longer_covers_the_bundle_waits() -> None:
    approved = record(("op.v2", "sha256:2", V1))   # recorded with fewer permissions than it needs now
    d = decide("op", "op.v2", "sha256:2", V2, cls("AllowAll"), approved)
    assert not d.approved and d.pending == PermissionSet.of([DELETE_PODS])


def test_deny_all_and_manual_approval_wait_even_without_new_permissions() -> None:
    approved = record(("op.v1", "sha256:1", V1))
    d = decide("op", "op.v1b", "sha256:9", V1, cls("DenyAll"), approved)
    assert not d.approved and not d.pending
    manual = decide("op", "op.v1b", "sha256:9", V1, ANDROID, approved, manual=True)
    assert not manual.approved and manual.policy == "DenyAll" and "manual approval" in manual.message


def test_user_permission_asks_about_every_atom() -> None:
    alice = Identity("alice")
    asked = []

    def check(identity: Identity, atom) -> bool:
        asked.append(atom)
        return identity.user == "alice" or atom.verb != "delete"
    assert decide("op", "op.v2", "sha256:2", V2, cls("UserPermission", alice), None, check=check).approved
    assert len(asked) == sum(1 for _ in V2.all.atoms())
    bob = decide("op", "op.v2", "sha256:2", V2, cls("UserPermission", alice), None,
                 approver=Identity("bob"), check=check)
    assert not bob.approved and bob.reason == "ApproverLacksPermission"
    assert "delete pods (core) in ops" in bob.denied
    assert bob.pending.covers(PermissionSet.of([DELETE_PODS]))
    offline = decide("op", "op.v2", "sha256:2", V2, cls("UserPermission", alice), None)
    assert not offline.approved and offline.reason == "ApproverNotChecked"
    nobody = decide("op", "op.v2", "sha256:2", V2, cls("UserPermission"), None, check=check)
    assert nobody.reason == "NoApprover"


def test_provisioner_classes_as_the_design_document_writes_them() -> None:
    doc = {"kind": "ProvisionerClass", "apiVersion": "rukpak.io/v1", "metadata": {"name": "olm.bundle"},
           "provisioner": "operators.coreos.com/operators",
           "parameters": {"approval": "UserPermission", "maxObjectSize": "10mb",
                          "approver": {"serviceAccount": {"namespace": "ci", "name": "deployer"}}}}
    pc = parse_provisioner_class(doc, "operators/classes.yaml")
    assert pc.approval == "UserPermission" and pc.ignored_parameters == ("maxObjectSize",)
    assert pc.approver.user == "system:serviceaccount:ci:deployer"
    with pytest.raises(DeclarationError, match="parameters.approval must be one of"):
        parse_provisioner_class({**doc, "parameters": {"approval": "AllowAll | DenyAll | Android"}}, "x.yaml")


def test_records_render_deterministically_and_parse_strictly() -> None:
    rec = record(("op.v2", "sha256:2", V2), ("op.v1", "sha256:1", V1))
    text = render_record(rec)
    import yaml
    again = parse_record(yaml.safe_load(text), "approvals/op.yaml")
    assert render_record(again) == text and again.union == V2.all
    with pytest.raises(InputError, match="needs a bundle name and a sha256: digest"):
        parse_record({"apiVersion": "reconciler.dev/v1alpha1", "kind": "Approval", "metadata": {"name": "op"},
                      "spec": {"bundles": [{"name": "x", "digest": "md5:1"}]}}, "approvals/op.yaml")


CORPUS = SHARED_CORPUS / "operators"


@pytest.mark.corpus
def test_a_real_upgrade_that_adds_permissions_waits_for_exactly_the_added_rules() -> None:
    """ack-cloudtrail-controller 1.0.4 adds Events and Leases to what 1.0.3 could do."""
    from reconciler.bundle import fetch, read_content, render_content
    from reconciler.model.declarations import InstallSettings

    if not (CORPUS / "ack-cloudtrail-controller" / "1.0.4").is_dir():
        not_tested("corpus", f"no corpus at {CORPUS}")

    def render(version: str):
        content = read_content(fetch(f"file://ack-cloudtrail-controller/{version}", CORPUS))
        return render_content(content, InstallSettings(), "ack-system")
    old, new = render("1.0.3"), render("1.0.4")
    approved = record((old.name, old.digest, required_permissions(old.objects)))
    d = decide("ack-cloudtrail", new.name, new.digest, required_permissions(new.objects), ANDROID, approved)
    assert not d.approved
    assert d.pending == PermissionSet.of([
        Rule.make(CLUSTER, verbs=["create", "patch"], api_groups=[""], resources=["events"]),
        Rule.make(CLUSTER, verbs=["create", "delete", "get", "list", "patch", "update", "watch"],
                  api_groups=["coordination.k8s.io"], resources=["leases"])])
