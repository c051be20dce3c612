"""The apply engine's functions stay small in what they take: the run's state travels as one applier."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "reconciler" / "cluster" / "apply"
MOST = 7


def parameters(source: str) -> dict[str, int]:
    """Function name -> how many parameters it takes (``self`` and ``cls`` not counted)."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
            names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
            out[node.name] = len([n for n in names if n not in ("self", "cls")])
    return out


def test_no_function_of_the_engine_takes_more_than_seven_parameters():
    wide = [f"{path.name}:{name} takes {count}" for path in sorted(ENGINE.glob("*.py"))
            for name, count in parameters(path.read_text()).items() if count > MOST]
    assert wide == []


def test_the_count_sees_every_kind_of_parameter():
    assert parameters("def f(a, /, b, *c, d, **e): pass\nclass A:\n    def g(self, x): pass") == {"f": 5, "g": 1}
