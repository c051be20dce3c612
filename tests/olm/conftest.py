"""OLM v0 on a control plane of its own, and catalogs served to it by opm on loopback.

Not the session's control plane: OLM's CRDs are cluster-scoped and would stay
for the rest of the session, and its operators act on every namespace (they
copy CSVs into the namespaces an OperatorGroup targets and write ClusterRoles
for each OperatorGroup), so the tests that compare a cluster with what the
reconciler wrote would see objects no user of theirs has. A plane of its own
costs one more start-up, and stopping it removes everything OLM wrote.

OLM is built here when the cache is cold (``make test`` builds it first,
with the control plane's binaries); where it can be neither found nor built
(no Go), the tests are skipped, saying so.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.localcluster.olmv0 import ensure_olm
from tests.olm.support import BUNDLE, INTERVAL, uncaptured, write_catalog


@pytest.fixture(scope="module")
def olm_plane(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane running OLM v0 (olm-operator and catalog-operator), built first if the cache is cold; both
    resync every ``INTERVAL`` seconds, so that a test can wait through whole resyncs (``wait_resynced``)."""
    with uncaptured(request):
        binaries, olm = ensure_binaries(log=print), ensure_olm(log=print)
    plane = ControlPlane(tmp_path_factory.mktemp("olm-plane"), binaries, olm=olm, olm_interval=INTERVAL)
    try:
        plane.start(timeout=240)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def catalog_address(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``BUNDLE`` rendered by ``reconciler catalog render`` into a catalog of one channel, served by the pinned opm
    (test_olm_v0: OLM installs from the reconciler's rendering, as ``cluster up --serve-catalog`` serves it)."""
    from bench.peers import opm

    with uncaptured(request):
        opm.opm_binary(log=print)
    directory = tmp_path_factory.mktemp("olm-catalog")
    write_catalog(BUNDLE, directory / "catalog", by_opm=False)
    with opm.serve(directory / "catalog", directory / "serve") as address:
        yield address
