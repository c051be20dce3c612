"""Adopting OLM v0 installs, done as deploy/'s ServiceAccount with exactly deploy/'s RBAC.

Real OLM v0 runs on a control plane of its own (tests/olm's: its CRDs and controllers would stay on the
suite's plane), on which an administrator applied deploy/base and OLM installed three corpus operators in
three modes. `reconciler adopt` and the takeover `reconcile` then run with a TokenRequest token of
``reconciler-system/reconciler`` only. That plane's audit log of the ServiceAccount is kept for the suite's
RBAC check (test_capabilities), which reads it with the suite plane's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.kube.client import Kube
from reconciler.localcluster import ControlPlane
from reconciler.localcluster.plane import DEPLOYED_USER
from tests.olm.adoption import installed_by_olm, make_repo
from tests.olm.conftest import olm_plane  # noqa: F401  (a fixture)
from tests.olm.support import needs_corpus, needs_olm
from tests.olm.test_takeover import CASES, olm_bookkeeping, snapshot
from tests.rollout.harness import DEPLOY, deploy_objects
from tests.support.repo import commit_all

from .conftest import keep_audit, passed
from .rbac_usage import deploy_rbac

pytestmark = [pytest.mark.incluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]


@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:  # noqa: F811
    """deploy/base and the component deploy/olm-takeover applied by an administrator, then the takeover
    tests' installs made by OLM v0."""
    with olm_plane.admin_client() as api:
        k8s = Kube(api)
        for doc in deploy_objects("base") + deploy_rbac(DEPLOY, "olm-takeover"):   # base's RBAC again: the same
            k8s.apply(k8s.require_resource(doc), doc, field_manager="deploy-test", dry_run=False)
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("incluster-catalog"), CASES):
        yield olm_plane


def test_adopting_and_taking_over_olm_v0_installs(installed: ControlPlane, tmp_path: Path):
    start = installed.audit_log.stat().st_size if installed.audit_log.exists() else 0
    as_deployed = installed.service_account_kubeconfig("reconciler-system", "reconciler")
    repo = make_repo(tmp_path / "platform-repo", CASES)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(*args: str, code: int = 0) -> str:
        done = subprocess.run([sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(as_deployed)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == code, f"{args}\n{done.stdout}{done.stderr}"
        return done.stdout

    with installed.admin_client() as api:
        before = snapshot(api)
    try:
        preview = run("adopt", str(repo), "--dry-run")
        assert all(f"would write operators/{c.package}.yaml" in preview for c in CASES), preview
        run("adopt", str(repo))
        commit_all(repo, "Adopt what OLM v0 runs")

        dry = run("reconcile", str(repo), "--dry-run", code=1)
        for case in CASES:
            assert f"takeover of {case.package} from OLM v0: would delete Subscription" in dry, dry
        run("reconcile", str(repo))
        with installed.admin_client() as api:
            after = snapshot(api)
            assert after["replicaSets"] == before["replicaSets"]   # no pod restarted
            assert after["templates"] == before["templates"]
            assert set(before["crds"]) <= set(after["crds"])
            left = olm_bookkeeping(api)
            assert left == [], "\n".join(left)
        again = run("reconcile", str(repo), "--dry-run")   # the next run is a no-op
        assert "takeover of" not in again, again
    finally:
        keep_audit(installed.audit_log, start, DEPLOYED_USER)
    passed("adoption")
