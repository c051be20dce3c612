"""A takeover killed with SIGKILL at random points is finished by the next run, with nothing lost.

The same three OLM v0 installs as test_takeover.py, on a plane of their own;
`reconcile` is killed (-9) after a random delay, again and again, each run
getting further, until one finishes. The seed is printed so a failure can be
replayed (RECONCILER_KILL_SEED). What must hold at the end is what a takeover
that was never interrupted gives.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.localcluster import ControlPlane
from tests.olm.adoption import get, installed_by_olm, killed, make_repo, reconciler
from tests.olm.support import needs_corpus, needs_olm, wait_resynced
from tests.olm.test_takeover import CASES, CR, olm_bookkeeping, snapshot
from tests.support.repo import commit_all

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

KILLS = 6


@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("kill-catalog"), CASES):
        yield olm_plane


def test_a_takeover_killed_anywhere_converges(installed: ControlPlane, tmp_path: Path):
    from kubernetes import client

    seed = int(os.environ.get("RECONCILER_KILL_SEED") or random.randrange(1 << 30))
    print(f"RECONCILER_KILL_SEED={seed}")
    rng = random.Random(seed)
    kubeconfig = str(installed.kubeconfig_path)
    with installed.admin_client() as api:
        group, version, plural, kind = CR
        client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, CASES[1].namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "kept"}, "spec": {}})
        before = snapshot(api)
    repo = make_repo(tmp_path / "repo", CASES)
    assert reconciler("adopt", str(repo), "--kubeconfig", kubeconfig).returncode == 0
    commit_all(repo, "adopt")

    argv = ["reconcile", str(repo), "--kubeconfig", kubeconfig]
    first = CASES[0]
    with installed.admin_client() as api:
        def gone(plural: str, name: str):
            return lambda: get(api, first.namespace, plural, name) is None
        # Killed right after the takeover's first deletion, right after the CSV's, then at random points later
        # and later: each run gets further.
        finished = [killed(argv, rng.uniform(0, 0.3), gone("subscriptions", first.package)),
                    killed(argv, rng.uniform(0, 0.3), gone("clusterserviceversions", first.csv))]
        states = [(get(api, first.namespace, "subscriptions", first.package) is None,
                   get(api, first.namespace, "clusterserviceversions", first.csv) is None)]
        delays = sorted(rng.uniform(0.5, 6.0) for _ in range(KILLS))
        finished += [killed(argv, delay) for delay in delays]
        assert snapshot(api)["replicaSets"] == before["replicaSets"]   # nothing of the workload lost meanwhile
    print(f"exit codes of the killed runs (None: killed): {finished}; delays {delays}")
    assert states == [(True, True)] and None in finished[:2], (states, finished)   # the takeover was cut short
    final = reconciler(*argv)
    assert final.returncode == 0, f"seed {seed}\n{final.stdout}{final.stderr}"
    wait_resynced(installed, [c.namespace for c in CASES])   # what OLM does on its next passes must undo nothing
    with installed.admin_client() as api:
        after = snapshot(api)
        assert after["replicaSets"] == before["replicaSets"], seed
        assert after["templates"] == before["templates"], seed
        assert set(before["crds"]) <= set(after["crds"]) and after["customResources"] == ["kept"], seed
        assert olm_bookkeeping(api) == [], seed
    noop = reconciler("reconcile", str(repo), "--kubeconfig", kubeconfig, "--dry-run")
    assert noop.returncode == 0 and "takeover of" not in noop.stdout, noop.stdout
