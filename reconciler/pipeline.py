"""The reconcile pipeline: repository -> catalogs -> resolution -> bundles -> manifests -> cluster -> status.

Each arrow is a call into one subpackage; this module only strings them
together, so the CLI and the in-cluster loop run exactly the same steps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from reconciler.bundle import RenderedBundle, render
from reconciler.catalog import load_catalog
from reconciler.cluster.apply import DesiredOperator, SyncResult, sync
from reconciler.cluster.kube import Kube
from reconciler.errors import ResolutionError
from reconciler.model.catalog import Catalog
from reconciler.model.declarations import OperatorDecl
from reconciler.model.kube import Manifest, ownership_labels
from reconciler.model.lock import LockEntry, Lockfile
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.resolve import ChannelHeadResolver, Resolution, Resolver, Selection


@dataclass(frozen=True)
class Installed:
    """One Operator after resolution and conversion."""

    selection: Selection
    bundle: RenderedBundle
    lock: LockEntry


@dataclass(frozen=True)
class Outcome:
    snapshot: RepoSnapshot
    installs: tuple[Installed, ...]
    lockfile: Lockfile
    lock_written: bool
    sync: SyncResult


def load_catalogs(snapshot: RepoSnapshot, operators: tuple[OperatorDecl, ...]) -> dict[str, Catalog]:
    """Load the catalogs the declarations refer to (unreferenced ones are not read)."""
    wanted = {op.catalog.name for op in operators if op.catalog}
    out = {}
    for name in sorted(wanted & set(snapshot.catalog_dirs)):
        prio = snapshot.settings.catalogs.get(name)
        out[name] = load_catalog(name, snapshot.catalog_dirs[name], f"catalogs/{name}",
                                 priority=prio.priority if prio else 0)
    return out


def resolve(snapshot: RepoSnapshot, resolver: Resolver | None = None) -> tuple[Resolution, Mapping[str, Catalog]]:
    catalogs = load_catalogs(snapshot, snapshot.operators)
    resolution = (resolver or ChannelHeadResolver()).resolve(snapshot.operators, catalogs, snapshot.lock)
    return resolution, catalogs


def convert(snapshot: RepoSnapshot, resolution: Resolution) -> tuple[Installed, ...]:
    installs = []
    for sel in resolution.selections:
        op = sel.operator
        bundle = render(sel.image, snapshot.root, op.install, snapshot.settings.default_install_namespace)
        if sel.package and bundle.package and bundle.package != sel.package:
            raise ResolutionError(f"bundle {sel.bundle_name} is listed in package {sel.package!r} but its "
                                  f"annotations say package {bundle.package!r}", path=str(op.origin),
                                  obj=f"Operator {op.name}")
        lock = LockEntry(operator=op.name, package=sel.package or bundle.package, name=sel.bundle_name,
                         version=sel.version or bundle.version, catalog=sel.catalog, channel=sel.channel,
                         source=sel.image, digest=bundle.digest, mediatype=bundle.mediatype)
        installs.append(Installed(sel, bundle, lock))
    return tuple(installs)


def desired_state(installs: tuple[Installed, ...]) -> list[DesiredOperator]:
    out = []
    for inst in installs:
        op = inst.selection.operator
        objects = tuple(_stamp(obj, op.name) for obj in inst.bundle.objects)
        spec = {"source": {"path": op.origin.path}, "package": inst.lock.package}
        if op.catalog:
            spec["catalog"] = {"name": op.catalog.name, "package": op.catalog.package,
                               "channel": op.catalog.channel or ""}
        if op.version:
            spec["version"] = str(op.version)
        bundle = {k: getattr(inst.lock, k) for k in ("name", "package", "version", "catalog", "channel",
                                                     "source", "digest")}
        bundle["namespace"] = inst.bundle.namespace
        out.append(DesiredOperator(op.name, objects, (inst.bundle.namespace,), spec, bundle))
    return out


def _stamp(obj: Manifest, operator: str) -> Manifest:
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **ownership_labels(operator)}
    return out


def write_lock(snapshot: RepoSnapshot, lockfile: Lockfile) -> bool:
    """Write olm.lock if its content changed; True when written."""
    text = lockfile.render()
    path: Path = snapshot.lock_path
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    tmp = path.with_suffix(".lock.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


def reconcile(repo: str | Path, kube: Kube | None, *, dry_run: bool, resolver: Resolver | None = None) -> Outcome:
    snapshot = read_repository(repo)
    resolution, _ = resolve(snapshot, resolver)
    installs = convert(snapshot, resolution)
    lockfile = Lockfile(tuple(sorted(i.lock for i in installs)))
    written = write_lock(snapshot, lockfile)
    result = sync(kube, desired_state(installs), dry_run=dry_run,
                  allow_empty=snapshot.settings.allow_empty, revision=snapshot.revision)
    return Outcome(snapshot, installs, lockfile, written, result)
