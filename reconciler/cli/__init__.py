"""The command line. ``parser`` builds the parser, runs a command and maps errors to exit codes; the commands
themselves are ``reconciler/commands/``, one module per group. Progress and log lines are set up here but live
in ``reconciler/report/``, where the pipeline and the loop report into them too."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The ``reconciler`` console entry point (pyproject.toml), importing the parser only when a command runs."""
    from reconciler.cli.parser import main as run

    return run(argv)
