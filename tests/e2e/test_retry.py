"""Per-request retries against the real API server, through a loopback proxy that injects faults once."""

from __future__ import annotations

import logging

import pytest
from kubernetes import client as k8s_client

from reconciler.kube import retry
from reconciler.kube.client import ApiError, Kube
from reconciler.errors import ClusterError
from tests.e2e.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.cluster

NS = "retry-test"


@pytest.fixture(scope="module")
def proxy(control_plane):
    with FaultProxy(control_plane.kubeconfig_path) as p:
        admin = Kube(control_plane.admin_client())
        ns = admin.resource("v1", "Namespace")
        if admin.get(ns, "", NS) is None:
            admin.request("POST", ns.path(), body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield p


@pytest.fixture
def kube(proxy) -> Kube:
    cfg = k8s_client.Configuration()
    cfg.host = proxy.url
    kube = Kube(k8s_client.ApiClient(cfg))
    kube.resource("v1", "ConfigMap")  # discovery before any fault is armed
    return kube


def _cm(name: str, value: str = "1") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"v": value}}


def test_429_is_retried_after_retry_after(kube, proxy, caplog):
    info = kube.resource("v1", "ConfigMap")
    proxy.arm(Fault("PATCH", "/configmaps/retry-after", "429", retry_after="1"))
    with caplog.at_level(logging.INFO, logger="reconciler.kube"):
        kube.apply(info, _cm("retry-after"), field_manager="test", dry_run=False)
    assert proxy.seen("PATCH", "/configmaps/retry-after") == ["429", "forwarded"]
    assert "429 from the API server; attempt 2 of 5 in 1.00s" in caplog.text


def test_apply_is_retried_on_5xx_and_after_a_dropped_connection(kube, proxy, control_plane):
    info = kube.resource("v1", "ConfigMap")
    proxy.arm(Fault("PATCH", "/configmaps/retry-apply", "503", times=2))
    applied = kube.apply(info, _cm("retry-apply", "a"), field_manager="test", dry_run=False)
    assert applied["data"] == {"v": "a"}
    assert proxy.seen("PATCH", "/configmaps/retry-apply") == ["503", "503", "forwarded"]

    # Applied by the server, then the answer is lost: applying again is harmless, so it is retried.
    proxy.arm(Fault("PATCH", "/configmaps/retry-apply", "drop-after"))
    applied = kube.apply(info, _cm("retry-apply", "b"), field_manager="test", dry_run=False)
    assert applied["data"] == {"v": "b"}
    assert proxy.seen("PATCH", "/configmaps/retry-apply") == ["drop-after", "forwarded"]


def test_a_create_that_may_have_been_applied_is_not_repeated(kube, proxy, control_plane):
    info = kube.resource("v1", "ConfigMap")
    proxy.arm(Fault("POST", "/configmaps", "drop-after"))
    with pytest.raises(ClusterError) as err:
        kube.request("POST", info.path(NS), body=_cm("retry-create"))
    assert "may or may not have been applied" in err.value.render()
    assert proxy.seen("POST", "/configmaps") == ["drop-after"]
    admin = Kube(control_plane.admin_client())
    assert admin.get(info, NS, "retry-create") is not None  # it was created: a blind retry would have been wrong

    # A 503 may come after the create took effect: not repeated either.
    proxy.arm(Fault("POST", "/configmaps", "503"))
    with pytest.raises(ApiError) as api_err:
        kube.request("POST", info.path(NS), body=_cm("retry-create-2"))
    assert api_err.value.status == 503 and proxy.seen("POST", "/configmaps") == ["503"]

    # 429 is refused before anything happens, so even a create is retried.
    proxy.arm(Fault("POST", "/configmaps", "429"))
    kube.request("POST", info.path(NS), body=_cm("retry-create-3"))
    assert proxy.seen("POST", "/configmaps") == ["429", "forwarded"]

    # A caller that handles 409 may declare its create repeatable: the retry meets AlreadyExists.
    proxy.arm(Fault("POST", "/configmaps", "drop-after"))
    with pytest.raises(ApiError) as api_err:
        kube.request("POST", info.path(NS), body=_cm("retry-create-4"), repeatable=True)
    assert api_err.value.status == 409
    assert proxy.seen("POST", "/configmaps") == ["drop-after", "forwarded"]


def test_retries_are_bounded(kube, proxy):
    info = kube.resource("v1", "ConfigMap")
    proxy.arm(Fault("GET", "/configmaps/none", "503", times=100))
    with pytest.raises(ApiError) as err:
        kube.get(info, NS, "none")
    assert err.value.status == 503
    assert len(proxy.seen("GET", "/configmaps/none")) == retry.DEFAULT_POLICY.attempts
    proxy.arm()
    proxy.faults.clear()


def test_policy_rules():
    assert retry.idempotent("PATCH", retry.APPLY_PATCH) and not retry.idempotent("PATCH", "application/json-patch+json")
    assert not retry.idempotent("POST", "application/json") and retry.idempotent("DELETE", "application/json")
    assert retry.retryable_status(429, None, repeatable=False)
    assert not retry.retryable_status(503, None, repeatable=False)
    assert retry.retryable_status(500, 2.0, repeatable=True) and not retry.retryable_status(500, None, repeatable=True)
    assert not retry.retryable_status(404, None, repeatable=True)
    policy = retry.RetryPolicy(base=1.0, cap=4.0, max_retry_after=10.0)
    assert policy.delay(1, 300.0) == 10.0 and policy.delay(1, 2.0) == 2.0
    assert all(0 <= policy.delay(n, None) <= 4.0 for n in range(1, 10))
    assert retry.parse_retry_after("3") == 3.0 and retry.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
