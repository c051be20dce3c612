"""Which repository a tree is: the identity recorded on every Operator it installs.

Two repositories reconciled into one cluster must never prune or take over
each other's Operators, whatever their settings. So each status object records
the repository it came from, and an instance refuses to act on Operators
recorded from another one (``cluster/ownership/inventory.py``).

The identity has to be the same for every checkout of one repository (a
laptop's clone over SSH, the in-cluster fetch over HTTPS, a git-sync
checkout) and differ between two repositories, without anything written into
the repository: a generated id kept in a file would be copied along with a
template repository, and then two repositories would share it. So it is the
repository's address, normalised the way git hosts treat addresses as equal:

* ``reconciler.yaml``'s ``repository:`` when set (a mirror, or a checkout
  whose remote is not the repository's address);
* else the URL a remote source is fetched from;
* else the working tree's ``origin`` remote (its only remote, if it has one
  of another name);
* else the working tree's own path (``file://...``): a repository that lives
  only on this machine. A clone of it names that path as its origin, so the
  clone has the same identity.

Scheme, user name, a trailing ``.git`` and ``/`` are dropped and the host is
lowercased: ``git@github.com:org/ops.git``, ``ssh://git@github.com/org/ops``
and ``https://github.com/org/ops`` are all ``github.com/org/ops``. When the
reconciler reads a subdirectory of the git repository, the identity is
``<address>//<subdirectory>`` (kustomize's notation), since one repository
can hold the configuration of several instances.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>(?!//).*)$")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22, "git": 9418}
MAX_LENGTH = 512


def normalize(location: str) -> str:
    """A git address as the identity of the repository it names (see the module docstring)."""
    text = location.strip()
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower().removeprefix("git+").removesuffix("+ssh")
        if scheme == "file":
            return "file://" + _local(parts.path)
        host = (parts.hostname or "").lower()
        port = parts.port
        if port and port != _DEFAULT_PORTS.get(scheme):
            host = f"{host}:{port}"
        return host + "/" + _trim(parts.path)
    scp = _SCP.match(text)
    if scp and not os.path.exists(text):
        return scp.group("host").lower() + "/" + _trim(scp.group("path"))
    return "file://" + _local(text)


def from_setting(value: str) -> str:
    """``repository:`` as written in reconciler.yaml: an address (URL, ``host:path``) or already an identity."""
    text = value.strip()
    if "://" in text or text.startswith(("/", ".")) or _SCP.match(text):
        return normalize(text)
    host, _, path = text.partition("/")
    return host.lower() + ("/" + _trim(path) if path.strip("/") else "")


def _trim(path: str) -> str:
    path = path.strip("/")
    return path[:-4] if path.endswith(".git") else path


def _local(path: str) -> str:
    return os.path.abspath(path).rstrip("/") or "/"


def maybe_in_git(path: Path) -> bool:
    """Whether ``path`` may lie in a git repository: it or a parent holds ``.git``, or it is a git directory.

    pygit2's import is a fifth of a short command's start-up: a tree outside any repository does not pay it
    to find that out.
    """
    here = os.path.abspath(path)
    if os.path.isfile(os.path.join(here, "HEAD")) and os.path.isdir(os.path.join(here, "objects")):
        return True
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return True
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent


def detect(top: Path) -> str:
    """The identity of the working tree at ``top`` (no setting given): its origin remote, or its path."""
    if not maybe_in_git(top):
        return "file://" + _local(str(top))
    import pygit2

    try:
        found = pygit2.discover_repository(str(top))
        repo = pygit2.Repository(found) if found else None
    except pygit2.GitError:
        repo = None
    if repo is None or repo.workdir is None:
        return "file://" + _local(str(top))
    workdir = Path(repo.workdir).resolve()
    names = list(repo.remotes.names())
    remote = "origin" if "origin" in names else (names[0] if len(names) == 1 else None)
    url = repo.remotes[remote].url if remote else None
    base = normalize(url) if url else "file://" + _local(str(workdir))
    return with_subdirectory(base, top.relative_to(workdir).as_posix() if top != workdir else "")


def with_subdirectory(base: str, subdirectory: str) -> str:
    sub = subdirectory.strip("/")
    return f"{base}//{sub}" if sub and sub != "." else base


def git_dir(top: Path) -> Path | None:
    """The git repository (its .git directory) a working tree at ``top`` belongs to, if any."""
    if not maybe_in_git(top):
        return None
    import pygit2

    try:
        found = pygit2.discover_repository(str(top))
    except pygit2.GitError:
        return None
    return Path(found) if found else None


def has_commit(repository: Path | None, revision: str | None) -> bool:
    """Whether the git repository ``repository`` holds the commit a status object recorded (``-dirty`` ignored)."""
    if repository is None or not revision:
        return False
    commit = revision.removesuffix("-dirty")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return False
    import pygit2

    try:
        obj = pygit2.Repository(str(repository)).get(commit)
    except (pygit2.GitError, ValueError):
        return False
    return obj is not None and obj.type == pygit2.enums.ObjectType.COMMIT
