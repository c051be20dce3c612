"""Every skip in tests/ names the part it leaves untested (a marker of pyproject.toml), and a run lists those parts.

The skips are read from the source (an AST walk of every module under tests/): a new skip written with
``pytest.skip``, ``skipif``, ``importorskip`` or ``mark.skip`` fails here, with where it is and what to write
instead (``tests/support/parts.py``).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.parts import not_tested
from tests.support.paths import ROOT

TESTS = ROOT / "tests"
PARTS_MODULE = TESTS / "support" / "parts.py"
BARE = {"skip", "skipif", "importorskip", "xfail"}   # pytest.<name>, pytest.mark.<name>, from pytest import <name>
HOW = ("name the part it leaves untested: @pytest.mark.<part>(missing=..., reason=...) or "
       "tests.support.parts.not_tested(<part>, reason), <part> one of pyproject.toml's markers")


def declared() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {name.strip(): rest.strip() for name, _, rest in (m.partition(":") for m in config["markers"])}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def problems(path: Path, source: str, parts: dict[str, str]) -> list[str]:
    """Each skip in ``source`` that names no declared part, as ``path:line: what``."""
    found = []
    tree = ast.parse(source, str(path))
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT) if path.is_absolute() else path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            if name.startswith(("pytest.", "unittest.")) and node.attr in BARE | {"skipIf", "skipUnless"} \
                    and name.count(".") <= 2:
                found.append(f"{where}: {name} skips without naming a part: {HOW}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("pytest", "_pytest.outcomes", "_pytest.skipping"):
            for alias in node.names:
                if alias.name in BARE:
                    found.append(f"{where}: from {node.module} import {alias.name}: {HOW}")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.endswith("not_tested"):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    found.append(f"{where}: not_tested's part must be written out (one of {', '.join(sorted(parts))})")
                elif first.value not in parts:
                    found.append(f"{where}: not_tested({first.value!r}): no such part in pyproject.toml's markers")
            elif name.startswith("pytest.mark.") and any(k.arg == "missing" for k in node.keywords):
                part = name.removeprefix("pytest.mark.")
                if part not in parts:
                    found.append(f"{where}: pytest.mark.{part}(missing=...): no such part in pyproject.toml's markers")
                if not any(k.arg == "reason" for k in node.keywords):
                    found.append(f"{where}: pytest.mark.{part}(missing=...) says no reason: add reason=...")
    return sorted(found, key=lambda line: int(line.split(": ", 1)[0].rsplit(":", 1)[1]))


def test_every_skip_in_the_tests_names_a_declared_part():
    parts = declared()
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path != PARTS_MODULE:
            found += problems(path, path.read_text(errors="replace"), parts)
    assert found == [], "\n".join(found)


def test_the_check_finds_a_bare_skip_in_each_of_its_forms():
    parts = declared()
    source = ("import pytest\nfrom pytest import skip\n"
              "@pytest.mark.skipif(True, reason='x')\ndef test_a(): pytest.skip('y')\n"
              "yaml = pytest.importorskip('yaml')\n"
              "@pytest.mark.corpus(missing=True)\ndef test_b(): not_tested('nowhere', 'z')\n"
              "@pytest.mark.corpus(missing=True, reason='r')\ndef test_c(): not_tested('corpus', 'fine')\n")
    lines = problems(Path("tests/x/test_new.py"), source, parts)
    assert [line.split(": ", 1)[0] for line in lines] == [f"tests/x/test_new.py:{n}" for n in (2, 3, 4, 5, 6, 7)], lines
    assert "from pytest import skip" in lines[0] and "pytest.mark.skipif skips" in lines[1]
    assert "no reason" in lines[4] and "not_tested('nowhere'): no such part" in lines[5]


def test_every_part_says_what_it_is_and_why_it_may_not_be_tested():
    undescribed = [name for name, text in declared().items() if len(text) < 20]
    assert undescribed == [], f"markers without a description in pyproject.toml: {undescribed}"


def test_a_run_ends_listing_what_it_did_not_test_how_many_tests_and_why(tmp_path: Path):
    """A real pytest run (in a process of its own) of a few tests that skip through the parts, one that runs."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\naddopts = \"--strict-markers\"\nmarkers = [\n"
        "  \"corpus: reads the corpus (not tested where it is absent)\",\n"
        "  \"olmv1: runs OLM v1 (not tested where it cannot be built)\",\n]\n")
    (tmp_path / "test_parts.py").write_text(
        "import pytest\nfrom tests.support.parts import not_tested\n\n"
        "@pytest.fixture(scope='module')\ndef olm():\n    not_tested('olmv1', 'the module proxy refuses boxcutter')\n\n"
        "def test_one(olm): pass\n\ndef test_two(olm): pass\n\n"
        "@pytest.mark.corpus(missing=True, reason='../shared/corpus is absent')\n"
        "@pytest.mark.parametrize('n', [1, 2, 3])\ndef test_three(n): pass\n\n"
        "@pytest.mark.corpus(missing=False, reason='not said')\ndef test_runs(): pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.parts", "-p", "no:cacheprovider",
                           "-q", "-rs", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "1 passed, 5 skipped" in out, out
    assert ("Not tested in this run:\n"
            "  corpus (3 tests): ../shared/corpus is absent\n"
            "  olmv1 (2 tests): the module proxy refuses boxcutter\n") in out, out
    # pytest's own line for each skip points at the test, not at the helper that raised it
    assert "SKIPPED [1] test_parts.py:8: the module proxy refuses boxcutter\n" in out, out
    assert out.index("SKIPPED [3] test_parts.py:12") < out.index("Not tested in this run:")   # the list comes last
    everything = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.parts", "-p", "no:cacheprovider",
                                 "-q", str(tmp_path / "test_parts.py::test_runs")], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "Not tested in this run: nothing (no test was skipped)." in everything.stdout, everything.stdout


def test_the_readmes_example_prints_the_list_it_shows(tmp_path: Path):
    """README.md's command, run as printed from the project's root, ends with the list README.md shows."""
    from tests.docblocks import indented_block

    [command] = indented_block("README.md", "taskset -c 0 .venv/bin/python -m pytest -q tests/catalog/test_parallel.py")
    if not (ROOT / ".venv" / "bin" / "python").exists():
        not_tested("lockedenv", "the command runs .venv's python, and there is no .venv (`make install` makes it)")
    shown = indented_block("README.md", "Not tested in this run:")
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTEST_ADDOPTS": f"-p no:cacheprovider --basetemp={tmp_path / 'pt'}"})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(shown[0])
    assert lines[at:at + len(shown)] == shown, done.stdout
    assert lines[at + len(shown)].startswith("3 passed, 3 skipped"), done.stdout   # the last thing before the counts
