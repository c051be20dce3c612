"""Remote repositories: fetch a branch, a tag or a pinned commit with pygit2, and read a commit's tree.

The clone is bare and private to the reconciler (a cache directory), so
nothing is ever written into a tree a user edits, and no working copy is
checked out. A commit is read straight from the object database and written
into a fresh temporary directory only for as long as the pipeline reads it;
that materialisation treats the repository as hostile input: entry names
cannot escape, symbolic links must stay inside the tree, submodules are
skipped, and the total size and file count are bounded.

Authentication is given explicitly (a token or user and password for HTTPS,
a key pair and a known_hosts file for SSH) and only handed to libgit2 when
the server asks for that kind of credential. Host keys and TLS certificates
are never accepted unless libgit2 found them valid.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import CredentialType

from reconciler.errors import InputError, ReconcilerError
from reconciler.repo.snapshot import MAX_TREE_DEPTH

MAX_TREE_BYTES = 512 * 1024 * 1024
MAX_TREE_FILES = 100_000
MAX_NAME_BYTES = 255       # one path component, as Linux file systems allow
_SHA = re.compile(r"^[0-9a-f]{40}$")
_MODE_TREE, _MODE_LINK, _MODE_COMMIT, _MODE_EXEC = 0o040000, 0o120000, 0o160000, 0o100755


class SourceError(ReconcilerError):
    """The remote repository could not be fetched or its ref not found (usually transient or a setting)."""


def is_remote(location: str) -> bool:
    """True for a URL (``https://``, ``ssh://``, ``git://``, ``file://``) or scp-like ``user@host:path``."""
    return "://" in location or bool(re.match(r"^[\w.-]+@[\w.-]+:", location))


@dataclass(frozen=True)
class Auth:
    """Credentials for the remote; every field optional. Secrets are read from files by the CLI."""

    username: str | None = None
    password: str | None = None        # a password or a token
    ssh_key: Path | None = None        # private key; the public key is ``<key>.pub`` when present
    ssh_passphrase: str = ""
    known_hosts: Path | None = None

    def __repr__(self) -> str:  # never print a secret
        return (f"Auth(username={self.username!r}, password={'***' if self.password else None}, "
                f"ssh_key={self.ssh_key}, known_hosts={self.known_hosts})")


@dataclass(frozen=True)
class Ref:
    """What to follow: exactly one of a branch, a tag or a commit."""

    branch: str | None = None
    tag: str | None = None
    commit: str | None = None

    def __post_init__(self) -> None:
        given = [x for x in (self.branch, self.tag, self.commit) if x]
        if len(given) > 1:
            raise InputError("give only one of a branch, a tag or a commit")
        if self.commit and not _SHA.match(self.commit):
            raise InputError(f"commit {self.commit!r} is not a full 40-character hex commit id",
                             hint="pin the full id, e.g. from `git rev-parse HEAD`")

    def __str__(self) -> str:
        if self.tag:
            return f"tag {self.tag}"
        if self.commit:
            return f"commit {self.commit}"
        return f"branch {self.branch or 'HEAD'}"


class _Callbacks(pygit2.RemoteCallbacks):
    def __init__(self, auth: Auth) -> None:
        super().__init__()
        self.auth = auth
        self.offered = 0

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType):
        self.offered += 1
        if self.offered > 3:  # libgit2 asks again after a rejection; stop instead of looping
            raise SourceError(f"the server at {url} rejected the credentials",
                              hint="check the token, user name or SSH key given to the reconciler")
        auth = self.auth
        if allowed_types & CredentialType.SSH_KEY and auth.ssh_key:
            pub = Path(f"{auth.ssh_key}.pub")
            return pygit2.Keypair(username_from_url or auth.username or "git", str(pub) if pub.is_file() else None,
                                  str(auth.ssh_key), auth.ssh_passphrase)
        if allowed_types & CredentialType.USERPASS_PLAINTEXT and auth.password is not None:
            # Git hosts take a token as the password with any non-empty user name.
            return pygit2.UserPass(auth.username or username_from_url or "git", auth.password)
        if allowed_types & CredentialType.USERNAME:
            return pygit2.Username(username_from_url or auth.username or "git")
        raise SourceError(f"the server at {url} asks for credentials and none of the right kind were given",
                          hint="pass --git-token-file / --git-password-file for HTTPS, or --ssh-key for SSH")

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        if not valid:
            raise SourceError(f"the certificate or host key of {host.decode(errors='replace')} is not trusted",
                              hint="for SSH, add the host to the known_hosts file (--ssh-known-hosts); for "
                                   "HTTPS, install the CA certificate")
        return True


class RemoteRepository:
    """A bare clone kept in ``cache_dir``, fetched on demand."""

    def __init__(self, url: str, ref: Ref, cache_dir: Path, auth: Auth | None = None) -> None:
        self.url = url
        self.ref = ref
        self.auth = auth or Auth()
        key = hashlib.sha256(url.encode()).hexdigest()[:16]
        self.path = Path(cache_dir) / f"repo-{key}.git"
        self._repo: pygit2.Repository | None = None

    def __repr__(self) -> str:
        return f"RemoteRepository({redact_url(self.url)}, {self.ref})"

    def _open(self) -> pygit2.Repository:
        if self._repo is None:
            if self.auth.known_hosts:
                _use_known_hosts(self.auth.known_hosts, self.path.parent)
            if (self.path / "HEAD").is_file():
                self._repo = pygit2.Repository(str(self.path))
                remote = self._repo.remotes["origin"]
                if remote.url != self.url:
                    self._repo.remotes.set_url("origin", self.url)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._repo = pygit2.init_repository(str(self.path), bare=True)
                self._repo.remotes.create("origin", self.url, "+refs/heads/*:refs/remotes/origin/*")
        return self._repo

    def fetch(self) -> str:
        """Fetch what the ref needs and return the commit id it points to now."""
        repo = self._open()
        if self.ref.commit and self.ref.commit in repo:
            return _peel(repo, self.ref.commit, self.ref)  # a pinned commit never moves: no network
        if self.ref.branch:
            refspecs = [f"+refs/heads/{self.ref.branch}:refs/remotes/origin/{self.ref.branch}"]
        elif self.ref.tag:
            refspecs = [f"+refs/tags/{self.ref.tag}:refs/tags/{self.ref.tag}"]
        else:
            refspecs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
        try:
            repo.remotes["origin"].fetch(refspecs, callbacks=_Callbacks(self.auth))
        except ReconcilerError:
            raise
        except (pygit2.GitError, KeyError, ValueError) as exc:
            raise SourceError(f"cannot fetch {str(self.ref)} from {redact_url(self.url)}: {exc}",
                              hint="check the URL, the ref and the credentials; the reconciler retries") from None
        if self.ref.branch:
            name = f"refs/remotes/origin/{self.ref.branch}"
        elif self.ref.tag:
            name = f"refs/tags/{self.ref.tag}"
        elif self.ref.commit:
            return _peel(repo, self.ref.commit, self.ref)
        else:
            name = self._default_branch(repo)
        try:
            target = repo.references[name].target
        except KeyError:
            raise SourceError(f"{self.ref} does not exist in {redact_url(self.url)}",
                              hint="check the spelling; branches and tags are case-sensitive") from None
        return _peel(repo, str(target), self.ref)

    def _default_branch(self, repo: pygit2.Repository) -> str:
        remote = repo.remotes["origin"]
        try:
            heads = remote.list_heads(callbacks=_Callbacks(self.auth))
            head = next((h for h in heads if h.name == "HEAD"), None)
            if head is not None and head.symref_target:
                return head.symref_target.replace("refs/heads/", "refs/remotes/origin/", 1)
        except pygit2.GitError:
            pass
        for candidate in ("main", "master"):
            if f"refs/remotes/origin/{candidate}" in repo.references:
                return f"refs/remotes/origin/{candidate}"
        raise SourceError(f"cannot tell the default branch of {redact_url(self.url)}", hint="pass --branch")

    @contextlib.contextmanager
    def checkout(self, commit: str) -> Iterator[Path]:
        """The tree of ``commit`` written into a temporary directory, removed afterwards."""
        tmp = Path(tempfile.mkdtemp(prefix="reconciler-tree-"))
        try:
            materialise(self._open(), commit, tmp)
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _peel(repo: pygit2.Repository, oid: str, ref: Ref) -> str:
    try:
        return str(repo[oid].peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise SourceError(f"{ref} is not in the fetched repository",
                          hint="a pinned commit must be reachable from a branch or tag of the remote") from None


def materialise(repo: pygit2.Repository, commit: str, dest: Path, *, max_bytes: int = MAX_TREE_BYTES,
                max_files: int = MAX_TREE_FILES) -> None:
    """Write the tree of ``commit`` under ``dest`` (which must exist and be empty)."""
    tree = repo[commit].peel(pygit2.Commit).tree
    budget = {"bytes": max_bytes, "files": max_files}
    try:
        _write_tree(repo, tree, dest, PurePosixPath(), budget)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        where = _rel(dest, str(exc.filename or ""))
        raise InputError(f"the repository has a path too long to write ({len(os.fsencode(where))} bytes)",
                         path=where[:80] + "...", hint="shorten the directory names") from None


def _rel(dest: Path, filename: str) -> str:
    prefix = str(dest) + os.sep
    return filename[len(prefix):] if filename.startswith(prefix) else filename


def _write_tree(repo: pygit2.Repository, tree: pygit2.Tree, dest: Path, rel: PurePosixPath,
                budget: dict[str, int]) -> None:
    if len(rel.parts) > MAX_TREE_DEPTH:  # recursion per level; and no file system holds such paths
        raise InputError(f"the repository nests directories more than {MAX_TREE_DEPTH} levels deep",
                         path="/".join(rel.parts[:3]) + "/...",
                         hint="a commit made by hand can nest trees without limit; flatten the directories")
    for entry in tree:
        name = entry.name
        path = rel / name
        if name in ("", ".", "..", ".git") or "/" in name or "\\" in name or "\0" in name:
            raise InputError(f"the repository has a tree entry named {name!r}, which is not allowed",
                             path=str(rel) or ".")
        if len(os.fsencode(name)) > MAX_NAME_BYTES:
            raise InputError(f"the repository has a tree entry named {name[:40]!r}... of "
                             f"{len(os.fsencode(name))} bytes; file systems hold at most {MAX_NAME_BYTES}",
                             path=str(rel) or ".", hint="rename it: git stores names of any length, but no "
                                                         "checkout can write this one")
        budget["files"] -= 1
        if budget["files"] < 0:
            raise InputError("the repository has too many files to read", hint=f"at most {MAX_TREE_FILES}")
        target = dest / path
        if entry.filemode == _MODE_TREE:
            target.mkdir()
            _write_tree(repo, repo[entry.id], dest, path, budget)
        elif entry.filemode == _MODE_COMMIT:
            continue  # submodules are not followed
        elif entry.filemode == _MODE_LINK:
            link = repo[entry.id].data.decode("utf-8", "replace")
            inside = PurePosixPath(os.path.normpath((rel / link).as_posix()))
            if link.startswith("/") or inside.parts[:1] == ("..",):
                raise InputError(f"symbolic link points outside the repository: {link}", path=str(path),
                                 hint="replace the link with the file it points to")
            os.symlink(link, target)
        else:
            blob = repo[entry.id]
            budget["bytes"] -= blob.size
            if budget["bytes"] < 0:
                raise InputError("the repository is too large to read", path=str(path),
                                 hint=f"at most {MAX_TREE_BYTES // (1024 * 1024)} MiB")
            target.write_bytes(blob.data)
            if entry.filemode == _MODE_EXEC:
                target.chmod(0o755)


def _use_known_hosts(known_hosts: Path, state_dir: Path) -> None:
    """libgit2 checks SSH host keys against ``$HOME/.ssh/known_hosts``: point its home at a copy of ours."""
    if not known_hosts.is_file():
        raise InputError("known_hosts file does not exist", path=str(known_hosts))
    home = state_dir / "ssh-home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(known_hosts, home / ".ssh" / "known_hosts")
    pygit2.settings.homedir = str(home)


def redact_url(url: str) -> str:
    """The URL without any password or token embedded in it."""
    return re.sub(r"://([^/@:]+)(:[^/@]*)?@", lambda m: f"://{m.group(1)}:***@" if m.group(2) else m.group(0), url)
