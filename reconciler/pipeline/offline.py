"""The offline chain after resolution, composed once: the lock a resolution implies, and each bundle converted.

``lock`` pins what resolution chose (``lock.plan_lock``), refusing, when
asked, a committed lock the resolution does not reproduce (``--locked``);
``convert`` fetches and converts every bundle to apply (``bundle/installed``)
and gives the lockfile the content digests conversion verified. Every shell
that resolves (reconcile, the loop, ``diff``, ``update``, ``resolve``, a
fleet's resolution and promotion) goes through these two, so each runs the
same steps as ``reconcile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.bundle.installed import Installed, convert as convert_bundles
from reconciler.lock import check_locked, plan_lock
from reconciler.model.lock import Lockfile

if TYPE_CHECKING:
    from reconciler.kube.client import Kube
    from reconciler.repo import RepoSnapshot
    from reconciler.resolve import Resolution


@dataclass(frozen=True)
class Converted:
    """Every bundle to apply, converted, and the lockfile with the digests conversion verified."""

    installs: tuple[Installed, ...]
    lockfile: Lockfile


def lock(snapshot: RepoSnapshot, resolution: Resolution, *, locked: bool = False) -> Lockfile:
    """The lockfile ``resolution`` implies; with ``locked``, refuse one the committed lock does not equal."""
    planned = plan_lock(snapshot, resolution)
    if locked:
        check_locked(snapshot, planned)
    return planned


def convert(snapshot: RepoSnapshot, resolution: Resolution, planned: Lockfile, kube: Kube | None = None, *,
            certificates: Any = None) -> Converted:
    """Fetch and convert each bundle ``resolution`` applies, as ``planned`` pins it (``kube``: read only, for
    the webhook certificates already in the cluster; ``certificates``: another provider, a review's)."""
    installs = convert_bundles(snapshot, resolution, planned, kube, certificates=certificates)
    converted = {i.lock.operator: i.lock for i in installs}
    return Converted(installs, Lockfile(tuple(sorted(converted.get(e.operator, e) for e in planned.entries))))
