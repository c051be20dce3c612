"""A push hook that lands on a standby replica reaches the leader through a ConfigMap.

With several replicas behind one Service, the git host's POST reaches any of
them. The replica that leads reconciles at once; a standby records the
request in the ConfigMap ``<lease-name>-hook`` beside the Lease (server-side
apply of a fresh request id, so nothing is lost to a race and a repeat is
harmless), and the leader, which reads that ConfigMap every few seconds while
it leads, reconciles when the id changes. A hook recorded while nobody leads
is covered too: a new leader reconciles when it takes the Lease (``look``
says which ids count as covered, and why).

The ConfigMap is not desired state and carries no payload: only when, which
event and which replica took the request.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable

from reconciler.cluster.kube import Kube
from reconciler.errors import ClusterError
from reconciler.model.kube import ownership_labels

log = logging.getLogger("reconciler.hook")
FIELD_MANAGER = "reconciler-hook"


class HookRelay:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, *, period: float = 2.0) -> None:
        self.kube = kube
        self.namespace, self.name, self.identity = namespace, name, identity
        self.period = period
        self._seen: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _info(self):
        return self.kube.resource("v1", "ConfigMap")

    def record(self, event: str) -> str:
        """Record one hook for the leader; returns the request id. Raises ClusterError when it cannot."""
        request = f"{dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}/{uuid.uuid4().hex[:12]}"
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": ownership_labels("reconciler")},
                "data": {"request": request, "event": event, "receivedBy": self.identity}}
        self.kube.apply(self._info(), body, field_manager=FIELD_MANAGER, dry_run=False)
        return request

    def look(self, leading: bool) -> str | None:
        """The request id the leader has yet to reconcile for, if any.

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
        cm = self.kube.get(self._info(), self.namespace, self.name)
        current = ((cm or {}).get("data") or {}).get("request", "")
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
                except ClusterError as exc:
                    log.warning("cannot read the hook record %s/%s: %s", self.namespace, self.name, exc.message)
                except Exception:  # noqa: BLE001 - the relay must outlive any one bad read
                    log.exception("unexpected error reading the hook record %s/%s", self.namespace, self.name)
                self._stop.wait(self.period)

        self._thread = threading.Thread(target=run, name="hook-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(self.period + 15)
