"""Every reason a script can read from `adopt -o json` (``Unmapped.code``) is the one docs/output.md lists, and the
doc lists no reason the code cannot give."""

from __future__ import annotations

import ast
import re
from tests.support.paths import ROOT


def _codes_in_code() -> set[str]:
    found = set()
    for path in sorted((ROOT / "reconciler" / "adopt").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Unmapped" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
    return found


def _codes_in_doc() -> set[str]:
    text = (ROOT / "docs" / "output.md").read_text()
    section = text.split("## `adopt -o json|yaml`", 1)[1].split("\n## ", 1)[0]
    prose = section.split("The reasons an install is not adopted", 1)[1]
    return set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", prose))


def test_the_documented_reasons_are_the_ones_the_code_gives():
    in_code = _codes_in_code()
    assert len(in_code) > 20   # the walk sees the adopt modules' Unmapped(...) calls
    assert _codes_in_doc() == in_code
