"""Promotion is a commit: a later stage gets the bundles the previous stage runs, healthy, for long enough.

``promote --to STAGE`` reads every cluster of the previous stage through its
kubeconfig context (``status.gather``). For each Operator placed on the
target stage, the previous stage must be unanimous: every cluster where it is
placed runs the same bundle, is Ready, has been Ready for the soak time, has
nothing waiting for approval and runs what its own lockfile pins. Then the
target stage's clusters are resolved held to exactly those bundles, and their
lockfiles are written and committed with the evidence in the message.
Anything else refuses, cluster by cluster, saying why. An unreachable
cluster of the previous stage is no evidence: the stage cannot be promoted
from. ``--force --reason`` records an override instead of the evidence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import PolicyError, UsageError
from reconciler.fleet.status import FleetStatus, gather
from reconciler.model.lock import Lockfile
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import select_cluster

DEFAULT_SOAK = 3600.0   # seconds the previous stage must have been healthy: an hour, as a first guard


@dataclass
class Evidence:
    operator: str
    bundle: str = ""
    lines: list[str] = field(default_factory=list)   # one per cluster of the previous stage
    problems: list[str] = field(default_factory=list)


@dataclass
class Promotion:
    source: str
    target: str
    evidence: list[Evidence]
    lockfiles: dict[str, Lockfile] = field(default_factory=dict)   # target cluster -> its new lockfile
    changed: list[str] = field(default_factory=list)                # target clusters whose lockfile changes
    forced: str = ""

    @property
    def refused(self) -> list[str]:
        return [p for ev in self.evidence for p in ev.problems]

    def message(self) -> str:
        moved = ", ".join(f"{ev.operator} {ev.bundle}" for ev in self.evidence if ev.bundle) or "nothing"
        lines = [f"Promote {moved} to {self.target}", ""]
        if self.forced:
            lines += [f"Forced past the evidence: {self.forced}", ""]
        lines.append(f"Evidence from stage {self.source}:")
        for ev in self.evidence:
            lines += [f"  {line}" for line in ev.lines]
            lines += [f"  ! {p}" for p in ev.problems]
        lines += ["", f"Lockfiles: {', '.join(f'clusters/{c}/olm.lock' for c in self.changed) or 'unchanged'}"]
        return "\n".join(lines) + "\n"


def parse_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def plan(root: str | Path, target: str, *, soak: float = DEFAULT_SOAK, kubeconfig: str | None = None,
         force_reason: str = "", now: dt.datetime | None = None, status: FleetStatus | None = None,
         snapshot: RepoSnapshot | None = None) -> Promotion:
    """What promoting to ``target`` would do and the evidence for it; nothing is written."""
    snapshot = snapshot or read_repository(root)
    stages = snapshot.settings.stages
    if target not in stages:
        raise UsageError(f"--to {target}: not a stage of reconciler.yaml ({', '.join(stages) or 'none declared'})",
                         hint="declare the stages in order, e.g. stages: [dev, staging, prod]")
    at = stages.index(target)
    if at == 0:
        raise UsageError(f"{target} is the first stage: it takes bundles from the catalogs, not by promotion",
                         hint=f"`reconciler resolve` updates its lockfiles; promote to {stages[1]} from it"
                              if len(stages) > 1 else None)
    source = stages[at - 1]
    sources = sorted(n for n, c in snapshot.clusters.items() if c.stage == source)
    targets = sorted(n for n, c in snapshot.clusters.items() if c.stage == target)
    if not sources or not targets:
        raise UsageError(f"stage {source if not sources else target} has no clusters",
                         hint="give clusters a spec.stage in clusters/<name>.yaml")
    now = now or dt.datetime.now(dt.timezone.utc)
    status = status or gather(root, kubeconfig, snapshot=snapshot)
    by_name = {c.name: c for c in status.clusters}
    placed_on_target = sorted({op.name for t in targets for op in select_cluster(snapshot, t).operators})
    evidence = []
    for op in placed_on_target:
        ev = Evidence(op)
        bundles: set[str] = set()
        for name in sources:
            c = by_name[name]
            if not c.reachable:
                ev.problems.append(f"{name}: unreachable ({c.error}); a stage whose clusters cannot be read "
                                   f"cannot be promoted from")
                continue
            cell = c.cells.get(op)
            if cell is None or not cell.placed:
                continue
            if not cell.installed:
                ev.problems.append(f"{name}: {op} is not installed")
                continue
            bundles.add(cell.bundle)
            since = parse_time(cell.ready_since) if cell.health == "Healthy" else None
            healthy_for = (now - since).total_seconds() if since else 0.0
            ev.lines.append(f"{name}: {cell.bundle} {cell.health.lower()}"
                            + (f" for {_duration(healthy_for)}" if since else f": {cell.message}"[:200])
                            + (f", revision {cell.revision[:12]}" if cell.revision else ""))
            if cell.health != "Healthy":
                ev.problems.append(f"{name}: {op} {cell.bundle} is not healthy ({cell.health}: {cell.message})")
            elif healthy_for < soak:
                ev.problems.append(f"{name}: {op} {cell.bundle} has been healthy for {_duration(healthy_for)}, "
                                   f"less than the soak time {_duration(soak)}")
            if cell.pending:
                ev.problems.append(f"{name}: {op} waits for approval of {cell.pending}")
            if cell.locked and not cell.in_sync:
                ev.problems.append(f"{name}: {op} runs {cell.bundle}, but its lockfile pins {cell.locked}: "
                                   f"it is not in sync")
        if len(bundles) > 1:
            ev.problems.append(f"the clusters of {source} run different bundles of {op}: "
                               f"{', '.join(sorted(bundles))}")
        elif not bundles and not ev.problems:
            ev.problems.append(f"{op} runs on no cluster of {source}: nothing to promote for it")
        ev.bundle = next(iter(bundles)) if len(bundles) == 1 else ""
        evidence.append(ev)
    promotion = Promotion(source, target, evidence, forced=force_reason)
    if promotion.refused and not force_reason:
        return promotion
    for name in targets:
        promotion.lockfiles[name] = _held_lock(snapshot, name)
        view = select_cluster(snapshot, name)
        if view.lock is None or view.lock.render() != promotion.lockfiles[name].render():
            promotion.changed.append(name)
    return promotion


def _held_lock(snapshot: RepoSnapshot, cluster: str) -> Lockfile:
    """The target cluster's lockfile, resolved held to what the previous stage's lockfiles pin (which the
    evidence showed it runs), dependencies included."""
    from reconciler import pipeline
    from reconciler.lock import plan_lock
    from reconciler.repo.fleet import stage_holds

    view = select_cluster(snapshot, cluster)
    return plan_lock(view, pipeline.resolve(view, None, holds=stage_holds(view, promoting=True)))


def write(root: str | Path, promotion: Promotion, *, commit: bool = True) -> str | None:
    """Write the target clusters' lockfiles; commit them (message: the evidence) unless ``commit`` is False."""
    from reconciler import yamlio
    from reconciler.repo.fleet import lock_file_of

    if promotion.refused and not promotion.forced:
        raise PolicyError("refusing to promote", hint="see the evidence")
    root = Path(root)
    written = []
    for name in promotion.changed:
        path = root / lock_file_of(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        yamlio.write_atomic(path, promotion.lockfiles[name].render())
        written.append(path)
    if not commit or not written:
        return None
    return _commit(root, written, promotion.message())


def _commit(root: Path, paths: list[Path], message: str) -> str:
    import pygit2

    found = pygit2.discover_repository(str(root))
    if not found:
        raise UsageError("the repository is not in a git work tree, so the promotion cannot be committed",
                         path=str(root), hint="pass --no-commit to only write the lockfiles")
    repo = pygit2.Repository(found)
    workdir = Path(repo.workdir).resolve()
    index = repo.index
    index.read()
    for path in paths:
        index.add(path.resolve().relative_to(workdir).as_posix())
    index.write()
    try:
        sig = repo.default_signature
    except (KeyError, pygit2.GitError):
        sig = pygit2.Signature("reconciler", "reconciler@localhost")
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, index.write_tree(), parents))


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
