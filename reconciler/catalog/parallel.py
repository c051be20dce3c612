"""Parsing a large catalog's files on two processes at once.

Parsing is most of a cold load (libyaml's scanner and the objects built from
its events), it holds the interpreter lock, and an index holds one file per
package. So when the files of one load add up to more than ``MIN_BYTES``, the
process forks once: the child parses about half of the bytes and hands the
parsed documents back, pickled, through a pipe (a fraction of what parsing
them cost); the parent parses the rest meanwhile. Results keep the load
order, so findings and the catalog are the same as a serial load's.

Only a process running a single thread forks (the CLI; not the in-cluster
loop, whose other threads may hold locks a child would inherit), and only
where there is a second CPU. Whatever goes wrong in the child (it dies, its
output is cut short) costs only time: the parent parses that half itself and
reports what it finds there as a serial load would.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from reconciler import yamlio
from reconciler.errors import InputError

if TYPE_CHECKING:
    from reconciler.catalog.load import CatalogFile

MIN_BYTES = 1 << 20  # below about a megabyte a fork and a pickle cost more than they save

# (parsed documents, None) or (None, (message, path, hint)) of the InputError that refused the file
Parsed = tuple[list[Any] | None, tuple[str, str | None, str | None] | None]


def parse(f: CatalogFile) -> Parsed:
    try:
        return yamlio.read_all(f.path, f.display), None
    except InputError as exc:
        return None, (exc.message, exc.path, exc.hint)


def parse_all(files: Sequence[CatalogFile]) -> Iterator[tuple[CatalogFile, Parsed]]:
    """Each file with its parse result, in the order given."""
    sizes = [_size(f) for f in files]
    if len(files) < 2 or sum(sizes) < MIN_BYTES or not _may_fork():
        for f in files:
            yield f, parse(f)
        return
    mine, theirs = _halves(sizes)
    results: dict[int, Parsed] = {}
    child = _fork([files[i] for i in theirs])
    for i in mine:
        results[i] = parse(files[i])
    handed = _collect(child) if child else None
    if handed is None or len(handed) != len(theirs):  # the child failed: parse its half here
        handed = [parse(files[i]) for i in theirs]
    results.update(zip(theirs, handed))
    for i, f in enumerate(files):
        yield f, results[i]


def _size(f: CatalogFile) -> int:
    try:
        return (f.stat or f.path.stat()).st_size
    except OSError:
        return 0


def _may_fork() -> bool:
    if not hasattr(os, "fork"):
        return False
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) > 1


def _halves(sizes: list[int]) -> tuple[list[int], list[int]]:
    """Indexes split into two groups of about equal bytes (largest first, each to the lighter group)."""
    groups: tuple[list[int], list[int]] = ([], [])
    totals = [0, 0]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = 0 if totals[0] <= totals[1] else 1
        groups[g].append(i)
        totals[g] += sizes[i]
    return sorted(groups[0]), sorted(groups[1])


def _fork(files: list[CatalogFile]) -> tuple[int, int] | None:
    """Start a child that parses ``files``; its pid and the pipe's read end, or None if it cannot start."""
    import pickle

    try:
        read, write = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid:
        os.close(write)
        return pid, read
    code = 1  # the child: never returns into the caller's code, never runs its exit handlers
    try:
        os.close(read)
        data = pickle.dumps([parse(f) for f in files], protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write, "wb") as out:
            out.write(data)
        code = 0
    finally:
        os._exit(code)


def _collect(child: tuple[int, int]) -> list[Parsed] | None:
    """What the child handed back, or None if it failed."""
    import pickle

    pid, read = child
    chunks = []
    try:
        with os.fdopen(read, "rb") as pipe:
            while chunk := pipe.read(1 << 20):
                chunks.append(chunk)
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a cut-short stream: parse that half in the parent instead
        return None
