"""The in-cluster suite: every capability run as deploy/'s ServiceAccount, with exactly deploy/'s RBAC.

deploy/base is applied for real by an administrator; the reconciler then acts only through a TokenRequest
token of ``reconciler-system/reconciler``, as its pod would. The API server's audit log (the local plane
records this ServiceAccount's requests, and only its) says afterwards which of deploy/'s rules were used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.kube.client import Kube
from tests.loop.conftest import uninstall
from tests.loop.test_deploy import objects


@pytest.fixture(scope="session")
def audit_start(control_plane) -> int:
    """Where this suite's part of the audit log begins (the suite's first test asks first)."""
    return control_plane.audit_log.stat().st_size if control_plane.audit_log.exists() else 0


@pytest.fixture
def k8s(control_plane) -> Kube:
    return Kube(control_plane.admin_client())


@pytest.fixture
def deployed(control_plane, k8s, audit_start) -> Path:
    """deploy/base applied; a kubeconfig that acts as its ServiceAccount (nothing else is granted to it)."""
    for doc in objects("base"):
        k8s.apply(k8s.require_resource(doc), doc, field_manager="deploy-test", dry_run=False)
    return control_plane.service_account_kubeconfig("reconciler-system", "reconciler")


@pytest.fixture
def clean(k8s):
    uninstall(k8s)
    _forget_default_instance(k8s)
    yield
    uninstall(k8s)


def _forget_default_instance(k8s: Kube) -> None:
    """Delete the default instance's ApplySet parent when it has nothing installed, so that the ServiceAccount
    creates it, as on a new cluster (tests run as the administrator before this suite may leave it behind, and
    the RBAC check would then see no use of ``create configmaps``)."""
    from reconciler.cluster.status import objects as status_objects
    from reconciler.kube.client import ApiError

    if status_objects.resource(k8s) is not None and status_objects.read_all(k8s, "default"):
        return   # something of it is still installed: its parent stays
    try:
        k8s.request("DELETE", "/api/v1/namespaces/reconciler-system/configmaps/reconciler-instance-default")
    except ApiError as exc:
        if exc.status != 404:
            raise


CAPABILITIES = ("first install", "upgrade", "dry run", "diff", "prune", "APIService bundle", "webhook bundle",
                "drift correction", "approval wait", "fleet loop", "commit verification", "adoption",
                "shared namespace takeover")
_PASSED: set[str] = set()
_AUDIT: list[bytes] = []   # audit events of deploy/'s ServiceAccount on planes other than the suite's


def passed(*capabilities: str) -> None:
    """Record that the calling test proved these capabilities (the RBAC check needs all of them)."""
    assert set(capabilities) <= set(CAPABILITIES)
    _PASSED.update(capabilities)


def proven() -> set[str]:
    return set(_PASSED)


def keep_audit(audit_log: Path, start: int, user: str) -> None:
    """Keep the requests ``user`` sent to another control plane (from byte ``start`` of its audit log), for the
    RBAC check, before that plane stops and its log goes."""
    if not audit_log.exists():
        return
    with audit_log.open("rb") as f:
        f.seek(start)
        _AUDIT.extend(line for line in f if json.loads(line).get("user", {}).get("username") == user)


def kept_audit() -> bytes:
    """The kept requests, as lines of an audit log."""
    return b"".join(_AUDIT)
