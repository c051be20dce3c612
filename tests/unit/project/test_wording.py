"""Counted nouns agree with their number everywhere the reconciler prints one: never "1 problems", "2 cluster(s)".

Every message counts through ``report.words.counted`` (and ``agree`` for the verb); the source is read to
find a string that says "(s)", or a number put straight before a plural noun, so a new message cannot bring
either back.
"""

from __future__ import annotations

import ast
import re

import pytest

from reconciler.report.words import agree, counted

from tests.support.paths import ROOT

# Nouns the messages count; a number formatted straight before one of their plurals is a "1 problems".
NOUNS = ("problem", "cluster", "Operator", "bundle", "object", "package", "channel", "warning", "error", "finding",
         "replica", "pod", "component", "resource", "namespace", "file", "entry", "change", "declaration", "rule",
         "group", "install", "document", "path", "field", "commit", "image", "key", "step", "stage", "request",
         "line", "update", "approval", "catalog", "endpoint", "resolution", "thing")
PLURALS = re.compile(r"^ (?:[a-z-]+ )?(" + "|".join(counted(2, n).split(" ", 1)[1] for n in NOUNS) + r")\b")


@pytest.mark.parametrize("n, noun, plural, said", [
    (1, "problem", None, "1 problem"), (2, "problem", None, "2 problems"), (0, "cluster", None, "0 clusters"),
    (1, "entry", None, "1 entry"), (3, "entry", None, "3 entries"), (2, "old replica", None, "2 old replicas"),
    (2, "policy", "policies", "2 policies"), (2, "match", None, "2 matches"), (1, "Operator", None, "1 Operator"),
    (2, "key", None, "2 keys")])
def test_a_count_agrees_with_its_noun(n, noun, plural, said):
    assert counted(n, noun, plural) == said


def test_a_verb_agrees_with_its_count():
    assert (agree(1, "was", "were"), agree(2, "was", "were"), agree(0, "was", "were")) == ("was", "were", "were")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _a_number(expr: ast.expr) -> bool:
    """Whether a formatted expression is (most likely) a count: ``len(...)``, ``sum(...)``, arithmetic, or a
    variable named as one."""
    if isinstance(expr, ast.Call):
        return getattr(expr.func, "id", "") in ("len", "sum")
    if isinstance(expr, ast.BinOp):
        return True
    name = expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else ""
    return name in ("count", "n", "total", "missing", "unreachable", "warnings", "waiting", "clusters")


def _found() -> list[str]:
    found = []
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if re.search(r"[a-z]\(s\)", node.value):
                    found.append(f"{where}:{node.lineno}: {node.value.strip()[:80]!r} says '(s)'")
            if isinstance(node, ast.JoinedStr):
                parts = node.values
                for before, after in zip(parts, parts[1:]):
                    if not (isinstance(before, ast.FormattedValue) and isinstance(after, ast.Constant)):
                        continue
                    if not _a_number(before.value):
                        continue
                    if (m := PLURALS.match(str(after.value))):
                        found.append(f"{where}:{node.lineno}: a number before {m.group(1)!r}")
    return found


def test_no_message_counts_without_agreeing():
    found = _found()
    assert not found, "\n".join(found)


def test_no_module_that_counts_shadows_the_helpers():
    """A local named like a helper the module imports (``counted = ...``, ``for counted in``) breaks it."""
    found = []
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "reconciler.report.words" for a in node.names}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.id}" for node in ast.walk(tree)
                  if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in imported]
    assert not found, found
