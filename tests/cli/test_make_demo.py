"""`make demo`, as the README prints it: the walk-through on a copy of the example, on a local cluster of its
own; run again from the same checkout it reuses that cluster and replaces the copy, saying both, and another
checkout gets its own.

The reconciler's cache is a temporary directory with the built tools linked in (nothing is built twice, and a
user's clusters are left alone); ``-o .venv/.installed`` keeps make from rebuilding the environment the test
itself runs in when pyproject.toml is newer than it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.localcluster.build import KWOK_TOOL, TOOL
from tests.docblocks import indented_block

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.cluster, pytest.mark.make(missing=shutil.which("make") is None, reason="make is not installed")]


def test_make_demo_walks_through_the_example_on_a_cluster_of_the_checkouts_own(tmp_path):
    assert "make demo" in indented_block("README.md", "make demo")
    cache = tmp_path / "cache"
    for tool in (TOOL, KWOK_TOOL):
        tool.ensure(print)
        (cache / tool.label).mkdir(parents=True)
        (cache / tool.label / tool.directory.name).symlink_to(tool.directory)
    env = {**os.environ, "RECONCILER_CACHE_DIR": str(cache), "TMPDIR": str(tmp_path), "HOME": str(tmp_path),
           "KUBECONFIG": ""}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    checkout = subprocess.run(["cksum"], input=str(ROOT), capture_output=True, text=True, check=True).stdout.split()[0]
    name, copy = f"demo-{checkout}", tmp_path / f"reconciler-demo-{checkout}"

    def demo() -> str:
        done = subprocess.run(["make", "-o", ".venv/.installed", "demo"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    try:
        first = demo()
        assert f"make demo of {ROOT}: local cluster {name}, repository copy {copy}" in first, first
        assert "  plumbus: healthy" in first
        assert f"The local cluster {name} (this checkout's) keeps running: export KUBECONFIG=" \
               f"{cache}/clusters/{name}/admin.kubeconfig" in first, first
        assert (copy / "approvals" / "plumbus.yaml").is_file()
        again = demo()   # the same checkout: its cluster reused, its copy replaced, both said
        assert "is already running at https://127.0.0.1:" in again and f"reusing it (its state: {cache}/clusters/" \
               f"{name})" in again, again
        assert f"replacing the copy an earlier make demo of this checkout left in {copy}" in again, again
        # another checkout: another cluster and another copy (make -n prints what it would run)
        other = tmp_path / "another-checkout"
        other.mkdir()
        planned = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), "-C", str(other), "-o",
                                  ".venv/.installed", "-o", "binaries", "demo"], env=env, capture_output=True,
                                 text=True, timeout=60).stdout
        found = re.search(r"cluster up --name (demo-\d+)", planned)
        assert found and found.group(1) != name, planned
    finally:
        subprocess.run([str(ROOT / ".venv" / "bin" / "reconciler"), "cluster", "down", "--name", name], env=env,
                       capture_output=True, timeout=120)
