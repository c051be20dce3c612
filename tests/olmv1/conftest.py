"""The OLM v1 tests' control plane: catalogd and operator-controller (the pinned build) beside it, and an HTTPS
registry on loopback whose CA both trust; one per test module."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from reconciler.errors import ControlPlaneError
from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.localcluster.olmv1 import Olmv1, ensure_olmv1
from reconciler.localcluster.pki import create_loopback_tls
from tests.olm.support import uncaptured
from tests.olmv1.support import REFUSED_BY_PROXY, Setup
from tests.support.parts import not_tested


@pytest.fixture(scope="module")
def olmv1_setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from bench.peers import stop
    from bench.peers.crane import crane_binary
    from bench.peers.registry import registry_binary
    from tests.bundle.oci_registry import start_registry

    with uncaptured(request):
        binaries = ensure_binaries(log=print)
        try:
            olm_binaries = ensure_olmv1(log=print)
        except ControlPlaneError as exc:   # a module proxy that refuses one of its modules (Makefile: olmv1)
            if not REFUSED_BY_PROXY.search(exc.message):
                raise
            not_tested("olmv1", f"OLM v1 cannot be built here: the Go module proxy refuses a module it needs: "
                                f"{REFUSED_BY_PROXY.search(exc.message).group(0)}")
        registry, crane = registry_binary(log=print), crane_binary(log=print)
    work = tmp_path_factory.mktemp("olmv1")
    tls = create_loopback_tls(work / "tls")
    reg_proc, reg = start_registry(registry, work / "registry", tls=(tls.cert, tls.key, tls.ca_cert))
    plane = ControlPlane(work / "plane", binaries)
    try:
        plane.start(timeout=240)
        env = {**os.environ, "SSL_CERT_FILE": str(tls.ca_cert)}

        def run_crane(*args: str) -> str:
            done = subprocess.run([str(crane), *args], capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            return done.stdout.strip()

        with Olmv1(olm_binaries, plane.kubeconfig_path, work / "olmv1", tls) as olm:
            yield Setup(plane, olm, reg.host, run_crane)
    finally:
        plane.stop()
        stop(reg_proc)
