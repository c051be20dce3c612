"""Promotion is a commit: a later stage gets the bundles an earlier stage runs, healthy, for long enough.

Each Operator moves along the stages it is placed on, in ``stages`` order:
its first stage takes bundles from the catalogs (resolution), and every later
one only from the stage before it *among those it is placed on* (a stage it
is not placed on, or one with no cluster, is passed over). ``promote --to
STAGE`` reads every cluster of each Operator's previous stage through its
kubeconfig context (``status.gather``) and requires that the clusters where it
is placed agree: the same bundle, Ready for the soak time, nothing waiting
for approval, in sync with their lockfiles. Then the target stage's clusters
are resolved with those Operators held to what the previous stage pins,
dependencies included, and the lockfiles that change are committed.

What a promotion moves is computed from the lockfiles, not from the
evidence: the commit (and ``--dry-run``, which prints the same text) names
every cluster, Operator and bundle it moves (from -> to), forced or not.

Evidence is typed: a ``Finding`` per cluster says what it showed; its kind
decides whether the Operator is ready, waiting (rolling out, soaking, not yet
applied, an approval to give), refused (unhealthy, clusters that disagree)
or without evidence (unreachable).
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import PolicyError, UsageError
from reconciler.fleet.status import ClusterStatus, FleetStatus, gather
from reconciler.model.lock import Lockfile
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import lock_file_of, select_cluster, stage_holds

DEFAULT_SOAK = 3600.0   # seconds the previous stage must have been healthy: an hour, as a first guard


class Kind(enum.Enum):
    """What one cluster of the previous stage showed about one Operator, and what that means for promoting it."""

    HEALTHY = "healthy"                 # evidence for it
    SOAKING = "soaking"                 # healthy, not for long enough yet: wait
    PROGRESSING = "progressing"         # not healthy yet: wait (Degraded, once the health wait gives up)
    NOT_IN_SYNC = "not-in-sync"         # runs another bundle than its lockfile pins: wait for it to apply
    NOT_INSTALLED = "not-installed"     # placed there, not installed yet: wait
    PENDING_APPROVAL = "pending-approval"   # an approval waits: a person's move
    UNHEALTHY = "unhealthy"             # Degraded or failed: refused
    DISAGREE = "disagree"               # the clusters of the stage run different bundles: refused
    UNREACHABLE = "unreachable"         # no evidence at all
    ABSENT = "absent"                   # runs on no cluster of the previous stage: nothing to promote

    @property
    def waits(self) -> bool:
        return self in (Kind.SOAKING, Kind.PROGRESSING, Kind.NOT_IN_SYNC, Kind.NOT_INSTALLED,
                        Kind.PENDING_APPROVAL, Kind.ABSENT)


@dataclass(frozen=True)
class Finding:
    cluster: str      # "" for a finding about the whole stage (DISAGREE, ABSENT)
    kind: Kind
    text: str


@dataclass
class Evidence:
    """One Operator's evidence from its previous stage: a line per cluster read, and what stands against it."""

    operator: str
    source: str
    bundle: str = ""
    lines: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.kind is not Kind.HEALTHY]

    @property
    def ready(self) -> bool:
        return bool(self.bundle) and not self.problems


@dataclass(frozen=True)
class Move:
    """One Operator's (or dependency's) bundle moving on one cluster of the target stage."""

    cluster: str
    operator: str
    before: str     # bundle name; "" when the cluster did not pin it yet
    after: str      # "" when the promotion removes it

    def text(self) -> str:
        return f"{self.cluster}: {self.operator} {self.before or '(none)'} -> {self.after or '(none)'}"


class Outcome(enum.Enum):
    PROMOTED = "promoted"           # lockfiles change (written and committed unless --dry-run / --no-commit)
    UP_TO_DATE = "up-to-date"       # ready, and the target already pins it: nothing to do
    NOT_READY = "not-ready"         # nothing ready yet: soaking, rolling out, an approval waits
    REFUSED = "refused"             # the evidence is against it
    UNREACHABLE = "unreachable"     # a cluster whose evidence is needed cannot be read


@dataclass
class Promotion:
    target: str
    evidence: list[Evidence]
    lockfiles: dict[str, Lockfile] = field(default_factory=dict)   # target cluster -> its new lockfile
    moves: list[Move] = field(default_factory=list)
    forced: str = ""
    partial: bool = False            # --all: what is ready moves, the rest waits (else all or nothing)
    skipped: list[str] = field(default_factory=list)   # Operators whose first stage is the target
    rewritten: set[str] = field(default_factory=set)     # target clusters whose lockfile changes

    @property
    def source(self) -> str:
        return ", ".join(sorted({ev.source for ev in self.evidence})) or "-"

    @property
    def changed(self) -> list[str]:
        return sorted(self.rewritten)

    @property
    def refused(self) -> list[Finding]:
        return [p for ev in self.evidence for p in ev.problems]

    @property
    def blocked(self) -> bool:
        """Whether nothing is written: the evidence stands against it, not forced, and all or nothing."""
        return bool(self.refused) and not self.forced and not self.partial

    @property
    def outcome(self) -> Outcome:
        if self.moves and not self.blocked:
            return Outcome.PROMOTED
        kinds = {p.kind for p in self.refused}
        if self.forced or not kinds:
            return Outcome.UP_TO_DATE
        if kinds & {Kind.UNHEALTHY, Kind.DISAGREE}:
            return Outcome.REFUSED
        if Kind.UNREACHABLE in kinds:
            return Outcome.UNREACHABLE
        return Outcome.NOT_READY

    def title(self) -> str:
        after: dict[str, set[str]] = {}
        for m in self.moves:
            after.setdefault(m.operator, set()).add(m.after or "(removed)")
        if not after:
            return f"Promote to {self.target}: nothing moves"
        moved = ", ".join(f"{op} {', '.join(sorted(b))}" for op, b in sorted(after.items()))
        return f"Promote {moved} to {self.target}" + (" (forced)" if self.forced and self.refused else "")

    def message(self) -> str:
        lines = [self.title(), ""]
        if self.forced:
            lines += [f"Forced past the evidence: {self.forced}", ""]
        if self.moves:
            lines.append("Moves:")
            lines += [f"  {m.text()}" for m in self.moves]
            lines.append("")
        for source in sorted({ev.source for ev in self.evidence}):
            lines.append(f"Evidence from stage {source}:")
            for ev in (e for e in self.evidence if e.source == source):
                lines += [f"  {line}" for line in ev.lines]
                lines += [f"  ! {p.text}" for p in ev.problems]
            lines.append("")
        if self.skipped:
            lines += [f"First stage here (resolved from the catalogs, not promoted): {', '.join(self.skipped)}", ""]
        lines.append(f"Lockfiles: {', '.join(lock_file_of(c) for c in self.changed) or 'unchanged'}")
        return "\n".join(lines) + "\n"


def parse_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def plan(root: str | Path, target: str, *, soak: float = DEFAULT_SOAK, kubeconfig: str | None = None,
         force_reason: str = "", now: dt.datetime | None = None, status: FleetStatus | None = None,
         snapshot: RepoSnapshot | None = None, operators: tuple[str, ...] = (), partial: bool = False) -> Promotion:
    """What promoting to ``target`` would do and the evidence for it; nothing is written.

    ``operators``: only these (default: every Operator placed on ``target`` for which it is not the first
    stage). ``partial``: promote the Operators that are ready and leave the others (else all or nothing).
    """
    snapshot = snapshot or read_repository(root)
    stages = snapshot.settings.stages
    if target not in stages:
        if stages:
            raise UsageError(f"--to {target}: not a stage of reconciler.yaml (its stages: {', '.join(stages)})",
                             hint=f"promote to one of {', '.join(stages[1:]) or stages[0]}, or add {target} to "
                                  f"stages in reconciler.yaml")
        raise UsageError(f"--to {target}: reconciler.yaml declares no stages",
                         hint="declare the stages in order, e.g. stages: [dev, staging, prod]")
    targets = sorted(n for n, c in snapshot.clusters.items() if c.stage == target)
    if not targets:
        raise UsageError(f"stage {target} has no clusters: there is nothing to promote to",
                         hint="give clusters a spec.stage in clusters/<name>.yaml; a stage without clusters is "
                              "passed over (each Operator moves along the stages it is placed on)")
    placed = snapshot_stages(snapshot)
    on_target = sorted({op.name for t in targets for op in select_cluster(snapshot, t).operators})
    unknown = sorted(set(operators) - set(on_target))
    if unknown:
        raise UsageError(f"--operator {unknown[0]}: not placed on any cluster of stage {target}",
                         hint=f"Operators placed on {target}: {', '.join(on_target) or 'none'}")
    chosen = [op for op in on_target if not operators or op in operators]
    sources = {op: _before(placed.get(op, ()), target) for op in chosen}
    skipped = sorted(op for op, s in sources.items() if s is None)
    if not operators and all(s is None for s in sources.values()) and stages.index(target) == 0:
        raise UsageError(f"{target} is the first stage: it takes bundles from the catalogs, not by promotion",
                         hint=f"`reconciler resolve` updates its lockfiles; promote to {stages[1]} from it"
                              if len(stages) > 1 else None)
    now = now or dt.datetime.now(dt.timezone.utc)
    needed = {s for s in sources.values() if s}
    if status is None and needed:
        status = gather(root, kubeconfig, snapshot=snapshot)
    by_name = {c.name: c for c in status.clusters} if status else {}
    evidence = []
    for op in chosen:
        source = sources[op]
        if source is None:
            continue
        names = sorted(n for n, c in snapshot.clusters.items() if c.stage == source)
        evidence.append(_evidence(op, source, [by_name[n] for n in names], soak, now))
    promotion = Promotion(target, evidence, forced=force_reason, partial=partial, skipped=skipped)
    if promotion.blocked:
        return promotion
    moving = frozenset(ev.operator for ev in evidence if ev.ready or force_reason)
    if not moving:
        return promotion
    for name in targets:
        view = select_cluster(snapshot, name)
        lock = promotion.lockfiles[name] = _held_lock(view, moving)
        promotion.moves += _moves(name, view.lock, lock, moving)
        if view.lock is None or view.lock.render() != lock.render():
            promotion.rewritten.add(name)
    return promotion


def snapshot_stages(snapshot: RepoSnapshot) -> dict[str, tuple[str, ...]]:
    from reconciler.repo.fleet import operator_stages

    return operator_stages(snapshot)


def _before(stages: tuple[str, ...], target: str) -> str | None:
    if target not in stages:
        return None
    at = stages.index(target)
    return stages[at - 1] if at > 0 else None


def _evidence(op: str, source: str, clusters: list[ClusterStatus], soak: float, now: dt.datetime) -> Evidence:
    ev = Evidence(op, source)
    bundles: set[str] = set()
    for c in clusters:
        if not c.reachable:
            ev.findings.append(Finding(c.name, Kind.UNREACHABLE, f"{c.name}: unreachable ({c.error}); a stage "
                                       f"whose clusters cannot be read cannot be promoted from"))
            continue
        cell = c.cells.get(op)
        if cell is None or not cell.placed:
            continue
        if not cell.installed:
            kind = Kind.PENDING_APPROVAL if cell.pending else Kind.NOT_INSTALLED
            ev.findings.append(Finding(c.name, kind, f"{c.name}: {op} is not installed"
                                       + (f" (it waits for approval of {cell.pending})" if cell.pending else "")))
            continue
        bundles.add(cell.bundle)
        since = parse_time(cell.ready_since) if cell.health == "Healthy" else None
        healthy_for = (now - since).total_seconds() if since else 0.0
        ev.lines.append(f"{c.name}: {cell.bundle} {cell.health.lower()}"
                        + (f" for {duration(healthy_for)}" if since else f": {cell.message}"[:600])
                        + (f", revision {cell.revision[:12]}" if cell.revision else ""))
        if cell.health != "Healthy":
            kind = Kind.UNHEALTHY if cell.health == "Degraded" else Kind.PROGRESSING
            ev.findings.append(Finding(c.name, kind, f"{c.name}: {op} {cell.bundle} is not healthy "
                                                     f"({cell.health}: {cell.message})"))
        elif healthy_for < soak:
            ev.findings.append(Finding(c.name, Kind.SOAKING, f"{c.name}: {op} {cell.bundle} has been healthy for "
                                                             f"{duration(healthy_for)}, less than the soak time "
                                                             f"{duration(soak)}"))
        else:
            ev.findings.append(Finding(c.name, Kind.HEALTHY, ev.lines[-1]))
        if cell.pending:
            ev.findings.append(Finding(c.name, Kind.PENDING_APPROVAL,
                                       f"{c.name}: {op} waits for approval of {cell.pending}"))
        if cell.locked and not cell.in_sync:
            ev.findings.append(Finding(c.name, Kind.NOT_IN_SYNC, f"{c.name}: {op} runs {cell.bundle}, but its "
                                                                 f"lockfile pins {cell.locked}: it is not in sync"))
    if len(bundles) > 1:
        ev.findings.append(Finding("", Kind.DISAGREE, f"the clusters of {source} run different bundles of {op}: "
                                                      f"{', '.join(sorted(bundles))}"))
    elif not bundles and not ev.problems:
        ev.findings.append(Finding("", Kind.ABSENT, f"{op} runs on no cluster of {source}: nothing to promote "
                                                    f"for it"))
    ev.bundle = next(iter(bundles)) if len(bundles) == 1 else ""
    return ev


def _held_lock(view: RepoSnapshot, moving: frozenset[str]) -> Lockfile:
    """The target cluster's lockfile, resolved with the ``moving`` Operators held to what their previous stage's
    lockfiles pin (which the evidence showed it runs), dependencies included; the others stay where they are."""
    from reconciler import pipeline

    return pipeline.lock(view, pipeline.resolve(view, None, holds=stage_holds(view, promoting=moving)))


def _moves(cluster: str, before: Lockfile | None, after: Lockfile, moving: frozenset[str]) -> list[Move]:
    old = {e.operator: e.name for e in before.entries} if before else {}
    new = {e.operator: e.name for e in after.entries}
    return [Move(cluster, op, old.get(op, ""), new.get(op, "")) for op in sorted(set(old) | set(new))
            if old.get(op, "") != new.get(op, "")]


def plan_all(root: str | Path, *, soak: float = DEFAULT_SOAK, kubeconfig: str | None = None,
             now: dt.datetime | None = None, snapshot: RepoSnapshot | None = None,
             status: FleetStatus | None = None) -> list[Promotion]:
    """Every stage after the first, each Operator that is ready moving one stage, as a scheduled job runs it.

    All stages are planned from the same reading of the repository and the clusters, before anything is
    written: a bundle moves one stage per run, since the stage it just reached has no evidence for it yet.
    """
    snapshot = snapshot or read_repository(root)
    stages = [s for s in snapshot.settings.stages[1:] if any(c.stage == s for c in snapshot.clusters.values())]
    if status is None and stages:
        status = gather(root, kubeconfig, snapshot=snapshot)
    return [plan(root, s, soak=soak, now=now, status=status, snapshot=snapshot, partial=True) for s in stages]


def message(promotions: list[Promotion]) -> str:
    """One commit's message for one or several stages' promotions: a title naming what moves, then each."""
    moving = [p for p in promotions if p.moves and not p.blocked]
    if len(moving) == 1:
        return moving[0].message()
    title = "Promote " + "; ".join(p.title().removeprefix("Promote ") for p in moving)
    return title + "\n\n" + "\n".join(p.message() for p in moving)


def write(root: str | Path, promotions: list[Promotion], *, commit: bool = True,
          branch: str | None = None) -> str | None:
    """Write the target clusters' lockfiles and commit them (message: the moves and the evidence); with
    ``branch``, commit on that new branch instead and leave the working tree as it is."""
    from reconciler import yamlio
    from reconciler.repo import commit as git

    if any(p.blocked for p in promotions):
        raise PolicyError("refusing to promote", hint="see the evidence")
    root = Path(root)
    files = {lock_file_of(name): p.lockfiles[name].render() for p in promotions for name in p.changed}
    if not files:
        return None
    text = message(promotions)
    if branch:
        repo = git.open_work_tree(root, "the promotion cannot be committed on a branch",
                                  hint="drop --branch and pass --no-commit to only write the files, or `git init` "
                                       "the repository first")
        return git.commit_on_new_branch(repo, root, files, text, branch)
    repo = git.open_work_tree(root, "the promotion cannot be committed") if commit else None
    written = []
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        yamlio.write_atomic(path, content)
        written.append(path)
    return git.commit_paths(repo, written, text) if repo is not None else None


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
