"""A cache of loaded and validated catalogs, keyed by the digest of their content.

An entry is the pickled ``Catalog`` plus its findings, stored under
``<cache_dir>/catalogs/`` by a key derived from the SHA-256 of every catalog
file's relative path and bytes (plus the display root and a format version).
Content decides, so a checkout of the same commit elsewhere, or a ``touch``,
still hits.

Hashing every byte is cheap next to parsing, but not free for a large
catalog, so a second, smaller index maps a *stat key* (each file's relative
path, size, mtime and inode) to the content digest it was last seen with.
An unchanged tree then costs one ``stat`` per file. A stat key is only
trusted when every file's mtime is older than the moment the index was
written minus a safety margin: a file rewritten within the file system's
timestamp granularity could keep its size and mtime, and then only the
content hash can tell (the "racy git" problem).

The cache holds only what this process wrote into the user's own cache
directory; entries are written atomically and a corrupt or foreign-format
entry is treated as a miss.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import time

from reconciler import cachedir

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any

# Paths are strings here (no pathlib, no tempfile): a load that hits the cache is a short command's whole work.

# The key includes a digest of the code that produces a cached result, so changing the loader, the
# validation rules, the YAML reader or the model can never serve a result the current code would not give.
_PRODUCERS = ("reconciler/yamlio/__init__.py", "reconciler/yamlio/classes.py", "reconciler/yamlio/bounds.py", "reconciler/model/catalog.py", "reconciler/model/record.py",
              "reconciler/model/semver_range.py", "reconciler/catalog/load.py", "reconciler/catalog/validate.py",
              "reconciler/catalog/findings.py", "reconciler/catalog/cache.py")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _digest(paths: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(os.path.join(_ROOT, p), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


FORMAT = _digest(_PRODUCERS)
RACY_SECONDS = 2.0    # files modified this recently are never trusted by stat alone
KEEP_ENTRIES = 64     # newest entries kept; older ones are pruned when writing


def directory() -> str:
    return os.path.join(cachedir.root(), "catalogs")


def stat_key(files: list[tuple[str, os.stat_result]], display_root: str) -> str | None:
    """A key for the tree's metadata, or None if some file is too new to be trusted by stat alone."""
    h = hashlib.sha256(f"stat/{FORMAT}/{display_root}\0".encode("utf-8", "surrogateescape"))
    horizon = time.time() - RACY_SECONDS
    for rel, st in files:
        if st.st_mtime > horizon:
            return None
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


class ContentHasher:
    """Accumulates (relative path, bytes) of every file, in load order."""

    def __init__(self, display_root: str) -> None:
        self._h = hashlib.sha256(f"content/{FORMAT}/{display_root}\0".encode("utf-8", "surrogateescape"))

    def add(self, rel: str, data: bytes) -> None:
        self._h.update(f"{rel}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _path(kind: str, key: str) -> str:
    return os.path.join(directory(), f"{key}.{kind}")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def lookup_stat(key: str) -> str | None:
    try:
        return _read(_path("stat", key)).decode().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def get(content_key: str) -> Any | None:
    enabled = gc.isenabled()
    gc.disable()  # unpickling builds many small objects; the cyclic GC would rescan them repeatedly
    try:
        with open(_path("pickle", content_key), "rb") as f:   # unpickled as it is read: never held whole
            value = pickle.load(f)
    except Exception:  # a missing, corrupt or older entry is a miss, never an error
        return None
    finally:
        if enabled:
            gc.enable()
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        return None
    return value


def put(content_key: str, value: dict[str, Any], stat: str | None) -> None:
    """Store an entry (and the stat index pointing at it); failures to write are ignored.

    Pickled straight into the file: the pickle is never held in memory whole beside the catalog it encodes.
    """
    d = directory()
    entry = {**value, "format": FORMAT}
    try:
        os.makedirs(d, exist_ok=True)
        cachedir.write_atomic(_path("pickle", content_key), lambda f: pickle.dump(entry, f, protocol=5))
        if stat:
            cachedir.write_atomic(_path("stat", stat), content_key.encode())
        _prune(d)
    except OSError:
        pass


def remember_stat(stat: str, content_key: str) -> None:
    try:
        cachedir.write_atomic(_path("stat", stat), content_key.encode())
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _prune(d: str) -> None:
    with os.scandir(d) as it:
        entries = [(e.stat().st_mtime, e.name, e.path) for e in it if e.is_file()]
    entries.sort(reverse=True)
    for suffix, keep in ((".pickle", KEEP_ENTRIES), (".stat", KEEP_ENTRIES * 4)):
        for _, _, path in [e for e in entries if e[1].endswith(suffix)][keep:]:
            _unlink(path)
