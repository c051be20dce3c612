"""A bound on the work of one CEL evaluation.

CEL has no loops, but comprehensions nest: seven ``[1..10].all(x, ...)``
inside each other are ten million evaluations of the innermost body, which
cel-python (an interpreter written in Python) would work through for hours.
Kubernetes bounds each expression by a cost budget; here each evaluation may
visit at most ``BUDGET`` nodes of the expression tree (every node of every
comprehension body counts again per element). The policies and constraints
of real repositories visit a few hundred; exceeding the budget is an error
of the expression, not a verdict, so it is raised as ``BudgetExceeded``.

The count is kept per thread and hooked into cel-python's evaluator once:
nested evaluators it creates for macros share the count.

``environment()`` is where both users of CEL (guardrail policies and
``olm.constraint`` rules) get their ``celpy.Environment``. cel-python builds
its Lark parser from the grammar once per process, and that analysis costs
0.1 to 1.5 s; Lark can store the analysed parser and load it back in a few
milliseconds (its ``cache`` option, which also checks the grammar and
options it was made from). So the first process stores it under
``<cache_dir>/cel/`` and every later one loads it, whatever options
cel-python passes: only the cache path is added to its own call.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from reconciler import cachedir

BUDGET = 100_000

_state = threading.local()
_installed = False
_lock = threading.Lock()


class BudgetExceeded(BaseException):
    """An evaluation ran out of budget.

    A BaseException, so that cel-python's own ``except Exception`` (which
    turns errors into values and evaluates on) cannot swallow it.
    """


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        from celpy import evaluation

        original = evaluation.Evaluator.visit_children

        def visit_children(self: Any, tree: Any) -> Any:
            left = getattr(_state, "left", None)
            if left is not None:
                if left <= 0:
                    raise BudgetExceeded()
                _state.left = left - 1
            return original(self, tree)

        evaluation.Evaluator.visit_children = visit_children
        _installed = True


def environment() -> Any:
    """A ``celpy.Environment`` whose parser was loaded from the cache when one is there."""
    import celpy
    from celpy import celparser

    with _lock:
        if celparser.CELParser.CEL_PARSER is None:
            _load_parser(celparser, celpy.InterpretedRunner.tree_node_class)
    return celpy.Environment()


def parser_file() -> str:
    """Where the analysed parser is kept: one file per cel-python, Lark and Python version."""
    from importlib.metadata import version

    try:
        versions = f"{version('cel-python')}-{version('lark')}"
    except Exception:  # noqa: BLE001 - no metadata (a vendored copy): Lark's own check of the grammar decides
        versions = "unknown"
    return os.path.join(cachedir.root(), "cel", f"parser-{versions}-py{sys.version_info[0]}{sys.version_info[1]}.lark")


def _load_parser(celparser: Any, tree_class: type) -> None:
    """Make cel-python's parser singleton with Lark's cache at ``parser_file()``.

    Lark writes the file in place, so a lock beside it is held while it is read or written: no process loads
    half of a file another is writing. Without a cache directory, the parser is built as cel-python would.
    """
    import fcntl
    import functools

    path = parser_file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        celparser.CELParser(tree_class=tree_class)
        return
    original = celparser.Lark
    celparser.Lark = functools.partial(original, cache=path)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        celparser.CELParser(tree_class=tree_class)
    finally:
        celparser.Lark = original
        os.close(lock)


def evaluate(program: Callable[[Any], Any], activation: Any, budget: int = BUDGET) -> Any:
    """``program(activation)``, raising ``BudgetExceeded`` once it has visited ``budget`` nodes."""
    _install()
    outer = getattr(_state, "left", None)
    _state.left = budget
    try:
        return program(activation)
    finally:
        _state.left = outer


__all__ = ["BUDGET", "BudgetExceeded", "environment", "evaluate"]
