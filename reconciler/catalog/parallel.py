"""Parsing a large catalog's files on two processes at once.

Parsing is most of a cold load (libyaml's scanner and the objects built from
its events), it holds the interpreter lock, and an index holds one file per
package. So when the YAML files of one load add up to more than ``MIN_BYTES``,
the process forks once (a single large YAML file counts as two pieces, split at
a document marker): the child parses about half of the bytes and hands the
parsed documents back, pickled, through a pipe (a fraction of what parsing
them cost; unpickled as they stream, so the parent never holds the pickle
besides the objects); the parent parses the rest meanwhile. Results keep the load
order, so findings and the catalog are the same as a serial load's.

Only a process running a single thread forks (the CLI; not the in-cluster
loop, whose other threads may hold locks a child would inherit), and only
where there is a second CPU. Whatever goes wrong in the child (it dies, its
output is cut short) costs only time: the parent parses that half itself and
reports what it finds there as a serial load would.
"""

from __future__ import annotations

import os
import re
import sys

from reconciler import yamlio
from reconciler.catalog.load import empty_documents
from reconciler.errors import InputError

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Sequence

    from reconciler.catalog.load import CatalogFile

    # (parsed documents, None, lines of the empty documents) or (None, (message, path, hint), ()) of the
    # InputError that refused the file; a piece's empty documents are found in the whole file's text
    Parsed = tuple[list[Any] | None, tuple[str, str | None, str | None] | None, tuple[int, ...]]
    Unit = tuple[int, str | None]  # a file's index, and the text of one of its pieces (None: the whole file)

MIN_BYTES = 1 << 19   # below half a megabyte a fork and a pickle cost more than they save
SPLIT_BYTES = 1 << 18  # a YAML file this large may be parsed as two pieces, split at a document marker
_MARKER = re.compile(r"^---(?=[ \t\r\n]|$)", re.M)
_DIRECTIVE = re.compile(r"^%", re.M)


def parse(f: CatalogFile, piece: str | None = None) -> Parsed:
    """The file's documents and the lines of its empty ones (``load.empty_documents``), or one ``piece``'s
    documents; the file is read once for both."""
    try:
        if piece is not None:
            return yamlio.load_all(piece, f.display, go=True), None, ()
        text = yamlio.read_text(f.path, f.display)
        return yamlio.load_all(text, f.display, go=True), None, tuple(empty_documents(text))
    except InputError as exc:
        return None, (exc.message, exc.path, exc.hint), ()


def parse_all(files: Sequence[CatalogFile]) -> Iterator[tuple[CatalogFile, Parsed]]:
    """Each file with its parse result, in the order given."""
    sizes = [_size(f) for f in files]
    is_json = [f.rel.endswith(".json") for f in files]
    units: list[Unit] = []
    if sum(s for s, j in zip(sizes, is_json) if not j) >= MIN_BYTES and _may_fork():
        for i, f in enumerate(files):
            pieces = _pieces(f) if sizes[i] >= SPLIT_BYTES and not is_json[i] else None
            units += [(i, p) for p in pieces] if pieces else [(i, None)]
    # JSON parses in C about ten times faster than YAML, and its documents unpickle no faster than they
    # parse: JSON files stay with the parent, counted at a tenth of their bytes.
    mine, theirs = _halves([(sizes[i] if p is None else len(p)) // (10 if is_json[i] else 1) for i, p in units],
                           [is_json[i] for i, _ in units])
    if not theirs:
        for f in files:
            yield f, parse(f)
        return
    yamlio.import_pyyaml()  # imported once, before the fork, not by each process after it
    child = _fork(lambda: [_parse_unit(files, units[k]) for k in theirs])
    try:
        results = {k: _parse_unit(files, units[k]) for k in mine}
    except BaseException:  # a bug or an interrupt here: the child must not wait on a pipe nobody reads
        if child:
            _abandon(child)
        raise
    handed = _collect(child) if child else None
    if handed is None or len(handed) != len(theirs):  # the child failed: parse its half here
        handed = [_parse_unit(files, units[k]) for k in theirs]
    results.update(zip(theirs, handed))
    parts: dict[int, list[Parsed]] = {}
    for k, (i, _) in enumerate(units):
        parts.setdefault(i, []).append(results[k])
    for i, f in enumerate(files):
        got = parts[i]
        if len(got) == 1:
            yield f, got[0]
        elif all(refused is None for _, refused, _ in got):
            whole = "".join(p for j, p in units if j == i)   # the pieces are the file's text, split once
            yield f, ([doc for docs, _, _ in got for doc in docs or ()], None, tuple(empty_documents(whole)))
        else:  # a piece was refused: the whole file says why, with its own line numbers
            yield f, parse(f)


def _pieces(f: CatalogFile) -> list[str] | None:
    """A large YAML stream as two pieces split at the document marker nearest its middle, if it has one.

    A ``---`` at the start of a line always starts a document (no scalar may
    contain one there), and anchors do not reach across documents, so the
    pieces parse to the file's documents. A stream with directives is left
    whole (a directive belongs to the document after it); so is JSON, which
    parses fast enough. Any piece that fails to parse sends the whole file
    back to a serial parse, so a split never changes what is reported.
    """
    try:
        text = yamlio.read_text(f.path, f.display)
    except InputError:
        return None  # the whole-file parse reports it
    head = text.lstrip()
    if head.startswith(("{", "[")) or _DIRECTIVE.search(text):
        return None
    middle = len(text) // 2
    at = next((m.start() for m in _MARKER.finditer(text, middle)), None)
    if at is None:
        at = max((m.start() for m in _MARKER.finditer(text) if m.start() < middle), default=0)
    return [text[:at], text[at:]] if at else None


def _parse_unit(files: Sequence[CatalogFile], unit: Unit) -> Parsed:
    return parse(files[unit[0]], unit[1])


def _size(f: CatalogFile) -> int:
    try:
        return (f.stat or os.stat(f.path)).st_size
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


def _halves(costs: list[int], pinned: list[bool]) -> tuple[list[int], list[int]]:
    """Indexes split into two groups of about equal cost (largest first, each to the cheaper group); the
    pinned ones go to the first group."""
    groups: tuple[list[int], list[int]] = ([], [])
    totals = [0, 0]
    for i in sorted(range(len(costs)), key=lambda i: (not pinned[i], -costs[i])):
        g = 0 if pinned[i] or totals[0] <= totals[1] else 1
        groups[g].append(i)
        totals[g] += costs[i]
    return sorted(groups[0]), sorted(groups[1])


def _fork(work: Callable[[], list[Parsed]]) -> tuple[int, int] | None:
    """Start a child that runs ``work``; its pid and the pipe's read end, or None if it cannot start."""
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
        result = work()
        with os.fdopen(write, "wb") as out:   # streamed: the whole pickle is never held as one bytes object
            pickle.dump(result, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def _abandon(child: tuple[int, int]) -> None:
    import signal

    pid, read = child
    os.close(read)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _collect(child: tuple[int, int]) -> list[Parsed] | None:
    """What the child handed back, or None if it failed.

    Unpickled as it streams from the pipe: holding the pickled bytes whole (and joined) besides the objects
    made from them would double the memory the child's half costs the parent.
    """
    import pickle

    pid, read = child
    handed = None
    try:
        with os.fdopen(read, "rb") as pipe:
            try:
                handed = pickle.load(pipe)
            except Exception:  # noqa: BLE001 - a cut-short stream: parse that half in the parent instead
                handed = None
            while pipe.read(1 << 16):   # never leave the child blocked on a full pipe
                pass
    finally:
        _, status = os.waitpid(pid, 0)
    return handed if status == 0 else None
