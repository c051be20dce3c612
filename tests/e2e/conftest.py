"""Fixtures of the end-to-end tests: the session's cluster as a kubeconfig path and as a Kube client."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.kube.client import Kube


@pytest.fixture
def kc(control_plane) -> Path:
    return control_plane.kubeconfig_path


@pytest.fixture
def k8s(control_plane) -> Kube:
    return Kube(control_plane.admin_client())


@pytest.fixture
def recorded_k8s(control_plane):
    """A RecordingKube and the Operator names a test installs; afterwards those Operators are removed."""
    from reconciler.cluster.status import objects as status_objects
    from reconciler.cluster.ownership import Request, sync
    from tests.e2e.support import RecordingKube

    kube = RecordingKube(control_plane.admin_client())
    names: list[str] = []
    yield kube, names
    others = frozenset(status_objects.read_all(kube)) - set(names)
    sync(kube, Request([], dry_run=False, allow_empty=True, held=others))
