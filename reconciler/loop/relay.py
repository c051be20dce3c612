"""A push hook that lands on a standby replica reaches the leader through the Lease they campaign for.

With several replicas behind one Service, the git host's POST reaches any of
them. The replica that leads reconciles at once; a standby records the
request on the Lease as annotations (a fresh request id, which event, which
replica took it), written on top of the version it read so that nothing
else on the Lease is lost and a race is simply tried again. The leader
renews the Lease every retry period on top of its own last write
(``lease.py``): a write by anyone else makes that renewal conflict, so the
leader reads the Lease again and sees the new id within one period, with no
request of its own for the relay. A hook recorded while nobody leads is
covered too: a new leader reconciles when it takes the Lease (``look`` says
which ids count as covered, and why).

The annotations are not desired state and carry no payload: only when,
which event and which replica took the request.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable

from reconciler.kube.client import ApiError
from reconciler.errors import ClusterError
from reconciler.loop.lease import LeaderElector
from reconciler.model.kube import API_GROUP

log = logging.getLogger("reconciler.hook")
FIELD_MANAGER = "reconciler-hook"
REQUEST, EVENT, RECEIVED_BY = (f"hook.{API_GROUP}/request", f"hook.{API_GROUP}/event",
                               f"hook.{API_GROUP}/received-by")
_ATTEMPTS = 5   # a standby's write races only the leader's renewals, every retry period


class HookRelay:
    def __init__(self, elector: LeaderElector, *, period: float = 2.0) -> None:
        self.elector = elector
        self.identity = elector.identity
        self.period = period
        self._seen: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, event: str) -> str:
        """Record one hook for the leader on the Lease; returns the request id. Raises ClusterError when it
        cannot."""
        elector = self.elector
        kube, info = elector.kube, elector.resource()
        where = f"Lease {elector.namespace}/{elector.name}"
        request = f"{dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}/{uuid.uuid4().hex[:12]}"
        for _ in range(_ATTEMPTS):
            lease = kube.get(info, elector.namespace, elector.name)
            if lease is None:
                raise ClusterError(f"{where} does not exist: no replica campaigns for it", obj=where,
                                   hint="start a replica with --leader-elect, which creates it")
            meta = lease.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   REQUEST: request, EVENT: event, RECEIVED_BY: self.identity}
            try:
                kube.request("PUT", info.path(elector.namespace, elector.name), body=lease,
                             query=[("fieldManager", FIELD_MANAGER)], obj=where)
                return request
            except ApiError as exc:
                if exc.status != 409:   # 409: the leader renewed meanwhile; read it again
                    raise
        raise ClusterError(f"cannot record the hook on {where}: it changed under every one of {_ATTEMPTS} writes",
                           obj=where, hint="the git host retries a hook that failed; polling catches up anyway")

    def look(self, leading: bool) -> str | None:
        """The request id the leader has yet to reconcile for, if any, from the Lease as the elector last saw it
        (no request of its own).

        ``_seen`` is the last id known to be covered. A standby's first look
        takes the baseline: whatever was recorded before it is covered by the
        reconcile that starts when the replica takes the Lease, which comes
        later. After that only a leader's look moves it, so a hook recorded
        while a renewal lapsed for a moment (a slow API server; no takeover
        reconcile follows, since the Lease never changed hands) still differs
        when the replica leads again. A first look made already leading cannot
        tell when the start-up reconcile read the source, so any recorded id
        counts: one reconcile too many, never one too few.
        """
        if not leading and self._seen is not None:
            return None
        lease = self.elector.lease
        if lease is None:   # not read yet: no baseline either
            return None
        current = ((lease.get("metadata") or {}).get("annotations") or {}).get(REQUEST, "")
        previous, self._seen = self._seen, current
        if not leading or not current or current == previous:
            return None
        return current

    def start(self, leading: Callable[[], bool], trigger: Callable[[str], None]) -> None:
        """Look every ``period`` seconds and call ``trigger`` with a reason for each relayed hook."""
        def run() -> None:
            while not self._stop.is_set():
                try:
                    if self.look(leading()):
                        trigger("webhook (relayed by a standby replica)")
                except Exception:  # noqa: BLE001 - the relay must outlive any one bad read
                    log.exception("unexpected error looking for a relayed hook on the Lease %s/%s",
                                  self.elector.namespace, self.elector.name)
                self._stop.wait(self.period)

        self._thread = threading.Thread(target=run, name="hook-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(self.period + 15)
