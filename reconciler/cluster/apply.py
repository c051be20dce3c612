"""Sync desired objects to the cluster: plan, apply in stages, prune, record.

The change set says, per object, Created / Configured / Unchanged / Deleted /
Skipped. Everything is planned before anything is written: live objects are
read with one labelled LIST per kind, every object that may change is
server-side dry-run applied and compared with the live object, and ownership
conflicts are detected, so an invalid object or a conflict stops the run with
nothing applied. The exception is an Operator's first install (nothing
recorded, nothing running to protect): its new objects are created directly,
one request each, after its inventory is recorded, so an object refused
midway leaves a recorded, reported partial install the next run completes or
prunes. Then objects are applied with server-side apply under one
field manager, stage by stage (namespaces, CRDs — waited for until
Established —, RBAC, ..., deployments), concurrently within a stage, and
finally objects that left the desired state are pruned.

An unchanged object costs no request beyond its kind's LIST. Each object we
apply carries ``reconciler.dev/applied-digest``, a digest of the
configuration sent; when the live digest matches the desired one and every
field of that configuration is still owned by our field manager (the API
server moves a field to whoever changes it), the object is what we would
apply and is skipped. Anything else is dry-run, and the difference is
described by a bounded, linear walk of both objects.

Ownership is proven by provenance, never by labels (anyone can write a
label): an existing object is applied over, or pruned, only when its
Operator's recorded inventory lists it and our field manager applied it
(an Apply entry of ``reconciler`` in managedFields). Anything else is
foreign and never taken over unless annotated ``reconciler.dev/adopt:
"true"``, even when it carries our labels. Inventories belong to one
reconciler instance (``applyset.py``): an instance never reads, applies over
or prunes another's.

Pruning is conservative. Only objects that are provably ours and still
carry the owner's label are deleted; an object annotated
``reconciler.dev/prune: disabled`` is kept and released (our labels are
removed, so a later install does not silently re-adopt it); a CRD that still
has custom resources is kept (deleting it would delete them) and stays in
the inventory until it can go, unless the declaration opted in with
``reconciler.dev/delete-custom-resources: "true"``. A declaration renamed
with its bundle unchanged is a move: the new name takes over the old one's
objects in place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterable

from reconciler.approve.permissions import PermissionSet
from reconciler.cluster import installer
from reconciler.cluster import crdsafety
from reconciler import progress
from reconciler.cluster import status as status_objects
from reconciler.cluster.applyset import Instance, write_parent
from reconciler.cluster.kube import WORKERS, ApiError, Kube, ResourceInfo
from reconciler.errors import BundleError, ClusterError, PolicyError, ReconcilerError
from reconciler.model.declarations import ANNOTATION_DELETE_CUSTOM_RESOURCES
from reconciler.model.kube import (
    ANNOTATION_PRUNE, API_GROUP, FIELD_MANAGER, LABEL_MANAGED_BY, LABEL_OPERATOR, LABEL_PART_OF, MANAGED_BY,
    Manifest, ObjectRef,
)

if TYPE_CHECKING:
    from reconciler.cluster.wait import OperatorHealth

ANNOTATION_ADOPT = f"{API_GROUP}/adopt"
ANNOTATION_DIGEST = f"{API_GROUP}/applied-digest"   # sha256 of the configuration we last applied to the object
CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")
_ORDER = {
    ("", "Namespace"): 0, CRD: 1, ("rbac.authorization.k8s.io", "ClusterRole"): 2,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): 3, ("", "ServiceAccount"): 4,
    ("rbac.authorization.k8s.io", "Role"): 5, ("rbac.authorization.k8s.io", "RoleBinding"): 6,
    ("", "Secret"): 7, ("", "ConfigMap"): 7, ("", "Service"): 8, ("apps", "Deployment"): 10,
    # Last: they route API requests to the Deployments applied just before.
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): 11,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): 11,
    ("apiregistration.k8s.io", "APIService"): 11,
}
_VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")


class Action(str, Enum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Change:
    operator: str
    ref: ObjectRef
    action: Action
    detail: str = ""
    diff: tuple[str, ...] = ()


@dataclass(frozen=True)
class DesiredOperator:
    """One Operator's objects, already stamped with ownership labels, and what to record about it."""

    name: str
    objects: tuple[Manifest, ...]
    namespaces: tuple[str, ...]
    spec: dict[str, Any]
    bundle: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)   # resolution facts: updates, dependencies, satisfies
    conditions: tuple[dict[str, str], ...] = ()             # more conditions beside Ready (e.g. UpdateAvailable)
    installer: PermissionSet | None = None   # apply as its own installer bound to these; None: our own identity
    allow_unsafe_crds: str = ""   # the declaration's reconciler.dev/allow-unsafe-crd-upgrade: CRD names, or "*"
    metadata: dict[str, Any] = field(default_factory=dict)  # the CSV's names, version and APIs, for the status


@dataclass(frozen=True)
class PendingOperator:
    """An Operator whose new bundle waits for approval: what it has stays, untouched; its status says why."""

    name: str
    spec: dict[str, Any]
    bundle: dict[str, Any]                   # the bundle that waits
    permissions: list[dict[str, Any]]        # seed 001's status.pending.permissions
    condition: dict[str, str]                # InstallPendingApproval


@dataclass
class SyncResult:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    health: dict[str, OperatorHealth] = field(default_factory=dict)   # per Operator, when judged after applying

    @property
    def changed(self) -> bool:
        return any(c.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED) for c in self.changes)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action == action)


@dataclass
class _Planned:
    operator: str
    obj: Manifest
    ref: ObjectRef
    info: ResourceInfo | None
    action: Action
    diff: tuple[str, ...] = ()
    writer: Kube | None = None   # the identity that writes it (the Operator's installer), else the caller's
    drifted: bool = False        # live differs although it carries the digest of what we apply: someone changed it
    write: bool = True    # False when the live object already is what we would apply


def order_key(ref: ObjectRef) -> tuple[int, str, str, str, str]:
    return (_ORDER.get((ref.group, ref.kind), 9), ref.group, ref.kind, ref.namespace, ref.name)


def sync(kube: Kube | None, desired: list[DesiredOperator], *, dry_run: bool, allow_empty: bool,
         revision: str | None, held: frozenset[str] = frozenset(), pending: tuple[PendingOperator, ...] = (),
         installer_namespace: str = "reconciler-system",
         judge: Callable[[list[DesiredOperator]], Mapping[str, OperatorHealth]] | None = None,
         instance: Instance | None = None) -> SyncResult:
    """Plan, apply and prune; owners in ``held`` keep what they have, untouched (not applied, not pruned).

    ``pending`` Operators wait for approval: held likewise, with their status saying what waits. An
    Operator with ``installer`` permissions is applied while impersonating its installer ServiceAccount
    (not in a dry run, which creates nothing: it plans with the caller's identity).
    ``judge`` (see ``wait.py``) is called after applying and pruning; its verdicts become each
    Operator's Ready, Progressing and Degraded conditions. Only ``instance``'s status objects are read,
    written and pruned; a declaration named like another instance's Operator is refused.
    """
    instance = instance or Instance(namespace=installer_namespace)
    result = SyncResult()
    held = held | {p.name for p in pending}
    _check_unique(desired)
    if kube is None:
        result.notes.append("no cluster configured: compared against an empty cluster; nothing was validated "
                            "by an API server")
        for op in desired:
            for ns in op.namespaces:
                result.changes.append(Change(op.name, ObjectRef("", "Namespace", "", ns, "v1"), Action.CREATED))
            for obj in sorted(op.objects, key=lambda o: order_key(ObjectRef.of(o))):
                result.changes.append(Change(op.name, ObjectRef.of(obj), Action.CREATED))
        return result

    everyone = status_objects.read_all(kube)
    _check_instances(everyone, [op.name for op in desired] + [p.name for p in pending], instance)
    mine = {k: v for k, v in everyone.items() if v.instance == instance.name}
    held = held | _held_renames(mine, pending, {op.name for op in desired})
    recorded = {k: v for k, v in mine.items() if k not in held}
    moves = _moves(desired, recorded)
    if not desired and recorded and not allow_empty:
        raise PolicyError(f"the repository declares no Operators, but {len(recorded)} are installed "
                          f"({', '.join(sorted(recorded))}); refusing to uninstall everything",
                          hint="set 'allowEmpty: true' in reconciler.yaml to remove them all")

    missing_ns = _namespaces(kube, desired, dry_run, result)
    writers: dict[str, Kube] = {}
    if not dry_run:
        writers = installer.ensure_all(kube, installer_namespace, {
            op.name: (op.installer, _shipped_namespaces(op)) for op in desired if op.installer is not None})
    elif any(op.installer is not None for op in desired):
        result.notes.append("a dry run creates no installer ServiceAccounts: objects were checked with the "
                            "reconciler's own identity, not each Operator's")
    owned = {name: {r.key for r in rec.inventory} for name, rec in mine.items()}   # held ones' too
    # A first install (nothing recorded, so nothing running to protect) creates its new objects directly, one
    # request each, without a dry-run pass first: its inventory is recorded before the first write, so a refusal
    # midway leaves a recorded, reported partial install that the next run completes or prunes. An Operator that
    # is installed (or renamed: its objects run) keeps validate-everything-before-writing.
    first = frozenset() if dry_run else frozenset(
        op.name for op in desired
        if op.name not in moves and (op.name not in recorded or not recorded[op.name].inventory))
    planned = _plan(kube, desired, missing_ns, dry_run, result, writers, owned=owned, moves=moves,
                    instance=instance.name, first_install=first)
    for new, old in sorted(moves.items()):
        result.notes.append(f"Operator {old} was renamed to {new} with the same bundle: its objects move to {new} "
                            f"in place (relabelled, not recreated)")
    if pending and not dry_run:
        _record_pending(kube, pending, recorded_all=status_objects.read_all(kube, instance.name), instance=instance)
    if dry_run:
        result.changes.extend(Change(p.operator, p.ref, p.action, diff=p.diff) for p in planned)
        _prune(kube, desired, recorded, dry_run=True, result=result)
        return result

    info = status_objects.ensure_crd(kube)
    # The ApplySet parent lists the kinds and namespaces of the members; written only when they change.
    members = _members(mine, desired)
    if members != _members(mine, []) or not all(rec.labelled for rec in mine.values()):
        write_parent(kube, instance, members)
    stamp = {"instance": instance.name, "part_of": instance.id}
    intents = 0
    for op in desired:  # record intent first: a failed run leaves nothing unexplained or untracked
        previous = recorded.get(op.name)
        before = set(previous.inventory if previous else ())
        if op.name in moves:  # the objects of the old name are this one's from now on
            before |= set(recorded[moves[op.name]].inventory)
        inventory = before | {ObjectRef.of(o) for o in op.objects}
        if inventory != before or (previous is None and before):
            intents += 1
            status_objects.write(kube, info, op.name, op.spec, _status(
                op, revision, inventory, False, "Progressing", f"applying {op.bundle.get('name')}"), previous,
                **stamp)
    all_desired = desired
    try:
        changes, refused = _execute_all(kube, planned)
        result.changes.extend(changes)
        # An Operator with a refused object stops where it is (recorded, reported) and is neither pruned nor
        # marked applied; the others were written through every stage and are finished as usual.
        failed = {p.operator for p, _ in refused}
        if failed:
            failed |= {moves[name] for name in failed if name in moves}
            desired = [op for op in desired if op.name not in failed]
            recorded = {k: v for k, v in recorded.items() if k not in failed}
        remaining = _prune(kube, desired, recorded, dry_run=False, result=result, writers=writers,
                           installer_namespace=installer_namespace)
    except (ClusterError, BundleError) as exc:
        for op in all_desired:
            _mark_failed(kube, info, op, exc, instance)
        raise
    result.health = dict(judge(desired)) if judge is not None else {}
    drift = _drift(planned, recorded, desired)
    # Nothing written since they were read: the status objects are as recorded (a no-op skips the re-read).
    current = status_objects.read_all(kube, instance.name) if intents or result.changed else mine
    final: dict[str, set[ObjectRef]] = {}
    for op in desired:
        kept = remaining.get(op.name, set())
        message = f"{op.bundle.get('name')} applied at {revision or 'an unversioned tree'}"
        if kept:
            message += f"; {len(kept)} object(s) left from earlier versions were kept (see the change list)"
        inventory = {ObjectRef.of(o) for o in op.objects} | kept
        final[op.name] = inventory
        status_objects.write(kube, info, op.name, op.spec,
                             _status(op, revision, inventory, True, "Applied", message, result.health.get(op.name),
                                     drift.get(op.name)),
                             current.get(op.name), **stamp)
    for name in sorted(set(recorded) - {op.name for op in desired}):
        rec = current.get(name)
        if rec is None:
            continue
        if not remaining.get(name):
            installer.remove(kube, installer_namespace, name)
        if remaining.get(name):
            final[name] = remaining[name]
            status_objects.write(kube, info, name, rec.spec, {
                **rec.status, "inventory": _inventory(remaining[name]),
                "conditions": [status_objects.condition(
                    "Ready", False, "Uninstalling",
                    f"declaration removed; {len(remaining[name])} object(s) could not be removed yet")]}, rec,
                **stamp)
        else:
            status_objects.delete(kube, info, name)
    after = {ObjectRef(API_GROUP, status_objects.KIND, "", name) for name in final} | set().union(*final.values()) \
        | _members({k: v for k, v in mine.items() if k in held}, []) \
        | _members({k: v for k, v in current.items() if k in failed}, [])
    if after != members:
        write_parent(kube, instance, after)
    if refused:
        exc = _refused_on_write(refused, planned, {op.name: op for op in all_desired})
        for op in all_desired:
            if op.name in failed:
                _mark_failed(kube, info, op, exc, instance)
        raise exc
    return result


def _check_instances(everyone: dict[str, status_objects.Recorded], names: list[str], instance: Instance) -> None:
    """Refuse a declaration whose name another reconciler instance already uses for an Operator."""
    for name in sorted(set(names)):
        rec = everyone.get(name)
        if rec is not None and rec.instance != instance.name:
            raise PolicyError(f"Operator {name} is declared by reconciler instance {instance.name!r}, but Operator "
                              f"{name} in this cluster belongs to reconciler instance {rec.instance!r}; refusing "
                              f"to take it over", obj=f"Operator {name}",
                              hint=f"rename the declaration, or remove it from the repository of instance "
                                   f"{rec.instance!r} first (each repository reconciled into one cluster needs its "
                                   f"own 'instance' in reconciler.yaml)")


def _same_bundle(bundle: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    return bool(bundle.get("name")) and (bundle.get("package"), bundle.get("name")) == \
        (other.get("package"), other.get("name"))


def _moves(desired: list[DesiredOperator], recorded: dict[str, status_objects.Recorded]) -> dict[str, str]:
    """Renamed declarations: new name -> old name, when the old one is gone and the new one installs the
    same bundle (package and bundle name) it had. Each old name moves to at most one new name."""
    names = {op.name for op in desired}
    gone = {name: rec for name, rec in recorded.items() if name not in names}
    out: dict[str, str] = {}
    for op in desired:
        if op.name in recorded:
            continue
        for name, rec in sorted(gone.items()):
            if name not in out.values() and _same_bundle(op.bundle, rec.status.get("bundle") or {}):
                out[op.name] = name
                break
    return out


def _held_renames(mine: dict[str, status_objects.Recorded], pending: tuple[PendingOperator, ...],
                  declared: set[str]) -> set[str]:
    """An old name whose renamed declaration waits for approval keeps what it has until the new one may move in."""
    out = set()
    for p in pending:
        if p.name in mine:
            continue
        out |= {name for name, rec in mine.items()
                if name not in declared and _same_bundle(p.bundle, rec.status.get("bundle") or {})}
    return out


def _members(recorded: Mapping[str, status_objects.Recorded], desired: list[DesiredOperator]) -> set[ObjectRef]:
    """Everything an instance manages: its status objects and every inventory entry, recorded or desired."""
    out = {ObjectRef(API_GROUP, status_objects.KIND, "", name) for name in recorded}
    out |= {ObjectRef(API_GROUP, status_objects.KIND, "", op.name) for op in desired}
    for rec in recorded.values():
        out |= set(rec.inventory)
    for op in desired:
        out |= {ObjectRef.of(o) for o in op.objects}
    return out


def _drift(planned: list[_Planned], recorded: dict[str, status_objects.Recorded],
           desired: list[DesiredOperator]) -> dict[str, list[ObjectRef]]:
    """Objects changed by someone else: the live copy carries the digest of exactly what we apply now, yet
    differs from it (a changed declaration or bundle brings a new digest, and is not drift)."""
    out: dict[str, list[ObjectRef]] = {op.name: [] for op in desired}
    for p in planned:
        if p.drifted and p.operator in out:
            out[p.operator].append(p.ref)
    return out


def _status(op: DesiredOperator, revision: str | None, inventory: set[ObjectRef], ready: bool, reason: str,
            message: str, health: OperatorHealth | None = None,
            drifted: list[ObjectRef] | None = None) -> dict[str, Any]:
    components: dict[str, Any] = {"matchLabels": {LABEL_OPERATOR: op.name}}
    conditions = [status_objects.condition("Ready", ready, reason, message)]
    if health is not None:
        conditions = status_objects.health_conditions(health, message)
        components["refs"] = [c.to_status() for c in health.components]
    if health is not None and health.operands:
        components["operands"] = [dict(o) for o in health.operands]
    if drifted:
        names = ", ".join(str(r) for r in drifted[:5]) + (f" and {len(drifted) - 5} more" if len(drifted) > 5 else "")
        conditions.append(status_objects.condition(
            "ComponentsDiverge", True, "DriftCorrected",
            f"{len(drifted)} component(s) differed from what was applied and were re-applied: {names}"))
    elif drifted is not None:
        conditions.append(status_objects.condition("ComponentsDiverge", False, "NoDrift",
                                                   "every component matched what was applied"))
    out = {"revision": revision, "bundle": op.bundle, "inventory": _inventory(inventory),
           "components": components, **op.report, "conditions": [*conditions, *map(dict, op.conditions)]}
    if op.metadata:
        out["metadata"] = op.metadata
    return out


def _check_unique(desired: list[DesiredOperator]) -> None:
    owner: dict[tuple[str, str, str, str], str] = {}
    for op in desired:
        for obj in op.objects:
            ref = ObjectRef.of(obj)
            other = owner.setdefault(ref.key, op.name)
            if other != op.name:
                raise PolicyError(f"{ref} would be installed by both Operator {other} and Operator {op.name}",
                                  hint="two Operators cannot own the same object; install the package once, "
                                       "or in different namespaces if its objects are namespaced")


def _namespaces(kube: Kube, desired: list[DesiredOperator], dry_run: bool, result: SyncResult) -> set[str]:
    """Create missing install namespaces (never pruned); return those that do not exist (dry-run)."""
    info = kube.resource("v1", "Namespace")
    assert info is not None
    missing: set[str] = set()
    wanted = {ns for op in desired for ns in op.namespaces}
    if not wanted:
        return missing
    try:  # one LIST, not a GET per namespace
        existing = {item["metadata"]["name"] for item in kube.list(info)}
    except ApiError as exc:
        if exc.status not in (401, 403):
            raise
        existing = {ns for ns in wanted if kube.get(info, "", ns) is not None}
    for op in desired:
        for ns in op.namespaces:
            if ns in missing or ns in existing:
                continue
            missing.add(ns)
            if not dry_run:
                kube.apply(info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                           field_manager=FIELD_MANAGER, dry_run=False)
            result.changes.append(Change(op.name, ObjectRef("", "Namespace", "", ns, "v1"), Action.CREATED,
                                         detail="namespaces are created when missing and never deleted"))
    return missing if dry_run else set()


def _plan(kube: Kube, desired: list[DesiredOperator], missing_ns: set[str], dry_run: bool,
          result: SyncResult, writers: dict[str, Kube] | None = None, *,
          owned: Mapping[str, set[tuple[str, str, str, str]]] | None = None,
          moves: Mapping[str, str] | None = None, instance: str = "default",
          first_install: frozenset[str] = frozenset()) -> list[_Planned]:
    """Decide every object's action before anything is written.

    Live objects are read with one labelled LIST per kind (a GET only for a
    desired object the list did not return: it is missing, or exists without
    our label). An object whose recorded digest matches and whose fields we
    own are intact is unchanged without further requests; every other object
    is validated by a server-side dry-run (concurrently, as the Operator's
    installer when it has one) and compared. A CRD that would be replaced is
    checked for changes that break its custom resources. A new object of an
    Operator in ``first_install`` is not dry-run: its create is its validation.
    """
    new_crd_kinds = {(o["spec"]["group"], o["spec"]["names"]["kind"]) for op in desired for o in op.objects
                     if o.get("kind") == CRD[1] and o.get("apiVersion", "").startswith(CRD[0] + "/")}
    by_name = {op.name: op for op in desired}
    missing_ns = missing_ns | _shipped_namespaces_missing(kube, desired)
    planned: list[_Planned] = []
    errors: list[str] = []
    unverified = 0
    for op in desired:
        writer = (writers or {}).get(op.name, kube)
        for ref, obj in sorted(((ObjectRef.of(o), o) for o in op.objects), key=lambda ro: order_key(ro[0])):
            info = kube.resource(obj["apiVersion"], obj["kind"])
            if info is None and (ref.group, ref.kind) not in new_crd_kinds:
                errors.append(f"{ref}: the cluster does not serve {ref.kind} in {obj['apiVersion']}")
                continue
            planned.append(_Planned(op.name, with_digest(obj), ref, info, Action.CREATED, writer=writer))
    live, partial = _read_live(kube, [p for p in planned if p.info is not None and p.ref.namespace not in missing_ns],
                               errors)
    checks: list[tuple[_Planned, Manifest | None]] = []
    for p in planned:
        if p.info is None or p.ref.namespace in missing_ns:
            unverified += 1  # created after its CRD or namespace: nothing to compare, nothing to dry-run yet
            continue
        current = live.get(p.ref.key)
        if current is not None:
            _check_owner(p.operator, p.ref, current, owned or {}, moves or {}, instance)
            if is_current(p.obj, current):
                p.action, p.write = Action.UNCHANGED, False
                continue
        elif p.operator in first_install:
            continue  # nothing live to protect: created directly, validated by the API server as it is written
        checks.append((p, current))

    def check(item: tuple[_Planned, Manifest | None]) -> list[tuple[str, str]]:
        """Problems as (invalid | unsafe | error, message); none when the object can be applied."""
        p, current = item
        assert p.info is not None
        writer = p.writer or kube
        unsafe: list[tuple[str, str]] = []
        try:
            if current is not None and p.ref.key in partial:  # listed as metadata: the diff needs all of it
                current = kube.get(p.info, p.ref.namespace, p.ref.name)
            if current is not None and (p.ref.group, p.ref.kind) == CRD:
                unsafe = [("unsafe", u) for u in unsafe_crd_changes(kube, by_name[p.operator], p.obj, current)]
            dry = writer.apply(p.info, p.obj, field_manager=FIELD_MANAGER, dry_run=True)
        except ApiError as exc:
            if is_invalid_object(exc):
                return [("invalid", f"{p.ref}: {exc.message}")]
            return [("error", f"{p.ref}: {exc.message}{_as_installer(p, writer, exc)}")]
        if current is not None:
            p.diff = describe_diff(current, dry)
            p.action = Action.CONFIGURED if p.diff else Action.UNCHANGED
            # With no difference, write only to record a new digest (once), so the next run is a fast no-op.
            p.write = bool(p.diff) or _digest(current) != _digest(p.obj)
            p.drifted = bool(p.diff) and _digest(current) == _digest(p.obj)
        return unsafe

    invalid: list[tuple[DesiredOperator, str]] = []
    unsafe: list[str] = []
    for (p, _), problems in zip(checks, _concurrently(check, checks)):
        for category, message in problems:
            if category == "invalid":
                invalid.append((by_name[p.operator], message))
            elif category == "unsafe":
                unsafe.append(message)
            else:
                errors.append(message)
    if invalid:
        raise invalid_objects(invalid)
    if unsafe:
        raise PolicyError("replacing these CustomResourceDefinitions could break custom resources; nothing was "
                          "applied:\n  " + "\n  ".join(unsafe),
                          hint=f"review the change; to accept it for this exact bundle, record it with `reconciler "
                               f"approve REPO OPERATOR --waive crd-upgrade-safety` and commit, or annotate the "
                               f"Operator declaration with {crdsafety.ANNOTATION_ALLOW}: <CRD name>[,...] (or \"*\")")
    if errors:
        raise ClusterError(f"{len(errors)} object(s) were refused by the API server; nothing was applied:\n  "
                           + "\n  ".join(errors))
    if unverified and dry_run:
        result.notes.append(f"{unverified} object(s) could not be checked by server-side dry-run because their "
                            f"namespace or CustomResourceDefinition does not exist yet")
    return planned


INVALID_STATUSES = (400, 422)  # the object itself is wrong (schema, field validation): the bundle's fault


def is_invalid_object(exc: ApiError) -> bool:
    """The API server refused the object itself, not the request: invalid fields, or (server-side apply
    answers 500 for these) a field of the wrong type or one the schema does not declare."""
    return exc.status in INVALID_STATUSES or (exc.status == 500 and "failed to create typed patch object"
                                              in exc.message)


def invalid_objects(invalid: list[tuple[DesiredOperator, str]], state: str = "nothing was applied") -> BundleError:
    """Objects the API server refused as invalid: an error in the bundle (exit 2), naming it and each object."""
    sources = sorted({str(op.bundle.get("source") or op.name) for op, _ in invalid})
    lines = "\n  ".join(f"{line} [bundle {op.bundle.get('source') or op.name} of {op.name}]" for op, line in invalid)
    return BundleError(f"{len(invalid)} object(s) of the bundle were refused by the API server as invalid; "
                       f"{state}:\n  {lines}", path=sources[0],
                       hint="the bundle's manifests do not pass the cluster's validation; fix the bundle or choose "
                            "another version")


def unsafe_crd_changes(kube: Kube, op: DesiredOperator, new: Manifest, live: Manifest) -> list[str]:
    """The unsafe changes replacing ``live`` with ``new`` would make, unless the declaration allows them."""
    if crdsafety.allowed(op.allow_unsafe_crds, ObjectRef.of(new).name):
        return []
    stored = (live.get("status") or {}).get("storedVersions") or []
    served = [v["name"] for v in (live.get("spec") or {}).get("versions") or [] if v.get("served")]
    still = {v["name"] for v in (new.get("spec") or {}).get("versions") or [] if v.get("served", True)}
    if set(served) <= still or not _custom_resource_count(kube, live):
        served = []  # custom resources are only listed when a served version would go
    return [f"{f} [Operator {op.name}]" for f in crdsafety.check_crd_upgrade(live, new, stored, served)]


_Key = tuple[str, str, str, str]
_LIST_OVER_GETS = 4   # this many unlisted objects of one kind in one namespace are read with one LIST
_SELECTOR_NAMES = 100  # Operators named in one label selector; beyond, every labelled object is listed


def _read_live(kube: Kube, planned: list[_Planned], errors: list[str]) -> tuple[dict[_Key, Manifest], set[_Key]]:
    """The live copy of each planned object, by one labelled LIST per kind, then a GET for what it missed.

    Also returns the keys of objects read as metadata only.
    """
    live: dict[_Key, Manifest] = {}
    partial: set[_Key] = set()
    # Metadata decides "unchanged"; only a Secret written through stringData is checked by its stored data.
    full = {p.info for p in planned if p.ref.kind == "Secret" and p.ref.group == "" and "stringData" in p.obj}
    kinds = sorted({p.info for p in planned if p.info is not None}, key=lambda i: (i.group, i.version, i.kind))
    owners: dict[ResourceInfo, set[str]] = {}
    for p in planned:
        owners.setdefault(p.info, set()).add(p.operator)  # type: ignore[arg-type]

    def listed(info: ResourceInfo) -> list[Manifest]:
        # Only the planned Operators' objects: the server encodes (and we decode) nothing of the others'. An
        # object another Operator owns is not returned here; it is read below and refused as a conflict.
        names = sorted(owners.get(info, ()))
        selector = f"{LABEL_OPERATOR} in ({','.join(names)})" if 0 < len(names) <= _SELECTOR_NAMES else LABEL_OPERATOR
        try:
            items = kube.list(info, label_selector=selector, metadata_only=info not in full)
        except ApiError as exc:
            if exc.status not in (401, 403, 404, 405, 406):
                raise
            return []  # not allowed to list this kind everywhere: each object is read on its own below
        return items

    for info, items in zip(kinds, _concurrently(listed, kinds)):
        for item in items:
            key = ObjectRef.of(item).key
            live[key] = item
            if info not in full:
                partial.add(key)
    unlisted = [p for p in planned if p.ref.key not in live]
    # Objects the labelled list did not return are new, or exist without our label (adoption, conflict).
    # Where many share a kind and namespace, one unlabelled metadata LIST there answers for all of them.
    groups: dict[tuple[ResourceInfo, str], list[_Planned]] = {}
    for p in unlisted:
        assert p.info is not None
        groups.setdefault((p.info, p.ref.namespace if p.info.namespaced else ""), []).append(p)
    scopes = [scope for scope, members in groups.items() if len(members) >= _LIST_OVER_GETS]

    def scanned(scope: tuple[ResourceInfo, str]) -> list[Manifest] | None:
        try:
            return kube.list(scope[0], namespace=scope[1], metadata_only=True)
        except ApiError as exc:
            if exc.status not in (401, 403, 404, 405, 406):
                raise
            return None

    for scope, items in zip(scopes, _concurrently(scanned, scopes)):
        if items is None:
            continue
        for item in items:
            key = ObjectRef.of(item).key
            live.setdefault(key, item)
            partial.add(key)
        del groups[scope]
    unlisted = [p for members in groups.values() for p in members]

    def read(p: _Planned) -> tuple[_Planned, Manifest | None, str | None]:
        assert p.info is not None
        try:
            return p, kube.get(p.info, p.ref.namespace, p.ref.name), None
        except ApiError as exc:
            return p, None, f"{p.ref}: {exc.message}"

    for p, obj, error in _concurrently(read, unlisted):
        if error:
            errors.append(error)
        elif obj is not None:
            live[p.ref.key] = obj
    return live, partial


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_POOL_PREFIX = "reconciler-requests"


def _concurrently(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` over ``items`` with up to ``WORKERS`` requests in flight; results in the order of ``items``.

    The worker threads live as long as the process (a loop reconciles every few minutes; starting eight
    threads several times per run costs more than the run's own work on a busy machine). A call made from a
    worker runs in that worker, so nesting cannot wait for itself.
    """
    global _POOL
    if len(items) <= 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [fn(i) for i in items]
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=_POOL_PREFIX)
    return list(_POOL.map(fn, items))


def with_digest(obj: Manifest) -> Manifest:
    """The object as we send it: annotated with a digest of everything else in it."""
    meta = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_DIGEST}
    meta["annotations"] = annotations
    body = {**obj, "metadata": meta}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    meta["annotations"] = {**annotations, ANNOTATION_DIGEST: "sha256:" + hashlib.sha256(text.encode()).hexdigest()}
    return body


def _digest(obj: Manifest) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_DIGEST)


def is_current(sent: Manifest, live: Manifest) -> bool:
    """Whether applying ``sent`` (made by ``with_digest``) would change nothing we own in ``live``.

    Two checks, no request. The live digest annotation equals the one we
    would send: the configuration we last applied is the one we want now.
    And every field of that configuration is still in our field manager's
    set in managedFields: when anyone else changes or removes a field we
    own, the API server moves it out of our set (to theirs), so a field
    still in our set holds the value we applied. Anything the walk cannot
    decide answers False, and the caller falls back to a dry-run.
    """
    meta = live.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    want = (sent.get("metadata") or {}).get("annotations", {}).get(ANNOTATION_DIGEST)
    if not want or (meta.get("annotations") or {}).get(ANNOTATION_DIGEST) != want:
        return False
    entries = [m for m in meta.get("managedFields") or []
               if m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply" and not m.get("subresource")]
    if len(entries) != 1 or entries[0].get("apiVersion") != sent.get("apiVersion") \
            or entries[0].get("fieldsType") != "FieldsV1":
        return False
    fields = entries[0].get("fieldsV1") or {}
    # status is dropped from an apply to the main resource of a kind with a status subresource
    body = {k: v for k, v in sent.items() if k not in ("apiVersion", "kind") and (k != "status" or "f:status" in fields)}
    body["metadata"] = {k: v for k, v in sent["metadata"].items() if k not in ("name", "namespace")}
    if sent.get("kind") == "Secret" and sent.get("apiVersion") == "v1" and "stringData" in body:
        # stringData is write-only: the server folds it into data, where another writer's change lands.
        data = live.get("data") or {}
        if any(data.get(k) != base64.b64encode(str(v).encode()).decode() for k, v in body["stringData"].items()):
            return False
    return _owned(fields, body, live)


def _owned(fields: dict[str, Any], want: Any, live: Any) -> bool:
    """Every field of ``want`` is in the managed-fields set ``fields`` (FieldsV1), matched against ``live``.

    An atomic value (a leaf in the set, whatever its shape) is owned as a
    whole: the server moves the whole leaf to whoever changes any part of it,
    so its presence is enough, and server defaults inside it do not count as
    drift. A null in an applied configuration sets nothing (``creationTimestamp: null``
    in generated manifests), so it is owned by no one and not looked for.
    """
    if isinstance(want, dict):
        if not want:
            return True
        if not fields:  # an atomic map, owned as a whole: a change anywhere in it would have moved it
            return True
        live = live if isinstance(live, dict) else {}  # live values matter only where a whole value is owned
        return all(v is None or (f"f:{k}" in fields and _owned(fields[f"f:{k}"], v, live.get(k)))
                   for k, v in want.items())
    if isinstance(want, list):
        if not want:
            return True
        if not fields:  # an atomic list, likewise
            return True
        live = live if isinstance(live, list) else []
        members = [(k[:2], json.loads(k[2:]), child) for k, child in fields.items() if k[:2] in ("k:", "v:")]
        for item in want:
            if isinstance(item, dict):
                found = [(key, child) for kind, key, child in members if kind == "k:" and isinstance(key, dict)
                         and any(f in item for f in key) and all(item.get(f, v) == v for f, v in key.items())]
                if len(found) != 1:
                    return False
                key, child = found[0]
                twins = [x for x in live if isinstance(x, dict) and all(x.get(f) == v for f, v in key.items())]
                if not _owned(child, item, twins[0] if len(twins) == 1 else None):
                    return False
            elif not any(kind == "v:" and key == item for kind, key, _ in members):
                return False
        return True
    return True  # a scalar we own holds the value we applied


def _shipped_namespaces(op: DesiredOperator) -> set[str]:
    return {ObjectRef.of(o).name for o in op.objects
            if o.get("kind") == "Namespace" and o.get("apiVersion") == "v1"}


def _shipped_namespaces_missing(kube: Kube, desired: list[DesiredOperator]) -> set[str]:
    """Namespaces a bundle ships as objects (plain bundles do) that do not exist yet.

    Objects in them cannot be dry-run before the Namespace is applied; they are
    validated when they are applied, right after it.
    """
    shipped = set().union(*(_shipped_namespaces(op) for op in desired)) if desired else set()
    info = kube.resource("v1", "Namespace") if shipped else None
    return {ns for ns in shipped if info is not None and kube.get(info, "", ns) is None}


def applied_by_us(live: Manifest) -> bool:
    """Whether our field manager applied the object: an Apply entry of ``reconciler`` in its managedFields."""
    return any(m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply"
               for m in (live.get("metadata") or {}).get("managedFields") or [])


def _check_owner(operator: str, ref: ObjectRef, live: Manifest, owned: Mapping[str, set[tuple[str, str, str, str]]],
                 moves: Mapping[str, str], instance: str = "default") -> None:
    """Refuse to apply over an object that is not provably ``operator``'s.

    Provenance, not labels: the object is ours when an inventory of this
    instance lists it and our field manager applied it. It is then
    ``operator``'s own, or the Operator it was renamed from, or another
    Operator's (refused). Anything else is foreign, whatever its labels say,
    and is taken over only when annotated for adoption.
    """
    meta = live.get("metadata") or {}
    holders = sorted(name for name, keys in owned.items() if ref.key in keys)
    ours = applied_by_us(live)
    if ours and (operator in holders or moves.get(operator) in holders):
        return
    if ours and holders:
        raise PolicyError(f"{ref} already exists and belongs to Operator {holders[0]}",
                          hint="two Operators cannot own the same object")
    if (meta.get("annotations") or {}).get(ANNOTATION_ADOPT) == "true":
        return
    label = (meta.get("labels") or {}).get(LABEL_OPERATOR)
    if label:
        why = (f"no Operator of reconciler instance {instance!r} recorded it in its inventory" if not holders else
               f"field manager {FIELD_MANAGER!r} did not apply it (it was replaced since)")
        raise PolicyError(f"{ref} already exists and carries the label {LABEL_OPERATOR}={label}, but {why}; "
                          f"labels do not make an object the reconciler's, refusing to take it over",
                          obj=str(ref),
                          hint=f"delete it, or annotate it with {ANNOTATION_ADOPT}=true to let Operator {operator} "
                               f"adopt it (it will then be pruned with the Operator)")
    raise PolicyError(f"{ref} already exists and was not created by the reconciler; refusing to take it over",
                      hint=f"delete it, or annotate it with {ANNOTATION_ADOPT}=true to let Operator "
                           f"{operator} adopt it (it will then be pruned with the Operator)")


def _execute_all(kube: Kube, planned: list[_Planned]) -> tuple[list[Change], list[tuple[_Planned, ApiError]]]:
    """Write in order of stage (namespaces, CRDs, RBAC, ...); within a stage, objects are applied concurrently.

    A stage holds objects that do not depend on each other; CRDs are all
    applied, then each is waited for until Established, before the next stage.
    An object the API server refuses stops its Operator after that stage (the
    rest of the stage is written); other Operators go on through every stage,
    so one bad first install never leaves an installed Operator half-upgraded.
    Returns the changes made and the refusals.
    """
    stages: dict[int, list[_Planned]] = {}
    done: dict[int, Change] = {}
    for p in planned:
        if p.write:
            stages.setdefault(order_key(p.ref)[0], []).append(p)
        else:
            done[id(p)] = Change(p.operator, p.ref, p.action)
    refused: list[tuple[_Planned, ApiError]] = []
    stopped: set[str] = set()
    for rank in sorted(stages):
        group = [p for p in stages[rank] if p.operator not in stopped]
        outcomes = _concurrently(lambda p: _attempt(kube, p), group)
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


def _attempt(kube: Kube, p: _Planned) -> Change | ApiError:
    try:
        return _execute(kube, p)
    except ApiError as exc:
        return exc


def _refused_on_write(refused: list[tuple[_Planned, ApiError]], planned: list[_Planned],
                      by_name: Mapping[str, DesiredOperator]) -> ReconcilerError:
    """The objects refused while writing, and what of their Operators was written (recorded in the inventory)."""
    invalid = [(by_name[p.operator], f"{p.ref}: {exc.message}") for p, exc in refused if is_invalid_object(exc)]
    owners = sorted({p.operator for p, _ in refused})
    rejected = {id(p) for p, _ in refused}
    last = {name: max(order_key(q.ref)[0] for q, _ in refused if q.operator == name) for name in owners}
    counts = {name: sum(1 for p in planned if p.operator == name and p.write and id(p) not in rejected
                        and order_key(p.ref)[0] <= last[name]) for name in owners}
    written = ", ".join(f"{counts[name]} object(s) of Operator {name}" for name in owners)
    others = sorted(set(by_name) - set(owners))
    state = (f"written before, and recorded in the inventory: {written}; the next reconcile applies the rest and "
             f"removes what is no longer wanted" + (f" (the other Operators were applied: {', '.join(others)})"
                                                    if others else ""))
    if len(invalid) == len(refused):
        return invalid_objects(invalid, state)
    lines = "\n  ".join(f"{p.ref}: {exc.message}{_as_installer(p, p.writer, exc)}" for p, exc in refused)
    return ClusterError(f"{len(refused)} object(s) were refused by the API server; {state}:\n  {lines}")


def _as_installer(p: _Planned, writer: Kube | None, exc: ApiError) -> str:
    """Why a 403 is no surprise when the object was written as the Operator's installer."""
    if exc.status != 403 or writer is None or not writer.impersonated:
        return ""
    return f" (applied as {writer.impersonated}, bound to the permissions approved for Operator {p.operator})"


def _execute(kube: Kube, p: _Planned) -> Change:
    if not p.write:
        return Change(p.operator, p.ref, p.action)
    info = p.info or kube.require_resource(p.obj)
    (p.writer or kube).apply(info, p.obj, field_manager=FIELD_MANAGER, dry_run=False)
    progress.item(f"{p.action.value:<10} {p.ref}")
    return Change(p.operator, p.ref, p.action, diff=p.diff)


def _prune(kube: Kube, desired: list[DesiredOperator], recorded: dict[str, status_objects.Recorded], *,
           dry_run: bool, result: SyncResult, writers: Mapping[str, Kube] | None = None,
           installer_namespace: str = "") -> dict[str, set[ObjectRef]]:
    """Delete recorded objects that left the desired state; return those that must stay recorded.

    An object another desired Operator now claims (a renamed declaration took it over) is not pruned.
    """
    wanted = {op.name: {ObjectRef.of(o).key for o in op.objects} for op in desired}
    claimed = set().union(*wanted.values()) if wanted else set()
    specs = {op.name: op.spec for op in desired}
    remaining: dict[str, set[ObjectRef]] = {}
    for name, rec in sorted(recorded.items()):
        keep = wanted.get(name, set())
        stale = [r for r in rec.inventory if r.key not in keep and r.key not in claimed]
        delete_crs = bool(specs.get(name, rec.spec).get("deleteCustomResources"))
        order = sorted(stale, key=order_key, reverse=True)
        if delete_crs:  # CRDs first, while the operator still runs to finalize their custom resources
            order = sorted(order, key=lambda r: (r.group, r.kind) != CRD)
        for ref in order:
            writer = (writers or {}).get(name) or (  # a removed Operator's installer lives until after pruning
                kube.impersonating(installer.username(installer_namespace, name)) if installer_namespace else None)
            action, detail = _prune_one(kube, name, ref, dry_run, delete_crs, writer)
            if action is None:
                continue
            if action == Action.SKIPPED and detail.startswith("kept:"):
                remaining.setdefault(name, set()).add(ref)
            result.changes.append(Change(name, ref, action, detail=detail))
            if not dry_run:
                progress.item(f"{action.value:<10} {ref}")
    return remaining


def _prune_one(kube: Kube, operator: str, ref: ObjectRef, dry_run: bool, delete_crs: bool = False,
               writer: Kube | None = None) -> tuple[Action | None, str]:
    info = kube.resource(ref.api_version, ref.kind)
    live = kube.get(info, ref.namespace, ref.name) if info else None
    if info is None or live is None:
        return None, ""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_OPERATOR) != operator:
        return Action.SKIPPED, f"no longer labelled {LABEL_OPERATOR}={operator}; left in place"
    if not applied_by_us(live):
        return Action.SKIPPED, (f"not applied by field manager {FIELD_MANAGER!r} (replaced by someone else); "
                                f"left in place")
    if (meta.get("annotations") or {}).get(ANNOTATION_PRUNE) == "disabled":
        released = "" if dry_run else _release(kube, info, ref, live, writer)
        return Action.SKIPPED, f"annotated {ANNOTATION_PRUNE}=disabled; left in place{released}"
    detail = ""
    if (ref.group, ref.kind) == CRD:
        count = _custom_resource_count(kube, live)
        if count and not delete_crs:
            return Action.SKIPPED, (f"kept: {count} custom resource(s) of it still exist; delete them and the "
                                    f"next reconcile removes the CRD, or opt in to deleting them with the "
                                    f"annotation {ANNOTATION_DELETE_CUSTOM_RESOURCES}: \"true\" on the declaration")
        if count:
            detail = f"with its {count} custom resource(s) ({ANNOTATION_DELETE_CUSTOM_RESOURCES})"
    kube.delete(info, ref.namespace, ref.name, dry_run=dry_run)
    if (ref.group, ref.kind) == CRD and not dry_run:
        # The API server finalizes a CRD asynchronously; a reinstall must not meet it half-deleted.
        _wait_gone(kube, info, ref)
    return Action.DELETED, detail


RELEASE_MANAGER = f"{FIELD_MANAGER}-release"


def _release(kube: Kube, info: ResourceInfo, ref: ObjectRef, live: Manifest, writer: Kube | None) -> str:
    """Strip our ownership labels and digest from an object left behind, so nothing re-adopts it silently.

    Returns a note for the change list. Written as the Operator's installer when the reconciler's own
    identity may not (in-cluster it may only read and delete bundle objects).
    """
    labels = (live.get("metadata") or {}).get("labels") or {}
    patch_labels: dict[str, None] = {LABEL_OPERATOR: None, LABEL_PART_OF: None}
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY:
        patch_labels[LABEL_MANAGED_BY] = None
    body = {"metadata": {"labels": patch_labels, "annotations": {ANNOTATION_DIGEST: None}}}
    for client in (kube, writer):
        if client is None:
            continue
        try:
            client.request("PATCH", info.path(ref.namespace, ref.name), body=body,
                           content_type="application/merge-patch+json", query=[("fieldManager", RELEASE_MANAGER)],
                           obj=str(ref))
            return " without the reconciler's labels"
        except ApiError as exc:
            if exc.status == 404:
                return ""
            if exc.status not in (401, 403):
                raise
    return f" (its {LABEL_OPERATOR} label could not be removed: not allowed to patch it)"


def _wait_gone(kube: Kube, info: ResourceInfo, ref: ObjectRef, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while kube.get(info, ref.namespace, ref.name) is not None:
        if time.monotonic() > deadline:
            raise ClusterError(f"{ref} was deleted but is still terminating after {timeout:.0f}s",
                               hint="check its finalizers with kubectl get -o yaml")
        time.sleep(0.1)


def _custom_resource_count(kube: Kube, crd: Manifest) -> int:
    """How many custom resources of the CRD exist: one metadata LIST of one item, plus the count the API
    server reports for the rest (``remainingItemCount``), so exact without listing them all."""
    spec = crd.get("spec") or {}
    served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    if not served:
        return 0
    info = kube.resource(f"{spec['group']}/{served[0]}", spec["names"]["kind"])
    if info is None:
        return 0
    from reconciler.cluster.kube import _METADATA_LIST

    page = kube.request("GET", info.path(""), query=[("limit", "1")], accept=f"{_METADATA_LIST},application/json")
    items = len(page.get("items") or [])
    rest = (page.get("metadata") or {}).get("remainingItemCount")
    if items and rest is None and (page.get("metadata") or {}).get("continue"):
        return len(kube.list(info, metadata_only=True))   # the server did not count: list them all
    return items + int(rest or 0)


def wait_established(kube: Kube, name: str, timeout: float = 60.0) -> None:
    info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert info is not None
    deadline = time.monotonic() + timeout
    while True:
        crd = kube.get(info, "", name) or {}
        conds = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established", {}).get("status") == "True":
            return
        if conds.get("NamesAccepted", {}).get("status") == "False":
            raise ClusterError(f"CustomResourceDefinition {name} was not accepted: "
                               f"{conds['NamesAccepted'].get('message')}")
        if time.monotonic() > deadline:
            raise ClusterError(f"CustomResourceDefinition {name} was not Established within {timeout:.0f}s")
        time.sleep(0.1)


def _record_pending(kube: Kube, pending: tuple[PendingOperator, ...],
                    recorded_all: dict[str, status_objects.Recorded], instance: Instance) -> None:
    """Say on each waiting Operator's status object what waits; what it has installed stays as it is."""
    info = status_objects.ensure_crd(kube)
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
        status_objects.write(kube, info, p.name, p.spec, st, rec, instance=instance.name, part_of=instance.id)


def _mark_failed(kube: Kube, info: ResourceInfo, op: DesiredOperator, exc: ReconcilerError,
                 instance: Instance) -> None:
    try:
        rec = status_objects.read_all(kube, instance.name).get(op.name)
        st = dict(rec.status) if rec else {}
        st["conditions"] = [status_objects.condition("Ready", False, "ApplyFailed", exc.message[:1000])]
        status_objects.write(kube, info, op.name, op.spec, st, rec, instance=instance.name, part_of=instance.id)
    except ClusterError:
        pass  # the original error is what the user needs; the status is best-effort here


def _inventory(refs: Iterable[ObjectRef]) -> list[dict[str, str]]:
    return [r.to_dict() for r in sorted(set(refs), key=order_key)]


SECRET_MASK = "<redacted>"
SECRET_MASK_CHANGED = "<redacted, changed>"


def normalize(obj: Manifest, compare_to: Manifest | None = None) -> dict[str, Any]:
    """An object without server-managed fields and status, Secret values masked.

    A Secret value becomes a fixed mask, never a function of the value (a
    hash prefix would let anyone who reads the diff confirm a guessed
    password offline). With ``compare_to`` (the live object), a value that
    differs from it gets a different fixed mask, so the diff still says
    which keys changed.
    """
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    if ANNOTATION_DIGEST in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != ANNOTATION_DIGEST}
        if not meta["annotations"]:
            del meta["annotations"]
    out["metadata"] = meta
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
        for key in ("data", "stringData"):
            if isinstance(obj.get(key), dict):
                other = (compare_to or {}).get(key)
                other = other if isinstance(other, dict) else {}
                out[key] = {k: SECRET_MASK_CHANGED if k in other and other[k] != v else SECRET_MASK
                            for k, v in obj[key].items()}
    return out


DIFF_LINES = 40   # a diff explains a change; past this many paths the rest is counted, not listed


def describe_diff(live: Manifest, proposed: Manifest, *, limit: int = DIFF_LINES) -> tuple[str, ...]:
    """Human-readable changed paths between the live object and the dry-run result.

    One linear walk of both objects (list items compared by position), so a
    large CRD schema costs milliseconds; at most ``limit`` lines, then a
    count of the rest.
    """
    found: list[tuple[int, str, str]] = []
    _walk(normalize(live), normalize(proposed, live), "", found)
    found.sort()
    lines = [text for _, _, text in found[:limit]]
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more changed path(s)")
    return tuple(lines)


_ADDED, _REMOVED, _CHANGED = 0, 1, 2


def _walk(old: Any, new: Any, path: str, out: list[tuple[int, str, str]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                out.append((_ADDED, where, f"{where}: added {_short(new[key])}"))
            elif key not in new:
                out.append((_REMOVED, where, f"{where}: removed"))
            elif old[key] != new[key]:
                _walk(old[key], new[key], where, out)
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            where = f"{path}[{i}]"
            if i >= len(old):
                out.append((_ADDED, where, f"{where}: added {_short(new[i])}"))
            elif i >= len(new):
                out.append((_REMOVED, where, f"{where}: removed"))
            elif old[i] != new[i]:
                _walk(old[i], new[i], where, out)
    elif old != new or type(old) is not type(new):
        out.append((_CHANGED, path, f"{path}: {_short(old)} -> {_short(new)}"))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."
