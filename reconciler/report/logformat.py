"""The log formatters and handler behind ``reconciler.report.logs.setup``: text for people, JSON lines for collectors.

Kept apart from ``reconciler.report.logs`` because defining them imports ``logging``,
which a command that never logs does not otherwise pay for.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

FIELDS = ("operator", "revision", "object", "action", "duration", "reason", "outcome")  # see reconciler.report.logs


def _fields(record: logging.LogRecord) -> dict[str, object]:
    out = {}
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is not None and value != "":
            out[name] = round(value, 3) if isinstance(value, float) else value
    return out


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = _fields(record)
        if fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (it may be replaced after set-up)."""

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure(level: str | int, fmt: str, stream: TextIO | None) -> None:
    """Route the reconciler's logs (and the libraries') to stderr, replacing an earlier set-up."""
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_reconciler", False):
            root.removeHandler(old)
    handler._reconciler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # urllib3 warns about each connection attempt it repeats inside one request; the reconciler's own retry
    # layer reports the outcome (one error line when the server stays unreachable), so show those at debug only.
    logging.getLogger("urllib3.connectionpool").setLevel(
        logging.NOTSET if root.getEffectiveLevel() <= logging.DEBUG else logging.ERROR)
