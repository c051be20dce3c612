"""The ``reconciler`` console entry point (pyproject.toml): it imports the parser only when a command runs, so
importing the entry point costs nothing."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from reconciler.cli.parser import main as run

    return run(argv)
