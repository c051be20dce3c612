"""Help with examples on every command, and tab completion through a real bash."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.parser import build_parser, main, subcommands

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_has_examples_and_exit_codes():
    parsers = subcommands(build_parser())
    assert {"reconcile", "watch", "catalog graph", "bundle render", "completion"} <= set(parsers)
    for path, parser in parsers.items():
        text = parser.format_help()
        assert "\nExamples:\n  " in text, f"`reconciler {path} --help` has no Examples section"
        assert "exit codes:" in text, f"`reconciler {path} --help` does not list its exit codes"
        assert text.index("Examples:") < text.index("exit codes:")
        for line in text.split("Examples:\n", 1)[1].split("\n\n", 1)[0].splitlines():
            assert line.startswith("  "), line


def test_completion_scripts(capsys):
    for shell, marker in (("bash", "complete "), ("zsh", "#compdef reconciler"), ("fish", "complete --command reconciler")):
        out = io.StringIO()
        assert main(["completion", shell], out=out) == 0
        assert marker in out.getvalue(), shell
    with pytest.raises(SystemExit) as exc:
        main(["completion", "tcsh"], out=io.StringIO())
    assert exc.value.code == 64


@pytest.mark.bash(missing=shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_flags_and_choices(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "reconciler"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m reconciler "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}

    def complete(line: str) -> list[str]:
        script = ('source <(reconciler completion bash)\n'
                  f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; read -ra COMP_WORDS <<< "$COMP_LINE"\n'
                  '[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")\n'
                  'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
                  '_python_argcomplete reconciler\nprintf "%s\\n" "${COMPREPLY[@]}"\n')
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return sorted(w.strip() for w in proc.stdout.splitlines() if w.strip())

    assert complete("reconciler cat") == ["catalog"]
    assert {"graph", "list", "render", "template", "validate"} <= set(complete("reconciler catalog "))
    assert "reconcile" not in complete("reconciler catalog ")
    assert complete("reconciler reconcile . --dry") == ["--dry-run"]
    assert complete("reconciler watch . --log-format ") == ["json", "text"]
    fleet = ROOT / "examples" / "fleet-repo"   # a fleet's cluster and stage names, read from the typed REPO
    assert complete(f"reconciler reconcile {fleet} --cluster ") == ["dev", "prod-eu", "prod-us", "staging"]
    assert complete(f"reconciler diff {fleet} --cluster prod-") == ["prod-eu", "prod-us"]
    assert complete(f"reconciler promote {fleet} --to ") == ["dev", "prod", "staging"]
    assert complete(f"reconciler promote {fleet} --to st") == ["staging"]


def test_help_of_a_run_is_the_whole_tree_help(capsys):
    """A run builds only its command's parsers; every --help reads as the whole tree's does."""
    for path, parser in subcommands(build_parser()).items():
        with pytest.raises(SystemExit) as exc:
            main([*path.split(), "--help"])
        assert exc.value.code == 0
        assert capsys.readouterr().out == parser.format_help(), f"`reconciler {path} --help` differs"
    with pytest.raises(SystemExit) as exc:
        main(["catalogue", "validate"])
    assert exc.value.code == 64
    assert "invalid choice: 'catalogue'" in capsys.readouterr().err
