"""The one way the tests write git repositories.

A ``GitRepo`` is a repository in a test's temporary directory: files written
into its working tree and everything committed by the test author (signed by
a test signer from ``tests/signing.py`` when given, through the git command
line as a user signs). ``GitOpsRepo`` is the README's example repository so
committed, its Operator approved. ``commit_all`` and ``git`` are the same for a
test that holds a plain directory; ``example_copy`` copies the example without
making it a git repository.

The example ships without an approval, so that a user following the README
sees its first install wait for one. Most tests are about something else and
start where the README ends: ``example_copy`` writes the approval `reconciler
approve` recorded for plumbus 1.0.0 and 1.1.0 (``tests/example_approval.yaml``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Protocol

import pygit2

from reconciler import yamlio
from tests.support.paths import EXAMPLE, ROOT

APPROVAL = ROOT / "tests" / "example_approval.yaml"
AUTHOR = ("Test", "test@example.invalid")
# The test author for the git command line, whatever the user's own configuration would sign or say.
GIT_USER = ("-c", f"user.name={AUTHOR[0]}", "-c", f"user.email={AUTHOR[1]}", "-c", "commit.gpgsign=false",
            "-c", "tag.gpgsign=false")


class Signer(Protocol):
    """A test signer (``tests.signing.SshSigner`` or ``GpgSigner``): git's options and environment for it."""

    def git_args(self) -> tuple[str, ...]: ...

    def env(self) -> dict[str, str]: ...


def example_copy(dest: Path, *, lock: bool = True) -> Path:
    """A copy of the example at ``dest`` (without its olm.lock unless ``lock``), its plumbus approved; not a git
    repository."""
    shutil.copytree(EXAMPLE, dest, ignore=None if lock else shutil.ignore_patterns("olm.lock"))
    (dest / "approvals").mkdir(exist_ok=True)
    shutil.copyfile(APPROVAL, dest / "approvals" / "plumbus.yaml")
    return dest


def git(root: Path, *args: str, signer: Signer | None = None) -> str:
    """``git`` in ``root`` as the test author (signing as ``signer`` when given); its output, stripped."""
    done = subprocess.run(["git", *GIT_USER, *(signer.git_args() if signer else ()), *args], cwd=root,
                          env=signer.env() if signer else None, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def init(root: Path, *, bare: bool = False) -> pygit2.Repository:
    """A new git repository at ``root`` (made when missing) whose first branch is ``main``."""
    root.mkdir(parents=True, exist_ok=True)
    return pygit2.init_repository(str(root), bare=bare, initial_head="main")


def commit_all(root: Path, message: str = "commit", *, signer: Signer | None = None) -> str:
    """Commit everything in ``root``'s working tree, made a git repository first when it is none (an empty
    commit when nothing changed; signed by ``signer`` when given); the new commit's id."""
    if signer is not None:
        if not (root / ".git").exists():
            init(root)
        git(root, "add", "-A")
        git(root, "commit", "--allow-empty", "-q", "-S", "-m", message, signer=signer)
        return git(root, "rev-parse", "HEAD")
    repo = pygit2.Repository(str(root)) if (root / ".git").exists() else init(root)
    index = repo.index
    index.add_all()
    index.write()
    author = pygit2.Signature(*AUTHOR)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", author, author, message, index.write_tree(), parents))


class GitRepo:
    """A git repository at ``path`` (made when missing) that a test writes and commits; with ``message``,
    what the directory already holds is committed at once."""

    def __init__(self, path: Path, message: str | None = None) -> None:
        self.path = path
        self.git = pygit2.Repository(str(path)) if (path / ".git").exists() else init(path)
        if message is not None:
            self.commit(message)

    def write(self, rel: str, text: str) -> Path:
        """``text`` as the file ``rel``, exactly as given (directories made)."""
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def write_docs(self, rel: str, *docs: Any) -> Path:
        """Objects as the multi-document YAML file ``rel``."""
        return self.write(rel, yamlio.dump_all(list(docs)))

    def remove(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, message: str, *, signer: Signer | None = None) -> str:
        """Everything in the working tree committed (an empty commit when nothing changed); the commit's id."""
        return commit_all(self.path, message, signer=signer)

    def run(self, *args: str, signer: Signer | None = None) -> str:
        """``git ARGS`` in the working tree as the test author; its output."""
        return git(self.path, *args, signer=signer)

    @property
    def head(self) -> str:
        return str(self.git.head.target)


class GitOpsRepo(GitRepo):
    """A copy of the example repository, its Operator approved (without its lockfile unless ``lock``),
    committed to a real git repository."""

    def __init__(self, path: Path, *, lock: bool = False) -> None:
        example_copy(path, lock=lock)
        super().__init__(path, "example")

    def set_version(self, version: str) -> None:
        """plumbus's declared version range set to ``version``."""
        text = (self.path / "operators/plumbus.yaml").read_text()
        lines = [f'  version: "{version}"' if ln.startswith("  version:") else ln for ln in text.splitlines()]
        self.write("operators/plumbus.yaml", "\n".join(lines) + "\n")

    def withdraw_all(self) -> None:
        """Every Operator declaration removed and the settings replaced by ``allowEmpty: true`` alone:
        reconciling it uninstalls what it installed (under the default instance)."""
        for declaration in (self.path / "operators").glob("*.yaml"):
            declaration.unlink()
        self.write("reconciler.yaml", "allowEmpty: true\n")
