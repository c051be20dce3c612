"""Everything the command line does, done as deploy/'s ServiceAccount with exactly deploy/'s RBAC.

Each test runs one capability through the CLI with a kubeconfig holding only a TokenRequest token of
``reconciler-system/reconciler`` (what its pod is given), against the local control plane on which an
administrator applied deploy/base. The last test reads the API server's audit log of the whole suite and
fails on any rule of deploy/ that no capability used.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pygit2
import pytest

from reconciler import yamlio
from reconciler.cluster.kube import Kube
from tests.e2e.support import GitOpsRepo, approve, cli, get, managed
from tests.e2e.test_reconcile import V100, V110
from tests.loop.conftest import wait_until
from tests.unit.helpers import crd_doc, csv_doc, deployment, operator_doc, write, write_bundle, write_docs

from .conftest import CAPABILITIES, passed

pytestmark = pytest.mark.incluster

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "reconciler.dev/v1alpha1"
CSV = "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"


def conditions(k8s: Kube, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in get(k8s, OPERATOR, "Operator", name)["status"]["conditions"]}


@pytest.fixture
def gitops(tmp_path: Path) -> GitOpsRepo:
    repo = GitOpsRepo(tmp_path / "gitops")
    repo.set_version("1.0.0")
    repo.commit("plumbus 1.0.0")
    return repo


def test_first_install_and_upgrade(deployed, k8s, gitops, clean, capsys):
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert managed(k8s, "plumbus") == V100
    assert conditions(k8s, "plumbus")["Ready"]["status"] == "True"
    installer = get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system")
    assert installer is not None   # the bundle was written by it, not by the deployed ServiceAccount

    gitops.set_version(">=1.0.0 <2.0.0")
    gitops.commit("follow 1.x")
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "Deployment.apps plumbus-system/plumbus-controller  deleted" in run.out   # pruned
    assert managed(k8s, "plumbus") == V110
    passed("first install", "upgrade")


def _release_reading_a_secret(gitops: GitOpsRepo) -> None:
    """plumbus 1.2.0 in the catalog: a Secret of its own and the permission to read it (so a new approval), and
    a changed pod template."""
    shutil.copytree(gitops.path / "bundles/plumbus/1.1.0", gitops.path / "bundles/plumbus/1.2.0")
    [csv] = yamlio.read_all(gitops.path / CSV)
    csv["metadata"]["name"], csv["spec"]["version"], csv["spec"]["replaces"] = "plumbus.v1.2.0", "1.2.0", \
        "plumbus.v1.1.0"
    csv["spec"]["install"]["spec"]["permissions"][0]["rules"].append(
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "patch"]})
    csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["metadata"]["labels"]["tier"] = "backend"
    gitops.write(CSV.replace("1.1.0", "1.2.0"), yamlio.dump_all([csv]))
    gitops.write("bundles/plumbus/1.2.0/manifests/settings.yaml",
                 "apiVersion: v1\nkind: Secret\nmetadata: {name: plumbus-settings}\nstringData: {level: info}\n")
    catalog = gitops.path / "catalogs/community/plumbus.yaml"
    catalog.write_text(catalog.read_text().replace(
        "    replaces: plumbus.v1.0.0\n", "    replaces: plumbus.v1.0.0\n  - name: plumbus.v1.2.0\n"
        "    replaces: plumbus.v1.1.0\n") + "---\nschema: olm.bundle\npackage: plumbus\nname: plumbus.v1.2.0\n"
        "image: file://bundles/plumbus/1.2.0\nproperties:\n  - type: olm.package\n"
        "    value: {packageName: plumbus, version: 1.2.0}\n  - type: olm.gvk\n"
        "    value: {group: how.theydoit.com, kind: Plumbus, version: v1alpha1}\n")


def test_dry_run_and_diff_of_a_change_then_the_approval_wait(deployed, k8s, gitops, clean, capsys):
    """A dry run of a changed bundle needs no right deploy/ does not grant, before and after
    the approval that the change needs; the real run waits for that approval (exit 4), then applies it."""
    gitops.set_version(">=1.0.0 <2.0.0")
    gitops.commit("follow 1.x")
    assert cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys).code == 0
    base = gitops.commit("olm.lock of 1.1.0")
    _release_reading_a_secret(gitops)
    assert cli("resolve", str(gitops.path), capsys=capsys).code == 0
    assert "plumbus.v1.2.0" in (gitops.path / "olm.lock").read_text()
    gitops.commit("plumbus 1.2.0 reads a Secret of its own")

    dry = cli("reconcile", str(gitops.path), "--dry-run", "--kubeconfig", str(deployed), capsys=capsys)
    assert dry.code == 1, dry.out + dry.err
    assert "Secret plumbus-system/plumbus-settings" in dry.out and "WAITS FOR APPROVAL" in dry.out, dry.out
    # planned as the installer in place: what its current approval allows is checked by the API server (the
    # Deployment's change), what only the pending one allows is said to be unchecked
    assert "~ Deployment.apps plumbus-system/plumbus-controller-manager  would be configured once approved" in dry.out
    assert "tier: backend" in dry.out, dry.out
    assert "the objects of plumbus that only the newly approved permissions allow" in dry.out, dry.out

    diff = cli("diff", str(gitops.path), "--base", base, "--kubeconfig", str(deployed), capsys=capsys)
    assert diff.code == 1, diff.out + diff.err
    assert "plumbus-settings" in diff.out and "secrets" in diff.out, diff.out

    waits = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert waits.code == 4, waits.out + waits.err
    assert get(k8s, "v1", "Secret", "plumbus-settings", "plumbus-system") is None
    assert conditions(k8s, "plumbus")["InstallPendingApproval"]["status"] == "True"
    assert get(k8s, OPERATOR, "Operator", "plumbus")["status"]["pending"]["bundle"]["name"] == "plumbus.v1.2.0"

    assert approve(gitops, "plumbus", capsys=capsys).code == 0
    dry = cli("reconcile", str(gitops.path), "--dry-run", "--kubeconfig", str(deployed), capsys=capsys)
    assert dry.code == 1, dry.out + dry.err
    assert "WAITS FOR APPROVAL" not in dry.out, dry.out
    # the waiting run removed the installer (none outlives its approval): a real run creates it first
    assert "the objects of plumbus, whose installer a real run creates first" in dry.out, dry.out
    assert "Deployment.apps plumbus-system/plumbus-controller-manager  would be configured  [plumbus]: not checked" \
        in dry.out, dry.out

    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert get(k8s, "v1", "Secret", "plumbus-settings", "plumbus-system") is not None
    passed("dry run", "diff", "approval wait")
