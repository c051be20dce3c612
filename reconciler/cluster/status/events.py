"""Kubernetes Events about the status objects, written as client-go's recorder writes them.

A condition's transition, a revision the loop rejected, drift it corrected:
each is a core/v1 Event about the ``Operator`` object, shown by ``kubectl
describe``. A repeat of the same Event (same object, type, reason and
message) is one Event whose ``count`` and ``lastTimestamp`` grow, so a
flapping drift does not add an object each interval. The recorder keeps the
count and resourceVersion of the Events it wrote, as client-go's does, so a
repeat is one PATCH; it belongs to whoever runs the syncs (one command's
run, or the loop for its whole life), and the recorders ``scoped`` from it
share that memory.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from reconciler.errors import ClusterError
from reconciler.kube.client import ApiError, Kube
from reconciler.model.kube import API_GROUP, API_VERSION, FIELD_MANAGER

KIND = "Operator"
# Ready=False for these reasons is the normal course of an install or upgrade, not trouble: a Normal Event, as
# Kubernetes' controllers and Flux record progress.
PROGRESS_REASONS = frozenset({"Progressing", "PendingApproval"})
KEPT = 1024   # Events remembered, the oldest forgotten first


WRITE_ID = f"{API_GROUP}/write-id"   # the annotation naming the write that POSTed an Event (``_Write.recount``)


def event_type(cond: dict[str, Any]) -> str:
    """Warning for a failure (Degraded, or not Ready for another reason than progress), else Normal."""
    if cond["type"] == "Degraded":
        return "Warning" if cond["status"] == "True" else "Normal"
    if cond["type"] == "Ready" and cond["status"] == "False" and cond.get("reason") not in PROGRESS_REASONS:
        return "Warning"
    return "Normal"


class _Memory:
    """The Events written, by (API server, namespace, name): their count and resourceVersion; bounded."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str, str], tuple[int, str]] = {}
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[int, str] | None:
        with self.lock:
            return self.known.get(key)

    def remember(self, key: tuple[str, str, str], event: Mapping[str, Any] | None) -> None:
        if not event:
            return
        with self.lock:
            self.known.pop(key, None)
            self.known[key] = (int(event.get("count") or 1), str((event.get("metadata") or {}).get("resourceVersion")))
            while len(self.known) > KEPT:
                self.known.pop(next(iter(self.known)))


class EventRecorder:
    """Writes Events about status objects into ``namespace`` (Events about cluster-scoped objects live in one;
    "default", as kubectl expects), reported as ``instance`` (the loop's identity; the field manager else)."""

    def __init__(self, namespace: str = "default", instance: str = "", memory: _Memory | None = None) -> None:
        self.namespace, self.instance = namespace, instance
        self.memory = memory or _Memory()

    def scoped(self, namespace: str, instance: str) -> EventRecorder:
        """A recorder writing into ``namespace`` as ``instance``, sharing what this one remembers."""
        return EventRecorder(namespace, instance, self.memory)

    def announce(self, kube: Kube, name: str, cond: dict[str, Any], about: Mapping[str, Any] | None = None) -> None:
        """An Event for a condition's transition (``about``: the status object's metadata, just written); best
        effort, an Event that cannot be written is no error."""
        try:
            self.record(kube, name, type_=event_type(cond), reason=str(cond.get("reason") or cond["type"]),
                        message=f"{cond['type']}={cond['status']}: {cond.get('message', '')}", about=about)
        except ClusterError:
            pass

    def record(self, kube: Kube, name: str, *, type_: str, reason: str, message: str,
               about: Mapping[str, Any] | None = None) -> None:
        """A core/v1 Event about the status object ``name``; best effort: a status object that does not exist
        gets none.

        ``about`` is the status object's metadata when the caller has just written it (else it is read). An
        Event this recorder wrote before is counted with one PATCH on top of the version it left; one it does
        not know (written by another replica, or before a restart) is read first; one that expired is written
        anew.
        """
        if about is None:
            info = kube.resource(API_VERSION, KIND)
            live = kube.get(info, "", name) if info else None
            if live is None:
                return
            about = live["metadata"]
        events = kube.resource("v1", "Event")
        if events is None:
            return
        _Write(self, kube, events, name, about, (type_, reason, message[:1024])).send()


class _Write:
    """One Event to write: POSTed new, or counted up on top of what is known of it."""

    def __init__(self, recorder: EventRecorder, kube: Kube, events: Any, name: str, about: Mapping[str, Any],
                 what: tuple[str, str, str]) -> None:
        type_, reason, message = what
        self.kube, self.events, self.memory, self.namespace = kube, events, recorder.memory, recorder.namespace
        self.now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        key = hashlib.sha256("\0".join((about.get("uid") or "", type_, reason, message)).encode()).hexdigest()[:16]
        self.event_name = f"{name}.{key}"
        self.where = f"Event about {KIND} {name}"
        self.known = (kube.server, self.namespace, self.event_name)
        # which write this is: a POST retried after its answer was lost finds its own Event by it, where two
        # occurrences within one second from two processes look alike in every other field
        self.write_id = uuid.uuid4().hex
        self.body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": self.event_name, "namespace": self.namespace,
                         "annotations": {WRITE_ID: self.write_id}},
            "involvedObject": {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": about.get("uid"),
                               "resourceVersion": about.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message, "count": 1,
            "firstTimestamp": self.now, "lastTimestamp": self.now,
            "source": {"component": FIELD_MANAGER}, "reportingComponent": f"{API_GROUP}/{FIELD_MANAGER}",
            "reportingInstance": recorder.instance or FIELD_MANAGER,
        }

    def send(self) -> None:
        counted = self.memory.get(self.known)
        if counted is not None:
            try:
                self.count(counted)
                return
            except ApiError as exc:
                if exc.status == 409:   # written by another since this recorder did
                    self.recount()
                    return
                if exc.status != 404:   # 404: it expired; written anew
                    raise
        try:
            self.memory.remember(self.known, self.kube.request("POST", self.events.path(self.namespace),
                                                               body=self.body, obj=self.where, repeatable=True))
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.recount()

    def count(self, existing: tuple[int, str]) -> None:
        """PATCH the count up on top of ``existing`` (count, resourceVersion): a 409 when it changed since."""
        self.memory.remember(self.known, self.kube.request(
            "PATCH", self.events.path(self.namespace, self.event_name),
            body={"count": existing[0] + 1, "lastTimestamp": self.now, "metadata": {"resourceVersion": existing[1]}},
            content_type="application/merge-patch+json", obj=self.where))

    def recount(self) -> None:
        """Count an Event written by someone else (another replica, this process before a restart) up."""
        existing = self.kube.get(self.events, self.namespace, self.event_name)
        if existing is None:
            return   # gone meanwhile: best effort
        if ((existing.get("metadata") or {}).get("annotations") or {}).get(WRITE_ID) == self.write_id \
                and int(existing.get("count") or 1) == 1:
            self.memory.remember(self.known, existing)   # this very POST, retried after its answer was lost
            return
        try:
            self.count((int(existing.get("count") or 1), existing["metadata"]["resourceVersion"]))
        except ApiError as exc:
            if exc.status not in (404, 409):   # 409: another writer counted this same occurrence a moment ago
                raise
