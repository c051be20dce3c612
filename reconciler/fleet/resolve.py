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


def facts_digest(view: RepoSnapshot) -> str:
    """What a cluster's resolution depends on, as one digest (the repository's catalogs are common to all)."""
    h = hashlib.sha256()
    h.update(repr(view.operators).encode())
    h.update(b"\0" + str(view.settings.kubernetes_version).encode())
    h.update(b"\0" + (repr(view.lock.entries).encode() if view.lock else b""))
    h.update(b"\0" + repr(sorted((p, sorted(n)) for p, n in stage_holds(view).items())).encode())
    return h.hexdigest()


def resolve_fleet(root: str | Path, *, write: bool = True, snapshot: RepoSnapshot | None = None) -> FleetResolution:
    """Every cluster's lockfile, offline (what each runs is its lockfile); written when ``write``.

    Clusters are taken in stage order, so a later stage's holds see the lockfiles the earlier stages just got.
    """
    from reconciler import pipeline
    from reconciler.lock import plan_lock, write_lock

    snapshot = snapshot or read_repository(root)
    stages = {name: i for i, name in enumerate(snapshot.settings.stages)}
    order = sorted(snapshot.clusters.values(),
                   key=lambda c: (stages.get(c.stage, -1) if c.stage else -1, c.name))
    catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    done: dict[str, Lockfile] = {}
    out = FleetResolution()
    for cluster in order:
        view = select_cluster(snapshot, cluster.name)
        key = facts_digest(view)
        lockfile = done.get(key)
        if lockfile is None:
            resolution = pipeline.resolve(view, None, catalogs=catalogs)
            lockfile = done[key] = plan_lock(view, resolution)
        out.lockfiles[cluster.name] = lockfile
        out.shape_of[cluster.name] = key
        if write and write_lock(view, lockfile):
            out.written.append(cluster.name)
    return out
