"""The resolution stage as a run takes it: the repository's catalogs loaded, what is installed read (from the
cluster's status objects, else olm.lock), the lock's pins and a fleet stage's holds applied, then the resolver.

A part of the composition root: it gathers the resolver's inputs from the stages before it and from the
cluster, so ``resolve/`` itself stays a pure function of its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from reconciler.catalog import load_catalog
from reconciler.catalog.source import load_image_catalog
from reconciler.report import progress
from reconciler.errors import CatalogError
from reconciler.lock import check_lock_entries, held_bundles, lock_pins
from reconciler.model.catalog import Catalog
from reconciler.model.declarations import OperatorDecl
from reconciler.model.lock import LockEntry
from reconciler.repo import RepoSnapshot
from reconciler.repo.fleet import stage_holds
from reconciler.report.words import counted
from reconciler.resolve import Resolution, ResolutionRequest, Resolver, SatResolver

if TYPE_CHECKING:
    from reconciler.pipeline.facts import ClusterFacts

__all__ = ["installed_state", "kubernetes_version", "load_catalogs", "pulling", "resolve"]


def load_catalogs(snapshot: RepoSnapshot, operators: tuple[OperatorDecl, ...], *,
                  always: bool = False) -> dict[str, Catalog]:
    """Every catalog of the repository, when anything needs resolving (``always``: in any case).

    All of them, not only those declarations name: an Input may ask for an
    API alone, and a dependency may be met from any catalog. A catalog is a
    directory under catalogs/, or an image named in reconciler.yaml.
    """
    if not always and all(op.bundle is not None for op in operators):
        return {}
    settings = snapshot.settings.catalogs
    images = {n: c.image for n, c in settings.items() if c.image}
    both = sorted(set(images) & set(snapshot.catalog_dirs))
    if both:
        raise CatalogError(f"catalog {both[0]!r} is both a directory under catalogs/ and an image in "
                           f"reconciler.yaml", path="reconciler.yaml", hint="keep one source per catalog name")
    out = {}
    for name in sorted(set(snapshot.catalog_dirs) | set(images)):
        prio = settings[name].priority if name in settings else 0
        if name in images:
            required = None
            if settings[name].verify:
                from reconciler.oci.signature import requirements

                required = requirements(snapshot.root, settings[name].verify, f"catalog {name}")
            with pulling(snapshot):
                out[name] = load_image_catalog(name, images[name], prio, required, settings[name].packages)
        else:
            out[name] = load_catalog(name, snapshot.catalog_dirs[name], f"catalogs/{name}", priority=prio)
    return out


def pulling(snapshot: RepoSnapshot):  # noqa: ANN201 - a context manager
    """The repository's registry mirrors (``mirrors:`` of reconciler.yaml) in force for the block."""
    from reconciler.oci.mirrors import using

    return using(snapshot.settings.mirrors)


def installed_state(snapshot: RepoSnapshot, cluster: ClusterFacts | None) -> dict[str, LockEntry]:
    """What is installed, per owner: the cluster's status objects when a cluster is configured, else olm.lock.

    The cluster is the truth about itself: a lock rewritten by a tentative
    ``resolve`` must not make reverting look like a downgrade. Without a
    cluster the lock is the only record of what was installed.
    """
    if cluster is None:
        return {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    return cluster.installed(snapshot.settings.instance)


def kubernetes_version(snapshot: RepoSnapshot, cluster: ClusterFacts | None) -> str | None:
    """The cluster's Kubernetes version, else the one the settings give for minKubeVersion."""
    return cluster.version if cluster is not None else snapshot.settings.kubernetes_version


def resolve(snapshot: RepoSnapshot, cluster: ClusterFacts | None = None, resolver: Resolver | None = None, *,
            catalogs: Mapping[str, Catalog] | None = None,
            holds: Mapping[str, frozenset[str]] | None = None) -> Resolution:
    """Resolve the snapshot's declarations against what ``cluster`` runs (offline: what olm.lock pins);
    ``catalogs``: already loaded for this repository, e.g. once for a fleet's clusters; ``holds``: what a fleet's
    stage allows instead of its ``stage_holds``, for a promotion or a stage whose lockfiles are not written yet."""
    progress.stage("loading catalogs")
    if catalogs is None:
        catalogs = load_catalogs(snapshot, snapshot.operators)
    progress.stage(f"resolving {counted(len(snapshot.operators), 'declaration')}")
    semver = frozenset(n for n, c in snapshot.settings.catalogs.items() if c.upgrade_graph == "semver")
    installed = installed_state(snapshot, cluster)
    if holds is None:   # a later stage of a fleet: what was promoted there, or what the stage before runs
        holds = stage_holds(snapshot)
    pins = lock_pins(snapshot, installed) if cluster is not None else {}
    check_lock_entries(snapshot, catalogs, pins, installed if cluster is not None else None)
    request = ResolutionRequest(snapshot.operators, catalogs, installed,
                                snapshot.input_classes, kubernetes_version(snapshot, cluster), semver, pins=pins,
                                holds=held_bundles(holds, installed) if holds else {},
                                installed_from="" if cluster is not None else snapshot.lock_file)
    return (resolver or SatResolver()).resolve(request)


