"""Every hostile case through every command that reads a repository (``every_command.py``), offline: none ends
in an internal error or a dead interpreter. ``test_hostile.py`` checks each case's own command and message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.parser import EXIT_INTERNAL
from tests.hostile.test_hostile import CASES, HERE, ROOT, _remove_deep, build, load_case


@pytest.mark.parametrize("name", CASES)
def test_no_command_ends_in_an_internal_error(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    deep: list[Path] = []
    request.addfinalizer(lambda: _remove_deep(deep))
    repo = build(load_case(name), name, tmp_path, deep)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"), KUBECONFIG="", RECONCILER_BUNDLE_CACHE="off")
    proc = subprocess.run([sys.executable, str(HERE / "every_command.py"), str(repo)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"the driver died (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == 9, proc.stdout + proc.stderr
    for command, code, internal, last in results:
        assert code != EXIT_INTERNAL and not internal, f"{command}: exit {code}: {last}"
