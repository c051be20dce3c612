"""olm.lock: the lockfile a resolution implies, and the checks that keep a committed one honest.

Resolution chooses bundles; this package pins them (a digest from the previous lock, a digest-pinned
reference or a local directory's content), refuses a lock edited to point elsewhere or gone stale
(``--locked``, as ``npm ci`` does), re-pins tags that moved when asked, and writes the file only when its
content changed. The ``Lockfile`` type itself is ``model/lock.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

from reconciler import yamlio
from reconciler.bundle import source as bundle_source
from reconciler.errors import BundleError, LockfileError, ReconcilerError
from reconciler.model.catalog import Catalog
from reconciler.model.lock import LockEntry, Lockfile
from reconciler.repo import RepoSnapshot
from reconciler.resolve import Resolution


def lock_pins(snapshot: RepoSnapshot, installed: Mapping[str, LockEntry]) -> dict[str, LockEntry]:
    """Locked bundles for owners with nothing installed: a committed lock is what a fresh cluster gets.

    Like package-lock.json, the lock is preferred while it still satisfies the
    declarations; a declaration it no longer satisfies resolves afresh.
    """
    locked = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    return {owner: e for owner, e in locked.items() if owner not in installed}


def check_lock_entries(snapshot: RepoSnapshot, catalogs: Mapping[str, Catalog],
                       pins: Mapping[str, LockEntry], installed: Mapping[str, LockEntry] | None = None) -> None:
    """Refuse a lockfile that was edited to point elsewhere, rather than silently rewriting it.

    Every entry's source must stay inside the repository when it is a path
    (``file://``, ``git+file://``). An entry of a declared owner (or of a
    dependency of one) must name a bundle its catalog has, with the source that
    catalog gives it: every entry about to be installed as a pin (nothing
    installed yet), and, given what the cluster has ``installed``, every entry
    that names another bundle than the installed one. An entry that names the
    installed bundle is left to resolution, which says what became of it.
    """
    if snapshot.lock is None:
        return
    where = snapshot.lock_file
    hint = ("olm.lock is written by the reconciler; restore it from git, or delete it and run `reconciler "
            "resolve` to write a fresh one, and review the diff")
    for e in snapshot.lock.entries:
        if _outside(e.source, snapshot.root):
            raise LockfileError(f"source {e.source!r} of bundle {e.name} lies outside the repository",
                                path=where, obj=f"entry {e.operator}", hint=hint)
    declared = {op.name for op in snapshot.operators}
    checked = dict(pins)
    for e in snapshot.lock.entries:
        have = (installed or {}).get(e.operator)
        if have is not None and (have.package, have.name) != (e.package, e.name):
            checked[e.operator] = e
    for owner, e in sorted(checked.items()):
        needed_by = {r for r in e.required_by.split(",") if r}
        if not e.catalog or (owner not in declared and not needed_by & declared):
            continue
        catalog = catalogs.get(e.catalog)
        bundle = catalog.bundle(e.package, e.name) if catalog is not None else None
        if catalog is None:
            problem = f"names catalog {e.catalog!r}, which the repository does not have"
        elif bundle is None:
            problem = f"names bundle {e.name} (package {e.package}), which catalog {e.catalog!r} does not have"
        elif bundle.image != e.source:
            problem = f"gives bundle {e.name} the source {e.source!r}, but catalog {e.catalog!r} gives {bundle.image!r}"
        else:
            continue
        raise LockfileError(problem, path=where, obj=f"entry {owner}", hint=hint)


def _outside(source: str, root: Path) -> bool:
    """Whether a path source (``file://`` directory, ``git+file://`` repository) leaves the repository."""
    top = root.resolve()
    if source.startswith(bundle_source.FILE_SCHEME):
        path = (top / source[len(bundle_source.FILE_SCHEME):].strip("/")).resolve()
    elif source.startswith(bundle_source.GIT_PREFIX + bundle_source.FILE_SCHEME):
        url = source[len(bundle_source.GIT_PREFIX):].partition("#")[0].rpartition("@")[0] or \
            source[len(bundle_source.GIT_PREFIX):].partition("#")[0]
        raw = url[len(bundle_source.FILE_SCHEME):]
        path = (Path(raw) if raw.startswith("/") else top / raw).resolve()
    else:
        return False
    return path != top and top not in path.parents


def held_bundles(holds: Mapping[str, frozenset[str]], installed: Mapping[str, LockEntry]) -> dict[str, frozenset[str]]:
    """What a later stage of a fleet may choose from each held package: the held bundles and the bundle the
    cluster runs (so that the upgrade edge from it to the promoted one is there)."""
    out = {pkg: set(names) for pkg, names in holds.items()}
    for e in installed.values():
        if e.package in out:
            out[e.package].add(e.name)
    return {pkg: frozenset(names) for pkg, names in out.items()}


def plan_lock(snapshot: RepoSnapshot, resolution: Resolution) -> Lockfile:
    """The lockfile a resolution implies, before any bundle is converted.

    Digests come from the previous lock when the bundle is unchanged, from a
    digest-pinned reference, or from a local bundle directory; other sources
    get theirs when the bundle is fetched. Owners held by a dry-run class keep
    their previous entry: what is installed for them does not change.
    """
    previous = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    entries = []
    for sel in resolution.selections:
        if not sel.apply:
            if sel.owner in previous:
                entries.append(previous[sel.owner])
            continue
        old = previous.get(sel.owner)
        digest = ""
        if old and (old.name, old.source) == (sel.bundle_name, sel.image):
            digest = old.digest
        elif "@sha256:" in sel.image:
            digest = "sha256:" + sel.image.rsplit("@sha256:", 1)[1]
        elif sel.image.startswith(bundle_source.FILE_SCHEME):
            try:
                digest = bundle_source.fetch(sel.image, snapshot.root).digest
            except BundleError as exc:
                raise bundle_source.located(exc, sel) from None
        entries.append(LockEntry(operator=sel.owner, package=sel.package, name=sel.bundle_name,
                                 version=sel.version, catalog=sel.catalog, channel=sel.channel, source=sel.image,
                                 digest=digest, required_by=",".join(sel.required_by)))
    return Lockfile(tuple(sorted(entries)))


def repin_moved_tags(lockfile: Lockfile) -> tuple[Lockfile, tuple[str, ...]]:
    """Re-pin locked OCI tags that now name another image; what changed (or could not be checked), as notes.

    ``resolve`` is where pins are chosen, so it asks each tag's registry what
    the tag names now; ``reconcile`` keeps the locked digest and never moves
    with a tag on its own.
    """
    from reconciler import oci

    entries, notes = [], []
    for e in lockfile.entries:
        src = e.source
        tagged = e.digest and "@sha256:" not in src and ("://" not in src or src.startswith("docker://"))
        if not tagged:
            entries.append(e)
            continue
        try:
            now = oci.resolve(src[len("docker://"):] if src.startswith("docker://") else src)
        except (oci.RegistryError, ReconcilerError) as exc:
            notes.append(f"{e.operator}: could not check whether {src} still names {e.digest}: {exc}")
            entries.append(e)
            continue
        if now != e.digest:
            notes.append(f"{e.operator}: re-pinned {src}: the tag moved from {e.digest} to {now}")
            e = dataclasses.replace(e, digest=now)
        entries.append(e)
    return Lockfile(tuple(entries)), tuple(notes)


def check_locked(snapshot: RepoSnapshot, planned: Lockfile) -> None:
    """Refuse a stale lockfile, as `npm ci` does: the resolution must be exactly what is locked."""
    locked = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    fresh = {e.operator: e for e in planned.entries}
    problems = []
    for owner in sorted(set(locked) | set(fresh)):
        old, new = locked.get(owner), fresh.get(owner)
        if old is None:
            problems.append(f"{owner}: resolves to {new.name} but is not in the lockfile")
        elif new is None:
            problems.append(f"{owner}: locked to {old.name} but no longer declared")
        else:
            fields = [f for f in ("package", "name", "version", "catalog", "channel", "source")
                      if getattr(old, f) != getattr(new, f)]
            if not fields and old.digest and new.digest and old.digest != new.digest:
                fields.append("digest")
            if fields:
                problems.append(f"{owner}: locked to {old.name}, resolves to {new.name} "
                                f"(differs in {', '.join(fields)})")
    if problems:
        raise LockfileError("the lockfile is stale:\n  " + "\n  ".join(problems),
                            path=snapshot.lock_file,
                            hint="run `reconciler resolve` (or reconcile without --locked) and commit olm.lock")


def write_lock(snapshot: RepoSnapshot, lockfile: Lockfile) -> bool:
    """Write olm.lock if its content changed; True when written."""
    text = lockfile.render()
    path: Path = snapshot.lock_path
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)   # a fleet cluster's clusters/<name>/
    yamlio.write_atomic(path, text)
    return True

