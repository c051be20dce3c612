"""Recording: the status objects that hold each Operator's inventory and report its state.

The inventory is written (old and new) before anything is applied, so an
interrupted run never leaves an object the reconciler created unrecorded;
after applying, each Operator's status says what was applied, its health
and any drift corrected.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import (
    ANNOTATION_DIGEST, DesiredOperator, PendingOperator, Planned, describe_diff, is_current, order_key,
    wait_established, with_digest,
)
from reconciler.kube.client import Kube, ResourceInfo
from reconciler.errors import ClusterError, ReconcilerError
from reconciler.model.kube import API_GROUP, FIELD_MANAGER, LABEL_OPERATOR, ObjectRef
from reconciler.report.words import agree, counted

if TYPE_CHECKING:
    from reconciler.cluster.status.objects import StatusWriter
    from reconciler.cluster.health.wait import OperatorHealth


def ensure_status_crd(kube: Kube) -> ResourceInfo:
    """Install or update the status CRD; no write when the live one already matches."""
    crd_info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd_info is not None
    live = kube.get(crd_info, "", status_objects.STATUS_CRD["metadata"]["name"])
    sent = with_digest(status_objects.STATUS_CRD)
    if live is None or (not is_current(sent, live) and (
            describe_diff(live, kube.apply(crd_info, sent, field_manager=FIELD_MANAGER, dry_run=True))
            or (live["metadata"].get("annotations") or {}).get(ANNOTATION_DIGEST)
            != sent["metadata"]["annotations"][ANNOTATION_DIGEST])):
        kube.apply(crd_info, sent, field_manager=FIELD_MANAGER, dry_run=False)
        wait_established(kube, status_objects.STATUS_CRD["metadata"]["name"])
    deadline = time.monotonic() + 30
    while (info := status_objects.resource(kube)) is None:  # discovery lags Established by a moment
        if time.monotonic() > deadline:
            name = status_objects.STATUS_CRD["metadata"]["name"]
            raise ClusterError(f"{name} is Established but not served after 30s")
        time.sleep(0.1)
    return info


def members_of(recorded: Mapping[str, status_objects.Recorded], desired: list[DesiredOperator]) -> set[ObjectRef]:
    """Everything an instance manages: its status objects and every inventory entry, recorded or desired."""
    out = {ObjectRef(API_GROUP, status_objects.KIND, "", name) for name in recorded}
    out |= {ObjectRef(API_GROUP, status_objects.KIND, "", op.name) for op in desired}
    for rec in recorded.values():
        out |= set(rec.inventory)
    for op in desired:
        out |= {ObjectRef.of(o) for o in op.objects}
    return out


def drifted_objects(planned: list[Planned], recorded: dict[str, status_objects.Recorded],
           desired: list[DesiredOperator]) -> dict[str, list[ObjectRef]]:
    """Objects changed by someone else: the live copy carries the digest of exactly what we apply now, yet
    differs from it (a changed declaration or bundle brings a new digest, and is not drift)."""
    out: dict[str, list[ObjectRef]] = {op.name: [] for op in desired}
    for p in planned:
        if p.drifted and p.operator in out:
            out[p.operator].append(p.ref)
    return out


def status_for(op: DesiredOperator, revision: str | None, inventory: set[ObjectRef], ready: tuple[bool, str, str],
               health: OperatorHealth | None = None, drifted: list[ObjectRef] | None = None) -> dict[str, Any]:
    """An Operator's status: ``ready`` is its Ready condition (status, reason, message) until ``health`` judges
    it; ``drifted``, when given, the objects found changed by someone else and re-applied."""
    components: dict[str, Any] = {"matchLabels": {LABEL_OPERATOR: op.name}}
    message = ready[2]
    conditions = [status_objects.condition("Ready", *ready)]
    if health is not None:
        conditions = status_objects.health_conditions(health, message)
        components["refs"] = [c.to_status() for c in health.components]
    if health is not None and health.operands:
        components["operands"] = [dict(o) for o in health.operands]
    if drifted:
        names = ", ".join(str(r) for r in drifted[:5]) + (f" and {len(drifted) - 5} more" if len(drifted) > 5 else "")
        conditions.append(status_objects.condition(
            "ComponentsDiverge", True, "DriftCorrected",
            f"{counted(len(drifted), 'component')} differed from what was applied and "
            f"{agree(len(drifted), 'was', 'were')} re-applied: {names}"))
    elif drifted is not None:
        conditions.append(status_objects.condition("ComponentsDiverge", False, "NoDrift",
                                                   "every component matched what was applied"))
    out = {"revision": revision, "bundle": op.bundle, "inventory": inventory_of(inventory),
           "components": components, **op.report, "conditions": [*conditions, *map(dict, op.conditions)]}
    if op.metadata:
        out["metadata"] = op.metadata
    return out


def record_pending(status: StatusWriter, pending: tuple[PendingOperator, ...],
                   recorded_all: dict[str, status_objects.Recorded]) -> None:
    """Say on each waiting Operator's status object what waits; what it has installed stays as it is."""
    for p in pending:
        rec = recorded_all.get(p.name)
        st = dict(rec.status) if rec else {"inventory": []}
        st["pending"] = {"bundle": p.bundle, "permissions": p.permissions}
        others = [c for c in st.get("conditions") or [] if c.get("type") not in ("InstallPendingApproval", "Ready")]
        ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None:
            ready = status_objects.condition("Ready", False, "PendingApproval",
                                             f"{p.bundle.get('name')} waits for approval; nothing is installed yet")
        st["conditions"] = [ready, p.condition, *others]
        status.write(p.name, p.spec, st, rec)


def mark_failed(status: StatusWriter, op: DesiredOperator, exc: ReconcilerError) -> None:
    try:
        rec = status_objects.read_all(status.kube, status.stamp.instance).get(op.name)
        st = dict(rec.status) if rec else {}
        st["conditions"] = [status_objects.condition("Ready", False, "ApplyFailed", exc.message[:1000])]
        status.write(op.name, op.spec, st, rec)
    except ClusterError:
        pass  # the original error is what the user needs; the status is best-effort here


def inventory_of(refs: Iterable[ObjectRef]) -> list[dict[str, str]]:
    return [r.to_dict() for r in sorted(set(refs), key=order_key)]
