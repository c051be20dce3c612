"""The reconcile command's --timeout durations, and the loop's recheck while an Operator rolls out."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from reconciler.cluster.health.judge import Status
from reconciler.commands.reconcile import duration
from reconciler.loop import HEALTH_RECHECK, Loop, StepResult


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0),
                                               ("0", 0.0), ("1.5m", 90.0)])
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5d", "-1s"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def step(*statuses: Status) -> StepResult:
    health = {f"op{i}": SimpleNamespace(status=s) for i, s in enumerate(statuses)}
    return StepResult("unchanged", outcome_detail=SimpleNamespace(sync=SimpleNamespace(health=health)))


def test_the_loop_looks_again_soon_while_rolling_out_backing_off_until_settled() -> None:
    loop = Loop(SimpleNamespace(), None)
    assert loop._health_recheck(step(Status.CURRENT, Status.FAILED)) is None
    delays = [loop._health_recheck(step(Status.CURRENT, Status.IN_PROGRESS)) for _ in range(9)]
    assert delays[:3] == [1.0, 2.0, 4.0] and delays[-1] == HEALTH_RECHECK[1]
    assert loop._health_recheck(step(Status.CURRENT)) is None
    assert loop._health_recheck(step(Status.NOT_FOUND)) == HEALTH_RECHECK[0]
