"""Shared fixtures.

One control plane serves the whole session: starting it takes seconds, and
tests isolate themselves by namespace instead. Every test that uses it is
marked ``cluster`` automatically, so ``-m "not cluster"`` never starts it.
"""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes.client
import pytest

from reconciler.localcluster import ControlPlane, ensure_binaries

# the repository fixtures (tests/support/fixtures.py); the parts a run leaves untested, listed at its end
# (tests/support/parts.py)
pytest_plugins = ["tests.support.fixtures", "tests.support.parts"]

_CLUSTER_FIXTURES = {"control_plane", "kube"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _CLUSTER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The local cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes) for the session.

    Built first if the cache is cold."""
    # Output capture would hide the progress of a build that takes minutes.
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binaries = ensure_binaries(log=print)
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), binaries)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """A fresh admin (system:masters) client."""
    with control_plane.admin_client() as client:
        yield client
