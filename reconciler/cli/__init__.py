"""The command line. ``parser`` builds the parser, runs a command and maps errors to exit codes; ``progress`` is
the report a run makes as it goes and ``logs`` (formatters in ``logformat``) sets up its log lines. The
pipeline and the loop report into ``progress`` and ``logs`` too, so importing either loads nothing else here."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The ``reconciler`` console entry point (pyproject.toml), importing the parser only when a command runs."""
    from reconciler.cli.parser import main as run

    return run(argv)
