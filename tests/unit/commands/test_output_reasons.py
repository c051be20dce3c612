"""Every machine-readable reason of every output document is what docs/output.md and docs/health.md say it is.

docs/output.md shows each document (``ReconcileResult``, ``FleetStatus``, ``Promotion``, ``OperatorStatusList``,
``AdoptionReport``) as YAML whose comments list the values of each field a script tests (``# A | B | C``).
Those lists are read here and compared with what the code can put in the field: its enum, or the literals it
writes there (read from its source, so a reason added in the code and not the documents fails here). The
component reasons of docs/health.md's table are compared the same way. That a document really carries the
value (a cluster that was read says ``Reachable``) is checked against real clusters in tests/e2e/test_fleet.py
and tests/e2e/test_health.py.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.support.paths import ROOT
OUTPUT = (ROOT / "docs" / "output.md").read_text()


def documented(kind: str) -> dict[str, set[str]]:
    """The ``A | B | C`` comments of the YAML block of ``kind`` in docs/output.md: field path -> values."""
    block = OUTPUT.split(f"```yaml\napiVersion: reconciler.dev/v1alpha1\nkind: {kind}\n", 1)[1].split("```", 1)[0]
    out: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []   # (indent, key) of the fields above the line
    last = ""
    for line in block.splitlines():
        body, _, comment = line.partition("#")
        if body.strip():
            indent = len(body) - len(body.lstrip(" -"))
            key = body.strip(" -").split(":", 1)[0]
            if body.lstrip().startswith("- ") or body.lstrip() == "-":
                indent = len(body) - len(body.lstrip()) + 2
            while stack and stack[-1][0] >= indent:
                stack.pop()
            last = ".".join([k for _, k in stack] + [key])
            stack.append((indent, key))
        elif not comment.strip().startswith("|"):
            continue
        values = comment.strip()
        if " | " not in values and not values.startswith("|"):
            continue
        for value in values.strip("| ").split(" | "):
            value = re.sub(r" \(.*$", "", value.strip()).strip('"')
            if value:
                out.setdefault(last, set()).add(value)
    return out


def literals(path: str, call: str, arg: int) -> set[str]:
    """The string literals passed as argument ``arg`` to calls of ``call`` in ``path`` (a name or an attribute)."""
    out = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == call or
                                           getattr(node.func, "attr", None) == call) and len(node.args) > arg:
            value = node.args[arg]
            if isinstance(value, ast.Tuple):   # a (status, reason, message) tuple
                value = value.elts[1]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.add(value.value)
    return out


def test_fleet_status_reasons_and_health():
    from reconciler.fleet import status

    doc = documented("FleetStatus")
    assert doc["clusters.reason"] == {r.value for r in status.Reach}
    assert doc["clusters.operators.health"] == set(status.HEALTH)
    written = set()
    for node in ast.walk(ast.parse((ROOT / "reconciler/fleet/status.py").read_text())):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and \
                    isinstance(node.value, ast.Tuple) else [(target, node.value)]
                written |= {v.value for t, v in pairs if getattr(t, "attr", None) == "health"
                            and isinstance(v, ast.Constant)}
        if isinstance(node, ast.keyword) and node.arg == "health" and isinstance(node.value, ast.Constant):
            written.add(node.value.value)
    written.add(status.Cell("x").health)   # the default
    assert written == set(status.HEALTH)


def test_a_cluster_that_was_read_is_reachable_whatever_it_was_made_as():
    from reconciler.fleet.status import ClusterStatus, FleetStatus, Reach

    read = ClusterStatus("dev")
    read.reachable = True   # as gather() records a cluster it read
    assert read.reach is Reach.REACHABLE
    assert FleetStatus("r", [], [read]).to_dict()["clusters"][0]["reason"] == "Reachable"
    unread = ClusterStatus("dev", cause=Reach.TIMEOUT)
    assert (unread.reach, ClusterStatus("dev").reach) == (Reach.TIMEOUT, Reach.ERROR)


def test_reconcile_result_reasons():
    from reconciler.cluster.apply import Action
    from reconciler.cluster.health.judge import Status
    from reconciler.commands import reconcile

    doc = documented("ReconcileResult")
    assert doc["target.mode"] == {reconcile.MODE_APPLY, reconcile.MODE_DRY_RUN, reconcile.MODE_EMPTY}
    assert doc["lockfile.state"] == {reconcile.LOCK_WRITTEN, reconcile.LOCK_UNCHANGED, reconcile.LOCK_STALE}
    assert doc["changes.action"] == {a.value for a in Action}
    assert doc["bookkeeping.action"] == {Action.CREATED.value, Action.CONFIGURED.value, Action.DELETED.value}
    assert doc["health.status"] == doc["health.unhealthy.status"] == {s.value for s in Status}
    kinds = {"Operator", "Dependency"}   # a declaration's default, and what the resolver adds
    for node in ast.walk(ast.parse((ROOT / "reconciler/model/declarations.py").read_text())):
        if isinstance(node, ast.keyword) and node.arg == "kind" and isinstance(node.value, ast.Constant):
            kinds.add(node.value.value)
    assert doc["operators.kind"] == kinds
    approvals = literals("reconciler/approve/policy.py", "result", 1)
    for node in ast.walk(ast.parse((ROOT / "reconciler/approve/stage.py").read_text())):
        if isinstance(node, ast.keyword) and node.arg == "reason" and isinstance(node.value, ast.Constant):
            approvals.add(node.value.value)
    assert doc["approvals.reason"] == approvals


def test_promotion_outcomes_and_finding_kinds():
    from reconciler.fleet.promote import Kind, Outcome

    doc = documented("Promotion")
    assert doc["stages.outcome"] == {o.value for o in Outcome}
    # a finding is evidence against (or waiting on) a promotion: every kind but healthy
    assert doc["stages.evidence.findings.kind"] == {k.value for k in Kind} - {Kind.HEALTHY.value}


def test_status_reasons_are_every_ready_reason_the_reconciler_writes():
    doc = documented("OperatorStatusList")
    written = set()
    for path in ("reconciler/cluster/status/objects.py", "reconciler/cluster/ownership/record.py",
                 "reconciler/cluster/ownership/sync.py"):
        tree = ast.parse((ROOT / path).read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            args = node.args
            if name == "condition" and len(args) >= 3 and isinstance(args[0], ast.Constant) and \
                    args[0].value == "Ready":
                reason = args[2]
                if isinstance(reason, ast.Constant):
                    written.add(reason.value)
                elif isinstance(reason, ast.Name):   # a variable: every literal it is given in that function
                    written |= {c.value for c in ast.walk(tree) if isinstance(c, ast.IfExp)
                                for c in (c.body, c.orelse) if isinstance(c, ast.Constant)
                                and isinstance(c.value, str) and c.value in ("ComponentFailed", "HealthTimeout")}
            if name == "status_for" and len(args) >= 4 and isinstance(args[3], ast.Tuple):
                if isinstance(args[3].elts[1], ast.Constant):
                    written.add(args[3].elts[1].value)
    assert doc["operators.reason"] == written
    assert doc["operators.ready"] == {"True", "False", "Unknown"}
    assert {re.sub(r" \(.*", "", v) for v in doc["operators.lock"]} == \
        {"in sync", "out of date", "not installed", "not declared"}


def test_adoption_report_verdicts():
    from reconciler.adopt.matching import VERDICTS

    assert documented("AdoptionReport")["operators.objects.verdict"] == set(VERDICTS)


def test_component_reasons_are_those_docs_health_lists():
    from reconciler.cluster.health import causes, judge

    text = (ROOT / "docs" / "health.md").read_text()
    table = text.split("Each verdict has a reason a script can test", 1)[1].split("\n\n", 2)[1]
    judged = {m for row in table.splitlines()[2:] for m in re.findall(r"`([A-Za-z]+)`", row.split("|")[2])}
    assert judged == set(judge.REASONS)
    given = literals("reconciler/cluster/health/judge.py", "_progress", 0) | \
        literals("reconciler/cluster/health/judge.py", "_failed", 0)
    assert given <= judge.REASONS, given - judge.REASONS
    table = text.split("### The cause when a rollout cannot progress", 1)[1].split("| reason | the pod |", 1)[1]
    table = table.split("\n\n", 1)[0]
    said = {m for row in table.splitlines()[2:] for m in re.findall(r"`([A-Za-z]+)`", row.split("|")[1])}
    assert said == set(causes.REASONS)


@pytest.mark.parametrize("kind", ["ReconcileResult", "FleetStatus", "Promotion", "OperatorStatusList",
                                  "AdoptionReport"])
def test_every_document_has_its_block_with_the_reasons_listed(kind):
    assert documented(kind), f"docs/output.md lists no values for the fields of {kind}"


def test_docs_output_shows_every_field_of_the_reconcile_result(tmp_path, capsys, monkeypatch):
    import json
    import shutil

    import yaml

    from tests.e2e.support import cli

    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    shutil.copytree(ROOT / "examples" / "gitops-repo", tmp_path / "repo")
    run = cli("reconcile", str(tmp_path / "repo"), "--dry-run", "-o", "json", capsys=capsys)
    assert run.code in (1, 4), run.err
    real = json.loads(run.out)
    block = OUTPUT.split("```yaml\napiVersion: reconciler.dev/v1alpha1\nkind: ReconcileResult\n", 1)[1]
    printed = yaml.safe_load("kind: ReconcileResult\n" + block.split("```", 1)[0].replace("…", "x"))
    assert set(printed) | {"apiVersion"} == set(real)
    for field in ("operators", "changes", "approvals"):
        assert set(printed[field][0]) == set(real[field][0]), field
