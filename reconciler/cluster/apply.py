"""Sync desired objects to the cluster: plan, apply in stages, prune, record.

The change set says, per object, Created / Configured / Unchanged / Deleted /
Skipped. Everything is planned before anything is written: every object is
server-side dry-run applied and compared with the live object, and ownership
conflicts are detected, so an invalid object or a conflict stops the run with
nothing applied. Then objects are applied with server-side apply under one
field manager, cluster-scoped definitions first (CRDs are waited for until
Established), and finally objects that left the desired state are pruned.

Pruning is conservative. Only objects in an Operator's recorded inventory
that still carry its owner label are deleted; an object annotated
``reconciler.dev/prune: disabled`` is kept; a CRD that still has custom
resources is kept (deleting it would delete them) and stays in the inventory
until it can go. An object that exists but was not created by the reconciler
is never taken over unless annotated ``reconciler.dev/adopt: "true"``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable

from deepdiff import DeepDiff

from reconciler.cluster import status as status_objects
from reconciler.cluster.kube import ApiError, Kube, ResourceInfo
from reconciler.errors import ClusterError, PolicyError
from reconciler.model.kube import (
    ANNOTATION_PRUNE, API_GROUP, FIELD_MANAGER, LABEL_OPERATOR, Manifest, ObjectRef,
)

if TYPE_CHECKING:
    from reconciler.cluster.wait import OperatorHealth

ANNOTATION_ADOPT = f"{API_GROUP}/adopt"
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
    metadata: dict[str, Any] = field(default_factory=dict)  # the CSV's names, version and APIs, for the status


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


def order_key(ref: ObjectRef) -> tuple[int, str, str, str, str]:
    return (_ORDER.get((ref.group, ref.kind), 9), ref.group, ref.kind, ref.namespace, ref.name)


def sync(kube: Kube | None, desired: list[DesiredOperator], *, dry_run: bool, allow_empty: bool,
         revision: str | None, held: frozenset[str] = frozenset(),
         judge: Callable[[list[DesiredOperator]], Mapping[str, OperatorHealth]] | None = None) -> SyncResult:
    """Plan, apply and prune; owners in ``held`` keep what they have, untouched (not applied, not pruned).

    ``judge`` (see ``wait.py``) is called after applying and pruning; its verdicts
    become each Operator's Ready, Progressing and Degraded conditions.
    """
    result = SyncResult()
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

    recorded = {k: v for k, v in status_objects.read_all(kube).items() if k not in held}
    if not desired and recorded and not allow_empty:
        raise PolicyError(f"the repository declares no Operators, but {len(recorded)} are installed "
                          f"({', '.join(sorted(recorded))}); refusing to uninstall everything",
                          hint="set 'allowEmpty: true' in reconciler.yaml to remove them all")

    missing_ns = _namespaces(kube, desired, dry_run, result)
    planned = _plan(kube, desired, missing_ns, dry_run, result)
    if dry_run:
        result.changes.extend(Change(p.operator, p.ref, p.action, diff=p.diff) for p in planned)
        _prune(kube, desired, recorded, dry_run=True, result=result)
        return result

    info = status_objects.ensure_crd(kube)
    for op in desired:  # record intent first: a failed run leaves nothing unexplained or untracked
        previous = recorded.get(op.name)
        before = set(previous.inventory if previous else ())
        inventory = before | {ObjectRef.of(o) for o in op.objects}
        if inventory != before:
            status_objects.write(kube, info, op.name, op.spec, _status(
                op, revision, inventory, False, "Progressing", f"applying {op.bundle.get('name')}"), previous)
    try:
        for p in planned:
            result.changes.append(_execute(kube, p))
        remaining = _prune(kube, desired, recorded, dry_run=False, result=result)
    except ClusterError as exc:
        for op in desired:
            _mark_failed(kube, info, op, exc)
        raise
    result.health = dict(judge(desired)) if judge is not None else {}
    drift = _drift(planned, recorded, desired)
    current = status_objects.read_all(kube)
    for op in desired:
        kept = remaining.get(op.name, set())
        message = f"{op.bundle.get('name')} applied at {revision or 'an unversioned tree'}"
        if kept:
            message += f"; {len(kept)} object(s) left from earlier versions were kept (see the change list)"
        inventory = {ObjectRef.of(o) for o in op.objects} | kept
        status_objects.write(kube, info, op.name, op.spec,
                             _status(op, revision, inventory, True, "Applied", message, result.health.get(op.name),
                                     drift.get(op.name)),
                             current.get(op.name))
    for name in sorted(set(recorded) - {op.name for op in desired}):
        rec = current.get(name)
        if rec is None:
            continue
        if remaining.get(name):
            status_objects.write(kube, info, name, rec.spec, {
                **rec.status, "inventory": _inventory(remaining[name]),
                "conditions": [status_objects.condition(
                    "Ready", False, "Uninstalling",
                    f"declaration removed; {len(remaining[name])} object(s) could not be removed yet")]}, rec)
        else:
            status_objects.delete(kube, info, name)
    return result


def _drift(planned: list[_Planned], recorded: dict[str, status_objects.Recorded],
           desired: list[DesiredOperator]) -> dict[str, list[ObjectRef]]:
    """Objects whose live copy differed from the same bundle's, already applied: changed by someone else."""
    same = {op.name for op in desired if op.name in recorded
            and (recorded[op.name].status.get("bundle") or {}).get("digest") == op.bundle.get("digest")}
    out: dict[str, list[ObjectRef]] = {op.name: [] for op in desired}
    for p in planned:
        if p.operator in same and p.action == Action.CONFIGURED:
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
    for op in desired:
        for ns in op.namespaces:
            if ns in missing or kube.get(info, "", ns) is not None:
                continue
            missing.add(ns)
            if not dry_run:
                kube.apply(info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                           field_manager=FIELD_MANAGER, dry_run=False)
            result.changes.append(Change(op.name, ObjectRef("", "Namespace", "", ns, "v1"), Action.CREATED,
                                         detail="namespaces are created when missing and never deleted"))
    return missing if dry_run else set()


def _plan(kube: Kube, desired: list[DesiredOperator], missing_ns: set[str], dry_run: bool,
          result: SyncResult) -> list[_Planned]:
    new_crd_kinds = {(o["spec"]["group"], o["spec"]["names"]["kind"])
                     for op in desired for o in op.objects if (ObjectRef.of(o).group, ObjectRef.of(o).kind) == CRD}
    missing_ns = missing_ns | _shipped_namespaces_missing(kube, desired)
    planned, errors = [], []
    unverified = 0
    for op in desired:
        for obj in sorted(op.objects, key=lambda o: order_key(ObjectRef.of(o))):
            ref = ObjectRef.of(obj)
            info = kube.resource(obj["apiVersion"], obj["kind"])
            if info is None:
                if (ref.group, ref.kind) not in new_crd_kinds:
                    errors.append(f"{ref}: the cluster does not serve {ref.kind} in {obj['apiVersion']}")
                    continue
                planned.append(_Planned(op.name, obj, ref, None, Action.CREATED))
                unverified += 1
                continue
            try:
                live = kube.get(info, ref.namespace, ref.name)
                if live is not None:
                    _check_owner(op.name, ref, live)
                if ref.namespace in missing_ns:
                    planned.append(_Planned(op.name, obj, ref, info, Action.CREATED))
                    unverified += 1
                    continue
                dry = kube.apply(info, obj, field_manager=FIELD_MANAGER, dry_run=True)
            except ApiError as exc:
                errors.append(f"{ref}: {exc.message}")
                continue
            if live is None:
                planned.append(_Planned(op.name, obj, ref, info, Action.CREATED))
            else:
                diff = describe_diff(live, dry)
                planned.append(_Planned(op.name, obj, ref, info, Action.CONFIGURED if diff else Action.UNCHANGED,
                                        diff))
    if errors:
        raise ClusterError(f"{len(errors)} object(s) were refused by the API server; nothing was applied:\n  "
                           + "\n  ".join(errors))
    # One stage at a time across all Operators: every CRD is established before any custom resource,
    # whichever Operator ships it; within a stage, each Operator's objects keep their order.
    planned.sort(key=lambda p: _ORDER.get((p.ref.group, p.ref.kind), 9))
    if unverified and dry_run:
        result.notes.append(f"{unverified} object(s) could not be checked by server-side dry-run because their "
                            f"namespace or CustomResourceDefinition does not exist yet")
    return planned


def _shipped_namespaces_missing(kube: Kube, desired: list[DesiredOperator]) -> set[str]:
    """Namespaces a bundle ships as objects (plain bundles do) that do not exist yet.

    Objects in them cannot be dry-run before the Namespace is applied; they are
    validated when they are applied, right after it.
    """
    shipped = {ObjectRef.of(o).name for op in desired for o in op.objects
               if (ObjectRef.of(o).group, ObjectRef.of(o).kind) == ("", "Namespace")}
    info = kube.resource("v1", "Namespace") if shipped else None
    return {ns for ns in shipped if info is not None and kube.get(info, "", ns) is None}


def _check_owner(operator: str, ref: ObjectRef, live: Manifest) -> None:
    meta = live.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(LABEL_OPERATOR)
    if owner == operator:
        return
    if owner:
        raise PolicyError(f"{ref} already exists and belongs to Operator {owner}",
                          hint="two Operators cannot own the same object")
    if (meta.get("annotations") or {}).get(ANNOTATION_ADOPT) == "true":
        return
    raise PolicyError(f"{ref} already exists and was not created by the reconciler; refusing to take it over",
                      hint=f"delete it, or annotate it with {ANNOTATION_ADOPT}=true to let Operator "
                           f"{operator} adopt it (it will then be pruned with the Operator)")


def _execute(kube: Kube, p: _Planned) -> Change:
    if p.action == Action.UNCHANGED:
        return Change(p.operator, p.ref, p.action)
    info = p.info or kube.require_resource(p.obj)
    kube.apply(info, p.obj, field_manager=FIELD_MANAGER, dry_run=False)
    if (p.ref.group, p.ref.kind) == CRD:
        wait_established(kube, p.ref.name)
        kube.forget_discovery()
    return Change(p.operator, p.ref, p.action, diff=p.diff)


def _prune(kube: Kube, desired: list[DesiredOperator], recorded: dict[str, status_objects.Recorded], *,
           dry_run: bool, result: SyncResult) -> dict[str, set[ObjectRef]]:
    """Delete recorded objects that left the desired state; return those that must stay recorded."""
    wanted = {op.name: {ObjectRef.of(o).key for o in op.objects} for op in desired}
    remaining: dict[str, set[ObjectRef]] = {}
    for name, rec in sorted(recorded.items()):
        keep = wanted.get(name, set())
        stale = [r for r in rec.inventory if r.key not in keep]
        for ref in sorted(stale, key=order_key, reverse=True):
            action, detail = _prune_one(kube, name, ref, dry_run)
            if action is None:
                continue
            if action == Action.SKIPPED and detail.startswith("kept:"):
                remaining.setdefault(name, set()).add(ref)
            result.changes.append(Change(name, ref, action, detail=detail))
    return remaining


def _prune_one(kube: Kube, operator: str, ref: ObjectRef, dry_run: bool) -> tuple[Action | None, str]:
    info = kube.resource(ref.api_version, ref.kind)
    live = kube.get(info, ref.namespace, ref.name) if info else None
    if info is None or live is None:
        return None, ""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_OPERATOR) != operator:
        return Action.SKIPPED, f"no longer labelled {LABEL_OPERATOR}={operator}; left in place"
    if (meta.get("annotations") or {}).get(ANNOTATION_PRUNE) == "disabled":
        return Action.SKIPPED, f"annotated {ANNOTATION_PRUNE}=disabled; left in place"
    if (ref.group, ref.kind) == CRD:
        count = _custom_resource_count(kube, live)
        if count:
            return Action.SKIPPED, (f"kept: {count}+ custom resource(s) of it still exist; delete them and the "
                                    f"next reconcile removes the CRD")
    kube.delete(info, ref.namespace, ref.name, dry_run=dry_run)
    if (ref.group, ref.kind) == CRD and not dry_run:
        # The API server finalizes a CRD asynchronously; a reinstall must not meet it half-deleted.
        _wait_gone(kube, info, ref)
    return Action.DELETED, ""


def _wait_gone(kube: Kube, info: ResourceInfo, ref: ObjectRef, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while kube.get(info, ref.namespace, ref.name) is not None:
        if time.monotonic() > deadline:
            raise ClusterError(f"{ref} was deleted but is still terminating after {timeout:.0f}s",
                               hint="check its finalizers with kubectl get -o yaml")
        time.sleep(0.1)


def _custom_resource_count(kube: Kube, crd: Manifest) -> int:
    spec = crd.get("spec") or {}
    served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    if not served:
        return 0
    info = kube.resource(f"{spec['group']}/{served[0]}", spec["names"]["kind"])
    return len(kube.list(info, limit=1)) if info else 0


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


def _mark_failed(kube: Kube, info: ResourceInfo, op: DesiredOperator, exc: ClusterError) -> None:
    try:
        rec = status_objects.read_all(kube).get(op.name)
        st = dict(rec.status) if rec else {}
        st["conditions"] = [status_objects.condition("Ready", False, "ApplyFailed", exc.message[:1000])]
        status_objects.write(kube, info, op.name, op.spec, st, rec)
    except ClusterError:
        pass  # the original error is what the user needs; the status is best-effort here


def _inventory(refs: Iterable[ObjectRef]) -> list[dict[str, str]]:
    return [r.to_dict() for r in sorted(set(refs), key=order_key)]


def normalize(obj: Manifest) -> dict[str, Any]:
    """An object without server-managed fields and status, Secret values redacted."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    out["metadata"] = meta
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
        for key in ("data", "stringData"):
            if isinstance(obj.get(key), dict):
                out[key] = {k: redact(v) for k, v in obj[key].items()}
    return out


def redact(value: Any) -> str:
    return "<redacted sha256:" + hashlib.sha256(str(value).encode()).hexdigest()[:12] + ">"


def describe_diff(live: Manifest, proposed: Manifest) -> tuple[str, ...]:
    """Human-readable changed paths between the live object and the dry-run result."""
    dd = DeepDiff(normalize(live), normalize(proposed), ignore_order=False, verbose_level=2)
    lines = []
    for kind, entries in sorted(dd.to_dict().items()):
        for path, value in sorted(entries.items(), key=lambda kv: str(kv[0])):
            where = _dotted(path)
            if kind == "values_changed":
                lines.append(f"{where}: {_short(value['old_value'])} -> {_short(value['new_value'])}")
            elif kind == "type_changes":
                lines.append(f"{where}: {_short(value.get('old_value'))} -> {_short(value.get('new_value'))}")
            elif kind.endswith("_added"):
                lines.append(f"{where}: added {_short(value)}")
            elif kind.endswith("_removed"):
                lines.append(f"{where}: removed")
    return tuple(lines)


def _dotted(path: str) -> str:
    return path.replace("root", "", 1).replace("']['", ".").replace("['", ".").replace("']", "").lstrip(".")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."
