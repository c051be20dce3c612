"""The long-running loop: reconcile on every change of the source, and on an interval to correct drift.

The loop is a thin shell over ``reconciler.pipeline``: ``prepare`` reads,
resolves and converts a revision with no side effect on the cluster, and only
a revision that prepared cleanly is handed to ``apply``. The last one that
did is kept in memory as the *last good* state, so when a later revision fails
to load or resolve it is *rejected* (logged, counted, reported as a Warning
Event on the status objects) and never applied, while drift correction
carries on with the last good state, even when the broken tree is all that
is left on disk.

Failures that are not the revision's fault (a fetch that cannot reach the
remote, an API server that refuses or drops a request) are retried with
exponential backoff. With a leader elector, only the replica holding the
Lease reconciles. ``stop()`` (SIGTERM) lets the current step finish, or
aborts it before its first write, then releases the Lease.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler import pipeline
from reconciler.cluster import status as status_objects
from reconciler.cluster.apply import Action
from reconciler.cluster.kube import Kube
from reconciler.errors import ClusterError, PolicyError, ReconcilerError
from reconciler.loop.lease import LeaderElector
from reconciler.loop.metrics import Metrics
from reconciler.loop.sources import LocalSource, RemoteSource, Source, Target

__all__ = ["LeaderElector", "LocalSource", "Loop", "Metrics", "RemoteSource", "StepResult"]

log = logging.getLogger("reconciler.loop")
UNVERSIONED = "an unversioned tree"
# While an Operator is still rolling out, look again after 1 s, doubling up to 60 s.
HEALTH_RECHECK = (1.0, 60.0)

APPLIED, UNCHANGED, REJECTED, FAILED, CURRENT, ABORTED, STANDBY = (
    "applied", "unchanged", "rejected", "failed", "current", "aborted", "standby")


@dataclass(frozen=True)
class StepResult:
    """What one step did. ``revision`` is the one read; ``applied`` the one in the cluster afterwards."""

    outcome: str
    revision: str | None = None
    applied: str | None = None
    error: str | None = None
    outcome_detail: pipeline.Outcome | None = field(default=None, repr=False)


class Loop:
    def __init__(self, source: Source, kube: Kube | None, *, interval: float = 300.0, dry_run: bool = False,
                 elector: LeaderElector | None = None, metrics: Metrics | None = None,
                 backoff: tuple[float, float] = (1.0, 300.0), events_namespace: str = "default",
                 identity: str = "", report: Callable[[StepResult], None] | None = None) -> None:
        self.source = source
        self.kube = kube
        self.interval = interval
        self.dry_run = dry_run
        self.elector = elector
        self.metrics = metrics or Metrics()
        self.backoff = backoff
        self.events_namespace = events_namespace
        self.identity = identity
        self.report = report
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reasons: list[str] = []
        self._good: pipeline.Prepared | None = None
        self._good_key: str | None = None
        self._bad: tuple[str | None, str] | None = None  # (key or revision, message) of the last rejection
        self._failures = 0
        self.steps = 0
        self.last: StepResult | None = None
        self.running = False
        self._recheck = HEALTH_RECHECK[0]

    # -- control, from any thread ------------------------------------------------------------

    def trigger(self, reason: str = "requested") -> None:
        """Reconcile as soon as possible (a watched change, a webhook, leadership acquired)."""
        self._reasons.append(reason)
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def applied_revision(self) -> str | None:
        """The revision of the last good state in place; a tree outside git is named as such."""
        if self._good is None:
            return None
        return self._good.snapshot.revision or UNVERSIONED

    @property
    def ready(self) -> bool:
        """Ready once a first step has finished, or while standing by for the Lease."""
        if self.elector is not None and not self.elector.leading:
            return self.running
        return self.last is not None

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        self.running = True
        self._reasons.append("start")
        self.source.start(self.trigger)
        drift_due = time.monotonic()
        poll = self.source.poll_interval
        poll_due = time.monotonic() + poll if poll else float("inf")
        retry_due = float("inf")
        try:
            while not self._stop.is_set():
                if self.elector is not None and not self.elector.leading:
                    self.metrics.leader.set(0)
                    drift_due = time.monotonic()  # reconcile at once when leadership comes
                    self._wake.wait(self.elector.retry_period)
                    self._wake.clear()
                    continue
                self.metrics.leader.set(1)
                now = time.monotonic()
                woken = bool(self._reasons)
                if woken or now >= min(drift_due, poll_due, retry_due):
                    drift = now >= drift_due or now >= retry_due
                    reasons, self._reasons = self._reasons, []
                    result = self.step(drift=drift, reason=", ".join(reasons) or ("interval" if drift else "poll"))
                    now = time.monotonic()
                    if poll:
                        poll_due = now + poll
                    if result.outcome == FAILED:
                        retry_due = now + self._backoff_delay()
                    else:
                        retry_due = float("inf")
                        if drift or result.outcome in (APPLIED, UNCHANGED):
                            drift_due = now + self.interval
                        if (recheck := self._health_recheck(result)) is not None:
                            drift_due = min(drift_due, now + recheck)
                timeout = max(0.0, min(drift_due, poll_due, retry_due) - time.monotonic())
                if self._wake.wait(timeout):
                    self._wake.clear()
        finally:
            self.source.stop()
            self.running = False

    def _backoff_delay(self) -> float:
        base, cap = self.backoff
        return min(cap, base * 2 ** max(0, self._failures - 1))

    def step(self, *, drift: bool = True, reason: str = "") -> StepResult:
        """Read the source and apply it if it prepared cleanly; else keep (and on drift re-apply) the last good."""
        started = time.monotonic()
        try:
            target = self.source.current()
        except ReconcilerError as exc:
            return self._finish(self._failed(None, exc, "fetch"), started)
        seen = target.key is not None and target.key in (self._good_key, self._bad and self._bad[0])
        if seen and not drift:
            return self._finish(StepResult(CURRENT, target.revision, self.applied_revision), started,
                                count=False)
        fresh, rejected = True, None
        if target.key is not None and target.key == self._good_key:
            prepared, fresh = self._good, False
        else:
            try:
                t0 = time.monotonic()
                with self.source.tree(target) as path:
                    prepared = pipeline.prepare(path, revision=target.key, kube=self.kube)
                self.metrics.resolution_duration.observe(time.monotonic() - t0)
            except ClusterError as exc:  # reading installed state failed: not the revision's fault
                return self._finish(self._failed(target.revision, exc, "resolve"), started)
            except ReconcilerError as exc:
                rejected = self._reject(target, exc)
                if self._good is None or not drift:
                    return self._finish(rejected, started)
                prepared, fresh = self._good, False
        assert prepared is not None
        if self._stop.is_set():
            log.info("stopping: not applying %s", prepared.snapshot.revision)
            return self._finish(StepResult(ABORTED, target.revision, self.applied_revision), started, count=False)
        if self.elector is not None and not self.elector.leading:
            return self._finish(StepResult(STANDBY, target.revision, self.applied_revision), started, count=False)
        try:
            outcome = pipeline.apply(prepared, self.kube, dry_run=self.dry_run,
                                     write_lockfile=fresh and self.source.write_lockfile)
        except PolicyError as exc:  # the revision asks for something refused: as bad as one that does not load
            return self._finish(self._reject(target, exc), started)
        except ClusterError as exc:
            return self._finish(self._failed(target.revision, exc, "apply"), started)
        except ReconcilerError as exc:
            return self._finish(self._reject(target, exc), started)
        if fresh:
            self._good, self._good_key = prepared, target.key
            if self._bad and self._bad[0] in (target.key, target.revision):
                self._bad = None
        self._failures = 0
        result = StepResult(APPLIED if outcome.sync.changed else UNCHANGED, target.revision,
                            prepared.snapshot.revision or UNVERSIONED, outcome_detail=outcome)
        self._applied(result, outcome, reason, fresh)
        if rejected is not None:  # the source is still bad: that stays the step's outcome
            result = dataclasses.replace(rejected, outcome_detail=outcome)
        return self._finish(result, started)

    def _health_recheck(self, result: StepResult) -> float | None:
        """Seconds until the next look when an Operator is still rolling out, backing off; None when all settled.

        A step judges health once and never waits for a rollout, so it comes
        back soon to record Ready when the rollout ends, instead of an interval later.
        """
        health = result.outcome_detail.sync.health if result.outcome_detail is not None else {}
        if not any(h.status.value in ("InProgress", "NotFound") for h in health.values()):
            self._recheck = HEALTH_RECHECK[0]
            return None
        delay, self._recheck = self._recheck, min(self._recheck * 2, HEALTH_RECHECK[1])
        return delay

    # -- reporting ---------------------------------------------------------------------------

    def _finish(self, result: StepResult, started: float, *, count: bool = True) -> StepResult:
        self.steps += 1
        self.last = result
        if count:
            self.metrics.reconcile_duration.observe(time.monotonic() - started)
            self.metrics.reconciles.labels(result.outcome).inc()
        if self.report:
            self.report(result)
        return result

    def _applied(self, result: StepResult, outcome: pipeline.Outcome, reason: str, fresh: bool) -> None:
        sync = outcome.sync
        counts = {a: sync.count(a) for a in (Action.CREATED, Action.CONFIGURED, Action.DELETED)}
        for action, n in counts.items():
            if n and not self.dry_run:
                self.metrics.objects.labels(action.value).inc(n)
        revision = result.applied or UNVERSIONED
        self.metrics.applied_commit.info({"revision": result.applied or ""})
        self.metrics.applied_timestamp.set_to_current_time()
        if not fresh:
            reason += "; the last good state, kept while the source is rejected" if self._bad else ""
        if sync.changed:
            log.info("applied %s (%s): %s", revision, reason, ", ".join(f"{n} {a.value}" for a, n in counts.items()))
            if not self.dry_run:
                for op in sorted({c.operator for c in sync.changes if c.action in counts}):
                    n = {a: sum(1 for c in sync.changes if c.operator == op and c.action == a) for a in counts}
                    self._event(op, "Normal", "Applied", f"applied {revision}: "
                                + ", ".join(f"{k} {a.value}" for a, k in n.items()))
        else:
            log.info("%s is applied: no changes (%s)", revision, reason)

    def _reject(self, target: Target, exc: ReconcilerError) -> StepResult:
        key = target.key or target.revision
        message = exc.render()
        keep = self.applied_revision
        result = StepResult(REJECTED, target.revision, keep, message)
        if self._bad == (key, message):
            return result  # already reported
        self._bad = (key, message)
        self.metrics.rejected_commit.info({"revision": target.revision or "", "error": exc.message[:200]})
        log.error("not applying %s: %s; %s", target.revision or "the working tree", message,
                  f"{keep} stays applied" if keep else "nothing was applied yet")
        for name in self._status_names():
            self._event(name, "Warning", "RevisionRejected",
                        f"revision {target.revision or '(working tree)'} was not applied: {message}; "
                        f"{keep or 'the previous state'} stays applied")
        return result

    def _failed(self, revision: str | None, exc: ReconcilerError, stage: str) -> StepResult:
        self._failures += 1
        log.error("%s failed (attempt %d, retrying in %.0fs): %s", stage, self._failures, self._backoff_delay(),
                  exc.render())
        return StepResult(FAILED, revision, self.applied_revision, exc.render())

    def _status_names(self) -> list[str]:
        if self.kube is None or self.dry_run:
            return []
        try:
            return sorted(status_objects.read_all(self.kube))
        except ClusterError:
            return []

    def _event(self, name: str, type_: str, reason: str, message: str) -> None:
        if self.kube is None or self.dry_run:
            return
        try:
            status_objects.record_event(self.kube, name, type_=type_, reason=reason, message=message,
                                        namespace=self.events_namespace, instance=self.identity)
        except ClusterError as exc:
            log.warning("could not record an event on Operator %s: %s", name, exc.message)
