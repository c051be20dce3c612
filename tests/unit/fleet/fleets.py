"""The example fleet (examples/fleet-repo) as the fleet tests set it up: lockfiles pinned to the older bundle,
and the ``FleetStatus`` that ``fleet status`` would read from its clusters."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from reconciler.fleet.status import Cell, ClusterStatus, FleetStatus
from reconciler.repo import read_repository
from reconciler.repo.fleet import select_cluster

OLD_DIGEST = "sha256:cfbf439270b6dc572e0b8814167883db2a20672e84f272ccecb1a37e8f6116c4"
NEW_DIGEST = "sha256:0ba79bff16bea7575f8261b469021ba777160b45afbf81060510cffc702f91d6"
NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)


def pin_old(root: Path, *clusters: str) -> None:
    """The lockfiles of ``clusters`` pin plumbus 1.0.0, as before 1.1.0 was in the catalog."""
    for name in clusters:
        lock = root / "clusters" / name / "olm.lock"
        lock.write_text(lock.read_text().replace("1.1.0", "1.0.0").replace(NEW_DIGEST, OLD_DIGEST))


def healthy(root: Path, *, running: dict[str, str], hours: float = 3.0, health: str = "Healthy",
            unreachable: tuple[str, ...] = ()) -> FleetStatus:
    """What `fleet status` would read: each cluster in ``running`` runs that plumbus bundle as its lockfile pins,
    in ``health`` for ``hours``."""
    snap = read_repository(root)
    clusters = []
    for name, decl in sorted(snap.clusters.items()):
        if name in unreachable:
            clusters.append(ClusterStatus(name, decl.stage or "", name, reachable=False,
                                          error="cannot reach the API server"))
            continue
        view = select_cluster(snap, name)
        placed = any(op.name == "plumbus" for op in view.operators)
        locked = view.lock.for_operator("plumbus").name if view.lock and view.lock.for_operator("plumbus") else ""
        bundle = running.get(name, "")
        since = (NOW - dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        cell = Cell("plumbus", placed=placed, installed=bool(bundle), bundle=bundle, version=bundle[9:],
                    health=health if bundle else "NotInstalled", locked=locked, in_sync=bool(bundle) and
                    bundle == locked, ready_since=since if health == "Healthy" else "", revision="1c9e0a7d4f2b")
        clusters.append(ClusterStatus(name, decl.stage or "", name, reachable=True, cells={"plumbus": cell}))
    return FleetStatus(str(root), ["plumbus"], clusters)
