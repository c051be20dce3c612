"""docs/deploy.md's steps, run as printed: the project's image, built with image/build, pushed to a registry on
loopback, deployed with deploy/sidecar, then run as the pod would be (its ServiceAccount's token mounted, the API
server's address in the environment), where the README's commands work unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.bundle.oci_registry import oci_registry  # noqa: F401  (a fixture)
from tests.docblocks import ROOT, indented_block
from tests.e2e.support import cli, get
from tests.support.repo import GitOpsRepo
from tests.image.test_image import ENV, _buildah
from tests.loop.conftest import uninstall
from tests.support.parts import not_tested

pytestmark = [pytest.mark.incluster, pytest.mark.timeout(2400)]   # a fresh machine assembles the image's base

DEPLOY_FIRST = "image/build localhost/reconciler:0.1.0"
POD_FIRST = "sa=$(mktemp -d) && kubectl -n reconciler-system create token reconciler > $sa/token"
TAG = "localhost/reconciler:0.1.0"


@pytest.fixture
def repo(gitops: GitOpsRepo, k8s, capsys) -> GitOpsRepo:
    """The README walk-through's end: plumbus approved and committed, with its olm.lock."""
    assert cli("resolve", str(gitops.path), capsys=capsys).code == 0
    gitops.commit("olm.lock")
    yield gitops
    uninstall(k8s)


def test_the_deploy_document_runs_as_printed(control_plane, k8s, deployed, oci_registry, repo, tmp_path):  # noqa: F811
    missing = [t for t in ("buildah", "mmdebstrap") if shutil.which(t) is None]
    if missing:
        not_tested("image", f"{' and '.join(missing)} not installed (`make image-tools` installs them as root with apt-get)")
    from bench.peers.kubectl import kubectl_binary

    script = "\n".join(["set -euo pipefail", *indented_block("docs/deploy.md", DEPLOY_FIRST),
                        *indented_block("docs/deploy.md", POD_FIRST)])
    env = {**ENV, "PATH": f"{kubectl_binary(log=lambda _: None).parent}:{os.environ['PATH']}",
           "KUBECONFIG": str(control_plane.kubeconfig_path), "REGISTRY": oci_registry.host, "REPO": str(repo.path),
           "GIT_URL": "http://127.0.0.1:9/platform/gitops.git", "TMPDIR": str(tmp_path)}
    try:
        run = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=2300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
        # the dry run found the changes, the locked reconcile applied them as deploy/'s ServiceAccount, and status
        # says so
        assert "Deployment.apps plumbus-system/plumbus-controller-manager  would be created" in run.stdout, \
            run.stdout[-3000:]
        assert "Changes (applied to https://127.0.0.1:" in run.stdout, run.stdout[-3000:]
        assert any("plumbus" in line and "Healthy" in line for line in run.stdout.splitlines()[-5:]), \
            run.stdout[-3000:]
        status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in status["status"]["conditions"])
        assert get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system") is not None
        deployment = get(k8s, "apps/v1", "Deployment", "reconciler", "reconciler-system")
        images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
        assert images["reconciler"] == f"{oci_registry.host}/reconciler:0.1.0"
    finally:
        deployment = k8s.resource("apps/v1", "Deployment")
        if k8s.get(deployment, "reconciler-system", "reconciler"):
            k8s.delete(deployment, "reconciler-system", "reconciler")
        _buildah("rmi", "-f", TAG, f"{oci_registry.host}/reconciler:0.1.0", check=False)
