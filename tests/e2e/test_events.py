"""Events about status objects against a real API server: repeats are counted, across processes too."""

from __future__ import annotations

import uuid

import pytest

from reconciler.cluster.status.events import EventRecorder, _Write

pytestmark = pytest.mark.cluster


def _event(k8s, name: str) -> list[dict]:
    events = k8s.resource("v1", "Event")
    return [e for e in k8s.list(events, namespace="default") if e["involvedObject"].get("name") == name]


def test_the_same_event_from_two_processes_within_one_second_is_counted_twice(k8s):
    """Two runs (each its own recorder, as two commands or replicas) correcting the same drift within one second:
    the second one's POST meets the first one's Event, and counts it up, not mistaking it for its own."""
    name, about = f"events-{uuid.uuid4().hex[:6]}", {"uid": str(uuid.uuid4()), "resourceVersion": "1"}
    for _ in range(2):
        EventRecorder().record(k8s, name, type_="Normal", reason="DriftCorrected", message="re-applied", about=about)
    (event,) = _event(k8s, name)
    assert event["count"] == 2, event


def test_a_post_retried_after_its_answer_was_lost_is_not_counted_again(k8s):
    name, about = f"events-{uuid.uuid4().hex[:6]}", {"uid": str(uuid.uuid4()), "resourceVersion": "1"}
    recorder = EventRecorder()
    write = _Write(recorder, k8s, k8s.resource("v1", "Event"), name, about, ("Normal", "DriftCorrected", "x"))
    write.send()
    write.recount()   # what a 409 on the retried POST leads to: the Event found is this write's own
    (event,) = _event(k8s, name)
    assert event["count"] == 1, event
