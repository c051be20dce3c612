"""The applier: one object for what every request of a run shares, with the engine's verbs.

It holds the client, the run's mode (a dry run writes nothing), the identity
each Operator's objects are written as (its installer, else the client's
own) and the change set the run fills. The field manager is fixed: provenance
is proven by it (``provenance.py``), so a run that applied under another
name would lose its own objects. Requests run concurrently through the one
pool of ``kube/concurrent.py``, sized on the client.

Its verbs are the engine's: ``namespaces`` (the install namespaces, made when
missing), ``plan`` (every object's action decided before anything is
written), ``preview`` (a dry run's plan as changes), ``apply`` (the plan
written stage by stage), ``write`` (one object outside the plan, e.g. a
webhook's own failure policy given back), ``delete``, ``record`` (what the
caller did to an object, entered in the change set) and ``wait`` (the
verdicts of a judge on what was applied). ``kube`` is the client the run
reads with (and writes as the reconciler's own identity); ``installer`` is
the identity an Operator's objects are written as. What to apply, which inventories
prove ownership and what to prune is the caller's (``cluster/ownership/``).
The caller's own records (status objects, installers, the ApplySet parent)
are written through ``bookkeeping``, the client that enters each write in
the change set (``bookkeeping.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from reconciler.cluster.apply.bookkeeping import journal
from reconciler.cluster.apply.changes import Action, Change, DesiredOperator
from reconciler.cluster.apply.diff import created, label_of
from reconciler.cluster.apply.order import order_key
from reconciler.cluster.apply.plan import Plan, Planned, ensure_namespaces, plan
from reconciler.cluster.apply.target import Claims, PlanOptions, Target
from reconciler.cluster.apply.write import execute_all
from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.model.kube import FIELD_MANAGER, Manifest, ObjectRef

__all__ = ["Applier", "Claims", "PlanOptions", "preview_empty"]

_Verdict = TypeVar("_Verdict")


class Applier(Target):
    """Server-side apply for one run, under the one field manager: ``kube`` writes, each Operator as
    ``writers[name]`` when it has one."""

    field_manager = FIELD_MANAGER

    @property
    def bookkeeping(self) -> Kube:
        """The client the run's own records are written with, as the reconciler's own identity: each write the
        API server accepts is entered in ``changes.bookkeeping`` (``bookkeeping.py``)."""
        return self.kube.recording(journal(self.changes, self.kube))

    def impersonating(self, user: str) -> Kube:
        """The run's client acting as ``user`` (an installer of an Operator no longer desired, to prune as)."""
        return self.kube.impersonating(user)

    def writer(self, operator: str) -> Kube:
        """The identity ``operator``'s objects are written as."""
        return self.installer(operator) or self.kube

    def namespaces(self, desired: list[DesiredOperator]) -> set[str]:
        """Create the missing install namespaces (never deleted); return those missing (created unless a dry run)."""
        return ensure_namespaces(self, desired)

    def plan(self, desired: list[DesiredOperator], claims: Claims, options: PlanOptions = PlanOptions()) -> Plan:
        """Every object's action, decided before anything is written (``plan.plan``), and each Operator the plan
        refuses, with its error. ``claims`` prove which existing objects are whose; ``options`` say what the run
        has not made yet."""
        return plan(self, desired, claims, options)

    def preview(self, planned: list[Planned]) -> None:
        """A dry run's plan as the change set: what would be created, configured or left, with its diff."""
        self.changes.changes.extend(
            Change(p.operator, p.ref, p.action, detail=p.detail, diff=p.diff,
                   unified=p.unified or (created(p.obj, label_of(p.ref)) if p.action == Action.CREATED else ()),
                   sides=p.sides) for p in planned)

    def apply(self, planned: list[Planned]) -> list[tuple[Planned, ApiError]]:
        """Write the plan stage by stage (``write.execute_all``); returns the refusals, records the changes."""
        done, refused = execute_all(self.kube, planned)
        self.changes.changes.extend(done)
        return refused

    def record(self, change: Change) -> None:
        """Enter what the caller did to one of the bundles' objects (a deletion, an object left) in the change set."""
        self.changes.changes.append(change)

    def write(self, operator: str, info: ResourceInfo, obj: Manifest) -> Manifest:
        """Apply one object outside the plan, as ``operator``'s writer; entered in ``changes.bookkeeping``."""
        writer = self.writer(operator).recording(journal(self.changes, self.kube))
        return writer.apply(info, obj, field_manager=self.field_manager, dry_run=self.dry_run)

    def delete(self, info: ResourceInfo, ref: ObjectRef) -> None:
        """Delete one object (server-side dry-run in a dry run); who may be deleted is the caller's decision."""
        self.kube.delete(info, ref.namespace, ref.name, dry_run=self.dry_run)

    def wait(self, judge: Callable[[list[DesiredOperator]], Mapping[str, _Verdict]] | None,
             desired: list[DesiredOperator]) -> dict[str, _Verdict]:
        """The verdict of ``judge`` (``cluster/health/wait.py`` polls until healthy or a deadline) on each Operator applied."""
        return dict(judge(desired)) if judge is not None else {}


def preview_empty(desired: list[DesiredOperator]) -> list[Change]:
    """Without a cluster: everything ``desired`` is created, in the order it would be applied, into namespaces that
    are missing (but for those the bundle ships itself, which are among its objects)."""
    out = []
    for op in desired:
        for ns in sorted(set(op.namespaces) - op.shipped_namespaces):
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            ref = ObjectRef("", "Namespace", "", ns, "v1")
            out.append(Change(op.name, ref, Action.CREATED, unified=created(namespace, label_of(ref))))
        for obj in sorted(op.objects, key=lambda o: order_key(ObjectRef.of(o))):
            ref = ObjectRef.of(obj)
            out.append(Change(op.name, ref, Action.CREATED, unified=created(obj, label_of(ref))))
    return out
