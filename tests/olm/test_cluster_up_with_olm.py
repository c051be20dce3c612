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
import shutil
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
    plane = None
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
        rehearse(cache, env, tmp_path)
        plane = ControlPlane.attach(state_dir)   # now with opm serving the catalog
    finally:
        down = run(block[1])
    assert "the local cluster is stopped" in down
    for name, pid in plane.pids.items():
        assert not Path(f"/proc/{pid}/cmdline").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes(), name
    assert not state_dir.exists()


REHEARSAL = ". .venv/bin/activate"
COPY = "rehearsal=$(mktemp -d) && cp -r examples/gitops-repo \"$rehearsal/platform-repo\" && cp examples/olm-v0-install.yaml \"$rehearsal/\""
ADOPT = "reconciler adopt platform-repo --dry-run"


def rehearse(cache: Path, env: dict, tmp_path: Path) -> None:
    """docs/migration.md's rehearsal, then its adoption block, as printed, from the project's root, on the
    running cluster (its `cluster up --with-olm --serve-catalog` adds the catalog): OLM installs plumbus from
    the catalog served, the repository adopts it and takes it over, and the CatalogSource nobody uses any more
    is named."""
    from bench.peers.kubectl import kubectl_binary

    from reconciler.localcluster.catalogs import OPM_TOOL
    from tests.docblocks import run_walkthrough

    (cache / OPM_TOOL.label).mkdir(parents=True, exist_ok=True)
    link = cache / OPM_TOOL.label / OPM_TOOL.directory.name
    if not link.exists():
        OPM_TOOL.ensure(print)
        link.symlink_to(OPM_TOOL.directory)
    block = indented_block("docs/migration.md", REHEARSAL) + indented_block("docs/migration.md", ADOPT)
    assert len(block) == 17 and block[1].startswith(COPY), block
    home = tmp_path / "reader"
    home.mkdir()
    steps = run_walkthrough(block, home, env={
        "RECONCILER_CACHE_DIR": str(cache), "TMPDIR": str(tmp_path),
        "PATH": f"{kubectl_binary(print).parent}{os.pathsep}{env['PATH']}"})
    out = {line: text for line, text, _ in steps}
    served = out["reconciler cluster up --with-olm --serve-catalog platform-repo/catalogs/community"]
    assert "serving catalog community (platform-repo/catalogs/community, 2 bundles with their objects inline) " \
           "to OLM as CatalogSource olm/community at 127.0.0.1:" in served, served
    assert "adopted Subscription plumbus-system/plumbus: Operator plumbus" in out["reconciler adopt platform-repo"]
    takeover = out["reconciler reconcile platform-repo"]
    assert "takeover of plumbus from OLM v0: " in takeover, takeover
    assert "CatalogSource olm/community is used by no Subscription any more: nothing adopted needs it" in takeover
    assert "  plumbus: healthy" in takeover
    assert "takeover of" not in steps[-1][1] and "CatalogSource" not in steps[-1][1], steps[-1][1]

    refusals_name_their_cause(tmp_path, env={**env, "RECONCILER_CACHE_DIR": str(cache)},
                              kubectl=kubectl_binary(print))


UNREADABLE = """\
apiVersion: v1
kind: Namespace
metadata: {name: unreadable}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: gone, namespace: unreadable}
spec: {sourceType: grpc, address: "127.0.0.1:%d"}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: group, namespace: unreadable}
spec: {}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: fleeb, namespace: unreadable}
spec: {name: fleeb, channel: stable, source: gone, sourceNamespace: unreadable}
"""


def refusals_name_their_cause(tmp_path: Path, env: dict, kubectl: Path) -> None:
    """After the takeover, on the same OLM: a Subscription whose CatalogSource cannot be read has installed
    nothing, and adopt names that CatalogSource (not an InstallPlan there is none of); a repository whose catalog
    file is broken is an input error (exit 2) naming the file, though nothing could be adopted anyway."""
    import socket
    import time

    with socket.socket() as s:   # nothing listens there once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = subprocess.run([sys.executable, "-m", "reconciler", "cluster", "kubeconfig"], env=env,
                                capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([str(kubectl), "--kubeconfig", kubeconfig, "apply", "-f", "-"], input=UNREADABLE % port,
                   text=True, check=True, capture_output=True)
    deadline = time.monotonic() + 120
    while True:   # until catalog-operator has tried it
        state = subprocess.run([str(kubectl), "--kubeconfig", kubeconfig, "get", "catalogsource", "-n", "unreadable",
                                "gone", "-o", "jsonpath={.status.connectionState.lastObservedState}"],
                               capture_output=True, text=True).stdout
        if state and state != "READY":
            break
        assert time.monotonic() < deadline, f"the CatalogSource is still {state!r}"
        time.sleep(1)
    repo = next(tmp_path.glob("tmp.*/platform-repo"))   # the rehearsal's (mktemp -d in TMPDIR), taken over

    def adopt(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "reconciler", "adopt", str(path), "--kubeconfig", kubeconfig],
                              env=env, capture_output=True, text=True, timeout=300)

    done = adopt(repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"not adopted Subscription unreadable/fleeb: nothing is installed for it: its CatalogSource "
            f"unreadable/gone cannot be read (connection {state}), so OLM resolved nothing") in done.stdout, done.stdout
    assert f"make CatalogSource unreadable/gone READY (it serves 127.0.0.1:{port};" in done.stdout
    assert "InstallPlan" not in done.stdout
    broken = repo.parent / "broken-repo"
    shutil.copytree(repo, broken)
    catalog = broken / "catalogs" / "community" / "plumbus.yaml"
    catalog.write_text(catalog.read_text() + "---\nschema: olm.bundle\nname: [unclosed\n")
    done = adopt(broken)
    assert done.returncode == 2, done.stdout + done.stderr   # as adopt --help says of an invalid catalog
    assert done.stderr.startswith("error: catalogs/community/plumbus.yaml: invalid YAML"), done.stderr


OPENSHIFT = "reconciler cluster up --name openshift --with-olm --openshift --serve-catalog platform-repo/catalogs/community"


def test_the_openshift_shaped_rehearsal_runs_as_printed(request, tmp_path):
    """docs/migration.md's rehearsal on an OpenShift-shaped cluster, as printed, on a private cluster of its own:
    the catalog is served in openshift-marketplace, plumbus installed in openshift-operators under
    global-operators, adopted and taken over, and global-operators kept."""
    from bench.peers.kubectl import kubectl_binary

    from reconciler.localcluster.catalogs import OPM_TOOL
    from tests.docblocks import run_walkthrough

    cache = tmp_path / "cache"
    for tool in (TOOL, KWOK_TOOL, OLM_TOOL, OPM_TOOL):
        with uncaptured(request):
            tool.ensure(print)
        (cache / tool.label).mkdir(parents=True)
        (cache / tool.label / tool.directory.name).symlink_to(tool.directory)
    block = indented_block("docs/migration.md", REHEARSAL, after="### On an OpenShift-shaped cluster")
    assert OPENSHIFT in block and block[-1] == "reconciler cluster down --name openshift", block
    home = tmp_path / "reader"
    home.mkdir()
    env = {"RECONCILER_CACHE_DIR": str(cache), "TMPDIR": str(tmp_path),
           "PATH": f"{kubectl_binary(print).parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                   f"{os.environ['PATH']}"}
    try:
        steps = run_walkthrough(block, home, env=env)
    finally:   # the cluster goes whatever happened to the block
        subprocess.run([sys.executable, "-m", "reconciler", "cluster", "down", "--name", "openshift"],
                       env={**os.environ, **env}, capture_output=True, timeout=120)
    out = {line: text for line, text, _ in steps}
    assert "laid out as OpenShift: catalogs in openshift-marketplace, openshift-operators under OperatorGroup " \
           "global-operators" in out[OPENSHIFT], out[OPENSHIFT]
    assert "to OLM as CatalogSource openshift-marketplace/community at 127.0.0.1:" in out[OPENSHIFT], out[OPENSHIFT]
    assert "adopted Subscription openshift-operators/plumbus: Operator plumbus" in out["reconciler adopt platform-repo"]
    takeover = out["reconciler reconcile platform-repo"]
    assert "takeover of plumbus from OLM v0: " in takeover, takeover
    assert "keep OperatorGroup openshift-operators/global-operators: OLM's installation ships it" in takeover, takeover
    assert "takeover of" not in steps[-2][1], steps[-2][1]
    assert "the local cluster is stopped" in steps[-1][1], steps[-1][1]
