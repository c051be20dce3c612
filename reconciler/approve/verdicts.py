"""Guardrail verdicts remembered across processes, so that a run with nothing new to judge runs no CEL.

A verdict is a pure function of a policy's expressions and of the parts of
the activation they read (``guardrails.Policy.reads``), so it is stored under
a key made of both: the SHA-256 of the policy's fingerprint and of those
inputs. Whether an expression compiles is stored the same way, keyed by its
text. Either key also covers the code and the CEL library that produced the
verdict (``FORMAT``), so an upgrade never serves a verdict the current code
would not give.

The store is one JSON file under ``<cache_dir>/guardrails/``, read once per
process and kept in memory (the loop reuses it at every revision). When a
run adds verdicts the file is merged with what is on disk and replaced
atomically; past ``KEEP_ENTRIES`` the entries no run has used for longest are
dropped. JSON rather than pickle: loading the file never runs code, and a
corrupt or foreign file is an empty store, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

from reconciler import cachedir

KEEP_ENTRIES = 20_000
_PRODUCERS = ("approve/guardrails.py", "approve/verdicts.py", "model/celbudget.py")
# What cel-python evaluates with: its interpreter, its types and its grammar (found without importing it).
_CEL_FILES = ("__init__.py", "evaluation.py", "celtypes.py", "celparser.py", "cel.lark")


def _format() -> str:
    """A digest of the code that produces a verdict: ours and cel-python's."""
    from importlib.util import find_spec

    h = hashlib.sha256()
    ours = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    spec = find_spec("celpy")
    theirs = os.path.dirname(spec.origin) if spec and spec.origin else ""
    for path in [os.path.join(ours, p) for p in _PRODUCERS] + [os.path.join(theirs, p) for p in _CEL_FILES]:
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"-")
    return h.hexdigest()[:16]


FORMAT = _format()


def key(*parts: str) -> str:
    """A store key: 128 bits of SHA-256 over the format and the parts."""
    h = hashlib.sha256(FORMAT.encode())
    for part in parts:
        h.update(b"\0")
        h.update(part.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


class Store:
    """Verdicts by key: a list of violation messages (empty: passed); ``True`` for an expression that compiles."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, object] = _read(path)
        self._new: dict[str, object] = {}
        self._used: set[str] = set()

    def get(self, k: str) -> object | None:
        with self._lock:
            value = self._entries.get(k)
            if value is not None:
                self._used.add(k)
            return value

    def put(self, k: str, value: object) -> None:
        with self._lock:
            self._entries[k] = value
            self._new[k] = value
            self._used.add(k)

    def flush(self) -> None:
        """Write what this process added, merged with the file as it is now; a failure to write is ignored."""
        with self._lock:
            if not self._new:
                return
            merged = _read(self.path)
            for k in self._used:  # most recently used last: pruning drops from the front
                value = self._entries.get(k)
                if value is not None:
                    merged.pop(k, None)
                    merged[k] = value
            if len(merged) > KEEP_ENTRIES:
                merged = dict(list(merged.items())[-KEEP_ENTRIES:])
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                cachedir.write_atomic(self.path, json.dumps({"format": FORMAT, "entries": merged},
                                                    separators=(",", ":")).encode())
            except OSError:
                return
            self._entries.update(merged)
            self._new.clear()


_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def store() -> Store:
    """The store of the current cache directory (``$RECONCILER_CACHE_DIR`` is read each time)."""
    path = os.path.join(cachedir.root(), "guardrails", "verdicts.json")
    with _stores_lock:
        if path not in _stores:
            _stores[path] = Store(path)
        return _stores[path]


def _read(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), dict):
        return {}
    return {k: v for k, v in doc["entries"].items()
            if v is True or (isinstance(v, list) and all(isinstance(m, str) for m in v))}

