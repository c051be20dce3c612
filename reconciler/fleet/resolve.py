"""Resolving every cluster of a fleet, once per distinct set of facts.

A cluster's resolution depends only on what it is given: the declarations
placed on it (overrides applied), its Kubernetes version, its lockfile (what
it runs, offline) and the bundles its stage holds it to. Clusters whose facts
are equal get the same lockfile, so the fleet is resolved once per *shape*,
and catalogs are loaded once for all. The cost grows with the number of
shapes, plus a digest and a file write per cluster.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.model.lock import Lockfile
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.errors import ReconcilerError
from reconciler.model.fleet import ClusterDecl
from reconciler.repo.fleet import select_cluster, stage_holds


@dataclass
class FleetResolution:
    """Per cluster: its lockfile and whether it was written; ``shapes``: how many resolutions were made."""

    lockfiles: dict[str, Lockfile] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    shape_of: dict[str, str] = field(default_factory=dict)   # cluster -> digest of its facts

    @property
    def shapes(self) -> int:
        return len(set(self.shape_of.values()))


def facts_digest(view: RepoSnapshot, holds: dict[str, frozenset[str]] | None = None) -> str:
    """What a cluster's resolution depends on, as one digest (the repository's catalogs are common to all)."""
    if holds is None:
        holds = stage_holds(view)
    h = hashlib.sha256()
    h.update(repr(view.operators).encode())
    h.update(b"\0" + str(view.settings.kubernetes_version).encode())
    h.update(b"\0" + (repr(view.lock.entries).encode() if view.lock else b""))
    h.update(b"\0" + repr(sorted((p, sorted(n)) for p, n in holds.items())).encode())
    return h.hexdigest()


def in_cluster(exc: ReconcilerError, cluster: ClusterDecl) -> ReconcilerError:
    """``exc`` saying which cluster of the fleet (and stage) it is about, unless it says so already."""
    where = f"cluster {cluster.name}" + (f" (stage {cluster.stage})" if cluster.stage else "")
    if not exc.message.startswith(f"cluster {cluster.name}"):
        exc.message = f"{where}: {exc.message}"
        exc.args = (exc.render(),)
    return exc


def resolve_fleet(root: str | Path, *, write: bool = True, snapshot: RepoSnapshot | None = None) -> FleetResolution:
    """Every cluster's lockfile, offline (what each runs is its lockfile); written when ``write``.

    Clusters are taken in stage order, so a later stage's holds see the lockfiles the earlier stages just got.
    All or nothing: every cluster is resolved before any lockfile is written, and an error names its cluster.
    """
    from reconciler import pipeline
    from reconciler.lock import write_lock

    snapshot = snapshot or read_repository(root)
    stages = {name: i for i, name in enumerate(snapshot.settings.stages)}
    order = sorted(snapshot.clusters.values(),
                   key=lambda c: (stages.get(c.stage, -1) if c.stage else -1, c.name))
    catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    done: dict[str, Lockfile] = {}
    out = FleetResolution()
    views = {}
    for cluster in order:
        view = views[cluster.name] = select_cluster(snapshot, cluster.name)
        try:
            holds = stage_holds(view, locks=out.lockfiles)
            key = facts_digest(view, holds)
            lockfile = done.get(key)
            if lockfile is None:
                lockfile = done[key] = pipeline.lock(view, pipeline.resolve(view, None, catalogs=catalogs,
                                                                            holds=holds))
        except ReconcilerError as exc:
            raise in_cluster(exc, cluster) from None
        out.lockfiles[cluster.name] = lockfile
        out.shape_of[cluster.name] = key
    if write:
        for cluster in order:
            if write_lock(views[cluster.name], out.lockfiles[cluster.name]):
                out.written.append(cluster.name)
    return out
