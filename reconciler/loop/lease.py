"""Leader election with a ``coordination.k8s.io/v1`` Lease, so two replicas never apply at once.

The rules are client-go's: the holder renews ``renewTime`` every
``retry_period``; a candidate takes the Lease when it is free (no holder, as
left by a graceful release) or when its record has not changed for
``lease_duration`` seconds *as measured by the candidate's own clock* since
it first saw that record (so clock skew between nodes does not matter).
Every write carries the ``resourceVersion`` that was read, so of two
candidates racing for the same record only one write succeeds. A holder
renews on top of the Lease its last write returned, without reading it
first: one request per renewal instead of two, and a write by anyone else
in between (a candidate taking an expired Lease) makes that renewal
conflict, after which the holder reads the Lease and decides as a candidate
would, in the same round.

A leader that cannot renew for ``renew_deadline`` (shorter than the lease
duration) stops calling itself leader before anyone else can take over.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.errors import ClusterError
from reconciler.model.kube import FIELD_MANAGER, ownership_labels

log = logging.getLogger("reconciler.lease")
LEASE_API = "coordination.k8s.io/v1"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_change: Callable[[bool], None] | None = None) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.kube = kube
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_change = on_change
        self._renewed_at: float | None = None
        self._observed: tuple[Any, ...] | None = None
        self._held: dict[str, Any] | None = None   # the Lease as this holder's last write returned it
        self.lease: dict[str, Any] | None = None   # the Lease as last read or written (the hook relay reads it)
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_leading = False
        self.last_error: str | None = None

    @property
    def leading(self) -> bool:
        at = self._renewed_at
        return at is not None and time.monotonic() - at < self.renew_deadline

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.identity}", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning; with ``release`` hand the Lease back so another replica takes over at once."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.retry_period + 15)
        if release and self._renewed_at is not None:
            try:
                self.release()
            except ClusterError as exc:
                log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc.message)
        self._renewed_at = None
        self._notify()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
                self.last_error = None
            except ClusterError as exc:
                self.last_error = exc.message
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc.message)
            self._notify()
            self._stop.wait(self.retry_period)

    def _notify(self) -> None:
        now = self.leading
        if now != self._was_leading:
            self._was_leading = now
            log.info("%s %s the lease %s/%s", self.identity, "acquired" if now else "lost", self.namespace,
                     self.name)
            if self.on_change:
                self.on_change(now)

    def resource(self) -> ResourceInfo:
        """The Lease resource (the hook relay writes the same object)."""
        info = self.kube.resource(LEASE_API, "Lease")
        if info is None:
            raise ClusterError("the cluster does not serve coordination.k8s.io/v1 Leases")
        return info

    def try_acquire_or_renew(self) -> bool:
        """One round: take or renew the Lease if allowed. True when this candidate holds it afterwards."""
        info = self.resource()
        started = time.monotonic()
        held, self._held = self._held, None
        if held is not None and self.leading:   # renew on top of our own last write; a conflict: read, decide
            held["spec"] = self._spec(held.get("spec") or {}, taking=False)
            try:
                return self._write(info, held, started)
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise
        lease = self.lease = self.kube.get(info, self.namespace, self.name)
        if lease is None:
            body = {"apiVersion": LEASE_API, "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": ownership_labels("reconciler")},
                    "spec": self._spec({}, taking=True)}
            try:
                created = self.kube.request("POST", info.path(self.namespace), body=body,
                                            query=[("fieldManager", FIELD_MANAGER)],
                                            obj=f"Lease {self.namespace}/{self.name}")
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self._renewed_at = started
            self._held = self.lease = created
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), spec.get("acquireTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, started
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
            self._renewed_at = None
            return False
        lease["spec"] = self._spec(spec, taking=holder != self.identity)
        try:
            return self._write(info, lease, started)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote first; read again next round
                self._renewed_at = None
                return False
            raise

    def _write(self, info: ResourceInfo, lease: dict[str, Any], started: float) -> bool:
        """PUT the Lease (its ``resourceVersion`` the precondition); this candidate holds it from ``started``."""
        updated = self.kube.request("PUT", info.path(self.namespace, self.name), body=lease,
                                    query=[("fieldManager", FIELD_MANAGER)], obj=f"Lease {self.namespace}/{self.name}")
        s = updated.get("spec") or {}
        self._observed = (s.get("holderIdentity") or "", s.get("renewTime"), s.get("leaseDurationSeconds"),
                          s.get("acquireTime"))
        self._observed_at = started
        self._renewed_at = started
        self._held = self.lease = updated
        return True

    def _spec(self, spec: dict[str, Any], *, taking: bool) -> dict[str, Any]:
        now = _now()
        out = dict(spec)
        out.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.lease_duration), renewTime=now)
        if taking:
            out["acquireTime"] = now
            out["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if spec else 0)
        return out

    def release(self) -> None:
        self._held = None
        info = self.resource()
        lease = self.kube.get(info, self.namespace, self.name)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _now()}
        try:
            self.kube.request("PUT", info.path(self.namespace, self.name), body=lease,
                              query=[("fieldManager", FIELD_MANAGER)],
                              obj=f"Lease {self.namespace}/{self.name}")
        except ApiError as exc:
            if exc.status != 409:
                raise
