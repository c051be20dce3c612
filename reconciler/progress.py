"""Progress of long work, for a person at a terminal: stage by stage, and objects as they are applied.

The pipeline calls ``stage()`` and ``item()`` wherever it is; they cost a
function call and do nothing until the CLI turns progress on, which it does
only when stderr is a terminal and ``-q`` is not given. So pipes, CI logs,
``-o json`` consumers and the loop never see it, and results on stdout are
never interleaved with it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, TextIO


class Progress:
    """The no-op default."""

    def stage(self, text: str) -> None:
        pass

    def item(self, text: str) -> None:
        pass


class TerminalProgress(Progress):
    """One line per stage with the time since the run started, one indented line per object."""

    def __init__(self, stream: TextIO) -> None:
        import threading  # only a terminal's progress needs a lock: not imported by a piped or quiet run

        self.stream = stream
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def _write(self, line: str) -> None:
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def stage(self, text: str) -> None:
        self._write(f"[{time.monotonic() - self.started:6.1f}s] {text}")

    def item(self, text: str) -> None:
        self._write(f"          {text}")


_current: Progress = Progress()


def stage(text: str) -> None:
    _current.stage(text)


def item(text: str) -> None:
    _current.item(text)


@contextmanager
def shown_on(stream: TextIO, *, quiet: bool = False) -> Iterator[Progress]:
    """Show progress on ``stream`` while inside, if it is a terminal and not ``quiet``."""
    global _current
    previous = _current
    isatty = getattr(stream, "isatty", None)
    if not quiet and isatty is not None and isatty():
        _current = TerminalProgress(stream)
    try:
        yield _current
    finally:
        _current = previous
