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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

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


def evaluate(program: Callable[[Any], Any], activation: Any, budget: int = BUDGET) -> Any:
    """``program(activation)``, raising ``BudgetExceeded`` once it has visited ``budget`` nodes."""
    _install()
    outer = getattr(_state, "left", None)
    _state.left = budget
    try:
        return program(activation)
    finally:
        _state.left = outer


__all__ = ["BUDGET", "BudgetExceeded", "evaluate"]
