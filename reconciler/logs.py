"""Log set-up for the CLI and the loop: text for people, one JSON object a line for collectors.

Structured fields travel in ``extra=`` (``operator``, ``revision``, ``object``,
``action``, ``duration``, ``reason``, ``outcome``): the text form appends them as
``key=value``, the JSON form makes them keys, as Flux's and Argo CD's controllers
log, so a log pipeline can filter on an Operator or a revision without parsing
the message.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

FIELDS = ("operator", "revision", "object", "action", "duration", "reason", "outcome")
LEVELS = ("debug", "info", "warning", "error")


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


def level_for(verbose: int, quiet: bool, default: str = "warning") -> str:
    """-q shows errors only; each -v shows one level more than the command's default."""
    if quiet:
        return "error"
    index = LEVELS.index(default) - verbose
    return LEVELS[max(index, 0)]


def setup(level: str | int = "warning", fmt: str = "text", stream: TextIO | None = None) -> None:
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
