"""The one root under which the reconciler caches: built tools, bundles, images and loaded catalogs."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import BinaryIO, Callable


def root() -> str:
    """$RECONCILER_CACHE_DIR, else ``reconciler`` in the XDG cache home ($XDG_CACHE_HOME, else ~/.cache).

    A string, not a ``Path``: a catalog load that hits its cache does not otherwise import pathlib.
    """
    if explicit := os.environ.get("RECONCILER_CACHE_DIR"):
        return explicit
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(xdg, "reconciler")
    return os.path.join(os.path.expanduser("~"), ".cache", "reconciler")


def write_atomic(path: str, data: bytes | Callable[[BinaryIO], object]) -> None:
    """Write a cache file whole or not at all: a file of this process's own (created, never reused), then a
    rename. A reader sees the old entry or the new one, never half of either. ``data`` is the bytes, or a
    function that writes them to the open file (a large entry is then never held in memory whole)."""
    import time

    tmp = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}-{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                data(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
