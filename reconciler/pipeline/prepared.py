"""Preparing a run: read, verify, resolve, lock, convert and judge, with nothing written.

``prepare`` is the half of a run that never writes to a cluster: the loop
keeps what it returns as its last good state and hands only a revision that
prepared cleanly to ``apply``; ``diff``, ``adopt`` and ``approve`` preview
with it. The cluster, when there is one, is only read, through one
``ClusterFacts``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from reconciler.approve import Decision
from reconciler.approve.stage import approval_notes, approvals
from reconciler.bundle.installed import Installed
from reconciler.model.lock import Lockfile
from reconciler.pipeline.facts import ClusterFacts
from reconciler.pipeline.offline import convert, lock
from reconciler.pipeline.resolution import pulling, resolve
from reconciler.pipeline.source import Source
from reconciler.report import progress
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import select_cluster
from reconciler.repo.inputs import Inputs, inputs_of
from reconciler.resolve import Resolution, Resolver

if TYPE_CHECKING:
    from reconciler.kube.client import Kube
    from reconciler.repo.verify import UntrustedRevision, Verdict


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
    verdicts: tuple[Verdict, ...] = ()   # the signatures verified (``Source.trust``)
    inputs: Inputs | None = None         # which paths of the repository this run read (``repo/inputs.py``)
    untrusted: UntrustedRevision | None = None   # a preview's revision that a real run refuses, and why


def prepare(source: Source | str | Path, kube: Kube | None = None, *, resolver: Resolver | None = None,
            locked: bool = False, preview: bool = False) -> Prepared:
    """Read, resolve and convert ``source``; nothing is written. ``kube`` is only read (installed state, version,
    what the approval stage asks).

    ``locked`` refuses a lockfile that the resolution does not reproduce. A ``preview`` (a dry run, ``adopt``,
    ``approve``) counts approvals not committed yet, and reports a revision whose signature does not verify
    (``Prepared.untrusted``) instead of refusing it: a real apply counts only committed approvals of a verified
    commit.
    """
    source = Source.of(source)
    cluster = ClusterFacts(kube) if kube is not None else None
    verdicts: tuple[Verdict, ...] = ()
    untrusted = None
    if source.trust is not None:
        from reconciler.repo.verify import UntrustedRevision

        try:
            verdicts = source.verify(cluster)
        except UntrustedRevision as exc:
            if not preview:
                raise
            untrusted = exc
    progress.stage(f"reading {source.tree}")
    full = read_repository(source.tree)
    snapshot = select_cluster(full, source.cluster)
    if source.revision is not None:
        snapshot = dataclasses.replace(snapshot, revision=source.revision)
    if source.identity is not None:
        snapshot = dataclasses.replace(snapshot, identity=snapshot.settings.repository or source.identity,
                                       git_dir=source.git_dir or snapshot.git_dir)
    with pulling(snapshot):   # catalog images and bundle images alike, through the repository's mirrors
        resolution = resolve(snapshot, cluster, resolver)
        converted = convert(snapshot, resolution, lock(snapshot, resolution, locked=locked), kube)
    held = frozenset(s.owner for s in resolution.selections if not s.apply)
    sources = [*(s.image for s in resolution.selections), *(e.source for e in converted.lockfile.entries),
               *(ref for op in snapshot.operators if op.bundle is not None for ref in op.bundle.refs)]
    notes = approval_notes(snapshot, counted=preview)   # the verdicts are said apart (``Outcome.signature_notes``)
    return Prepared(snapshot, converted.installs, converted.lockfile, resolution, held,
                    approvals(snapshot, converted.installs, kube, uncommitted=preview), notes, verdicts,
                    inputs_of(full, snapshot, sources), untrusted)
