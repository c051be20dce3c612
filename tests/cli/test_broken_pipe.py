"""Output piped into a reader that stops early (`reconciler ... | head`) ends the run quietly, for every command.

Each run is a real process whose stdout (and, where said, stderr) is a pipe
whose reading end is already closed, so its first write meets EPIPE
deterministically, whatever the size of the output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.commands import COMMANDS
from reconciler.errors import EXIT_BROKEN_PIPE
from tests.support.repo import example_copy

ROOT = Path(__file__).resolve().parents[2]


def run_into_closed_pipe(*argv: str, close_stderr: bool = False, cwd: Path = ROOT) -> tuple[int, str]:
    """Run ``reconciler ARGV`` with stdout (and with ``close_stderr`` stderr too) into a pipe nobody reads;
    its exit code and what it wrote on stderr when stderr is kept."""
    read, write = os.pipe()
    os.close(read)   # the reader is gone before the first byte is written
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "RECONCILER_TRACEBACK")}
    env["HOME"] = str(cwd)   # no ~/.kube/config: commands that want a cluster say so on stderr
    try:
        proc = subprocess.run([sys.executable, "-m", "reconciler", *argv], stdout=write,
                              stderr=write if close_stderr else subprocess.PIPE, stdin=subprocess.DEVNULL,
                              cwd=cwd, env=env, timeout=300)
    finally:
        os.close(write)
    return proc.returncode, (proc.stderr or b"").decode()


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_of_every_command(command):
    code, err = run_into_closed_pipe(*([command] if command else []), "--help")
    assert (code, err) == (EXIT_BROKEN_PIPE, "")


@pytest.mark.parametrize("argv", [
    ("--version",),
    ("catalog", "list", "packages", "-c", "catalogs/community"),
    ("catalog", "graph", "plumbus", "-c", "catalogs/community", "-f", "dot"),
    ("bundle", "render", "bundles/plumbus/1.1.0"),
    ("resolve", ".", "--offline", "--no-write"),
    ("reconcile", ".", "--dry-run", "--write-lock"),
    ("completion", "bash"),
])
def test_output_of_commands(tmp_path, argv):
    example_copy(tmp_path / "repo")
    code, err = run_into_closed_pipe(*argv, cwd=tmp_path / "repo")
    assert (code, err) == (EXIT_BROKEN_PIPE, "")


def test_an_error_written_into_a_closed_pipe(tmp_path):
    """`2>&1 | head`: the error line itself meets the closed pipe; still no traceback and no internal error."""
    code, _ = run_into_closed_pipe("status", close_stderr=True, cwd=tmp_path)
    assert code == EXIT_BROKEN_PIPE
