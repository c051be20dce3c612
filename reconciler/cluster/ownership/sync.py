"""The sync of the Operators of one instance, the one entry the pipeline calls: read what the instance
recorded, plan, record intent, write, prune, judge, record.

``sync`` takes a ``Request`` (what the pipeline asks) and runs it as a ``_Run``, one object for what the
steps of one sync share (the client, the applier and its change set, what the instance recorded), so each
step is a method that reads as a paragraph of the sequence in ``_Run.sync``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

from reconciler.cluster.status import gates, objects as status_objects
from reconciler.cluster.status.events import EventRecorder
from reconciler.cluster.status.objects import StatusWriter
from reconciler.cluster.apply import (
    Plan,
    Action, Applier, ChangeSet, Claims, DesiredOperator, PendingOperator, PlanOptions, Planned, check_unique,
    preview_empty, refused_on_write, unmatched,
)
from reconciler.kube.client import ApiError, Kube
from reconciler.cluster.ownership import installer, webhooks
from reconciler.cluster.ownership.applyset import Instance, write_parent
from reconciler.cluster.ownership.inventory import (
    check_cluster, check_instances, check_repositories, find_moves, held_renames,
)
from reconciler.cluster.ownership.prune import prune
from reconciler.cluster.ownership.record import (
    drifted_objects, ensure_status_crd, inventory_of, mark_failed, members_of, record_pending, status_for,
)
from reconciler.errors import EXIT_ERROR, BundleError, ClusterError, PolicyError, ReconcilerError
from reconciler.model.kube import API_GROUP, Manifest, ObjectRef
from reconciler.report.words import counted

if TYPE_CHECKING:
    from reconciler.cluster.health.wait import OperatorHealth
    from reconciler.cluster.ownership.takeover.around import Takeovers
    from reconciler.cluster.ownership.takeover.handback import HandBack

Judge = Callable[[list[DesiredOperator]], Mapping[str, "OperatorHealth"]]


@dataclass(frozen=True)
class Request:
    """What the pipeline asks of one sync.

    ``held`` owners keep what they have, untouched (not applied, not pruned). ``pending`` Operators wait for
    approval: held likewise, with their status saying what waits (a dry run previews them instead: they come
    as ``desired`` marked ``waiting``, and so do their changes). ``judge`` (see ``wait.py``) is called after
    applying and pruning; its verdicts become each Operator's Ready, Progressing and Degraded conditions.
    ``allow_empty``: a repository that declares nothing may uninstall everything. ``adopted`` Operators take
    over an install of OLM (name -> ``olm-v0/<namespace>/<subscription>`` or OLM v1's ClusterExtension), and
    ``consenting`` ones the live objects of their bundle, at their first apply (``takeover/``); ``handback``
    Operators are returned to OLM v0 (``takeover/handback.py``), and held meanwhile.
    """

    desired: list[DesiredOperator]
    dry_run: bool
    allow_empty: bool = False
    revision: str | None = None
    held: frozenset[str] = frozenset()
    pending: tuple[PendingOperator, ...] = ()
    judge: Judge | None = None
    adopted: Mapping[str, str] = field(default_factory=dict)
    consenting: frozenset[str] = frozenset()
    events: EventRecorder | None = None   # announces conditions' transitions: the loop's own, else the sync's
    handback: Mapping[str, HandBack] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """An Operator the sync held back, with why and what to do; the others were synced. ``condition`` is the
    reason its status gives (``Ready=False``), ``exit_code`` what the refusal alone would exit with."""

    operator: str
    reason: str
    hint: str = ""
    condition: str = "TakeoverRefused"
    exit_code: int = EXIT_ERROR


@dataclass
class SyncResult(ChangeSet):
    """The change set of one sync, with each Operator's health when it was judged after applying, and the Operators
    it held back (``refused``: nothing of theirs was written but their status, which says why)."""

    health: dict[str, OperatorHealth] = field(default_factory=dict)
    refused: list[Refused] = field(default_factory=list)


def sync(kube: Kube | None, request: Request, instance: Instance | None = None) -> SyncResult:
    """Plan, apply and prune ``request`` for ``instance`` (the default one unless given).

    An Operator with ``installer`` permissions is applied while impersonating its installer ServiceAccount
    (in a dry run, which creates nothing, as the installers already there: see ``installer.for_dry_run``).
    Only ``instance``'s status objects are read, written and pruned; a declaration named like another
    instance's Operator is refused. Without a cluster (``kube`` None) the result is what a first install
    into an empty cluster would create.
    """
    result = SyncResult()
    # what waits for approval is only ever previewed
    desired = list(request.desired) if request.dry_run else [op for op in request.desired if not op.waiting]
    result.notes.extend(unmatched(desired))
    check_unique(desired)
    if kube is None:
        return _offline(desired, result)
    return _Run(kube, request, instance or Instance(), desired, result).sync()


class _Run:
    """One sync against a cluster: what its steps share, and the steps."""

    def __init__(self, kube: Kube, request: Request, instance: Instance, desired: list[DesiredOperator],
                 result: SyncResult) -> None:
        self.request, self.instance, self.result = request, instance, result
        self.dry_run = request.dry_run
        self.applier = Applier(kube, dry_run=request.dry_run, changes=result)
        self.kube = self.applier.bookkeeping   # what the run writes besides the bundles, entered in the change set
        self.all_desired = desired   # as asked
        self.desired = desired       # less those refused while writing
        self.failed: set[str] = set()
        self.status: StatusWriter | None = None   # the status objects' writer, once their kind is ensured
        self.takeovers: Takeovers | None = None
        if request.adopted or request.consenting - request.held or request.handback:
            # the takeovers' modules only for a run that has one (most runs have none)
            from reconciler.cluster.ownership.takeover.around import Takeovers

            self.takeovers = Takeovers(self.kube, request.adopted, request.consenting - request.held,
                                       instance=instance.name, revision=request.revision, dry_run=request.dry_run,
                                       back=request.handback)

    def sync(self) -> SyncResult:
        self.read_records()
        if self.takeovers is not None:   # what each Operator may apply over; OLM stops asking
            self.desired = self.all_desired = self.takeovers.before(self.desired, self.result.notes)
            self.hold_refused()
        planned = self.prepare()
        for new, old in sorted(self.moves.items()):
            self.result.notes.append(f"Operator {old} was renamed to {new} with the same bundle: its objects move "
                                     f"to {new} in place (relabelled, not recreated)")
        if self.request.pending and not self.dry_run:
            record_pending(self.ensure_status(), self.request.pending, self.mine)   # nothing written since read
        if self.dry_run:
            self.applier.preview(planned)
            prune(self.applier, self.desired, self.recorded)
            if self.takeovers is not None:
                self.takeovers.after(self.desired, self.result, self.write_again)
            return _mark_waiting(self.result, self.desired)
        self.ensure_status()
        members = members_of(self.mine, self.desired)
        if members != members_of(self.mine, []) or not all(rec.labelled for rec in self.mine.values()):
            write_parent(self.kube, self.instance, members)   # written only when the members' kinds change
        intents = self.record_intent()
        refused, rolled_back, remaining = self.write(planned)
        final, current = self.record(planned, remaining, intents)
        after = {ObjectRef(API_GROUP, status_objects.KIND, "", name) for name in final} | set().union(
            *final.values()) | members_of({k: v for k, v in self.mine.items() if k in self.held}, []) \
            | members_of({k: v for k, v in current.items() if k in self.failed}, [])
        if after != members:
            write_parent(self.kube, self.instance, after)
        if refused:
            exc = refused_on_write(refused, planned, {op.name: op for op in self.all_desired}, rolled_back)
            self.mark_failed(exc, self.failed)
            self.record_refused()
            raise exc
        if self.takeovers is not None:   # OLM lets go of what is now the reconciler's
            self.takeovers.after(self.desired, self.result, self.write_again)
        self.record_refused()
        return self.result

    def hold_refused(self) -> None:
        """The Operators whose takeover is refused keep what they have, untouched, and the others go on."""
        assert self.takeovers is not None
        for r in self.takeovers.refused:
            self.result.refused.append(Refused(r.operator, r.reason, r.hint, "HandbackRefused"
                                               if r.source.startswith("handback/") else "TakeoverRefused"))
        names = {r.operator for r in self.result.refused}
        if names and not self.desired and not self.request.pending:
            # every Operator asked for is held back: nothing is written at all, and the refusal says why for each
            raise PolicyError(f"{counted(len(names), 'Operator')} held back, so nothing was written:\n  "
                              + "\n  ".join(f"Operator {r.operator}: {r.reason}" for r in self.result.refused),
                              hint="; ".join(dict.fromkeys(r.hint for r in self.result.refused if r.hint)))
        if names:
            self.held = self.held | names
            self.recorded = {k: v for k, v in self.recorded.items() if k not in names}

    def record_refused(self) -> None:
        """Each held-back Operator that has a status object says why there (Ready=False, TakeoverRefused or
        ApplyRefused); nothing else of it is written. One that has none gets none: a status object records which
        repository and instance an Operator is, and one held back has not been installed by this one yet (the
        run's output and exit code say why)."""
        refused = [r for r in self.result.refused if r.operator in self.mine]
        if self.dry_run or not refused:
            return
        status = self.ensure_status()
        asked = {op.name: op for op in self.request.desired}
        for r in refused:
            op = asked.get(r.operator)
            if op is None:
                continue
            rec = self.mine[r.operator]
            st = dict(rec.status)
            message = f"{r.reason}; {r.hint}"[:1000]
            st["conditions"] = [status_objects.condition("Ready", False, r.condition, message)]
            status.write(r.operator, op.spec, st, rec)

    def write_again(self, operator: str, obj: Manifest) -> None:
        """Apply one of ``operator``'s objects again, as its writer (what a takeover's OLM reaction undid)."""
        self.applier.write(operator, self.applier.kube.require_resource(obj), obj)

    def read_records(self) -> None:
        """What the cluster's status objects record: every instance's, checked, and this instance's own."""
        names = {op.name for op in self.desired}
        asked = names | {p.name for p in self.request.pending}
        self.everyone = status_objects.read_all(self.kube)
        check_instances(self.everyone, sorted(asked), self.instance)
        self.mine = {k: v for k, v in self.everyone.items() if v.instance == self.instance.name}
        check_cluster(self.mine, self.instance)
        for name in check_repositories(self.mine, asked, self.instance):
            self.result.notes.append(f"Operator {name} was installed before repositories were recorded: it "
                                     f"{'would be' if self.dry_run else 'is'} recorded as this repository's "
                                     f"({self.instance.repository})")
        self.held = self.request.held | set(self.request.handback) | {p.name for p in self.request.pending} \
            | held_renames(self.mine, self.request.pending, names)
        self.recorded = {k: v for k, v in self.mine.items() if k not in self.held}
        self.moves = find_moves(self.desired, self.recorded)
        if not self.desired and self.recorded and not self.request.allow_empty:
            raise PolicyError(f"the repository declares no Operators, but {len(self.recorded)} are installed "
                              f"({', '.join(sorted(self.recorded))}); refusing to uninstall everything",
                              hint="set 'allowEmpty: true' in reconciler.yaml to remove them all")

    def prepare(self) -> list[Planned]:
        """Namespaces and installers in place, then every object's action planned.

        A first install (nothing recorded, so nothing of it runs) is checked before the first write like any
        change, but for its objects in a namespace this run created for it: they touch nothing else, are
        validated as they are created, and a refusal while writing rolls the first install back whole. A
        refusal up to the end of planning leaves the cluster as it was: the installers made for first
        installs and the namespaces made by this run are removed again. An Operator taking over what another
        installer runs (``adopting``) is never a first install: what it would remove is running.
        """
        desired, recorded = self.desired, self.recorded
        missing_ns = self.applier.namespaces(desired)
        self.created_ns = set() if self.dry_run else missing_ns
        self.first = frozenset() if self.dry_run else frozenset(
            op.name for op in desired
            if op.name not in self.moves and not op.adopting
            and (op.name not in recorded or not recorded[op.name].inventory))
        fresh = frozenset((op.name, ns) for op in desired if op.name in self.first
                          for ns in op.namespaces if ns in self.created_ns)
        try:
            rebinding = self.bind_installers()
            owned = {name: {r.key for r in rec.inventory} for name, rec in self.mine.items()}   # held ones' too
            plan = self.applier.plan(desired, Claims(owned, self.moves, self.instance.name), PlanOptions(
                frozenset(missing_ns) if self.dry_run else frozenset(), fresh, rebinding))
        except ReconcilerError:
            undo_preparation(self.kube, self.instance.namespace, sorted(self.first), self.created_ns)
            raise
        return self.hold_back(plan) if plan.refused else plan.planned

    def hold_back(self, plan: Plan) -> list[Planned]:
        """The Operators the plan refused, and those that depend on them, held back alone: nothing of theirs is
        written (what this run made for a refused first install is removed again), their status says why, and
        the others go on. When the plan refuses every Operator, nothing is written at all: the refusal is
        raised, as it always was."""
        names = set(plan.refused)
        if names >= {op.name for op in self.desired}:
            undo_preparation(self.kube, self.instance.namespace, sorted(self.first), self.created_ns)
            raise _all_refused(plan.refused)
        reasons = {name: (exc.render(), exc.hint or "", exc.exit_code) for name, exc in plan.refused.items()}
        bundles = {op.name: str(op.bundle.get("name") or "") for op in self.desired}
        while True:   # what needs a refused Operator's bundle waits with it
            held = {bundles[n] for n in names}
            more = {op.name for op in self.desired if op.name not in names
                    and any(d.get("bundle") in held for d in op.report.get("dependencies") or [])}
            if not more:
                break
            for name in sorted(more):
                needed = sorted(n for n in names if any(d.get("bundle") == bundles[n]
                                                        for d in next(o for o in self.desired
                                                                      if o.name == name).report["dependencies"]))
                reasons[name] = (f"held back with {', '.join(needed)}, whose bundle it depends on and which was "
                                 f"refused", "", EXIT_ERROR)
            names |= more
        for name in sorted(names):
            reason, hint, code = reasons[name]
            self.result.refused.append(Refused(name, reason, hint, "ApplyRefused", code))
        refused_ops = [op for op in self.desired if op.name in names]
        self.desired = [op for op in self.desired if op.name not in names]
        self.all_desired = [op for op in self.all_desired if op.name not in names]
        self.held = self.held | names
        self.recorded = {k: v for k, v in self.recorded.items() if k not in names}
        still_used = {ns for op in self.desired for ns in op.namespaces}
        made = {ns for op in refused_ops for ns in op.namespaces if ns in self.created_ns and ns not in still_used}
        undo_preparation(self.kube, self.instance.namespace, sorted(self.first & names), made)
        self.created_ns -= made
        self.first = self.first - names
        return [p for p in plan.planned if p.operator not in names]

    def bind_installers(self) -> frozenset[str]:
        """Give the applier each Operator's installer to write as; returns, in a dry run, the installers a real
        run would first bind to newly approved permissions."""
        wanted = {op.name: (op.installer, op.shipped_namespaces) for op in self.desired if op.installer is not None}
        names = {op.name for op in self.desired}
        if not self.dry_run:
            # Installers of Operators no longer desired and approved go; those still being uninstalled stay
            # until their objects are pruned (as them).
            ending = frozenset(set(self.recorded) - names)
            self.applier.writers = installer.ensure_all(
                self.kube, self.instance.namespace, wanted, instance=self.instance.name, keep=ending,
                elsewhere=frozenset(set(self.everyone) - set(self.mine)),
                collect=bool(set(self.mine) - names))   # an Operator of the instance has ended
            for name in ending:   # an Operator being uninstalled is pruned as its installer, kept until then
                self.applier.writers[name] = self.applier.impersonating(
                    installer.username(self.instance.namespace, name))
            return frozenset()
        if not wanted:
            return frozenset()
        # A dry run writes nothing, so it plans as the installers already there (the real run's identities, even
        # where a real run first binds one to newly approved permissions); an Operator whose installer a real
        # run would first create is checked as the caller.
        self.applier.writers, rebinding = installer.for_dry_run(self.kube, self.instance.namespace, wanted,
                                                                instance=self.instance.name)
        missing = sorted(set(wanted) - set(self.applier.writers))
        if missing:
            self.result.notes.append(f"a dry run creates no installer ServiceAccounts: the objects of "
                                     f"{', '.join(missing)} were checked with the reconciler's own identity, not "
                                     f"each Operator's")
        return rebinding

    def record_intent(self) -> int:
        """Record each Operator's inventory, old and new, before anything is written, so a failed run leaves
        nothing unexplained or untracked; returns how many status objects were written."""
        intents = 0
        for op in self.desired:
            previous = self.recorded.get(op.name)
            before = set(previous.inventory if previous else ())
            if op.name in self.moves:  # the objects of the old name are this one's from now on
                before |= set(self.recorded[self.moves[op.name]].inventory)
            inventory = before | {ObjectRef.of(o) for o in op.objects}
            if inventory != before or (previous is None and before):
                intents += 1
                self.write_status(op.name, op.spec, status_for(
                    op, self.request.revision, inventory, (False, "Progressing", f"applying {op.bundle.get('name')}")),
                    previous)
        return intents

    def write(self, planned: list[Planned]) -> tuple[list[tuple[Planned, ApiError]], dict[str, int],
                                                     dict[str, set[ObjectRef]]]:
        """Write the plan, prune and judge: returns the refused objects, how many objects of each refused
        first install were rolled back, and what pruning had to keep.

        An Operator with a refused object stops where it is (recorded, reported) and is neither pruned nor
        marked applied; the others are written through every stage and finished as usual.
        """
        rolled_back: dict[str, int] = {}
        relaxed = webhooks.relax(self.kube, planned)   # given their own policy back on every way out, below
        try:
            try:
                refused = self.applier.apply(planned)
                self.failed = {p.operator for p, _ in refused}
                if self.failed:
                    self.failed |= {self.moves[name] for name in self.failed if name in self.moves}
                    self.desired = [op for op in self.desired if op.name not in self.failed]
                    self.recorded = {k: v for k, v in self.recorded.items() if k not in self.failed}
                    assert self.status is not None
                    rolled_back = roll_back(self.applier, [op for op in self.all_desired
                                                           if op.name in self.failed & self.first],
                                            self.desired, self.created_ns, status=self.status, instance=self.instance)
                remaining = prune(self.applier, self.desired, self.recorded)
            except (ClusterError, BundleError) as exc:
                self.mark_failed(exc, {op.name for op in self.all_desired})
                raise
            self.result.health = self.applier.wait(self.request.judge, self.desired)
        finally:
            if relaxed:
                self.result.notes.extend(webhooks.restore(self.applier, relaxed, self.result.health))
        return refused, rolled_back, remaining

    def record(self, planned: list[Planned], remaining: dict[str, set[ObjectRef]],
               intents: int) -> tuple[dict[str, set[ObjectRef]], dict[str, status_objects.Recorded]]:
        """Each Operator's status after writing: what was applied, its health and drift; an Operator no longer
        declared goes with its installer once nothing of it is left. Returns every recorded inventory and the
        status objects as they were before this step."""
        drift = drifted_objects(planned, self.recorded, self.desired)
        # Nothing written since they were read: the status objects are as recorded (a no-op skips the re-read).
        current = status_objects.read_all(self.kube, self.instance.name) if intents or self.result.changed \
            else self.mine
        final: dict[str, set[ObjectRef]] = {}
        revision = self.request.revision
        for op in self.desired:
            kept = remaining.get(op.name, set())
            message = f"{op.bundle.get('name')} applied at {revision or 'an unversioned tree'}"
            if kept:
                message += f"; {counted(len(kept), 'object')} left from earlier versions were kept (see the change list)"
            final[op.name] = {ObjectRef.of(o) for o in op.objects} | kept
            status = status_for(op, revision, final[op.name], (True, "Applied", message),
                                self.result.health.get(op.name), drift.get(op.name))
            if op.metadata and (gate := gates.upgradeable(self.kube, str(op.bundle.get("namespace") or ""),
                                                          str(op.bundle.get("name") or ""))):
                status["conditions"].append(gate)   # what the operator's own OperatorCondition says
            self.write_status(op.name, op.spec, status, current.get(op.name))
        assert self.status is not None
        for name in sorted(set(self.recorded) - {op.name for op in self.desired}):
            rec = current.get(name)
            if rec is None:
                continue
            left = remaining.get(name)
            if not left:
                installer.remove(self.kube, self.instance.namespace, name)
                self.status.delete(name)
                continue
            final[name] = left
            self.write_status(name, rec.spec, {
                **rec.status, "inventory": inventory_of(left),
                "conditions": [status_objects.condition(
                    "Ready", False, "Uninstalling",
                    f"declaration removed; {counted(len(left), 'object')} could not be removed yet")]}, rec)
        return final, current

    def ensure_status(self) -> StatusWriter:
        """The writer of this instance's status objects, their CRD installed or updated first (once a run)."""
        if self.status is None:
            self.status = StatusWriter(self.kube, ensure_status_crd(self.kube), self.instance.stamp(),
                                       self.request.events or EventRecorder())
        return self.status

    def write_status(self, name: str, spec: dict, status: dict, previous: status_objects.Recorded | None) -> None:
        assert self.status is not None
        self.status.write(name, spec, status, previous)

    def mark_failed(self, exc: ReconcilerError, names: set[str]) -> None:
        if self.status is None:
            return   # refused before anything of the run was recorded: the error says it all
        for op in self.all_desired:
            if op.name in names:
                mark_failed(self.status, op, exc)


def roll_back(applier: Applier, refused: list[DesiredOperator], going_on: list[DesiredOperator], created_ns: set[str],
              *, status: StatusWriter, instance: Instance) -> dict[str, int]:
    """First installs refused while writing, removed whole: what the run wrote of each (pruned as any object
    of ours is: newest first), its installer, and the namespaces this run made that no Operator going on uses.
    Each keeps its status object, with what could not be removed as its inventory. Returns how many objects
    of each were removed."""
    kube = status.kube
    removed: dict[str, int] = {}
    for op in refused:
        written = status_objects.Recorded(op.name, tuple(ObjectRef.of(o) for o in op.objects), op.spec, {})
        before = applier.changes.count(Action.DELETED, op.name)
        left = prune(applier, going_on, {op.name: written}).get(op.name, set())
        removed[op.name] = applier.changes.count(Action.DELETED, op.name) - before
        rec = status_objects.read_all(kube, instance.name).get(op.name)
        status.write(op.name, op.spec, {**(rec.status if rec else {}), "inventory": inventory_of(left)}, rec)
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


def _offline(desired: list[DesiredOperator], result: SyncResult) -> SyncResult:
    """No cluster: everything desired is created, in the order it would be applied, into missing namespaces."""
    result.notes.append("no cluster configured: compared against an empty cluster; nothing was validated by an "
                        "API server")
    result.changes.extend(preview_empty(desired))
    return _mark_waiting(result, desired)


def _mark_waiting(result: SyncResult, desired: list[DesiredOperator]) -> SyncResult:
    """A dry run previews Operators that wait for approval as if approved; their changes say so."""
    waiting = {op.name for op in desired if op.waiting}
    if waiting:
        result.changes = [dataclasses.replace(c, waiting=True) if c.operator in waiting else c
                          for c in result.changes]
    return result


def _all_refused(refused: dict[str, ReconcilerError]) -> ReconcilerError:
    """Every Operator refused: one Operator's error as it is, several as one error of the gravest kind (the
    cluster's refusals exit 3, the rest 2) that lists each."""
    if len(refused) == 1:
        return next(iter(refused.values()))
    errors = [refused[name] for name in sorted(refused)]
    worst = max(errors, key=lambda e: e.exit_code)
    combined = type(worst)("; ".join(f"Operator {name}: {refused[name].message}" for name in sorted(refused)),
                           hint=worst.hint)
    return combined
