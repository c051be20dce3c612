"""`reconciler cluster up --with-olm` and `cluster down`, run as docs/health.md prints them.

`--with-olm` is given to a cluster already running without OLM (a fresh
start with OLM is what the other OLM tests' plane does): OLM is added, the
rest of the cluster stays as it was. The commands run with the reconciler's
cache in a temporary directory, so the default cluster they start is the
test's own (a user's default cluster is left alone); the built tools are
linked in from the real cache, so nothing is built twice.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes.client
import pytest

from reconciler.localcluster import ControlPlane
from reconciler.localcluster.build import KWOK_TOOL, TOOL
from reconciler.localcluster.olmv0 import TOOL as OLM_TOOL
from tests.docblocks import indented_block
from tests.olm.support import needs_olm, uncaptured

pytestmark = [pytest.mark.cluster, pytest.mark.olm, needs_olm]

ROOT = Path(__file__).resolve().parents[2]
FIRST_LINE = "reconciler cluster up --with-olm"


def test_cluster_up_with_olm_adds_olm_to_the_cluster_and_down_stops_it(request, tmp_path):
    cache = tmp_path / "cache"
    for tool in (TOOL, KWOK_TOOL, OLM_TOOL):
        with uncaptured(request):
            tool.ensure(print)
        (cache / tool.label).mkdir(parents=True)
        (cache / tool.label / tool.directory.name).symlink_to(tool.directory)
    block = indented_block("docs/health.md", FIRST_LINE)
    assert block == ["reconciler cluster up --with-olm", "reconciler cluster down"]
    env = {**os.environ, "RECONCILER_CACHE_DIR": str(cache), "KUBECONFIG": "",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    state_dir = cache / "cluster"

    def run(line: str) -> str:
        done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        return done.stdout

    run("reconciler cluster up")
    try:
        plain = ControlPlane.attach(state_dir)
        assert plain.healthy() and plain.olm_version == ""
        up = run(block[0])
        plane = ControlPlane.attach(state_dir)
        assert plane.healthy() and plane.olm_version == "v0.46.0"
        assert {k: v for k, v in plane.pids.items() if k in plain.pids} == plain.pids   # the rest kept running
        assert set(plane.pids) - set(plain.pids) == {"catalog-operator", "olm-operator"}
        assert re.search(r"^export KUBECONFIG=.*admin\.kubeconfig$", up, re.M), up
        assert "OLM v0.46.0 is running (namespace olm)" in up, up
        with plane.admin_client() as api:
            crds = {c.metadata.name for c in kubernetes.client.ApiextensionsV1Api(api)
                    .list_custom_resource_definition().items}
            assert {"subscriptions.operators.coreos.com", "clusterserviceversions.operators.coreos.com",
                    "installplans.operators.coreos.com", "catalogsources.operators.coreos.com",
                    "operatorgroups.operators.coreos.com"} <= crds
        again = run(block[0])   # already running with OLM: nothing new is started
        assert "already running" in again and "with OLM v0.46.0" in again, again
        assert ControlPlane.attach(state_dir).pids == plane.pids
    finally:
        down = run(block[1])
    assert "the local cluster is stopped" in down
    for name, pid in plane.pids.items():
        assert not Path(f"/proc/{pid}/cmdline").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes(), name
    assert not state_dir.exists()
