"""A bounded crash campaign: kill -9 the CLI at random points of an install, an upgrade and a removal, then
reconcile again; the cluster must converge: nothing desired missing, nothing orphaned, the inventory equal to
what carries the owner label.

The seed is printed so a failing trial can be replayed (RECONCILER_CRASH_SEED); RECONCILER_CRASH_TRIALS runs
more trials (a longer campaign belongs in a bench run, not in CI).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reconciler.kube.client import Kube
from tests.e2e.support import get, managed
from tests.support.paths import EXAMPLE
from tests.support.repo import GitOpsRepo
from tests.e2e.test_reconcile import V100 as _V100, V110 as _V110

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
# An install namespace of its own: namespaces are never pruned, and other tests expect to create plumbus-system.
NAMESPACE = "crash-system"
V100 = {s.replace("plumbus-system", NAMESPACE) for s in _V100}
V110 = {s.replace("plumbus-system", NAMESPACE) for s in _V110}
DECLARATION = (EXAMPLE / "operators/plumbus.yaml").read_text().replace("namespace: plumbus-system",
                                                                        f"namespace: {NAMESPACE}")
KINDS = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount",
         "Deployment"}


def cli(repo: Path, kubeconfig: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "reconciler", "reconcile", str(repo), "--kubeconfig",
                             str(kubeconfig)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def inventory(kube: Kube) -> set[str]:
    obj = get(kube, "reconciler.dev/v1alpha1", "Operator", "plumbus")
    refs = ((obj or {}).get("status") or {}).get("inventory") or []
    return {f"{r['kind']} {r['namespace']}/{r['name']}" if r.get("namespace") else f"{r['kind']} {r['name']}"
            for r in refs if r["kind"] in KINDS}


def converge(repo: GitOpsRepo, kubeconfig: Path) -> subprocess.CompletedProcess:
    proc = cli(repo.path, kubeconfig)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def approve_namespace(repo: GitOpsRepo) -> None:
    """Another install namespace is another set of permissions: approve both bundles for it, as a user would."""
    import io

    from reconciler.cli.parser import main

    for version in ("1.1.0", "1.0.0"):
        repo.set_version(version)
        assert main(["approve", str(repo.path), "plumbus", "--offline"], out=io.StringIO()) == 0
    repo.commit("Approve plumbus in its namespace")   # an approval counts once committed


def test_killed_reconciles_converge_on_the_next_run(tmp_path, kc, k8s):
    seed = int(os.environ.get("RECONCILER_CRASH_SEED") or random.randrange(1 << 30))
    trials = int(os.environ.get("RECONCILER_CRASH_TRIALS") or 2)
    print(f"crash campaign seed {seed}, {trials} trial(s) per phase")
    rng = random.Random(seed)
    repo = GitOpsRepo(tmp_path / "repo")
    repo.write("operators/plumbus.yaml", DECLARATION)
    approve_namespace(repo)
    phases = [("install", "1.0.0", V100), ("upgrade", ">=1.0.0 <2.0.0", V110), ("removal", None, set())]
    try:
        for trial in range(trials):
            for phase, version, expected in phases:
                if version is None:
                    repo.remove("operators/plumbus.yaml")
                    repo.write("reconciler.yaml", "allowEmpty: true\n")
                else:
                    if not (repo.path / "operators/plumbus.yaml").exists():
                        repo.write("operators/plumbus.yaml", DECLARATION)
                        repo.write("reconciler.yaml", (EXAMPLE / "reconciler.yaml").read_text())
                    repo.set_version(version)
                delay = rng.uniform(0.3, 6.0)
                proc = cli(repo.path, kc)
                time.sleep(delay)  # a random point in the run, not a timing assertion
                killed = proc.poll() is None
                if killed:
                    proc.kill()
                proc.communicate(timeout=60)
                run = converge(repo, kc)
                where = f"seed {seed}, trial {trial}, {phase}, killed={killed} after {delay:.2f}s"
                print(where)
                assert run.returncode == 0, f"{where}: {run.stderr}"
                assert managed(k8s, "plumbus") == expected, where
                assert inventory(k8s) == expected, where
                if phase == "removal":
                    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None, where
    finally:
        repo.write("reconciler.yaml", "allowEmpty: true\n")
        if (repo.path / "operators/plumbus.yaml").exists():
            repo.remove("operators/plumbus.yaml")
        converge(repo, kc)
        assert managed(k8s, "plumbus") == set()
