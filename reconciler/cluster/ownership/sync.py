"""The sync of the Operators of one instance, the one entry the pipeline calls: plan, record intent, write, prune,
judge, record."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

from reconciler.cluster import installer
from reconciler.cluster import status as status_objects
from reconciler.cluster.applyset import Instance, write_parent
from reconciler.cluster.apply.changes import Action, Change, ChangeSet, DesiredOperator, PendingOperator
from reconciler.cluster.apply.diff import created, label_of
from reconciler.cluster.apply.fields import unmatched
from reconciler.cluster.apply.order import order_key
from reconciler.cluster.apply.provenance import check_unique
from reconciler.cluster.apply import Applier, Claims
from reconciler.cluster.apply.plan import shipped_namespaces
from reconciler.cluster.ownership.inventory import (
    check_cluster, check_instances, check_repositories, find_moves, held_renames,
)
from reconciler.cluster.ownership.prune import prune
from reconciler.cluster.ownership.record import (
    drifted_objects, ensure_status_crd, inventory_of, mark_failed, members_of, record_pending, status_for,
)
from reconciler.cluster.ownership import webhooks
from reconciler.cluster.apply.write import refused_on_write
from reconciler.cluster.kube import Kube, ResourceInfo
from reconciler.errors import BundleError, ClusterError, PolicyError, ReconcilerError
from reconciler.model.kube import API_GROUP, ObjectRef

if TYPE_CHECKING:
    from reconciler.cluster.wait import OperatorHealth


@dataclass
class SyncResult(ChangeSet):
    """The change set of one sync, with each Operator's health when it was judged after applying."""

    health: dict[str, OperatorHealth] = field(default_factory=dict)


def sync(kube: Kube | None, desired: list[DesiredOperator], *, dry_run: bool, allow_empty: bool,
         revision: str | None, held: frozenset[str] = frozenset(), pending: tuple[PendingOperator, ...] = (),
         installer_namespace: str = "reconciler-system",
         judge: Callable[[list[DesiredOperator]], Mapping[str, OperatorHealth]] | None = None,
         instance: Instance | None = None) -> SyncResult:
    """Plan, apply and prune; owners in ``held`` keep what they have, untouched (not applied, not pruned).

    ``pending`` Operators wait for approval: held likewise, with their status saying what waits (a dry run
    previews them instead: they come as ``desired`` marked ``waiting``, and so do their changes). An
    Operator with ``installer`` permissions is applied while impersonating its installer ServiceAccount
    (in a dry run, which creates nothing, as the installers already there: see ``installer.for_dry_run``).
    ``judge`` (see ``wait.py``) is called after applying and pruning; its verdicts become each
    Operator's Ready, Progressing and Degraded conditions. Only ``instance``'s status objects are read,
    written and pruned; a declaration named like another instance's Operator is refused.
    """
    instance = instance or Instance(namespace=installer_namespace)
    result = SyncResult()
    if not dry_run:   # what waits for approval is only ever previewed
        desired = [op for op in desired if not op.waiting]
    result.notes.extend(unmatched(desired))
    held = held | {p.name for p in pending}
    check_unique(desired)
    if kube is None:
        result.notes.append("no cluster configured: compared against an empty cluster; nothing was validated "
                            "by an API server")
        for op in desired:
            for ns in sorted(set(op.namespaces) - shipped_namespaces(op)):   # a shipped one is listed below
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                ref = ObjectRef("", "Namespace", "", ns, "v1")
                result.changes.append(Change(op.name, ref, Action.CREATED, unified=created(namespace, label_of(ref))))
            for obj in sorted(op.objects, key=lambda o: order_key(ObjectRef.of(o))):
                ref = ObjectRef.of(obj)
                result.changes.append(Change(op.name, ref, Action.CREATED, unified=created(obj, label_of(ref))))
        return _mark_waiting(result, desired)

    everyone = status_objects.read_all(kube)
    check_instances(everyone, [op.name for op in desired] + [p.name for p in pending], instance)
    mine = {k: v for k, v in everyone.items() if v.instance == instance.name}
    check_cluster(mine, instance)
    for name in check_repositories(mine, {op.name for op in desired} | {p.name for p in pending}, instance):
        result.notes.append(f"Operator {name} was installed before repositories were recorded: it "
                            f"{'would be' if dry_run else 'is'} recorded as this repository's ({instance.repository})")
    held = held | held_renames(mine, pending, {op.name for op in desired})
    recorded = {k: v for k, v in mine.items() if k not in held}
    moves = find_moves(desired, recorded)
    if not desired and recorded and not allow_empty:
        raise PolicyError(f"the repository declares no Operators, but {len(recorded)} are installed "
                          f"({', '.join(sorted(recorded))}); refusing to uninstall everything",
                          hint="set 'allowEmpty: true' in reconciler.yaml to remove them all")

    applier = Applier(kube, dry_run=dry_run, changes=result)
    missing_ns = applier.namespaces(desired)
    created_ns = set() if dry_run else missing_ns
    # A first install (nothing recorded, so nothing of it runs) is checked before the first write like any
    # change, but for its objects in a namespace this run created for it: they touch nothing else, are validated
    # as they are created, and a refusal while writing rolls the first install back whole. A refusal up to the
    # end of planning leaves the cluster as it was: the installers made for first installs and the namespaces
    # made by this run are removed again.
    # An Operator taking over what another installer runs (``adopting``) is never a first install: it is not removed
    # whole when refused, since what it would remove is running.
    rebinding: frozenset[str] = frozenset()   # dry run: installers a real run binds to new permissions first
    first = frozenset() if dry_run else frozenset(
        op.name for op in desired
        if op.name not in moves and not op.adopting
        and (op.name not in recorded or not recorded[op.name].inventory))
    fresh = frozenset((op.name, ns) for op in desired if op.name in first for ns in op.namespaces if ns in created_ns)
    try:
        if not dry_run:
            # Installers of Operators no longer desired and approved go; those still being uninstalled stay until
            # their objects are pruned (as them), below.
            uninstalling = frozenset(set(recorded) - {op.name for op in desired})
            applier.writers = installer.ensure_all(kube, installer_namespace, {
                op.name: (op.installer, shipped_namespaces(op)) for op in desired if op.installer is not None},
                instance=instance.name, keep=uninstalling, elsewhere=frozenset(set(everyone) - set(mine)),
                collect=bool(set(mine) - {op.name for op in desired}))   # an Operator of the instance has ended
        elif any(op.installer is not None for op in desired):
            # A dry run writes nothing, so it plans as the installers already there (the real run's identities,
            # even where a real run first binds one to newly approved permissions); an Operator whose installer a
            # real run would first create is checked as the caller.
            wanted = {op.name: (op.installer, shipped_namespaces(op)) for op in desired if op.installer is not None}
            applier.writers, rebinding = installer.for_dry_run(kube, installer_namespace, wanted,
                                                               instance=instance.name)
            missing = sorted(set(wanted) - set(applier.writers))
            if missing:
                result.notes.append(f"a dry run creates no installer ServiceAccounts: the objects of "
                                    f"{', '.join(missing)} were checked with the reconciler's own identity, not "
                                    f"each Operator's")
        owned = {name: {r.key for r in rec.inventory} for name, rec in mine.items()}   # held ones' too
        planned = applier.plan(desired, Claims(owned, moves, instance.name), missing=missing_ns if dry_run else set(),
                               fresh=fresh, rebinding=rebinding)
    except ReconcilerError:
        undo_preparation(kube, installer_namespace, sorted(first), created_ns)
        raise
    for new, old in sorted(moves.items()):
        result.notes.append(f"Operator {old} was renamed to {new} with the same bundle: its objects move to {new} "
                            f"in place (relabelled, not recreated)")
    if pending and not dry_run:
        record_pending(kube, pending, recorded_all=status_objects.read_all(kube, instance.name), instance=instance)
    if dry_run:
        applier.diff(planned)
        prune(applier, desired, recorded)
        return _mark_waiting(result, desired)

    info = ensure_status_crd(kube)
    # The ApplySet parent lists the kinds and namespaces of the members; written only when they change.
    members = members_of(mine, desired)
    if members != members_of(mine, []) or not all(rec.labelled for rec in mine.values()):
        write_parent(kube, instance, members)
    stamp = instance.stamp()
    intents = 0
    for op in desired:  # record intent first: a failed run leaves nothing unexplained or untracked
        previous = recorded.get(op.name)
        before = set(previous.inventory if previous else ())
        if op.name in moves:  # the objects of the old name are this one's from now on
            before |= set(recorded[moves[op.name]].inventory)
        inventory = before | {ObjectRef.of(o) for o in op.objects}
        if inventory != before or (previous is None and before):
            intents += 1
            status_objects.write(kube, info, op.name, op.spec, status_for(
                op, revision, inventory, False, "Progressing", f"applying {op.bundle.get('name')}"), previous,
                **stamp)
    all_desired = desired
    rolled_back: dict[str, int] = {}
    relaxed = webhooks.relax(kube, planned)   # given their own policy back on every way out, below
    try:
        try:
            refused = applier.apply(planned)
            # An Operator with a refused object stops where it is (recorded, reported) and is neither pruned nor
            # marked applied; the others were written through every stage and are finished as usual.
            failed = {p.operator for p, _ in refused}
            if failed:
                failed |= {moves[name] for name in failed if name in moves}
                desired = [op for op in desired if op.name not in failed]
                recorded = {k: v for k, v in recorded.items() if k not in failed}
                rolled_back = roll_back(applier, [op for op in all_desired if op.name in failed & first], desired,
                                        created_ns, info=info, instance=instance)
            remaining = prune(applier, desired, recorded, installer_namespace=installer_namespace)
        except (ClusterError, BundleError) as exc:
            for op in all_desired:
                mark_failed(kube, info, op, exc, instance)
            raise
        result.health = applier.wait(judge, desired)
    finally:
        if relaxed:
            result.notes.extend(webhooks.restore(applier, relaxed, result.health))
    drift = drifted_objects(planned, recorded, desired)
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
                             status_for(op, revision, inventory, True, "Applied", message, result.health.get(op.name),
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
                **rec.status, "inventory": inventory_of(remaining[name]),
                "conditions": [status_objects.condition(
                    "Ready", False, "Uninstalling",
                    f"declaration removed; {len(remaining[name])} object(s) could not be removed yet")]}, rec,
                **stamp)
        else:
            status_objects.delete(kube, info, name)
    after = {ObjectRef(API_GROUP, status_objects.KIND, "", name) for name in final} | set().union(*final.values()) \
        | members_of({k: v for k, v in mine.items() if k in held}, []) \
        | members_of({k: v for k, v in current.items() if k in failed}, [])
    if after != members:
        write_parent(kube, instance, after)
    if refused:
        exc = refused_on_write(refused, planned, {op.name: op for op in all_desired}, rolled_back)
        for op in all_desired:
            if op.name in failed:
                mark_failed(kube, info, op, exc, instance)
        raise exc
    return result


def roll_back(applier: Applier, refused: list[DesiredOperator], going_on: list[DesiredOperator], created_ns: set[str],
              *, info: ResourceInfo, instance: Instance) -> dict[str, int]:
    """First installs refused while writing, removed whole: what the run wrote of each (pruned as any object
    of ours is: newest first), its installer, and the namespaces this run made that no Operator going on uses.
    Each keeps its status object, with what could not be removed as its inventory. Returns how many objects
    of each were removed."""
    kube = applier.kube
    removed: dict[str, int] = {}
    stamp = instance.stamp()
    for op in refused:
        written = status_objects.Recorded(op.name, tuple(ObjectRef.of(o) for o in op.objects), op.spec, {})
        undone = Applier(kube, dry_run=False, writers=applier.writers)
        left = prune(undone, going_on, {op.name: written}, installer_namespace=instance.namespace).get(op.name, set())
        removed[op.name] = undone.changes.count(Action.DELETED)
        rec = status_objects.read_all(kube, instance.name).get(op.name)
        status_objects.write(kube, info, op.name, op.spec, {**(rec.status if rec else {}),
                                                            "inventory": inventory_of(left)}, rec, **stamp)
    still_used = {ns for op in going_on for ns in op.namespaces}
    undo_preparation(kube, instance.namespace, [op.name for op in refused],
                     {ns for op in refused for ns in op.namespaces if ns in created_ns and ns not in still_used})
    return removed


def undo_preparation(kube: Kube, installer_namespace: str, operators: list[str], namespaces: set[str]) -> None:
    """What a run refused before its first object was written had made: first installs' installers, namespaces.

    A namespace is deleted only when this run created it, and only while it holds nothing but what the API
    server puts in every namespace (its root CA ConfigMap, the default ServiceAccount).
    """
    for name in operators:
        installer.remove(kube, installer_namespace, name)
    if not namespaces:
        return
    info = kube.resource("v1", "Namespace")
    assert info is not None
    for ns in sorted(namespaces):
        if _holds_only_defaults(kube, ns):
            kube.delete(info, "", ns)


_DEFAULT_CONTENT = {("", "ConfigMap", "kube-root-ca.crt"), ("", "ServiceAccount", "default")}


def _holds_only_defaults(kube: Kube, namespace: str) -> bool:
    for api_version, kind in (("v1", "ConfigMap"), ("v1", "ServiceAccount"), ("v1", "Secret"), ("v1", "Service"),
                              ("apps/v1", "Deployment"), ("v1", "Pod"), ("rbac.authorization.k8s.io/v1", "Role"),
                              ("rbac.authorization.k8s.io/v1", "RoleBinding")):
        info = kube.resource(api_version, kind)
        if info is None:
            continue
        for item in kube.list(info, namespace=namespace, metadata_only=True):
            if ("", kind, item["metadata"]["name"]) not in _DEFAULT_CONTENT:
                return False
    return True


def _mark_waiting(result: SyncResult, desired: list[DesiredOperator]) -> SyncResult:
    """A dry run previews Operators that wait for approval as if approved; their changes say so."""
    waiting = {op.name for op in desired if op.waiting}
    if waiting:
        result.changes = [dataclasses.replace(c, waiting=True) if c.operator in waiting else c
                          for c in result.changes]
    return result
