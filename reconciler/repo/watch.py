"""Watching a local working tree: call back once the tree has been quiet for a moment after a change.

watchdog reports every write of an editor's save (temporary file, rename,
attribute change) separately, and a ``git pull`` touches hundreds of files, so
events are debounced: the callback fires ``debounce`` seconds after the last
relevant event (and at the latest ``max_delay`` after the first).

Not every event is a change of desired state. The lockfile is the
reconciler's own write, so events on it are ignored (a hand edit of it is
still picked up by the loop's drift interval). Inside ``.git`` only moves of
HEAD and refs count, so a commit updates the recorded revision while index
refreshes and object writes do not trigger anything.

On a crowded machine (a Kubernetes node whose processes hold many inotify
instances) the kernel can refuse inotify at start: ``EMFILE``, the instance
limit, or ``ENOSPC``, the watch limit. The watcher then polls the tree instead
(watchdog's polling observer, every ``POLL_SECONDS``), says so once in the log,
and calls back as before, only later.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from reconciler.model.lock import LOCK_FILENAME

_OWN_WRITES = {LOCK_FILENAME, LOCK_FILENAME + ".tmp"}
POLL_SECONDS = 2.0   # how often a tree is scanned when inotify is refused
_INOTIFY_LIMITS = (errno.EMFILE, errno.ENOSPC)   # instances, watches
log = logging.getLogger("reconciler.loop")


def relevant(rel: str) -> bool:
    """Whether a change at ``rel`` (relative to the tree, POSIX separators) can change the desired state."""
    parts = PurePosixPath(rel).parts
    if not parts or parts[-1] in _OWN_WRITES:
        return False
    if ".git" in parts:
        inner = parts[parts.index(".git") + 1:]
        return inner in (("HEAD",), ("packed-refs",)) or (len(inner) > 1 and inner[0] == "refs"
                                                         and not rel.endswith(".lock"))
    return True


class TreeWatcher:
    """Calls ``on_change(paths)`` after changes under ``root`` settle."""

    def __init__(self, root: Path, on_change: Callable[[list[str]], None], *, debounce: float = 0.3,
                 max_delay: float = 2.0) -> None:
        self.root = Path(root).resolve()
        self.on_change = on_change
        self.debounce = debounce
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._first = 0.0
        self._timer: threading.Timer | None = None
        self.polling = False   # inotify was refused: the tree is scanned every POLL_SECONDS
        self._observer = Observer()
        self._observer.schedule(_Handler(self), str(self.root), recursive=True)

    def start(self) -> None:
        try:
            self._observer.start()
        except OSError as exc:
            if exc.errno not in _INOTIFY_LIMITS:
                raise
            self._observer = PollingObserver(timeout=POLL_SECONDS)
            self._observer.schedule(_Handler(self), str(self.root), recursive=True)
            self._observer.start()
            self.polling = True
            log.warning("watching %s by polling every %gs: %s (raise fs.inotify.%s to watch it with inotify)",
                        self.root, POLL_SECONDS, exc.strerror or exc,
                        "max_user_instances" if exc.errno == errno.EMFILE else "max_user_watches")

    def stop(self) -> None:
        self._observer.stop()
        with self._lock:
            if self._timer:
                self._timer.cancel()
        self._observer.join(timeout=5)

    def _event(self, path: str) -> None:
        try:
            rel = Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return
        if not relevant(rel):
            return
        with self._lock:
            now = time.monotonic()
            if not self._pending:
                self._first = now
            self._pending.add(rel)
            if self._timer:
                self._timer.cancel()
            delay = max(0.0, min(self.debounce, self._first + self.max_delay - now))
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            paths, self._pending, self._timer = sorted(self._pending), set(), None
        if paths:
            self.on_change(paths)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: TreeWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        for p in (event.src_path, getattr(event, "dest_path", "")):
            if p:
                self.watcher._event(p if isinstance(p, str) else p.decode())
