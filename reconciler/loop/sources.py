"""Where the loop reads desired state from: a local working tree, or a remote repository at a commit.

Both answer the same two questions: what is the current revision (``current``),
and where is its tree for the pipeline to read (``tree``). A local tree is
read in place and its lockfile written by the pipeline; a remote commit is
materialised into a temporary directory that is never written to. A target's
``key`` lets the loop skip commits it has already applied or rejected; a
local tree has none (its content can change without a commit), so it is
always read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.repo import git_revision, identity
from reconciler.repo.git import RemoteRepository, redact_url
from reconciler.repo.watch import TreeWatcher

if TYPE_CHECKING:
    from reconciler.repo.verify import Trust


@dataclass(frozen=True)
class Target:
    """One state of the source: its revision (commit, ``-dirty`` for an edited tree) and a skip key."""

    revision: str | None
    key: str | None = None


class Source(Protocol):
    description: str
    write_lockfile: bool
    poll_interval: float | None
    trust: Trust | None     # verify each revision's signature before it is read (repo/verify.py)
    tag: str | None         # the tag followed, for the Tag verification modes

    def current(self) -> Target: ...

    def history(self) -> Path | None:
        """Where the commits a target's key names can be read (a remote's clone); None for a working tree."""
        ...

    def tree(self, target: Target) -> contextlib.AbstractContextManager[Path]: ...

    def start(self, trigger: Callable[[str], None]) -> None: ...

    def stop(self) -> None: ...

    def origin(self, tree: Path) -> tuple[str | None, Path | None]:
        """The repository ``tree`` was taken from and where its history is; ``None`` where the tree tells."""
        ...


class LocalSource:
    """A working tree on disk, watched with watchdog.

    The root may be a symbolic link that another process swaps atomically to
    publish a new checkout (git-sync does this). Then the link's directory is
    watched, so the swap is seen, and the link is resolved afresh on every read.
    """

    poll_interval = None
    tag = None

    def __init__(self, root: Path, *, debounce: float = 0.3, watch: bool = True, write_lockfile: bool = True,
                 repository: str | None = None, trust: Trust | None = None) -> None:
        self.root = Path(root).absolute()
        self.trust = trust
        self.repository = repository
        self.description = f"working tree {self.root}"
        self.debounce = debounce
        self.watch = watch
        self.write_lockfile = write_lockfile
        self._watcher: TreeWatcher | None = None

    def current(self) -> Target:
        return Target(git_revision(self.root.resolve()))

    def history(self) -> Path | None:
        return None   # an edit of the tree is no commit: every state is read

    @contextlib.contextmanager
    def tree(self, target: Target) -> Iterator[Path]:
        yield self.root.resolve()

    def origin(self, tree: Path) -> tuple[str | None, Path | None]:
        """A published checkout (a link swapped to each new commit) is known by the link, not by where it points
        today, when its git repository names no remote."""
        if self.repository:
            return self.repository, identity.git_dir(tree)
        if self.root.is_symlink() and identity.detect(tree).startswith("file://"):
            return "file://" + str(self.root), identity.git_dir(tree)
        return None, None

    def start(self, trigger: Callable[[str], None]) -> None:
        if self.watch:
            watched = self.root.parent if self.root.is_symlink() else self.root
            self._watcher = TreeWatcher(watched, lambda paths: trigger(f"changed: {', '.join(paths[:3])}"
                                                                        + (" ..." if len(paths) > 3 else "")),
                                        debounce=self.debounce)
            self._watcher.start()

    def stop(self) -> None:
        if self._watcher:
            self._watcher.stop()
            self._watcher = None


class RemoteSource:
    """A remote repository followed at a branch, tag or commit, fetched every ``poll_interval`` seconds."""

    write_lockfile = False

    def __init__(self, remote: RemoteRepository, *, poll_interval: float | None = 30.0,
                 repository: str | None = None, trust: Trust | None = None) -> None:
        self.remote = remote
        self.trust = trust
        self.tag = remote.ref.tag
        self.repository = repository
        self.poll_interval = poll_interval
        self.description = f"{redact_url(remote.url)} ({remote.ref})"

    def current(self) -> Target:
        commit = self.remote.fetch()
        return Target(commit, commit)

    def history(self) -> Path | None:
        return self.remote.path

    def tree(self, target: Target) -> contextlib.AbstractContextManager[Path]:
        assert target.key is not None
        return self.remote.checkout(target.key)

    def origin(self, tree: Path) -> tuple[str | None, Path | None]:
        return self.repository or identity.normalize(self.remote.url), self.remote.path

    def start(self, trigger: Callable[[str], None]) -> None:
        pass  # polled by the loop; a webhook triggers it early

    def stop(self) -> None:
        pass
