"""What a run does to a cluster (``cluster/``: the apply engine, health, status and the ownership policy around
them) stays small: the run's state travels as one object (the applier, a planner, a sync run, a status writer),
not as parameters threaded from function to function, and each step reads as a page."""

from __future__ import annotations

import ast
from pathlib import Path
from tests.support.paths import RECONCILER

CLUSTER = RECONCILER / "cluster"
MOST_PARAMETERS = 7
MOST_LINES = 60


def functions(source: str) -> dict[str, tuple[int, int]]:
    """Function name -> (how many parameters it takes, ``self`` and ``cls`` not counted; how many lines)."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
            names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
            out[node.name] = (len([n for n in names if n not in ("self", "cls")]),
                              (node.end_lineno or node.lineno) - node.lineno + 1)
    return out


def _modules() -> list[Path]:
    found = sorted(CLUSTER.rglob("*.py"))
    assert {p.parent.name for p in found} >= {"apply", "health", "status", "ownership", "takeover"}   # all of it
    return found


def test_no_function_of_the_engine_takes_more_than_seven_parameters():
    wide = [f"{path.relative_to(CLUSTER)}:{name} takes {count}" for path in _modules()
            for name, (count, _) in functions(path.read_text()).items() if count > MOST_PARAMETERS]
    assert wide == []


def test_every_function_of_the_engine_reads_as_a_page():
    long = [f"{path.relative_to(CLUSTER)}:{name} is {lines} lines" for path in _modules()
            for name, (_, lines) in functions(path.read_text()).items() if lines > MOST_LINES]
    assert long == []


def test_the_count_sees_every_kind_of_parameter_and_every_line():
    source = "def f(a, /, b, *c, d, **e):\n    pass\n\n    return\nclass A:\n    def g(self, x): pass"
    assert functions(source) == {"f": (5, 4), "g": (1, 1)}
