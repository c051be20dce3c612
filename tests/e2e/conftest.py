"""Fixtures of the end-to-end tests: the session's cluster as a kubeconfig path and as a Kube client."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cluster.kube import Kube


@pytest.fixture
def kc(control_plane) -> Path:
    return control_plane.kubeconfig_path


@pytest.fixture
def k8s(control_plane) -> Kube:
    return Kube(control_plane.admin_client())
