"""A step that fails (the API server answers 503) is retried after the backoff the log names, not at the drift
deadline that passed meanwhile; until a step succeeds the replica is not ready, and /readyz and the metrics say
why and when it tries again."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

import pytest
from kubernetes import client as k8s_client

from reconciler.kube.client import Kube
from reconciler.loop import APPLIED, FAILED, UNCHANGED, LocalSource, Loop
from reconciler.loop.server import Server
from tests.e2e.faultproxy import Fault, FaultProxy
from tests.support.wait import wait_until

from .test_watch_local import clean, running  # noqa: F401 - fixtures

pytestmark = pytest.mark.cluster
__all__ = ["clean"]


def _get(server: Server, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _sample(loop: Loop, name: str, labels: dict | None = None) -> float | None:
    return loop.metrics.registry.get_sample_value(name, labels or {})


def test_a_failed_step_backs_off_as_logged_and_the_replica_is_unready_until_one_succeeds(
        control_plane, gitops, k8s, clean, caplog):
    caplog.set_level(logging.INFO, logger="reconciler.loop")
    with FaultProxy(control_plane.kubeconfig_path) as proxy:
        cfg = k8s_client.Configuration()
        cfg.host = proxy.url
        kube = Kube(k8s_client.ApiClient(cfg), attempts=1)   # one try per request: the step fails at once
        proxy.arm(Fault("GET", "/", "503", times=1))
        # The drift deadline (an hour) is due at the first step; the backoff after a failure is 30 s.
        loop = Loop(LocalSource(gitops.path, debounce=0.1), kube, interval=3600, backoff=(30.0, 300.0),
                    identity="test")
        server = Server(loop, "127.0.0.1", 0)
        server.start()
        try:
            with running(loop):
                wait_until(lambda: loop.last is not None, "the first step")
                assert loop.last.outcome == FAILED and loop.failures == 1, loop.last
                assert "failed (attempt 1, retrying in 30s)" in caplog.text
                retry = loop.retry_in
                assert retry is not None and 25 < retry <= 30, retry   # not the drift deadline that passed
                assert loop.steps == 1
                code, body = _get(server, "/readyz")
                ready = json.loads(body)
                assert code == 503 and ready["ready"] is False, body
                assert ready["last"]["outcome"] == "failed" and ready["failures"] == 1
                assert 25 < ready["retryInSeconds"] <= 30
                assert _sample(loop, "reconciler_last_step_outcome", {"outcome": "failed"}) == 1
                assert _sample(loop, "reconciler_consecutive_failures") == 1

                # A trigger (a change, a hook) tries at once; failing again doubles the backoff.
                proxy.arm(Fault("GET", "/", "503", times=1))
                loop.trigger("test")
                wait_until(lambda: loop.failures == 2, "the second failure")
                assert "failed (attempt 2, retrying in 60s)" in caplog.text
                assert 50 < loop.retry_in <= 60 and loop.steps == 2

                loop.trigger("test")
                wait_until(lambda: loop.last.outcome in (APPLIED, UNCHANGED), "a step that succeeds")
                code, body = _get(server, "/readyz")
                ready = json.loads(body)
                assert code == 200 and ready["ready"] is True and ready["failures"] == 0, body
                assert ready["retryInSeconds"] is None and loop.retry_in is None
                assert _sample(loop, "reconciler_consecutive_failures") == 0
                assert _sample(loop, "reconciler_last_step_outcome", {"outcome": "failed"}) == 0
                assert _sample(loop, "reconciler_last_step_outcome", {"outcome": loop.last.outcome}) == 1
        finally:
            server.stop()
