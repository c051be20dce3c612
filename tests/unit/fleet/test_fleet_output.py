"""The fleet's output as a product: `fleet status -o json|yaml` as a versioned document, an unreachable
cluster's reason in words (a kind for scripts), and `diff` across the fleet grouping clusters whose outcome
reads the same and saying what the stages hold back.

Unreachable clusters are real: a kubeconfig whose server is a closed port on loopback, a context the kubeconfig
lacks, a context naming a cluster it does not define, no kubeconfig at all.
"""

from __future__ import annotations

import json
import shutil
import socket

import pygit2
import yaml

from tests.e2e.support import cli
from tests.support.paths import FLEET_EXAMPLE as FLEET, ROOT
from tests.support.repo import commit_all
from tests.unit.fleet.fleets import pin_old

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- {name: closed, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: dev, context: {cluster: closed, user: u}}
- {name: staging, context: {cluster: undefined, user: u}}
current-context: dev
"""


def closed_port() -> int:
    with socket.socket() as s:   # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fleet_status_is_a_versioned_document_with_reasons_a_person_understands(tmp_path, capsys, monkeypatch):
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    port = closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG % port)
    run = cli("fleet", "status", str(root), "--kubeconfig", str(kubeconfig), "-o", "json", capsys=capsys)
    assert run.code == 3
    doc = json.loads(run.out)
    assert (doc["apiVersion"], doc["kind"]) == ("reconciler.dev/v1alpha1", "FleetStatus")
    rows = {c["name"]: c for c in doc["clusters"]}
    assert {n: r["reason"] for n, r in rows.items()} == {
        "dev": "ConnectionRefused", "staging": "InvalidContext", "prod-eu": "NoContext", "prod-us": "NoContext"}
    assert rows["dev"]["message"] == (f"cannot reach the API server at https://127.0.0.1:{port}: nothing accepts "
                                      f"connections there (is the cluster running?)")
    assert rows["staging"]["message"].startswith("the kubeconfig's context 'staging' cannot be used: its cluster "
                                                 "or user is missing")
    assert rows["prod-eu"]["message"] == ("the kubeconfig has no context 'prod-eu' (it has 2): add one, or name "
                                          "the one to use in spec.context of clusters/prod-eu.yaml")
    cell = rows["dev"]["operators"][0]
    assert set(cell) >= {"operator", "placed", "inSync", "pendingApproval", "readySince", "driftCorrected"}
    assert all("_" not in key for key in cell)   # camelCase, as every document
    as_yaml = cli("fleet", "status", str(root), "--kubeconfig", str(kubeconfig), "-o", "yaml", capsys=capsys)
    assert yaml.safe_load(as_yaml.out) == doc
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    nothing = cli("fleet", "status", str(root), capsys=capsys)
    assert nothing.code == 3
    assert "unreachable: no kubeconfig is configured: pass --kubeconfig FILE or set KUBECONFIG" in nothing.out, \
        nothing.out


def test_the_fleet_diff_groups_outcomes_that_read_the_same_and_says_what_is_held(tmp_path, capsys):
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    pin_old(root, "staging", "prod-eu", "prod-us")
    commit_all(root)
    decl = root / "operators" / "plumbus.yaml"   # prod-us keeps its own namespace: the outcome reads the same
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: ">=1.0.0 <3.0.0"'))
    run = cli("diff", str(root), "--base", "HEAD", capsys=capsys)
    assert run.code in (0, 1), run.err
    assert "  dev, prod-eu, prod-us, staging (4 clusters): unchanged" in run.out, run.out
    assert "Held back by the stages (not moved by this change):" in run.out
    assert (f"  prod-eu, prod-us (2 clusters): plumbus: held by stage prod to plumbus.v1.0.0 (its lockfile pins "
            f"it); a newer bundle comes only by promotion from staging: reconciler promote {root} --to prod "
            f"--operator plumbus") in run.out, run.out
    doc = json.loads(cli("diff", str(root), "--base", "HEAD", "-o", "json", capsys=capsys).out)
    assert {tuple(h["clusters"]) for h in doc["held"]} == {("prod-eu", "prod-us"), ("staging",)}
    assert pygit2.Repository(str(root)).head_is_unborn is False


def test_the_fleet_diff_previews_a_cluster_that_a_reconcile_would_refuse_to_empty(tmp_path, capsys):
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    commit_all(root)
    decl = root / "operators" / "plumbus.yaml"   # placed on prod only: dev and staging would be emptied
    decl.write_text(decl.read_text().replace("  placement:\n", "  placement:\n    clusterSelector: {matchLabels: "
                                             "{env: prod}}\n"))
    run = cli("diff", str(root), "--base", "HEAD", capsys=capsys)
    assert run.code == 1, run.err
    assert ("A reconcile would refuse:\n  dev: the change places nothing on it, so its reconcile would refuse to "
            "remove plumbus (an empty desired state is applied only with allowEmpty: true in reconciler.yaml)\n"
            "  staging: the change places nothing") in run.out, run.out
    markdown = cli("diff", str(root), "--base", "HEAD", "-o", "markdown", capsys=capsys).out
    assert "**A reconcile would refuse:**\n\n- dev: the change places nothing on it" in markdown
    (root / "reconciler.yaml").write_text((root / "reconciler.yaml").read_text() + "allowEmpty: true\n")
    assert "A reconcile would refuse" not in cli("diff", str(root), "--base", "HEAD", capsys=capsys).out


def test_docs_output_describes_the_fleet_status_document_field_for_field(tmp_path):
    from reconciler.fleet.status import Cell, ClusterStatus, FleetStatus

    text = (ROOT / "docs" / "output.md").read_text()
    block = text.split("```yaml\napiVersion: reconciler.dev/v1alpha1\nkind: FleetStatus\n", 1)[1].split("```", 1)[0]
    printed = yaml.safe_load("apiVersion: reconciler.dev/v1alpha1\nkind: FleetStatus\n" + block)
    fleet = FleetStatus("github.com/example/fleet", ["plumbus"], [ClusterStatus(
        "prod-eu", "prod", "prod-eu", reachable=True, cells={"plumbus": Cell("plumbus", installed=True)})])
    real = fleet.to_dict()

    def keys(doc):   # noqa: ANN001, ANN202
        if isinstance(doc, dict):
            return {k: keys(v) for k, v in doc.items()}
        return keys(doc[0]) if isinstance(doc, list) and doc and isinstance(doc[0], dict) else None

    assert keys(printed) == keys(real)
    assert printed["clusters"][0]["reason"] == real["clusters"][0]["reason"] == "Reachable"
