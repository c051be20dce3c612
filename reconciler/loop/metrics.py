"""Prometheus metrics of the loop, kept in a registry of their own.

A private registry (rather than the client library's global one) lets two
loops live in one process, as in tests, without their series colliding.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
OUTCOMES = ("applied", "unchanged", "rejected", "failed", "skipped")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reconcile_duration = Histogram(
            "reconciler_reconcile_duration_seconds", "Time of one reconcile, from reading the source to the "
            "last write", registry=r, buckets=_BUCKETS)
        self.resolution_duration = Histogram(
            "reconciler_resolution_duration_seconds", "Time to read, resolve and convert one revision",
            registry=r, buckets=_BUCKETS)
        self.reconciles = Counter(
            "reconciler_reconciles", "Reconciles by outcome: applied (changes written), unchanged, rejected "
            "(the revision failed to load or resolve; nothing applied), failed (fetch or cluster error), skipped (a "
            "commit that changes nothing this run reads)",
            ["outcome"], registry=r)
        self.objects = Counter("reconciler_objects", "Objects written to the cluster, by action",
                               ["action"], registry=r)
        self.applied_commit = Info("reconciler_applied", "The revision last applied", registry=r)
        self.applied_timestamp = Gauge("reconciler_last_applied_timestamp_seconds",
                                       "When a revision was last applied successfully", registry=r)
        self.rejected_commit = Info("reconciler_rejected", "The last revision refused because it failed to "
                                    "load or resolve, and the kind of error (the text is in the logs and Events)",
                                    registry=r)
        # Per Operator, in the shape of Flux's gotk_reconcile_*: labels are bounded by the declared Operators.
        self.operator_reconciles = Counter(
            "reconciler_operator_reconciles", "Reconciles of one Operator by result: changed (objects written), "
            "unchanged, failed", ["operator", "result"], registry=r)
        self.operator_drift = Counter(
            "reconciler_operator_drift_corrected", "Reconciles of an unchanged revision that had to write "
            "objects again because the cluster drifted from it", ["operator"], registry=r)
        self.operator_condition = Gauge(
            "reconciler_operator_condition", "1 for the current status of each condition of an Operator "
            "(type Ready, status True, False or Unknown), 0 for the others", ["operator", "type", "status"],
            registry=r)
        self._operators: set[str] = set()
        self.leader = Gauge("reconciler_leader", "1 while this replica is the one reconciling (it holds the Lease, or runs without leader election)", registry=r)
        self.last_step = Gauge(
            "reconciler_last_step_outcome", "1 for the outcome of the last step (applied, unchanged, rejected, "
            "failed, skipped), 0 for the others", ["outcome"], registry=r)
        self.failures = Gauge(
            "reconciler_consecutive_failures", "Steps failed in a row (the source or the API server could not be "
            "reached, or refused); 0 once a step succeeds", registry=r)
        for outcome in OUTCOMES:
            self.reconciles.labels(outcome)
            self.last_step.labels(outcome)
        for action in ("created", "configured", "deleted"):
            self.objects.labels(action)

    def last_outcome(self, outcome: str) -> None:
        for o in OUTCOMES:
            self.last_step.labels(o).set(1 if o == outcome else 0)

    def condition(self, operator: str, type_: str, status: str) -> None:
        self._operators.add(operator)
        for s in ("True", "False", "Unknown"):
            self.operator_condition.labels(operator, type_, s).set(1 if s == status else 0)

    def reconciled(self, operator: str, result: str, *, drift: bool = False) -> None:
        self._operators.add(operator)
        self.operator_reconciles.labels(operator, result).inc()
        if drift:
            self.operator_drift.labels(operator).inc()

    def keep_only(self, operators: set[str]) -> None:
        """Drop the series of Operators no longer declared, so label values stay bounded."""
        for name in self._operators - operators:
            for metric in (self.operator_reconciles, self.operator_drift, self.operator_condition):
                for labels in [k for k in metric._metrics if k[0] == name]:  # noqa: SLF001
                    metric.remove(*labels)
        self._operators &= operators
