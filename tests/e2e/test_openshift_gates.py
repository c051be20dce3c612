"""OpenShift's upgrade gate kept where a user looks before a cluster upgrade: a bundle's olm.maxOpenShiftVersion in
the Operator's status (``metadata``), in `reconciler status`, and in the dry-run-next check of `resolve` and
`reconcile --dry-run`, judged against the OpenShift release of reconciler.yaml (the cluster has no ClusterVersion)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.e2e.support import GitOpsRepo, cli, get, reconcile
from tests.unit.helpers import csv_doc, operator_doc, write_bundle

pytestmark = pytest.mark.cluster

APPROVE_ALL = ("apiVersion: rukpak.io/v1\nkind: ProvisionerClass\nmetadata: {name: approve-everything}\n"
               "provisioner: operators.coreos.com/operators\nparameters: {approval: AllowAll}\n")
GATE = json.dumps([{"type": "olm.maxOpenShiftVersion", "value": "4.14"}])


def gated_repo(root, name: str, namespace: str, *, input_class: str = "subscription") -> GitOpsRepo:
    repo = GitOpsRepo(root)
    repo.write("reconciler.yaml", 'openshiftVersion: "4.14"\nallowEmpty: true\nprovisionerClassName: '
                                  'approve-everything\n')
    repo.write("classes/approve-everything.yaml", APPROVE_ALL)
    write_bundle(repo.path, f"bundles/{name}", csv_doc(annotations={"olm.properties": GATE}))
    import yaml

    repo.write(f"operators/{name}.yaml", yaml.safe_dump(operator_doc(
        name, inputClass=input_class, bundle={"name": "demo.v0.1.0", "spec": {"refs": [f"file://bundles/{name}"]}},
        install={"namespace": namespace})))
    repo.commit("a bundle that supports OpenShift up to 4.14")
    return repo


def test_the_gate_is_in_the_status_and_status_says_it_blocks_the_next_minor(tmp_path, kc, capsys):
    from reconciler.kube.client import Kube, load_api_client

    uid = uuid.uuid4().hex[:6]
    name, namespace = f"gated-{uid}", f"gated-{uid}"
    repo = gated_repo(tmp_path / "repo", name, namespace)
    try:
        run = reconcile(repo, kc, "--timeout", "120s", capsys=capsys)
        assert run.code == 0, run.out + run.err
        kube = Kube(load_api_client(str(kc), None))
        status = get(kube, "reconciler.dev/v1alpha1", "Operator", name)
        assert status["status"]["metadata"]["maxOpenShiftVersion"] == "4.14"
        shown = cli("status", str(repo.path), "--kubeconfig", str(kc), capsys=capsys)
        assert shown.code == 0, shown.err
        assert (f"  {name}: olm.maxOpenShiftVersion 4.14: blocks the cluster's OpenShift upgrade: it supports "
                f"OpenShift up to 4.14 (olm.maxOpenShiftVersion): the cluster, at 4.14, cannot be upgraded to 4.15 "
                f"while it runs (openshiftVersion in reconciler.yaml)") in shown.out, shown.out
        doc = json.loads(cli("status", str(repo.path), "--kubeconfig", str(kc), "-o", "json", capsys=capsys).out)
        [row] = [r for r in doc["operators"] if r["name"] == name]
        assert row["maxOpenShiftVersion"] == "4.14" and row["openshift"]["version"] == "4.14"
        # without the repository nothing says which release the cluster runs: said so, not guessed
        bare = cli("status", "--kubeconfig", str(kc), capsys=capsys)
        assert f"  {name}: olm.maxOpenShiftVersion 4.14: the cluster's OpenShift version is unknown" in bare.out
        repo.write("reconciler.yaml", 'openshiftVersion: "4.13"\nallowEmpty: true\nprovisionerClassName: '
                                      'approve-everything\n')
        older = cli("status", str(repo.path), "--kubeconfig", str(kc), capsys=capsys)
        assert f"  {name}: olm.maxOpenShiftVersion 4.14: allows the next OpenShift minor after 4.13" in older.out
    finally:
        for p in (repo.path / "operators").glob("*.yaml"):
            p.unlink()
        repo.commit("remove")
        assert reconcile(repo, kc, "--no-wait", capsys=capsys).code == 0


def test_the_dry_run_next_check_judges_the_gate(tmp_path, capsys):
    repo = gated_repo(tmp_path / "repo", "gated", "gated-system", input_class="dry-run-next")
    resolved = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert resolved.code == 0, resolved.err
    assert ("! it supports OpenShift up to 4.14 (olm.maxOpenShiftVersion): the cluster, at 4.14, cannot be "
            "upgraded to 4.15 while it runs") in resolved.out, resolved.out
    doc = json.loads(cli("resolve", str(repo.path), "--offline", "--no-write", "-o", "json", capsys=capsys).out)
    [check] = doc["nextMinorChecks"]
    assert check["maxOpenShiftVersion"] == "4.14" and check["openshift"]["version"] == "4.14"
    assert check["openshift"]["blocksNextMinor"].startswith("it supports OpenShift up to 4.14")
    dry = cli("reconcile", str(repo.path), "--dry-run", capsys=capsys)
    assert "cannot be upgraded to 4.15 while it runs" in dry.out
    repo.write("reconciler.yaml", 'openshiftVersion: "4.13"\n')
    later = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert "olm.maxOpenShiftVersion 4.14: allows OpenShift 4.14, the minor after 4.13" in later.out
