"""Approval policies: is this bundle, for this Operator, approved to be applied?

* AllowAll: approved.
* DenyAll: every bundle not recorded by name and digest waits.
* Android: approved when recorded, or when its permissions are covered by
  what was approved for the Operator before; otherwise only the escalation
  (what is not covered) is pending. A first install has nothing before it.
* UserPermission: approved when SubjectAccessReviews say the class's or the
  declaration's approver may do everything the bundle needs (create its
  objects, hold its rules); otherwise the denied checks are pending.

A recorded approval (``approvals/``) approves its exact bundle under every
policy. A decision never blocks other Operators: a pending one is held back
alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler.model.provisioner import Identity, ProvisionerClass
from reconciler.model.permissions import CLUSTER, Atom, PermissionSet, compact
from reconciler.model.approvals import ApprovalRecord, APPROVALS_DIR
from reconciler.approve.required import Requirements
from reconciler.report.words import counted

# Asks the cluster whether ``identity`` may do ``atom``: SubjectAccessReview.
AccessCheck = Callable[[Identity, Atom], bool]


@dataclass(frozen=True)
class Decision:
    operator: str
    bundle: str
    digest: str
    provisioner_class: str
    policy: str
    approved: bool
    reason: str          # CamelCase, as a condition reason
    message: str
    required: Requirements
    pending: PermissionSet = PermissionSet()   # what needs approving; empty when approved
    denied: tuple[str, ...] = ()               # UserPermission checks that failed
    violations: tuple = ()                     # guardrails.Violation: policies it breaks (not waived)
    waived: tuple[str, ...] = ()               # policies its approval record waives for this exact bundle

    @property
    def granted(self) -> PermissionSet:
        """What the Operator's installer identity is bound to when this is applied."""
        return self.required.installer


def decide(operator: str, bundle: str, digest: str, required: Requirements, cls: ProvisionerClass,
           record: ApprovalRecord | None, *, approver: Identity | None = None, manual: bool = False,
           declared: bool = False, check: AccessCheck | None = None) -> Decision:
    """``manual``: the declaration waits for a record (DenyAll); ``declared``: the declaration itself is the
    approval (an Install's ``spec.approval: Approved``, committed with the content it approves)."""
    needed = required.all
    policy = "DenyAll" if manual else "Declared" if declared else cls.approval

    def result(approved: bool, reason: str, message: str, pending: PermissionSet = PermissionSet(),
               denied: tuple[str, ...] = ()) -> Decision:
        return Decision(operator, bundle, digest, cls.name, policy, approved, reason, message, required,
                        pending, denied)

    where = record.path if record else f"{APPROVALS_DIR}/{operator}.yaml"
    exact = record.find(bundle, digest) if record else None
    if exact is not None:
        if exact.permissions.covers(needed):
            return result(True, "Approved", f"{bundle} is approved in {where}")
        return result(False, "PrivilegeEscalationRequired",
                      f"{bundle} needs permissions its approval in {where} does not list",
                      exact.permissions.missing(needed))
    if policy == "AllowAll":
        return result(True, "AllowAll", f"ProvisionerClass {cls.name} approves every bundle (AllowAll)")
    if policy == "Declared":
        return result(True, "ApprovedByDeclaration", f"{bundle} is approved by its declaration (spec.approval: "
                                                     f"Approved)")
    before = record.union if record else PermissionSet()
    if policy == "DenyAll":
        why = ("the declaration asks for manual approval" if manual else
               f"ProvisionerClass {cls.name} approves nothing by itself (DenyAll)")
        return result(False, "ApprovalRequired", f"{bundle} waits for approval: {why}", before.missing(needed))
    if policy == "Android":
        if record is None or not record.bundles:
            return result(False, "PrivilegeEscalationRequired",
                          f"first install of {bundle} waits for approval of its permissions", needed)
        missing = before.missing(needed)
        if not missing:
            return result(True, "CoveredByEarlierApproval",
                          f"{bundle} needs no permission beyond those approved in {where}")
        return result(False, "PrivilegeEscalationRequired",
                      f"{bundle} needs permissions beyond those approved in {where}", missing)
    # UserPermission
    identity = approver or cls.approver
    if identity is None:
        return result(False, "NoApprover", f"ProvisionerClass {cls.name} checks an approver's permissions "
                                           f"(UserPermission), but none is named", needed)
    if check is None:
        return result(False, "ApproverNotChecked", f"UserPermission needs a cluster to check what "
                                                   f"{identity.describe()} may do", needed)
    denied_atoms = [a for a in needed.atoms() if not check(identity, a)]
    if not denied_atoms:
        return result(True, "ApproverHasPermission", f"{identity.describe()} may create every object of "
                                                     f"{bundle} and grant every rule it carries")
    denied = tuple(_describe_atom(a) for a in denied_atoms[:20])
    return result(False, "ApproverLacksPermission",
                  f"{identity.describe()} may not do {counted(len(denied_atoms), 'thing')} {bundle} needs",
                  compact(denied_atoms), denied)


def _describe_atom(a: Atom) -> str:
    if a.url:
        return f"{a.verb} {a.url}"
    where = "cluster-wide" if a.scope == CLUSTER else f"in {a.scope}"
    name = f"/{a.name}" if a.name else ""
    return f"{a.verb} {a.resource}{name} ({a.api_group or 'core'}) {where}"


def approve_command(repo: object, name: str, d: Decision) -> str:
    """The command that approves what ``d`` waits for, as it must be typed: with a ``--waive`` for each
    guardrail the bundle violates (without them, `approve` refuses it)."""
    import shlex

    waive = "".join(f" --waive {shlex.quote(p)}" for p in sorted({v.policy for v in d.violations}))
    return f"reconciler approve {shlex.quote(str(repo))} {shlex.quote(name)}{waive}"
