"""Writing: the planned objects applied stage by stage, concurrently within a stage.

CRDs are waited for until Established before the next stage. An object the
API server refuses stops its own Operator after that stage; the others go
on, so one bad first install never leaves an installed Operator half-upgraded.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.report import progress
from reconciler.cluster.apply.changes import Change, DesiredOperator
from reconciler.cluster.apply.crds import CRD, wait_established
from reconciler.cluster.apply.order import order_key
from reconciler.kube.concurrent import concurrently
from reconciler.cluster.apply.plan import Planned, as_installer, invalid_objects, is_invalid_object
from reconciler.kube.client import ApiError, Kube
from reconciler.errors import ClusterError, ReconcilerError
from reconciler.model.kube import FIELD_MANAGER
from reconciler.report.words import agree, counted


def execute_all(kube: Kube, planned: list[Planned]) -> tuple[list[Change], list[tuple[Planned, ApiError]]]:
    """Write in order of stage (namespaces, CRDs, RBAC, ...); within a stage, objects are applied concurrently.

    A stage holds objects that do not depend on each other; CRDs are all
    applied, then each is waited for until Established, before the next stage.
    An object the API server refuses stops its Operator after that stage (the
    rest of the stage is written); other Operators go on through every stage,
    so one bad first install never leaves an installed Operator half-upgraded.
    Returns the changes made and the refusals.
    """
    stages: dict[int, list[Planned]] = {}
    done: dict[int, Change] = {}
    for p in planned:
        if p.write:
            stages.setdefault(order_key(p.ref)[0], []).append(p)
        else:
            done[id(p)] = Change(p.operator, p.ref, p.action, detail=p.detail)
    refused: list[tuple[Planned, ApiError]] = []
    stopped: set[str] = set()
    for rank in sorted(stages):
        group = [p for p in stages[rank] if p.operator not in stopped]
        outcomes = concurrently(lambda p: _attempt(kube, p), group)
        for p, out in zip(group, outcomes):
            if isinstance(out, ApiError):
                refused.append((p, out))
                stopped.add(p.operator)
            else:
                done[id(p)] = out
        crds = [p for p, out in zip(group, outcomes) if (p.ref.group, p.ref.kind) == CRD and not isinstance(
            out, ApiError)]
        for p in crds:
            wait_established(kube, p.ref.name)
        if crds:
            kube.forget_discovery()
    return [done[id(p)] for p in planned if id(p) in done], refused


def _attempt(kube: Kube, p: Planned) -> Change | ApiError:
    try:
        return _execute(kube, p)
    except ApiError as exc:
        return exc


def refused_on_write(refused: list[tuple[Planned, ApiError]], planned: list[Planned],
                      by_name: Mapping[str, DesiredOperator], rolled_back: Mapping[str, int]) -> ReconcilerError:
    """The objects refused while writing, and what became of what their Operators had written: removed again
    (a first install, ``rolled_back``: how many objects), or recorded in the inventory for the next run."""
    invalid = [(by_name[p.operator], f"{p.ref}: {exc.message}") for p, exc in refused if is_invalid_object(exc)]
    owners = sorted({p.operator for p, _ in refused})
    rejected = {id(p) for p, _ in refused}
    last = {name: max(order_key(q.ref)[0] for q, _ in refused if q.operator == name) for name in owners}
    counts = {name: sum(1 for p in planned if p.operator == name and p.write and id(p) not in rejected
                        and order_key(p.ref)[0] <= last[name]) for name in owners}
    kept = [name for name in owners if name not in rolled_back]
    parts = []
    if kept:
        written = ", ".join(f"{counted(counts[name], 'object')} of Operator {name}" for name in kept)
        parts.append(f"written before, and recorded in the inventory: {written}; the next reconcile applies the "
                     f"rest and removes what is no longer wanted")
    for name in sorted(rolled_back):
        parts.append(f"Operator {name} was a first install and was removed again ({counted(rolled_back[name], 'object')} "
                     f"written before the refusal deleted, its installer and new namespace too)")
    others = sorted(set(by_name) - set(owners))
    state = "; ".join(parts) + (f" (the other Operators were applied: {', '.join(others)})" if others else "")
    if len(invalid) == len(refused):
        return invalid_objects(invalid, state)
    lines = "\n  ".join(f"{p.ref}: {exc.message}{as_installer(p, p.writer, exc)}" for p, exc in refused)
    return ClusterError(f"{counted(len(refused), 'object')} {agree(len(refused), 'was', 'were')} refused by the API server; {state}:\n  {lines}")


def _execute(kube: Kube, p: Planned) -> Change:
    if not p.write:
        return Change(p.operator, p.ref, p.action)
    info = p.info or kube.require_resource(p.obj)
    (p.writer or kube).apply(info, p.obj, field_manager=FIELD_MANAGER, dry_run=False)
    progress.item(f"{p.action.value:<10} {p.ref}")
    return Change(p.operator, p.ref, p.action, diff=p.diff, unified=p.unified)
