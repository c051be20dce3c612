"""A fleet repository: the view of one cluster, and what the stages hold back.

``select_cluster`` turns a repository that declares clusters into what one
cluster sees: the declarations placed there, with their overrides, its own
lockfile ``clusters/<name>/olm.lock`` and its Kubernetes version, so every
stage after it (resolution, conversion, approval, apply) works on one
cluster as on a single-cluster repository.

Promotion is a commit: in every stage but the first, a package's bundle is
held to what the cluster's lockfile pins (written by ``reconciler promote``),
or, for a package it has not pinned yet, to what the previous stage's
clusters pin. ``stage_holds`` says which bundles; the pipeline resolves
against catalogs that offer only those, so nothing newer reaches a later
stage by resolution alone.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler import yamlio
from reconciler.model.lock import LOCK_FILENAME, Lockfile
from reconciler.repo.snapshot import CLUSTERS_DIR, RepoSnapshot
from reconciler.report.words import counted


def cluster_context(root: str | os.PathLike[str], name: str | None) -> str | None:
    """The kubeconfig context of cluster ``name`` (its ``spec.context``, else its name), read before the rest of
    the repository so that a command can connect first; None outside a fleet.

    Raises UsageError, listing the clusters, when a fleet repository gets no ``--cluster`` or an unknown one,
    and when a repository without clusters gets one.
    """
    from reconciler.errors import UsageError
    from reconciler.model.fleet import parse_cluster

    files = cluster_names(root)
    if not files:
        if name is not None:
            raise UsageError(f"--cluster {name}: this repository declares no clusters",
                             hint=f"a fleet repository declares each cluster in {CLUSTERS_DIR}/<name>.yaml; "
                                  f"without one, leave --cluster out")
        return None
    if name is None or name not in files:
        problem = "say which with --cluster NAME" if name is None else f"--cluster {name}: no such cluster"
        raise UsageError(f"this repository drives {counted(len(files), 'cluster')}: {problem}",
                         hint=f"clusters: {', '.join(sorted(files))}")
    rel = f"{CLUSTERS_DIR}/{files[name].name}"
    docs = yamlio.read_all(files[name], rel, strict=True)
    return parse_cluster(docs[0], rel).kube_context if len(docs) == 1 and isinstance(docs[0], dict) else name


def cluster_names(root: str | os.PathLike[str]) -> dict[str, Path]:
    """The clusters a repository declares, by the names of their files (nothing else is read): empty outside a
    fleet."""
    base = Path(root) / CLUSTERS_DIR
    if not base.is_dir():
        return {}
    return {p.name.rsplit(".", 1)[0]: p for p in sorted(base.iterdir())
            if p.is_file() and p.name.endswith((".yaml", ".yml")) and not p.name.startswith(".")}


def lock_file_of(cluster: str) -> str:
    """A cluster's lockfile, relative to the repository root."""
    return f"{CLUSTERS_DIR}/{cluster}/{LOCK_FILENAME}"


_LOCKS: dict[tuple[str, int, int], Lockfile] = {}


def read_lock(root: Path, rel: str) -> Lockfile | None:
    """A cluster's lockfile, parsed once while the file is unchanged (every later-stage cluster of a fleet reads
    the previous stage's lockfiles: without this, resolving a fleet would cost its size squared)."""
    path = root / rel
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    lock = _LOCKS.get(key)
    if lock is None:
        if len(_LOCKS) > 4096:
            _LOCKS.clear()
        lock = _LOCKS[key] = Lockfile.parse(yamlio.read_text(path, rel), rel)
    return lock


def select_cluster(snapshot: RepoSnapshot, name: str | None) -> RepoSnapshot:
    """The repository as one cluster of a fleet sees it: the declarations placed there (overrides applied), its
    own lockfile and Kubernetes version. A repository without clusters is returned as it is.

    Raises UsageError when a fleet repository is read without a cluster, or with one it does not declare.
    """
    from reconciler.errors import UsageError
    from reconciler.model.fleet import for_cluster

    if not snapshot.clusters:
        if name is not None:
            raise UsageError(f"--cluster {name}: this repository declares no clusters",
                             hint=f"a fleet repository declares each cluster in {CLUSTERS_DIR}/<name>.yaml; "
                                  f"without one, leave --cluster out")
        return snapshot
    names = ", ".join(sorted(snapshot.clusters))
    if name is None:
        raise UsageError(f"this repository drives {counted(len(snapshot.clusters), 'cluster')}: say which with --cluster "
                         f"NAME", hint=f"clusters: {names}")
    cluster = snapshot.clusters.get(name)
    if cluster is None:
        raise UsageError(f"--cluster {name}: no such cluster in {CLUSTERS_DIR}/", hint=f"clusters: {names}")
    operators = tuple(d for d in (for_cluster(op, cluster) for op in snapshot.operators) if d is not None)
    lock_file = lock_file_of(name)
    lock = read_lock(snapshot.root, lock_file)
    settings = snapshot.settings
    if cluster.kubernetes_version:
        settings = dataclasses.replace(settings, kubernetes_version=cluster.kubernetes_version)
    return dataclasses.replace(snapshot, operators=operators, lock=lock, lock_file=lock_file, cluster=cluster,
                               settings=settings, operator_stages=operator_stages(snapshot))


@dataclass(frozen=True)
class StageHold:
    """One package a cluster of a later stage may not choose freely, and why.

    ``by`` is the stage whose pins hold it: the cluster's own stage (its lockfile pins it, as the last
    promotion wrote it) or the stage before it among those the Operator is placed on (a package the cluster has
    not pinned yet starts from what that stage runs). ``previous`` is that earlier stage, the one a promotion
    takes the next bundle from.
    """

    operator: str
    package: str
    bundles: frozenset[str]
    versions: tuple[str, ...]
    stage: str          # the cluster's stage
    by: str             # the stage whose pins hold it
    previous: str       # the Operator's stage before this one

    def command(self, repo: str = "REPO") -> str:
        return f"reconciler promote {repo} --to {self.stage} --operator {self.operator}"

    def describe(self, repo: str = "REPO") -> str:
        pins = ", ".join(sorted(self.bundles))
        if self.by == self.stage:
            return (f"{self.operator}: held by stage {self.stage} to {pins} (its lockfile pins it); a newer bundle "
                    f"comes only by promotion from {self.previous}: {self.command(repo)}")
        return (f"{self.operator}: held by stage {self.by} to {pins} (this cluster has not pinned it yet, so it "
                f"starts from what {self.by} runs); a newer bundle comes only by promotion: {self.command(repo)}")


_STAGES: dict[tuple[int, int], tuple[object, object, dict[str, tuple[str, ...]]]] = {}


def operator_stages(snapshot: RepoSnapshot, operators: tuple = ()) -> dict[str, tuple[str, ...]]:
    """Operator -> the stages it is placed on (a cluster of that stage selects it), in reconciler.yaml's order.

    An Operator's first stage is the first of these: there resolution chooses from the catalogs, and every later
    one gets a bundle only by promotion from the one before it in this list, so a stage it is not placed on, or
    that has no cluster, is passed over. Computed once per repository read (every cluster's view asks).
    """
    from reconciler.model.fleet import for_cluster

    operators = operators or snapshot.operators
    key = (id(operators), id(snapshot.clusters))
    hit = _STAGES.get(key)
    if hit is not None and hit[0] is operators and hit[1] is snapshot.clusters:
        return hit[2]
    order = {s: i for i, s in enumerate(snapshot.settings.stages)}
    found: dict[str, set[str]] = {op.name: set() for op in operators}
    for cluster in snapshot.clusters.values():
        if cluster.stage is None:
            continue
        for op in operators:
            if cluster.stage not in found[op.name] and for_cluster(op, cluster) is not None:
                found[op.name].add(cluster.stage)
    out = {name: tuple(sorted(stages, key=order.__getitem__)) for name, stages in found.items()}
    if len(_STAGES) > 64:
        _STAGES.clear()
    _STAGES[key] = (operators, snapshot.clusters, out)
    return out


def previous_stage(snapshot: RepoSnapshot, operator: str | None = None) -> str | None:
    """The stage before this cluster's that a bundle must pass first (for ``operator``: the stage before this one
    among those it is placed on); None in the first stage, and for a cluster without a stage."""
    cluster, stages = snapshot.cluster, snapshot.settings.stages
    if cluster is None or cluster.stage is None:
        return None
    if operator is not None:
        stages = snapshot.operator_stages.get(operator, stages)
        if cluster.stage not in stages:
            return None
    at = stages.index(cluster.stage)
    return stages[at - 1] if at > 0 else None


def lock_owners(entry) -> set[str]:  # noqa: ANN001 - a LockEntry
    """The Operators a lock entry is there for: its own, and for a dependency those that need it."""
    return {entry.operator, *(o.strip() for o in entry.required_by.split(",") if o.strip())}


def hold_details(snapshot: RepoSnapshot, *, promoting: frozenset[str] | bool = False,
                 locks: Mapping[str, Lockfile] | None = None) -> list[StageHold]:
    """Every package this cluster of a fleet is held on, with the stage that holds it.

    Per Operator placed here: in its first stage nothing is held (resolution chooses, as on a single cluster);
    in a later one, its lockfile's pins hold, and a package it has not pinned is held to what the clusters of
    the Operator's previous stage pin (any of them), and is free only when none of them runs it either. For the
    Operators in ``promoting`` (True: all), what the previous stage pins replaces the cluster's own pins: that
    is the promotion. ``locks`` (cluster -> lockfile) stands in for lockfiles not written yet.
    """
    cluster = snapshot.cluster
    if cluster is None or cluster.stage is None:
        return []
    own: dict[str, list] = {}
    for e in snapshot.lock.entries if snapshot.lock else ():
        for o in lock_owners(e):
            own.setdefault(o, []).append(e)
    out: list[StageHold] = []
    seen: set[str] = set()
    stages: dict[str, dict[str, list]] = {}   # stage -> owner -> its clusters' lock entries, read once per view
    for op in snapshot.operators:
        before = previous_stage(snapshot, op.name)
        if before is None:
            continue
        moving = promoting is True or (promoting is not False and op.name in promoting)
        if before not in stages:
            stages[before] = _pins_of_stage(snapshot, before, locks or {})
        earlier = stages[before].get(op.name, [])
        entries = earlier if moving or not own.get(op.name) else own[op.name]
        by = before if moving or not own.get(op.name) else cluster.stage
        packages: dict[str, list] = {}
        for e in entries:
            packages.setdefault(e.package, []).append(e)
        for package, es in sorted(packages.items()):
            if package in seen:
                continue
            seen.add(package)
            out.append(StageHold(op.name, package, frozenset(e.name for e in es),
                            tuple(sorted({e.version for e in es})), cluster.stage, by, before))
    return out


_PINS: dict[tuple, tuple[list, dict[str, list]]] = {}


def _pins_of_stage(snapshot: RepoSnapshot, stage: str, locks: Mapping[str, Lockfile]) -> dict[str, list]:
    """Operator -> the lock entries for it in the lockfiles of ``stage``'s clusters; computed once while those
    lockfiles are the same objects (``read_lock`` returns one object per unchanged file), since every cluster of
    the next stage asks."""
    found = [locks[name] if name in locks else read_lock(snapshot.root, lock_file_of(name))
             for name, other in sorted(snapshot.clusters.items()) if other.stage == stage]
    key = (stage, tuple(id(lock) for lock in found))
    hit = _PINS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], found)):
        return hit[1]
    out: dict[str, list] = {}
    for lock in found:
        for e in lock.entries if lock else ():
            for owner in lock_owners(e):
                out.setdefault(owner, []).append(e)
    if len(_PINS) > 64:
        _PINS.clear()
    _PINS[key] = (found, out)   # the lockfiles are kept, so their ids are not reused while the entry lives
    return out


def stage_holds(snapshot: RepoSnapshot, *, promoting: frozenset[str] | bool = False,
                locks: Mapping[str, Lockfile] | None = None) -> dict[str, frozenset[str]]:
    """Package -> the bundle names a cluster of a later stage may run (empty when nothing is held), refusing a
    hold the cluster's own declaration excludes (``check_holds``); ``hold_details`` says why each is held, and
    takes ``promoting`` and ``locks`` as it does."""
    details = hold_details(snapshot, promoting=promoting, locks=locks)
    check_holds(snapshot, details)
    return {h.package: h.bundles for h in details}


def check_holds(snapshot: RepoSnapshot, holds: list[StageHold]) -> None:
    """Refuse, naming both, a hold that the cluster's own declaration (an override's version range) excludes:
    resolution would only say that no bundle satisfies the range, which is true of the hold, not the catalog."""
    from reconciler.errors import ResolutionError

    declared = {op.name: op for op in snapshot.operators}
    for hold in holds:
        decl = declared.get(hold.operator)
        if decl is None or decl.version is None or hold.package != decl.package:
            continue
        if any(decl.version.contains(v) for v in hold.versions if v):
            continue
        name = snapshot.cluster.name
        raise ResolutionError(
            f"cluster {name} (stage {hold.stage}): Operator {hold.operator} declares version {decl.version} here, "
            f"but stage {hold.by} holds {hold.package} to {', '.join(sorted(hold.bundles))} "
            f"({', '.join(hold.versions)}), which that range excludes",
            path=str(decl.origin), obj=f"Operator {hold.operator}",
            hint=(f"either let {hold.stage} take what {hold.by} runs (widen the version override for this cluster), "
                  f"or give stage {hold.previous} a bundle in {decl.version} first (the same override there), then "
                  f"`{hold.command}`"))


def snapshot_repo(snapshot: RepoSnapshot) -> str:
    """The repository as a command line names it: the working directory's relative path when it is below it."""
    try:
        return str(snapshot.root.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(snapshot.root)
