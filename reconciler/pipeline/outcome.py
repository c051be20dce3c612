"""Applying a prepared run: the lockfile written, the sync asked of the ownership policy, and what it did.

``apply`` turns what ``prepare`` made into what the engine is asked to make
true (``desired.py``) and calls the ownership policy's ``sync``, which plans,
takes over what was adopted, writes, prunes, judges health and records
status; ``reconcile`` is both halves once. ``same_intent`` tells the loop
that a new revision would ask exactly what the last one applied.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from reconciler.approve import Decision
from reconciler.bundle.installed import Installed
from reconciler.cluster.apply import DesiredOperator
from reconciler.cluster.ownership import Request, SyncResult, sync
from reconciler.lock import write_lock
from reconciler.model.lock import Lockfile
from reconciler.pipeline.desired import desired_state, pending_state
from reconciler.pipeline.prepared import Prepared, prepare
from reconciler.pipeline.source import Source
from reconciler.report import progress
from reconciler.repo import RepoSnapshot
from reconciler.resolve import Resolution, Resolver

if TYPE_CHECKING:
    from reconciler.cluster.ownership.applyset import Instance
    from reconciler.cluster.status.events import EventRecorder
    from reconciler.kube.client import Kube
    from reconciler.repo.verify import UntrustedRevision


@dataclass(frozen=True)
class Outcome:
    """What one apply did: the run it applied (``prepared``), whether it wrote the lockfile, and the sync's
    change set."""

    prepared: Prepared
    lock_written: bool
    sync: SyncResult

    @property
    def snapshot(self) -> RepoSnapshot:
        return self.prepared.snapshot

    @property
    def installs(self) -> tuple[Installed, ...]:
        return self.prepared.installs

    @property
    def lockfile(self) -> Lockfile:
        return self.prepared.lockfile

    @property
    def resolution(self) -> Resolution:
        return self.prepared.resolution

    @property
    def decisions(self) -> Mapping[str, Decision]:
        return self.prepared.decisions

    @property
    def untrusted(self) -> UntrustedRevision | None:
        """A dry run's revision that a real run refuses, and why."""
        return self.prepared.untrusted

    @property
    def verdicts(self) -> tuple:
        """The signatures verified (``repo.verify.Verdict``), said above the plan."""
        return self.prepared.verdicts

    @property
    def signature_notes(self) -> tuple[str, ...]:
        """What the run says of the revision's signature: the refusal a real run makes, else each signature
        verified; these lead the notes (``-o json``), and the text says them above the plan."""
        refused = (f"not verified, a real run refuses it: {self.untrusted.render()}",) if self.untrusted else ()
        return refused + tuple(f"verified: {v}" for v in self.verdicts)

    @property
    def pending(self) -> list[Decision]:
        return [d for d in self.decisions.values() if not d.approved]


def desired_operators(prepared: Prepared, *, dry_run: bool) -> tuple[list[DesiredOperator], Instance]:
    """What the engine is asked to make true (a dry run previews what waits for approval too), and the
    reconciler instance it is asked of."""
    from reconciler.cluster.ownership.applyset import Instance
    from reconciler.repo.identity import has_commit

    snapshot = prepared.snapshot
    instance = Instance(snapshot.settings.instance, snapshot.settings.installer_namespace, snapshot.identity,
                        cluster=snapshot.cluster.name if snapshot.cluster else "",
                        knows_revision=lambda revision: has_commit(snapshot.git_dir, revision))
    return desired_state(prepared.installs, prepared.resolution, prepared.decisions, part_of=instance.id,
                         preview=dry_run, settings=snapshot.settings), instance


def same_intent(before: Prepared, after: Prepared) -> bool:
    """Whether applying ``after`` would ask of the cluster, and record about it, exactly what applying ``before``
    did, but the revision: the same objects to apply, the same status to write (the resolution's updates,
    deprecations and dependencies, the approvals waiting), the same Operators held, under the same instance.

    Conditions are compared without their transition times. A repository that adopts or takes over what
    another installer runs is never the same: its apply acts on live objects beyond the desired ones.
    """
    if any(d.adopted_from or d.adopt_existing or d.handback for snap in (before.snapshot, after.snapshot)
           for d in snap.operators):
        return False
    if before.lockfile.render() != after.lockfile.render() or before.held != after.held:
        return False   # the common change, told without building either desired state

    def intent(prepared: Prepared) -> tuple:
        desired, instance = desired_operators(prepared, dry_run=False)
        pending = pending_state(prepared.installs, prepared.decisions)
        settings = prepared.snapshot.settings
        return (tuple(dataclasses.replace(d, conditions=tuple(map(_untimed, d.conditions))) for d in desired),
                tuple(dataclasses.replace(p, condition=_untimed(p.condition)) for p in pending),
                (instance.name, instance.namespace, instance.repository, instance.cluster), settings.allow_empty)

    return intent(before) == intent(after)


def _untimed(condition: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in condition.items() if k != "lastTransitionTime"}


def apply(prepared: Prepared, kube: Kube | None, *, dry_run: bool, write_lockfile: bool = True,
          wait: float = 0.0, on_progress: Callable[[str], object] | None = None,
          events: EventRecorder | None = None) -> Outcome:
    """Write olm.lock (unless told not to: a fetched remote tree is never written to) and sync.

    ``events`` records the Events the sync announces (a long-running caller keeps one, so a repeat is counted
    on the Event it wrote before); without it the sync has its own.

    After applying, every Operator's components are judged (``cluster/health/wait.py``),
    waiting up to ``wait`` seconds for them to become healthy (0: judge once).
    """
    snapshot, installs, lockfile = prepared.snapshot, prepared.installs, prepared.lockfile
    written = write_lock(snapshot, lockfile) if write_lockfile else False
    progress.stage("comparing with the cluster (server-side dry run)" if dry_run and kube is not None else
                   "comparing with an empty cluster" if kube is None else "applying")

    def judge(desired: list[DesiredOperator]) -> dict:
        from reconciler.cluster.health.wait import wait_healthy

        assert kube is not None
        paths = {i.selection.owner: i.bundle.operand_conditions for i in installs}
        return wait_healthy(kube, {op.name: op.objects for op in desired}, timeout=wait, progress=on_progress,
                            operands=paths)

    desired, instance = desired_operators(prepared, dry_run=dry_run)
    # Operators handed back to OLM v0 are held, neither applied nor pruned, while the sync hands them back
    back = {}
    if any(d.handback for d in snapshot.operators):
        from reconciler.cluster.ownership.takeover.handback import intents as handback_intents   # rarely needed

        back = handback_intents(snapshot, installs, lockfile)
    result = sync(kube, Request([op for op in desired if op.name not in back], dry_run=dry_run,
                                allow_empty=snapshot.settings.allow_empty,
                                revision=snapshot.revision, held=prepared.held,
                                pending=() if dry_run else tuple(p for p in pending_state(installs, prepared.decisions)
                                                                 if p.name not in back),
                                judge=judge,
                                adopted={d.name: d.adopted_from for d in snapshot.operators if d.adopted_from},
                                consenting=frozenset(d.name for d in snapshot.operators if d.adopt_existing),
                                events=events, handback=back),
                  instance)
    outcome = Outcome(prepared, written, result)
    result.notes[:0] = outcome.signature_notes
    result.notes.extend(prepared.notes)
    return outcome


def reconcile(source: Source | str | Path, kube: Kube | None, *, dry_run: bool, resolver: Resolver | None = None,
              locked: bool = False, write_lock: bool | None = None, wait: float = 0.0,
              on_progress: Callable[[str], object] | None = None) -> Outcome:
    """Prepare and apply once. A dry run writes nothing, olm.lock included, unless ``write_lock``; it previews
    (``prepare``), so a revision whose signature does not verify is reported in its notes instead of refused."""
    prepared = prepare(source, kube, resolver=resolver, locked=locked, preview=dry_run)
    if write_lock is None:
        write_lock = not dry_run
    return apply(prepared, kube, dry_run=dry_run, write_lockfile=write_lock and not locked, wait=wait,
                 on_progress=on_progress)
