"""The two sides of a review, read from git and the working tree through the pipeline (no cluster writes).

The base revision is materialised from the object database into a
temporary directory with ``repo.git.materialise`` (hostile input: bounded,
no escaping links), read and resolved as committed. The working tree is
resolved with the base's lock as what is installed: that is what the
cluster has when the change merges, so the upgrade edges are the real ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from reconciler import pipeline
from reconciler.bundle.installed import Installed
from reconciler.approve import stage
from reconciler.errors import InputError, UsageError
from reconciler.model.lock import Lockfile
from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import select_cluster, stage_holds
from reconciler.repo.git import materialise
from reconciler.review.compare import Approval, BundleInfo, Owner, Side, secret_lookup


@dataclass(frozen=True)
class Resolved:
    """A side as the pipeline saw it, and as the review compares it."""

    side: Side
    snapshot: RepoSnapshot
    lockfile: Lockfile
    installs: tuple[Installed, ...]


def open_git(root: Path) -> tuple[pygit2.Repository, str]:
    """The git repository holding ``root``, and ``root``'s path inside its work tree."""
    try:   # a .git file (a worktree's) can be malformed or name a repository that is gone
        found = pygit2.discover_repository(str(root))
        repo = pygit2.Repository(found) if found is not None else None
    except pygit2.GitError as exc:
        raise InputError(f"cannot open its git repository: {exc}", path=str(root),
                         hint="repair or remove the .git file or directory, or run diff in a fresh checkout") from None
    if repo is None:
        raise InputError("the repository is not in a git work tree, so there is no base revision to compare with",
                         path=str(root), hint="run diff in a git checkout of the GitOps repository")
    if repo.workdir is None:
        raise InputError("the git repository is bare", path=str(root))
    try:
        rel = Path(root).resolve().relative_to(Path(repo.workdir).resolve())
    except ValueError:   # a .git file naming a repository whose work tree is elsewhere
        raise InputError(f"its git repository {found} has its work tree at {repo.workdir}, which does not hold "
                         f"it", path=str(root), hint="the .git file points at another repository; run diff in "
                                                     "a checkout of the GitOps repository") from None
    return repo, rel.as_posix() if str(rel) != "." else ""


def _dirty(repo: pygit2.Repository, rel: str) -> bool:
    try:
        status = repo.status()
    except pygit2.GitError as exc:   # e.g. directories nested deeper than git walks
        raise InputError(f"git cannot tell whether the working tree has changes: {exc}", path=str(repo.workdir),
                         hint="remove what git cannot read from the working tree, or name the base with --base "
                              "REV") from None
    for path, flags in status.items():
        if flags & pygit2.enums.FileStatus.IGNORED:
            continue
        if not rel or path.startswith(rel + "/"):
            return True
    return False


def base_commit(repo: pygit2.Repository, rel: str, base: str | None) -> tuple[str | None, str]:
    """(commit id or None for "nothing before", how to name it). Default: HEAD when the working tree has
    uncommitted changes, else HEAD's first parent (a pull request's merge commit against its target)."""
    if base:
        try:
            commit = repo.revparse_single(base).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            raise UsageError(f"--base {base!r} does not name a commit of {repo.workdir}",
                             hint="give a branch, tag or commit id, e.g. origin/main") from None
        return str(commit.id), f"{base} ({str(commit.id)[:7]})"
    if repo.head_is_unborn:
        return None, "empty repository"
    head = repo.head.peel(pygit2.Commit)
    if _dirty(repo, rel):
        return str(head.id), f"HEAD ({str(head.id)[:7]})"
    if not head.parents:
        return None, "empty repository (HEAD has no parent)"
    parent = head.parents[0]
    return str(parent.id), f"HEAD^ ({str(parent.id)[:7]})"


@contextlib.contextmanager
def checkout(repo: pygit2.Repository, commit: str | None, rel: str) -> Iterator[Path | None]:
    """The commit's tree in a temporary directory (the repository's subdirectory of it), removed after."""
    if commit is None:
        yield None
        return
    tmp = Path(tempfile.mkdtemp(prefix="reconciler-base-"))
    try:
        materialise(repo, commit, tmp)
        path = tmp / rel if rel else tmp
        yield path if path.is_dir() else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def secrets_of(side: Side | None):  # noqa: ANN201 - a bundle.certs.Lookup
    """A certificate lookup over a side's rendered Secrets, for the other side to reuse."""
    return secret_lookup(obj for owner in (side.owners.values() if side else ()) for obj in owner.objects)


def resolve_side(root: Path | None, label: str, *, installed: Lockfile | None = None,
                 revision: str | None = None, pin: bool = False, reuse: Side | None = None,
                 cluster: str | None = None, snapshot: RepoSnapshot | None = None,
                 catalogs: Any = None) -> Resolved | None:
    """Read, resolve and convert one side. ``installed`` replaces the snapshot's own lock as what is installed;
    without it, or with ``pin``, every owner in the side's own lock stays on its locked bundle (the base:
    what the cluster has; a commit that moves only part of the lock: what it moves). In a fleet repository,
    ``cluster`` says which cluster's view; a side that does not declare that cluster has nothing. ``catalogs``:
    the side's catalogs, already loaded (a fleet's review reads them once for all its clusters)."""
    if root is None:
        return None
    snapshot = snapshot or read_repository(root)
    if cluster is not None:
        if snapshot.is_fleet and cluster not in snapshot.clusters:
            return None
        snapshot = select_cluster(snapshot, cluster) if snapshot.is_fleet else snapshot
    own_lock = snapshot.lock
    holds = stage_holds(snapshot)   # a later stage of a fleet: what its own lockfile (a promotion) allows
    if revision is not None:
        snapshot = dataclasses.replace(snapshot, revision=revision)
    if installed is not None:
        snapshot = dataclasses.replace(snapshot, lock=installed)
    if catalogs is None:
        catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    resolution = pipeline.resolve(snapshot, None, holds=holds, catalogs=catalogs)
    if (installed is None or pin) and own_lock is not None:
        resolution = pinned(resolution, own_lock)
    from reconciler.bundle.certs import SelfSignedProvider

    converted = pipeline.convert(snapshot, resolution, pipeline.lock(snapshot, resolution), None,
                                 certificates=SelfSignedProvider(lookup=secrets_of(reuse)))
    installs, lockfile = converted.installs, converted.lockfile
    owners = {}
    for inst in installs:
        sel, lock = inst.selection, inst.lock
        owners[sel.owner] = Owner(
            name=sel.owner, kind=sel.kind,
            bundle=BundleInfo(lock.name, lock.version, lock.package, lock.catalog, lock.channel, lock.source,
                              lock.digest),
            dependencies=sel.dependencies, objects=inst.bundle.objects,
            input_class=sel.declaration.input_class if sel.declaration else "")
    semver = frozenset(n for n, c in snapshot.settings.catalogs.items() if c.upgrade_graph == "semver")
    return Resolved(Side(label, owners, catalogs, semver), snapshot, lockfile, installs)


def pinned(resolution, lock: Lockfile):  # noqa: ANN001, ANN201 - a resolve.Resolution
    """The resolution with every locked owner on its locked bundle: the base side is what is installed,
    as committed, even when a re-resolution of it would already move on."""
    locked = {e.operator: e for e in lock.entries}
    selections = []
    for sel in resolution.selections:
        e = locked.get(sel.owner)
        if e is not None and sel.apply and (e.name, e.source) != (sel.bundle_name, sel.image):
            sel = dataclasses.replace(sel, bundle_name=e.name, image=e.source, version=e.version,
                                      package=e.package, catalog=e.catalog, channel=e.channel)
        selections.append(sel)
    return dataclasses.replace(resolution, selections=tuple(selections))


def approvals_of(resolved: Resolved) -> dict[str, Approval]:
    """Whether each bundle of the side will be approved, as the approval stage decides it offline (the working
    tree's approvals count: they are part of the change reviewed)."""
    decisions = stage.approvals(resolved.snapshot, resolved.installs, None, uncommitted=True)
    return {name: Approval(d.approved, d.reason, d.message, d.pending) for name, d in decisions.items()}
