"""The reconcile pipeline: repository -> catalogs -> resolution -> bundles -> approval -> cluster -> status.

Each arrow is a call into one stage's package (the lockfile in ``lock/``, conversion in ``bundle/installed.py``,
what each Operator should be in ``cluster/desired.py``); this package only strings them together, so the CLI
and the in-cluster loop run exactly the same steps. ``resolution.py`` gathers the resolver's inputs (catalogs,
installed state, pins, holds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from reconciler.cli import progress
from reconciler.approve import Decision
from reconciler.approve.stage import approval_notes, approvals
from reconciler.bundle.installed import Installed, convert
from reconciler.cluster.apply import DesiredOperator
from reconciler.cluster.ownership import Request, SyncResult, sync
from reconciler.cluster.desired import desired_state, pending_state
from reconciler.cluster.kube import Kube
from reconciler.cluster import status as status_objects
from reconciler.lock import check_locked, plan_lock, write_lock
from reconciler.model.lock import Lockfile
from reconciler.pipeline.resolution import installed_state, kubernetes_version, load_catalogs, pulling, resolve
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import select_cluster
from reconciler.repo.inputs import Inputs, inputs_of
from reconciler.resolve import Resolution, ResolutionRequest, Resolver, SatResolver

if TYPE_CHECKING:
    from reconciler.cluster.ownership.applyset import Instance
    from reconciler.repo.verify import Trust, Verdict

__all__ = ["Installed", "Outcome", "Prepared", "ResolutionRequest", "SatResolver", "apply", "installed_state",
           "kubernetes_version", "load_catalogs", "prepare", "reconcile", "resolve", "same_intent"]


@dataclass(frozen=True)
class Outcome:
    snapshot: RepoSnapshot
    installs: tuple[Installed, ...]
    lockfile: Lockfile
    lock_written: bool
    sync: SyncResult
    resolution: Resolution | None = None
    decisions: Mapping[str, Decision] = dataclasses.field(default_factory=dict)

    @property
    def pending(self) -> list[Decision]:
        return [d for d in self.decisions.values() if not d.approved]


@dataclass(frozen=True)
class Prepared:
    """Everything read, resolved and converted, before anything is written: what the loop keeps as last good."""

    snapshot: RepoSnapshot
    installs: tuple[Installed, ...]
    lockfile: Lockfile
    resolution: Resolution
    held: frozenset[str] = frozenset()   # owners whose input class only reports (dry-run): left untouched
    decisions: Mapping[str, Decision] = dataclasses.field(default_factory=dict)   # approval, per owner
    notes: tuple[str, ...] = ()   # what the run says beside its changes (approvals not committed)
    verdicts: tuple[Verdict, ...] = ()   # the signatures verified (``trust``)
    inputs: Inputs | None = None         # which paths of the repository this run read (``repo/inputs.py``)


def prepare(repo: str | Path, resolver: Resolver | None = None, *, revision: str | None = None,
            kube: Kube | None = None, locked: bool = False, identity: str | None = None,
            git_dir: Path | None = None, cluster: str | None = None,
            uncommitted_approvals: bool = False, trust: Trust | None = None, tag: str | None = None) -> Prepared:
    """Read, resolve and convert; nothing is written. ``kube`` is only read (installed state, version).

    ``revision`` names the commit when the tree is not a git working copy, ``identity`` and ``git_dir`` the
    repository it was taken from and where its history is (a fetched remote: ``repo/identity.py``);
    ``locked`` refuses a lockfile that the resolution does not reproduce; ``cluster`` names the cluster of a
    fleet repository (``repo/fleet.py``); ``uncommitted_approvals`` counts approvals not committed yet (a
    preview: a real apply counts only committed ones); ``trust`` verifies the commit (or ``tag``) before anything
    of the tree is read (``repo/verify.py``).
    """
    verdicts = verify_source(repo, trust, revision=revision, git_dir=git_dir, tag=tag, kube=kube)
    progress.stage(f"reading {repo}")
    full = read_repository(repo)
    snapshot = select_cluster(full, cluster)
    if revision is not None:
        snapshot = dataclasses.replace(snapshot, revision=revision)
    if identity is not None:
        snapshot = dataclasses.replace(snapshot, identity=snapshot.settings.repository or identity,
                                       git_dir=git_dir or snapshot.git_dir)
    with pulling(snapshot):   # catalog images and bundle images alike, through the repository's mirrors
        resolution = resolve(snapshot, kube, resolver)
        planned = plan_lock(snapshot, resolution)
        if locked:
            check_locked(snapshot, planned)
        installs = convert(snapshot, resolution, planned, kube)
    converted = {i.lock.operator: i.lock for i in installs}
    lockfile = Lockfile(tuple(sorted(converted.get(e.operator, e) for e in planned.entries)))
    held = frozenset(s.owner for s in resolution.selections if not s.apply)
    sources = [*(s.image for s in resolution.selections), *(e.source for e in lockfile.entries),
               *(ref for op in snapshot.operators if op.bundle is not None for ref in op.bundle.refs)]
    return Prepared(snapshot, installs, lockfile, resolution, held,
                    approvals(snapshot, installs, kube, uncommitted=uncommitted_approvals),
                    (*(f"verified: {v}" for v in verdicts), *approval_notes(snapshot, counted=uncommitted_approvals)),
                    verdicts, inputs_of(full, snapshot, sources))


def verify_source(repo: str | Path, trust: Trust | None, *, revision: str | None, git_dir: Path | None,
                  tag: str | None, kube: Kube | None) -> tuple[Verdict, ...]:
    """The signatures of the revision about to be read, as ``trust`` asks (none without it).

    A working tree is verified at its HEAD (and refused with uncommitted changes); a fetched remote's tree at
    ``revision`` in ``git_dir``. What the cluster records as applied (every instance's status objects: this
    tree's settings are not trusted yet) is what a rollback is judged against.
    """
    if trust is None:
        return ()
    from reconciler.repo import git_revision
    from reconciler.repo.identity import git_dir as find_git_dir
    from reconciler.repo.verify import verify_revision

    progress.stage("verifying signatures")
    top = Path(repo).resolve()
    applied = [r.status.get("revision") or "" for r in status_objects.read_all(kube).values()] if kube else []
    return verify_revision(git_dir or find_git_dir(top), revision or git_revision(top), trust, tag=tag,
                           applied=applied)


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
    if any(d.adopted_from or d.adopt_existing for snap in (before.snapshot, after.snapshot) for d in snap.operators):
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
          wait: float = 0.0, on_progress: Callable[[str], object] | None = None) -> Outcome:
    """Write olm.lock (unless told not to: a fetched remote tree is never written to) and sync.

    After applying, every Operator's components are judged (``cluster/wait.py``),
    waiting up to ``wait`` seconds for them to become healthy (0: judge once).
    """
    snapshot, installs, lockfile = prepared.snapshot, prepared.installs, prepared.lockfile
    written = write_lock(snapshot, lockfile) if write_lockfile else False
    progress.stage("comparing with the cluster (server-side dry run)" if dry_run and kube is not None else
                   "comparing with an empty cluster" if kube is None else "applying")

    def judge(desired: list[DesiredOperator]) -> dict:
        from reconciler.cluster.wait import wait_healthy

        assert kube is not None
        paths = {i.selection.owner: i.bundle.operand_conditions for i in installs}
        return wait_healthy(kube, {op.name: op.objects for op in desired}, timeout=wait, progress=on_progress,
                            operands=paths)

    desired, instance = desired_operators(prepared, dry_run=dry_run)
    around = None
    if kube is not None and any(d.adopted_from or d.adopt_existing for d in snapshot.operators):
        from reconciler.adopt.around import Takeovers   # what the repository adopted or consents to take over

        around = Takeovers(kube, snapshot.operators, held=prepared.held, instance=instance.name,
                           revision=snapshot.revision, dry_run=dry_run)
        desired = around.before(desired)
    result = sync(kube, Request(desired, dry_run=dry_run, allow_empty=snapshot.settings.allow_empty,
                                revision=snapshot.revision, held=prepared.held,
                                pending=() if dry_run else pending_state(installs, prepared.decisions),
                                judge=judge), instance)
    if around is not None:
        around.after(desired, result)
    result.notes.extend(prepared.notes)
    return Outcome(snapshot, installs, lockfile, written, result, prepared.resolution, prepared.decisions)


def reconcile(repo: str | Path, kube: Kube | None, *, dry_run: bool, resolver: Resolver | None = None,
              locked: bool = False, write_lock: bool | None = None, wait: float = 0.0,
              on_progress: Callable[[str], object] | None = None, cluster: str | None = None,
              trust: Trust | None = None) -> Outcome:
    """Prepare and apply once. A dry run writes nothing, olm.lock included, unless ``write_lock``."""
    prepared = prepare(repo, resolver, kube=kube, locked=locked, cluster=cluster, uncommitted_approvals=dry_run,
                       trust=trust)
    if write_lock is None:
        write_lock = not dry_run
    return apply(prepared, kube, dry_run=dry_run, write_lockfile=write_lock and not locked, wait=wait,
                 on_progress=on_progress)
