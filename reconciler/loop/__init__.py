"""The long-running loop: reconcile on every change of the source, and on an interval to correct drift.

``runner`` is the ``Loop`` and the outcome of each of its steps; ``sources`` are what it watches (a working tree, a
remote), ``lease`` elects a leader, ``relay`` hands a hook to the leader, ``server`` serves health, metrics and the
hook, and ``metrics`` are its Prometheus metrics."""

from __future__ import annotations

from reconciler.loop.runner import (
    ABORTED, APPLIED, CURRENT, FAILED, HEALTH_RECHECK, LeaderElector, LocalSource, Loop, Metrics, REJECTED,
    RemoteSource, SKIPPED, STANDBY, StepResult, UNCHANGED
)

__all__ = ["ABORTED", "APPLIED", "CURRENT", "FAILED", "HEALTH_RECHECK", "LeaderElector", "LocalSource", "Loop",
           "Metrics", "REJECTED", "RemoteSource", "SKIPPED", "STANDBY", "StepResult", "UNCHANGED"]
