"""What a short command imports: only what it uses, so its start-up stays small (figures: bench/startup_bench.py).

Each command runs in a fresh interpreter, as a user's would; a module another
command or a test has imported already would otherwise hide a regression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# The catalog the start-up benchmark times, and the libraries no offline catalog command needs (the Kubernetes
# client, deepdiff, python-sat, cel-python, oras, pygit2).
from bench.startup_bench import HEAVY, ONE_PACKAGE

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that sees the package and its libraries as an installed copy does.

    ``-S`` skips the site hooks of a development environment (an editable install's hook imports pathlib
    and re before anything else), which would hide what the command itself imports.
    """
    path = [str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))]
    return subprocess.run([sys.executable, "-S", "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(path)}, timeout=120)


def _cli_modules(*argv: str) -> tuple[int, str, set[str]]:
    """The exit code and stdout of ``reconciler ARGV`` in a fresh interpreter, and the modules it loaded."""
    child = ("import sys\nfrom reconciler.cli.parser import main\ntry:\n    code = main(sys.argv[1:])\n"
             "except SystemExit as exc:\n    code = exc.code\n"
             "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + "
             "' CODE ' + str(code) + '\\n')\n")
    proc = _run(child, *argv)
    tail = proc.stderr.rsplit("\nMODULES ", 1)[-1].split()
    assert "CODE" in tail, proc.stderr
    return int(tail[-1]), proc.stdout, set(tail[:-2]) | {m.split(".")[0] for m in tail[:-2]}


def test_catalog_validate_imports_only_what_it_uses(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "catalog.yaml").write_text(ONE_PACKAGE)
    code, out, modules = _cli_modules("catalog", "validate", "--no-cache", str(tmp_path / "one"))
    assert (code, out) == (0, "1 package, 1 channel, 1 bundle: valid\n")
    assert "yaml" in modules and "reconciler" in modules  # the check sees what the run loaded
    assert not {"logging", "semver", "json", "threading", "reconciler.model.views", *HEAVY} & modules, sorted(modules)
    # a third of a short command's start-up, before these were kept off its path (see ARCHITECTURE.md)
    assert not {"typing", "dataclasses", "inspect", "pathlib", "shutil"} & modules, sorted(modules)


def test_help_imports_only_the_parsers():
    code, out, modules = _cli_modules("--help")
    assert code == 0 and "catalog" in out
    assert not {"logging", "semver", "yaml", "json", "typing", "dataclasses", "pathlib", "shutil", *HEAVY} & modules, \
        sorted(modules)


def test_logs_are_set_up_when_logging_is_first_imported():
    """A command that never logs does not import logging; a library that logs later still gets the set-up."""
    child = ("import sys\nfrom reconciler.report import logs\nlogs.setup('info', 'json')\n"
             "print('logging' in sys.modules)\nimport logging\n"
             "logging.getLogger('reconciler.x').info('hello', extra={'operator': 'plumbus'})\n"
             "logging.getLogger('reconciler.x').debug('below the level')\n"
             "print(logging.__spec__.loader is logging.__loader__, type(logging.__loader__).__name__)\n")
    proc = _run(child)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "SourceFileLoader"]
    [line] = proc.stderr.splitlines()
    doc = json.loads(line)
    assert {k: doc[k] for k in ("level", "logger", "msg", "operator")} == {
        "level": "info", "logger": "reconciler.x", "msg": "hello", "operator": "plumbus"}


def test_verbose_applies_to_logs_of_a_module_imported_after_the_set_up(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "catalog.yaml").write_text(ONE_PACKAGE)
    child = ("import sys\nfrom reconciler.cli.parser import main\n"
             "code = main(sys.argv[1:])\nimport logging\n"
             "logging.getLogger('reconciler.x').info('shown with -v')\n"
             "logging.getLogger('reconciler.x').debug('shown with -vv only')\nprint(code)\n")
    proc = _run(child, "-v", "catalog", "validate", "--no-cache", str(tmp_path / "one"))
    assert proc.stdout.splitlines()[-1] == "0", proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.endswith(" INFO reconciler.x: shown with -v")


def test_a_dry_run_without_a_cluster_loads_no_client_and_a_second_no_cel(tmp_path, monkeypatch):
    """The first dry run judges the guardrails (cel-python); the second finds every verdict remembered and runs
    no CEL at all. Neither imports the Kubernetes client (no cluster is configured) nor pygit2 (no repository)."""
    from tests.support.repo import example_copy

    repo = tmp_path / "repo"
    example_copy(repo)
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, out, first = _cli_modules("reconcile", "--dry-run", str(repo))
    assert code == 1 and "Summary: 8 created" in out, out
    assert "celpy" in first and "kubernetes" not in first
    code, out, second = _cli_modules("reconcile", "--dry-run", str(repo))
    assert code == 1 and "Summary: 8 created" in out, out
    assert not {"celpy", "lark", "kubernetes"} & second, sorted(second)
    assert "pygit2" not in second   # a tree outside any git repository has no revision to read
