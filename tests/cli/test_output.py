"""Machine-readable output, verbosity flags and the loop's structured logs."""

from __future__ import annotations

import io
import json
import logging

import pytest
import yaml

from reconciler.report import logs
from reconciler.cli.parser import build_parser
from tests.e2e.support import cli


def _cli(*args: str, capsys) -> tuple[int, str, str]:
    return cli(*args, capsys=capsys)


@pytest.fixture
def no_cluster(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_reconcile_json_against_the_cluster(control_plane, example_repo, capsys):
    code, out, err = _cli("reconcile", str(example_repo), "--dry-run", "-o", "json",
                          "--kubeconfig", str(control_plane.kubeconfig_path), capsys=capsys)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["apiVersion"] == "reconciler.dev/v1alpha1" and doc["kind"] == "ReconcileResult"
    assert doc["target"] == {"server": control_plane.server, "dryRun": True, "mode": "server-side-dry-run"}
    assert doc["lockfile"]["state"] == "stale" and not (example_repo / "olm.lock").exists()
    [op] = doc["operators"]
    assert (op["operator"], op["bundle"], op["namespace"]) == ("plumbus", "plumbus.v1.1.0", "plumbus-system")
    deployment = next(c for c in doc["changes"] if c["kind"] == "Deployment")
    assert deployment == {"action": "created", "operator": "plumbus", "group": "apps", "version": "v1",
                          "kind": "Deployment", "namespace": "plumbus-system",
                          "name": "plumbus-controller-manager", "detail": deployment["detail"],
                          "diff": deployment["diff"], "waitsForApproval": False}
    assert doc["changed"] is True and doc["summary"]["created"] == len(doc["changes"]) - doc["summary"]["unchanged"]
    assert "Changes (" not in out  # nothing but the document on stdout


def test_reconcile_yaml_without_a_cluster(example_repo, no_cluster, capsys):
    code, out, err = _cli("reconcile", str(example_repo), "--dry-run", "-o", "yaml", capsys=capsys)
    assert code == 1, err
    doc = yaml.safe_load(out)
    assert doc["kind"] == "ReconcileResult" and doc["target"]["mode"] == "empty-cluster"
    assert {c["action"] for c in doc["changes"]} == {"created"}
    assert sorted(doc["summary"]) == ["configured", "created", "deleted", "skipped", "unchanged", "waitingForApproval"]


def test_global_flags_go_before_or_after_the_command():
    parser = build_parser()
    assert parser.parse_args(["-vv", "resolve", "r"]).verbose == 2
    assert parser.parse_args(["resolve", "r", "-v"]).verbose == 1
    assert parser.parse_args(["catalog", "list", "packages", "-q"]).quiet is True
    assert parser.parse_args(["resolve", "r"]).verbose == 0
    assert logs.level_for(0, False) == "warning" and logs.level_for(1, False) == "info"
    assert logs.level_for(5, False) == "debug" and logs.level_for(2, True) == "error"
    assert logs.level_for(1, False, default="info") == "debug"


def test_verbose_shows_what_quiet_hides(example_repo, no_cluster, capsys):
    logger = logging.getLogger("reconciler.test")
    code, _, err = _cli("-v", "resolve", str(example_repo), "--no-write", capsys=capsys)
    assert code == 0
    assert logging.getLogger().getEffectiveLevel() == logging.INFO
    logger.info("seen when verbose")
    assert "seen when verbose" in capsys.readouterr().err
    _cli("resolve", str(example_repo), "--no-write", "-q", capsys=capsys)
    logger.warning("hidden when quiet")
    assert "hidden when quiet" not in capsys.readouterr().err


def test_json_log_lines_carry_the_fields():
    buf = io.StringIO()
    logs.setup("info", "json", stream=buf)
    try:
        logging.getLogger("reconciler.loop").info("Deployment x created", extra={
            "operator": "plumbus", "object": "Deployment.apps ns/x", "action": "created", "revision": "abc",
            "duration": 1.23456})
    finally:
        logs.setup("warning")
    line = json.loads(buf.getvalue().splitlines()[-1])
    assert line["level"] == "info" and line["msg"] == "Deployment x created"
    assert {k: line[k] for k in ("operator", "object", "action", "revision", "duration")} == {
        "operator": "plumbus", "object": "Deployment.apps ns/x", "action": "created", "revision": "abc",
        "duration": 1.235}


def test_the_loop_logs_each_object_and_the_step(control_plane, gitops):
    from reconciler.kube.client import Kube
    from reconciler.loop import APPLIED, LocalSource, Loop

    buf = io.StringIO()
    logs.setup("info", "json", stream=buf)
    try:
        loop = Loop(LocalSource(gitops.path, write_lockfile=False), Kube(control_plane.admin_client()),
                    dry_run=True, identity="test")
        result = loop.step(reason="test")
    finally:
        logs.setup("warning")
    assert result.outcome == APPLIED
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    objects = [x for x in lines if x.get("object", "").startswith("Deployment.apps ")]
    assert objects and objects[0]["operator"] == "plumbus" and objects[0]["action"] == "created"
    assert objects[0]["revision"] == result.revision
    [step] = [x for x in lines if x.get("outcome") == APPLIED]
    assert step["duration"] >= 0 and step["revision"] == result.revision
