"""Judging bundles: ``evaluate`` takes every converted bundle and returns one ``Decision`` per
Operator: approved (and with which permissions its installer identity is
bound when applying) or pending (and exactly which permissions wait). The
pieces are pure and separately usable: ``required_permissions`` (what a
bundle needs), ``PermissionSet.covers`` / ``missing`` (comparison),
``decide`` (one policy), ``records`` (approvals kept in git) and
``guardrails`` (policies every rendered object must pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.model.permissions import CLUSTER, Atom, PermissionSet, Rule
from reconciler.approve.policy import AccessCheck, Decision, decide
from reconciler.approve.required import Requirements, required_permissions
from reconciler.model.resources import ResourceLookup, resource_lookup
from reconciler.model.declarations import OperatorDecl
from reconciler.model.kube import Manifest
from reconciler.model.provisioner import BUILTIN_CLASSES, DEFAULT_CLASS, ProvisionerClass

__all__ = ["Atom", "CLUSTER", "Decision", "PermissionSet", "Requirements", "Rule", "Subject", "decide",
           "evaluate", "required_permissions"]


@dataclass(frozen=True)
class Subject:
    """One bundle to judge: who it is for and what it renders to."""

    operator: str
    bundle: str
    digest: str
    objects: tuple[Manifest, ...]
    declaration: OperatorDecl | None = None   # None for a dependency: the repository default applies


def evaluate(subjects: Iterable[Subject], *, classes: dict[str, ProvisionerClass] | None = None,
             records: dict | None = None, default_class: str = DEFAULT_CLASS,
             check: AccessCheck | None = None, cluster_lookup: ResourceLookup | None = None) -> dict[str, Decision]:
    classes = classes or dict(BUILTIN_CLASSES)
    records = records or {}
    out = {}
    for s in subjects:
        decl = s.declaration
        cls = classes[(decl.provisioner_class if decl else None) or default_class]
        required = required_permissions(s.objects, resource_lookup(s.objects, cluster_lookup))
        out[s.operator] = decide(s.operator, s.bundle, s.digest, required, cls, records.get(s.operator),
                                 approver=decl.approver if decl else None,
                                 manual=bool(decl and decl.manual_approval),
                                 declared=bool(decl and decl.approved), check=check)
    return out
