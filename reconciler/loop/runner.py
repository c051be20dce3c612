"""The loop's steps: reconcile on every change of the source, and on an interval to correct drift.

The loop is a thin shell over ``reconciler.pipeline``: ``prepare`` reads,
resolves and converts a revision with no side effect on the cluster, and only
a revision that prepared cleanly is handed to ``apply``. The last one that
did is kept in memory as the *last good* state, so when a later revision fails
to load or resolve it is *rejected* (logged, counted, reported as a Warning
Event on the status objects) and never applied, while drift correction
carries on with the last good state, even when the broken tree is all that
is left on disk.

Any exception while preparing a revision rejects it, an unexpected one (a
bug, reported as an internal error) included: no input stops the loop.
Failures that are not the revision's fault (a fetch that cannot reach the
remote, an API server that refuses or drops a request, an unexpected
exception while applying) are retried with exponential backoff: the drift
interval and the polls wait for the retry, only a trigger (a change, a hook,
leadership) comes sooner; the replica is not ready meanwhile. With a leader
elector, only the replica holding the Lease reconciles. ``stop()`` (SIGTERM) lets the current step finish, or
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
from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.status.events import EventRecorder
from reconciler.cluster.apply import Action
from reconciler.kube.client import Kube
from reconciler.errors import ClusterError, InternalError, PolicyError, ReconcilerError
from reconciler.loop.lease import LeaderElector
from reconciler.loop.metrics import Metrics
from reconciler.loop.sources import LocalSource, RemoteSource, Source, Target
from reconciler.repo import inputs as repo_inputs
from reconciler.report.words import agree, counted

__all__ = ["LeaderElector", "LocalSource", "Loop", "Metrics", "RemoteSource", "StepResult"]

log = logging.getLogger("reconciler.loop")
UNVERSIONED = "an unversioned tree"
# While an Operator is still rolling out, look again after 1 s, doubling up to 60 s.
HEALTH_RECHECK = (1.0, 60.0)

APPLIED, UNCHANGED, REJECTED, FAILED, CURRENT, ABORTED, STANDBY, SKIPPED = (
    "applied", "unchanged", "rejected", "failed", "current", "aborted", "standby", "skipped")


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
                 identity: str = "", report: Callable[[StepResult], None] | None = None,
                 cluster: str | None = None) -> None:
        self.source = source
        self.cluster = cluster   # the fleet cluster this loop reconciles (watch --cluster)
        self.kube = kube
        self.interval = interval
        self.dry_run = dry_run
        self.elector = elector
        self.metrics = metrics or Metrics()
        self.backoff = backoff
        self.events_namespace = events_namespace
        self.identity = identity
        self.events = EventRecorder()   # the Events this loop writes, remembered for its life (a repeat is a PATCH)
        self.report = report
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reasons: list[str] = []
        self._good: pipeline.Prepared | None = None
        self._good_key: str | None = None
        self._bad: tuple[str | None, str] | None = None  # (key or revision, message) of the last rejection
        self._rejection_shown = True   # status.rejected may be on status objects (unknown before the first apply)
        self._failures = 0
        self._retry_due: float | None = None
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
        """Ready once a step has finished without failing, or while standing by for the Lease.

        A failed step (the source or the API server could not be reached, or refused) makes the replica
        unready until a step succeeds: it cannot do its work. A rejected revision does not: the last good
        state stays applied and is still corrected for drift; the repository is what needs fixing.
        """
        if self.elector is not None and not self.elector.leading:
            return self.running
        return self.last is not None and self.last.outcome != FAILED

    @property
    def failures(self) -> int:
        """Steps failed in a row."""
        return self._failures

    @property
    def retry_in(self) -> float | None:
        """Seconds until the retry of a failed step (sooner on a trigger); None when nothing failed."""
        if self._retry_due is None:
            return None
        return max(0.0, self._retry_due - time.monotonic())

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
                if woken or now >= self._due(drift_due, poll_due, retry_due):
                    drift = now >= drift_due or now >= retry_due
                    reasons, self._reasons = self._reasons, []
                    try:
                        result = self.step(drift=drift,
                                           reason=", ".join(reasons) or ("interval" if drift else "poll"))
                    except Exception as exc:  # noqa: BLE001 - a bug in one step must not end the loop
                        log.exception("unexpected error in a reconcile step")
                        result = self._finish(self._failed(None, InternalError.wrap(exc), "step"), time.monotonic())
                    now = time.monotonic()
                    if poll:
                        poll_due = now + poll
                    if result.outcome == FAILED:
                        retry_due = now + self._backoff_delay()
                    else:
                        retry_due = float("inf")
                        self._failures = 0
                        self.metrics.failures.set(0)
                        if drift or result.outcome in (APPLIED, UNCHANGED):
                            drift_due = now + self.interval
                        if (recheck := self._health_recheck(result)) is not None:
                            drift_due = min(drift_due, now + recheck)
                    self._retry_due = retry_due if retry_due != float("inf") else None
                timeout = max(0.0, self._due(drift_due, poll_due, retry_due) - time.monotonic())
                if self._wake.wait(timeout):
                    self._wake.clear()
        finally:
            self.source.stop()
            self.running = False

    @staticmethod
    def _due(drift_due: float, poll_due: float, retry_due: float) -> float:
        """When the next step of the loop's own comes: after a failure, the retry and nothing sooner (the drift
        interval and the polls wait for it, as the log says); else the drift interval or the next poll."""
        return retry_due if retry_due != float("inf") else min(drift_due, poll_due)

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
        except Exception as exc:  # noqa: BLE001 - reported and retried like an unreachable source
            log.exception("unexpected error reading the source")
            return self._finish(self._failed(None, InternalError.wrap(exc), "fetch"), started)
        seen = target.key is not None and target.key in (self._good_key, self._bad and self._bad[0])
        if seen and not drift:
            return self._finish(StepResult(CURRENT, target.revision, self.applied_revision), started,
                                count=False)
        fresh, rejected = True, None
        if target.key is not None and target.key != self._good_key and self._unchanged_inputs(target):
            self._good_key = target.key   # what it would read is what the last good state read
            if not drift:
                return self._finish(StepResult(SKIPPED, target.revision, self.applied_revision), started)
        if target.key is not None and target.key == self._good_key:
            prepared, fresh = self._good, False
        else:
            try:
                t0 = time.monotonic()
                with self.source.tree(target) as path:
                    repository, git_dir = self.source.origin(path)
                    prepared = pipeline.prepare(pipeline.Source(
                        path, revision=target.key, identity=repository, git_dir=git_dir, cluster=self.cluster,
                        trust=getattr(self.source, "trust", None), tag=getattr(self.source, "tag", None)), self.kube)
                self.metrics.resolution_duration.observe(time.monotonic() - t0)
            except ClusterError as exc:  # reading installed state failed: not the revision's fault
                return self._finish(self._failed(target.revision, exc, "resolve"), started)
            except Exception as exc:  # noqa: BLE001 - any failure to prepare rejects the revision
                if not isinstance(exc, ReconcilerError):
                    log.exception("unexpected error preparing %s", target.revision or "the working tree")
                    exc = InternalError.wrap(exc)
                rejected = self._reject(target, exc)
                if self._good is None or not drift:
                    return self._finish(rejected, started)
                prepared, fresh = self._good, False
        assert prepared is not None
        if fresh and not drift and rejected is None and target.key is not None and not self.source.write_lockfile \
                and self._good is not None and not self._rejection_shown and self.kube is not None \
                and not self.dry_run and (self.elector is None or self.elector.leading) \
                and pipeline.same_intent(self._good, prepared):
            # A commit whose every write, status included, would be what is in place: the cluster is not read
            # again for it (the drift interval and the health rechecks still read it). Recorded as a skip: the
            # applied revision stays. A working tree is always applied (its lockfile is written).
            self._good_key = target.key
            log.info("skipped %s: what it asks of %s is what %s applied; nothing to write", target.revision,
                     self._whom(), self.applied_revision, extra={"revision": target.revision or "",
                                                                  "outcome": SKIPPED})
            return self._finish(StepResult(SKIPPED, target.revision, self.applied_revision), started)
        if self._stop.is_set():
            log.info("stopping: not applying %s", prepared.snapshot.revision)
            return self._finish(StepResult(ABORTED, target.revision, self.applied_revision), started, count=False)
        if self.elector is not None and not self.elector.leading:
            return self._finish(StepResult(STANDBY, target.revision, self.applied_revision), started, count=False)
        try:
            outcome = pipeline.apply(prepared, self.kube, dry_run=self.dry_run,
                                     write_lockfile=fresh and self.source.write_lockfile, events=self.events)
        except PolicyError as exc:  # the revision asks for something refused: as bad as one that does not load
            return self._finish(self._reject(target, exc), started)
        except ClusterError as exc:
            return self._finish(self._failed(target.revision, exc, "apply"), started)
        except ReconcilerError as exc:
            return self._finish(self._reject(target, exc), started)
        except Exception as exc:  # noqa: BLE001 - a bug while applying: retried with backoff, the loop goes on
            log.exception("unexpected error applying %s", prepared.snapshot.revision or "the working tree")
            return self._finish(self._failed(target.revision, InternalError.wrap(exc), "apply"), started)
        # A drift correction re-applies what was applied before: the same revision and the same lockfile (a
        # working tree has no key to tell, so an edit shows as a new lockfile or revision).
        same = not fresh or (self._good is not None and self._good.snapshot.revision == prepared.snapshot.revision
                             and self._good.lockfile.render() == prepared.lockfile.render())
        if fresh:
            self._good, self._good_key = prepared, target.key
            if self._bad and self._bad[0] in (target.key, target.revision):
                self._bad = None
        self._failures = 0
        result = StepResult(APPLIED if outcome.sync.changed else UNCHANGED, target.revision,
                            prepared.snapshot.revision or UNVERSIONED, outcome_detail=outcome)
        self._applied(result, outcome, reason, fresh, new_revision=not same)
        if fresh and rejected is None and self._rejection_shown:
            self._show_rejection(None)
        if rejected is not None:  # the source is still bad: that stays the step's outcome
            result = dataclasses.replace(rejected, outcome_detail=outcome)
        return self._finish(result, started)

    def _unchanged_inputs(self, target: Target) -> bool:
        """Whether the commit ``target`` changes nothing the last good state's run read (``repo/inputs.py``):
        then reading, resolving and converting it would give that state again, and the step skips it.

        Only a commit of a source with history qualifies (a working tree has no key), and not while a rejection
        is shown on the status objects (the next good revision is applied, which clears it). When anything is in
        doubt (the diff cannot be made, the signature does not verify), the commit is read as any other.
        """
        good, history = self._good, self.source.history()
        if good is None or good.inputs is None or history is None or not good.snapshot.revision \
                or target.key is None or (self._rejection_shown and self.kube is not None and not self.dry_run):
            return False
        try:
            changed = repo_inputs.changes(history, good.snapshot.revision, target.key)
            read = good.inputs.touched(changed, lambda path: repo_inputs.blob_text(history, target.key, path))
        except Exception:  # noqa: BLE001 - a commit that cannot be compared is read
            log.debug("cannot compare %s with %s; reading it", target.key, good.snapshot.revision, exc_info=True)
            return False
        if read:
            log.debug("%s changes %s, read for %s", target.key[:12], ", ".join(read[:3]) + (" ..." if len(read) > 3
                      else ""), self._whom())
            return False
        if self.source.trust is not None:
            try:
                pipeline.Source(history, revision=target.key, git_dir=history, trust=self.source.trust,
                                tag=self.source.tag).verify(pipeline.ClusterFacts(self.kube) if self.kube else None)
            except Exception:  # noqa: BLE001 - the step reads it, and rejects it as it would any other
                return False
        log.info("skipped %s: its %s %s none that %s reads; %s stays applied",
                 target.key, counted(len(changed), "changed path"), agree(len(changed), "is", "are"), self._whom(),
                 self.applied_revision,
                 extra={"revision": target.key, "outcome": SKIPPED})
        return True

    def _whom(self) -> str:
        return f"cluster {self.cluster}" if self.cluster else "this repository's run"

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
            duration = time.monotonic() - started
            self.metrics.reconcile_duration.observe(duration)
            self.metrics.reconciles.labels(result.outcome).inc()
            self.metrics.last_outcome(result.outcome)
            log.info("step %s in %.2fs", result.outcome, duration,
                     extra={"outcome": result.outcome, "revision": result.revision or "", "duration": duration})
        if self.report:
            self.report(result)
        return result

    def _applied(self, result: StepResult, outcome: pipeline.Outcome, reason: str, fresh: bool, *,
                 new_revision: bool = True) -> None:
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
        owners = {i.selection.owner for i in outcome.installs}
        if not self.dry_run:
            self.metrics.keep_only(owners)
            for op in sorted(owners):
                wrote = any(c.operator == op and c.action in counts for c in sync.changes)
                self.metrics.reconciled(op, "changed" if wrote else "unchanged", drift=wrote and not new_revision)
                self.metrics.condition(op, "Ready", "True")
        if sync.changed:
            for c in sync.changes:
                if c.action in counts:
                    log.info("%s %s%s", c.ref, c.action.value, f": {c.detail}" if c.detail else "",
                             extra={"operator": c.operator, "object": str(c.ref), "action": c.action.value,
                                    "revision": revision})
            log.info("applied %s (%s): %s", revision, reason, ", ".join(f"{n} {a.value}" for a, n in counts.items()),
                     extra={"revision": revision, "reason": reason})
            if not self.dry_run:
                for op in sorted({c.operator for c in sync.changes if c.action in counts}):
                    n = {a: sum(1 for c in sync.changes if c.operator == op and c.action == a) for a in counts}
                    summary = ", ".join(f"{k} {a.value}" for a, k in n.items() if k)
                    if new_revision:
                        self._event(op, "Normal", "Applied", f"applied {revision}: {summary}")
                    else:  # the same revision again: the cluster had drifted from it
                        objects = sorted(str(c.ref) for c in sync.changes if c.operator == op and c.action in counts)
                        self._event(op, "Normal", "DriftCorrected", f"corrected drift from {revision}: {summary} ("
                                    + ", ".join(objects[:5]) + (", ..." if len(objects) > 5 else "") + ")")
        else:
            log.info("%s is applied: no changes (%s)", revision, reason, extra={"revision": revision, "reason": reason})
        if fresh and not self.dry_run:
            from reconciler.approve.policy import approve_command

            for d in outcome.pending:
                log.warning("%s: %s waits for approval: %s", d.operator, d.bundle, d.message)
                self._event(d.operator, "Warning", "ApprovalPending",
                            f"{d.bundle} at {revision} waits: {d.message}; approve with "
                            f"`{approve_command('REPO', d.operator, d)}` and commit approvals/{d.operator}.yaml")

    def _reject(self, target: Target, exc: ReconcilerError) -> StepResult:
        key = target.key or target.revision
        message = exc.render()
        keep = self.applied_revision
        result = StepResult(REJECTED, target.revision, keep, message)
        if self._bad == (key, message):
            return result  # already reported
        self._bad = (key, message)
        self.metrics.rejected_commit.info({"revision": target.revision or "", "reason": type(exc).__name__})
        log.error("not applying %s: %s; %s", target.revision or "the working tree", message,
                  f"{keep} stays applied" if keep else "nothing was applied yet",
                  extra={"revision": target.revision or "", "outcome": REJECTED, "object": exc.obj or ""})
        records = self._status_records()
        for name in sorted(records):
            self._event(name, "Warning", "RevisionRejected",
                        f"revision {target.revision or '(working tree)'} was not applied: {message}; "
                        f"{keep or 'the previous state'} stays applied")
        self._show_rejection({"revision": target.revision or "", "reason": type(exc).__name__, "message": message,
                              "applied": keep or "", "since": status_objects.now()}, records)
        return result

    def _show_rejection(self, rejection: dict[str, str] | None,
                        records: dict[str, status_objects.Recorded] | None = None) -> None:
        """Write ``status.rejected`` on the status objects (None: remove it once a newer revision applies)."""
        if self.kube is None or self.dry_run:
            return
        try:
            info = status_objects.resource(self.kube)
            for name, rec in sorted((self._status_records() if records is None else records).items()) if info else ():
                if rejection is not None or status_objects.REJECTED in rec.status:
                    status_objects.record_rejection(self.kube, info, name, rejection)
            self._rejection_shown = rejection is not None
        except ClusterError as exc:
            log.warning("could not record the rejection on the Operator status objects: %s", exc.message)

    def _failed(self, revision: str | None, exc: ReconcilerError, stage: str) -> StepResult:
        self._failures += 1
        self.metrics.failures.set(self._failures)
        if stage == "apply" and self._good is not None and not self.dry_run:
            for sel in self._good.resolution.selections:
                if sel.apply:
                    self.metrics.reconciled(sel.owner, "failed")
                    self.metrics.condition(sel.owner, "Ready", "False")
        log.error("%s failed (attempt %d, retrying in %.0fs): %s", stage, self._failures, self._backoff_delay(),
                  exc.render(), extra={"revision": revision or "", "outcome": FAILED, "object": exc.obj or ""})
        return StepResult(FAILED, revision, self.applied_revision, exc.render())

    def _status_records(self) -> dict[str, status_objects.Recorded]:
        if self.kube is None or self.dry_run:
            return {}
        try:
            # The last good revision's instance (a rejected revision's settings are not to be trusted).
            instance = self._good.snapshot.settings.instance if self._good is not None else None
            return status_objects.read_all(self.kube, instance)
        except ClusterError:
            return {}

    def _event(self, name: str, type_: str, reason: str, message: str) -> None:
        if self.kube is None or self.dry_run:
            return
        try:
            self.events.scoped(self.events_namespace, self.identity).record(self.kube, name, type_=type_,
                                                                            reason=reason, message=message)
        except ClusterError as exc:
            log.warning("could not record an event on Operator %s: %s", name, exc.message)
