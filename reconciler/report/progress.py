"""Progress of long work, for a person at a terminal: stage by stage, and objects as they are applied.

The pipeline calls ``stage()`` and ``item()`` wherever it is; they cost a
function call and do nothing until the CLI turns progress on, which it does
only when stderr is a terminal and ``-q`` is not given. Elsewhere (pipes, CI
logs) ``-v`` turns it into log lines on stderr (stages at info, objects at
debug with ``-vv``), so a CI log gets what a terminal shows; without it,
``-o json`` consumers and the loop never see it, and results on stdout are
never interleaved with it.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import TextIO


class Progress:
    """The no-op default."""

    def stage(self, text: str) -> None:
        pass

    def item(self, text: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def clear(self) -> None:
        pass


class TerminalProgress(Progress):
    """One line per stage with the time since the run started, one indented line per object, and a status
    line that each new status overwrites (waiting for a rollout).

    The status line has no line end, so whatever comes next on the terminal (a stage, the report on stdout,
    an error) would continue it: it is erased first, by the next line of progress or by ``clear()``, which
    the CLI calls before printing results and when progress ends.
    """

    def __init__(self, stream: TextIO) -> None:
        import threading  # only a terminal's progress needs a lock: not imported by a piped or quiet run

        self.stream = stream
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._open = False   # a status line is on the terminal

    def _write(self, line: str, *, end: str = "\n") -> None:
        with self._lock:
            if self._open:
                self.stream.write(ERASE_LINE)
            self.stream.write(line + end)
            self._open = not end
            self.stream.flush()

    def stage(self, text: str) -> None:
        self._write(f"[{time.monotonic() - self.started:6.1f}s] {text}")

    def item(self, text: str) -> None:
        self._write(f"          {text}")

    def status(self, text: str) -> None:
        self._write(text[:STATUS_WIDTH], end="")

    def clear(self) -> None:
        with self._lock:
            if self._open:
                self.stream.write(ERASE_LINE)
                self.stream.flush()
                self._open = False


class LogProgress(Progress):
    """``-v`` where stderr is not a terminal (a CI log): each stage is an info line of the log and each object a
    debug line (``-vv``), written in order with the other logs; nothing is overwritten."""

    def __init__(self) -> None:
        import logging

        self.log = logging.getLogger("reconciler.progress")

    def stage(self, text: str) -> None:
        self.log.info(text)

    def item(self, text: str) -> None:
        self.log.debug(text.strip())

    def status(self, text: str) -> None:
        self.log.debug(text)


ERASE_LINE = "\r\033[K"   # back to the start of the line, and erase it
STATUS_WIDTH = 119
_current: Progress = Progress()


def stage(text: str) -> None:
    _current.stage(text)


def item(text: str) -> None:
    _current.item(text)


def status(text: str) -> None:
    """A transient line, replaced by the next status and erased before anything else is written."""
    _current.status(text)


def clear() -> None:
    """Erase the status line, if one is shown: before a command prints its results on the same terminal."""
    _current.clear()


class shown_on:
    """Show progress on ``stream`` inside a ``with`` block, if it is a terminal and not ``quiet``; elsewhere, with
    ``verbose`` (-v), as log lines.

    A class, not a ``contextlib`` generator: every command enters one, and contextlib is not otherwise imported.
    """

    def __init__(self, stream: TextIO, *, quiet: bool = False, verbose: int = 0) -> None:
        self.stream, self.quiet, self.verbose = stream, quiet, verbose

    def __enter__(self) -> Progress:
        global _current
        self.previous = _current
        isatty = getattr(self.stream, "isatty", None)
        if not self.quiet and isatty is not None and isatty():
            _current = TerminalProgress(self.stream)
        elif not self.quiet and self.verbose:
            _current = LogProgress()
        return _current

    def __exit__(self, *exc: object) -> None:
        global _current
        _current.clear()
        _current = self.previous
