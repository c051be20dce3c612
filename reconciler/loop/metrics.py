"""Prometheus metrics of the loop, kept in a registry of their own.

A private registry (rather than the client library's global one) lets two
loops live in one process, as in tests, without their series colliding.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


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
            "(the revision failed to load or resolve; nothing applied), failed (fetch or cluster error)",
            ["outcome"], registry=r)
        self.objects = Counter("reconciler_objects", "Objects written to the cluster, by action",
                               ["action"], registry=r)
        self.applied_commit = Info("reconciler_applied", "The revision last applied", registry=r)
        self.applied_timestamp = Gauge("reconciler_last_applied_timestamp_seconds",
                                       "When a revision was last applied successfully", registry=r)
        self.rejected_commit = Info("reconciler_rejected", "The last revision refused because it failed to "
                                    "load or resolve", registry=r)
        self.leader = Gauge("reconciler_leader", "1 while this replica is the one reconciling (it holds the Lease, or runs without leader election)", registry=r)
        for outcome in ("applied", "unchanged", "rejected", "failed"):
            self.reconciles.labels(outcome)
        for action in ("created", "configured", "deleted"):
            self.objects.labels(action)
