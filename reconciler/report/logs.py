"""Log set-up for the CLI and the loop: text for people, one JSON object a line for collectors.

Structured fields travel in ``extra=`` (``operator``, ``revision``, ``object``,
``action``, ``duration``, ``reason``, ``outcome``): the text form appends them as
``key=value``, the JSON form makes them keys, as Flux's and Argo CD's controllers
log, so a log pipeline can filter on an Operator or a revision without parsing
the message.

Most commands never log (a catalog validation, a render, an offline
resolution), and importing ``logging`` is a noticeable part of their
start-up; so ``setup`` configures it at once only when something has
imported it already, and otherwise the moment something first does (the
formatters live in ``reconciler.report.logformat``). The effect is the same: no
record can be emitted before ``logging`` is imported.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any, TextIO

LEVELS = ("debug", "info", "warning", "error")


def level_for(verbose: int, quiet: bool, default: str = "warning") -> str:
    """-q shows errors only; each -v shows one level more than the command's default."""
    if quiet:
        return "error"
    index = LEVELS.index(default) - verbose
    return LEVELS[max(index, 0)]


def setup(level: str | int = "warning", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Route the reconciler's logs (and the libraries') to stderr, replacing an earlier set-up."""
    for finder in [f for f in sys.meta_path if isinstance(f, _OnImport)]:
        sys.meta_path.remove(finder)
    if "logging" in sys.modules:
        from reconciler.report.logformat import configure

        configure(level, fmt, stream)
    else:
        sys.meta_path.insert(0, _OnImport(level, fmt, stream))


class _OnImport:
    """An import finder that lets ``logging`` be imported as usual, then configures it (once)."""

    def __init__(self, *args: Any) -> None:
        self.args = args

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "logging":
            return None
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if finder is not self and hasattr(finder, "find_spec") \
                else None
            if spec is not None:
                spec.loader = _ThenConfigure(spec.loader, self)
                return spec
        return None


class _ThenConfigure:
    """``logging``'s own loader, followed by the pending ``setup``; it then steps aside."""

    def __init__(self, loader: Any, finder: _OnImport) -> None:
        self.loader, self.finder = loader, finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self.loader
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
            from reconciler.report.logformat import configure

            configure(*self.finder.args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
