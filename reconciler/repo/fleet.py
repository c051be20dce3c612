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
from pathlib import Path

from reconciler import yamlio
from reconciler.model.lock import LOCK_FILENAME, Lockfile
from reconciler.repo import CLUSTERS_DIR, RepoSnapshot


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
        raise UsageError(f"this repository drives {len(files)} clusters: {problem}",
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
        raise UsageError(f"this repository drives {len(snapshot.clusters)} clusters: say which with --cluster "
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
                               settings=settings)


def previous_stage(snapshot: RepoSnapshot) -> str | None:
    """The stage before this cluster's, whose clusters a bundle must pass first; None in the first stage."""
    cluster, stages = snapshot.cluster, snapshot.settings.stages
    if cluster is None or cluster.stage is None:
        return None
    at = stages.index(cluster.stage)
    return stages[at - 1] if at > 0 else None


def stage_holds(snapshot: RepoSnapshot, *, promoting: bool = False) -> dict[str, frozenset[str]]:
    """Package -> the bundle names a cluster of a later stage may run; empty when nothing is held.

    Its own lockfile's pins hold; a package it has not pinned is held to what the previous stage's clusters pin
    (any of them), and is free only when no earlier cluster runs it either. When ``promoting``, what the
    previous stage pins replaces the cluster's own pins: that is the promotion.
    """
    before = previous_stage(snapshot)
    if before is None:
        return {}
    holds: dict[str, set[str]] = {}
    for e in snapshot.lock.entries if snapshot.lock else ():
        holds.setdefault(e.package, set()).add(e.name)
    earlier: dict[str, set[str]] = {}
    for name, other in sorted(snapshot.clusters.items()):
        if other.stage != before:
            continue
        lock = read_lock(snapshot.root, lock_file_of(name))
        for e in lock.entries if lock else ():
            earlier.setdefault(e.package, set()).add(e.name)
    for package, names in earlier.items():
        if promoting:
            holds[package] = set(names)
        else:
            holds.setdefault(package, set(names))
    return {p: frozenset(n) for p, n in holds.items()}
