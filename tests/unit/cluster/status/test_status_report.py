"""How health becomes an Operator's conditions and components, and how `reconciler status` summarises them."""

from __future__ import annotations

import pytest

from reconciler.cluster.health.judge import Health, Status
from reconciler.cluster.status.objects import health_conditions
from reconciler.cluster.health.wait import Component, OperatorHealth
from reconciler.commands.status import summarize
from reconciler.model.kube import ObjectRef

DEPLOY = ObjectRef("apps", "Deployment", "ns", "web", "v1")
CRD = ObjectRef("apiextensions.k8s.io", "CustomResourceDefinition", "", "things.example.com", "v1")
OK = Health(Status.CURRENT, "fine", "Current")


def by_type(conds: list[dict]) -> dict[str, dict]:
    return {c["type"]: c for c in conds}


def test_healthy_operator_is_ready_and_not_progressing() -> None:
    health = OperatorHealth("op", Status.CURRENT, (Component(CRD, OK), Component(DEPLOY, OK)), 3.0)
    conds = by_type(health_conditions(health, "op.v1 applied at abc"))
    assert conds["Ready"]["status"] == "True"
    assert conds["Ready"]["message"] == "op.v1 applied at abc; all 2 components are healthy"
    assert conds["Progressing"]["status"] == "False" and conds["Degraded"]["status"] == "False"


def test_rolling_out_operator_is_progressing_not_degraded() -> None:
    wip = Health(Status.IN_PROGRESS, "available replicas: 0/1", "AvailableReplicas")
    conds = by_type(health_conditions(OperatorHealth("op", Status.IN_PROGRESS, (Component(DEPLOY, wip),)), "x"))
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "Progressing")
    assert conds["Ready"]["message"] == "Deployment.apps ns/web: available replicas: 0/1"
    assert conds["Progressing"]["status"] == "True" and conds["Degraded"]["status"] == "False"


def test_timed_out_operator_is_degraded_and_says_for_how_long() -> None:
    wip = Health(Status.IN_PROGRESS, "available replicas: 0/1", "AvailableReplicas")
    health = OperatorHealth("op", Status.IN_PROGRESS, (Component(DEPLOY, wip),), 30.4, timed_out=True)
    conds = by_type(health_conditions(health, "x"))
    assert conds["Ready"]["reason"] == "HealthTimeout"
    assert conds["Ready"]["message"].endswith("available replicas: 0/1 (not healthy after 30s)")
    assert conds["Degraded"]["status"] == "True"


def test_failed_component_is_named_first() -> None:
    wip = Health(Status.IN_PROGRESS, "ready replicas: 0/1", "ReadyReplicas")
    bad = Health(Status.FAILED, "Progressing=False: ProgressDeadlineExceeded", "ProgressDeadlineExceeded")
    other = ObjectRef("apps", "Deployment", "ns", "api", "v1")
    health = OperatorHealth("op", Status.FAILED, (Component(DEPLOY, wip), Component(other, bad)), 5.0)
    assert health.message.startswith("Deployment.apps ns/api: Progressing=False")
    conds = by_type(health_conditions(health, "x"))
    assert (conds["Ready"]["reason"], conds["Progressing"]["status"]) == ("ComponentFailed", "False")


def test_component_refs_carry_identity_and_explain_abnormal_ones() -> None:
    healthy = Component(CRD, OK, uid="u1", resource_version="42").to_status()
    assert healthy == {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "name": "things.example.com", "uid": "u1", "resourceVersion": "42"}
    unavailable = {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}
    progressing = {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}
    wip = Health(Status.IN_PROGRESS, "available replicas: 0/1", "AvailableReplicas")
    ref = Component(DEPLOY, wip, "u2", "7", (unavailable, progressing)).to_status()
    assert ref["namespace"] == "ns" and ref["apiVersion"] == "apps/v1"
    assert ref["conditions"] == [unavailable]
    assert ref["health"] == {"status": "InProgress", "reason": "AvailableReplicas",
                             "message": "available replicas: 0/1"}
    derived = Component(DEPLOY, wip).to_status()["conditions"]
    assert derived == [{"type": "Ready", "status": "False", "reason": "AvailableReplicas",
                        "message": "available replicas: 0/1"}]


def status(name: str, digest: str = "sha256:a", ready: str = "True", **extra) -> dict:
    return {"bundle": {"package": "p", "name": name, "version": "1.0.0", "digest": digest}, "revision": "abc123",
            "conditions": [{"type": "Ready", "status": ready, "reason": "Healthy", "message": "ok"}], **extra}


def test_summary_compares_with_the_lock() -> None:
    recorded = {
        "same": status("p.v1"),
        "old": status("p.v1"),
        "extra": status("p.v1", updates=[{"options": ["p.v2"]}],
                        conditions=[{"type": "InstallPendingApproval", "status": "True"}]),
    }
    locked = {"same": {"name": "p.v1", "version": "1.0.0", "digest": "sha256:a"},
              "old": {"name": "p.v2", "version": "2.0.0", "digest": ""},
              "new": {"name": "p.v1", "version": "1.0.0", "digest": ""}}
    rows = {r["name"]: r for r in summarize(recorded, locked)}
    assert rows["same"]["lock"] == "in sync"
    assert rows["old"]["lock"] == "out of date (locked p.v2)"
    assert rows["new"]["lock"] == "not installed"
    assert rows["extra"]["lock"] == "not declared"
    assert rows["extra"]["pendingApproval"] is True and rows["extra"]["updatesAvailable"] == ["p.v2"]
    assert rows["same"]["ready"] == "True" and rows["same"]["revision"] == "abc123"


def test_summary_without_a_repository_has_no_lock_column() -> None:
    rows = summarize({"a": status("p.v1", ready="False")}, None)
    assert "lock" not in rows[0] and rows[0]["ready"] == "False"


@pytest.mark.parametrize("cond, expected", [
    ({"type": "Ready", "status": "False", "reason": "Progressing"}, "Normal"),        # an install or upgrade
    ({"type": "Ready", "status": "False", "reason": "PendingApproval"}, "Normal"),
    ({"type": "Ready", "status": "True", "reason": "Healthy"}, "Normal"),
    ({"type": "Progressing", "status": "True", "reason": "RollingOut"}, "Normal"),
    ({"type": "Degraded", "status": "False", "reason": "Healthy"}, "Normal"),
    ({"type": "Ready", "status": "False", "reason": "ApplyFailed"}, "Warning"),
    ({"type": "Ready", "status": "False", "reason": "HealthTimeout"}, "Warning"),
    ({"type": "Degraded", "status": "True", "reason": "ComponentFailed"}, "Warning"),
])
def test_progress_is_a_normal_event_and_failure_a_warning(cond, expected):
    from reconciler.cluster.status.events import event_type

    assert event_type(cond) == expected


def test_table_status_is_the_ready_reason_and_a_message_is_never_cut():
    import io

    from reconciler.commands.status import print_table

    revision = "3f2a9c1d0b7e" + "5" * 28
    ok = status("p.v1", revision=revision, bundle={"package": "p", "name": "p.v1", "version": "1.0.0",
                                                   "namespace": "p-system"},
                conditions=[{"type": "Ready", "status": "True", "reason": "Healthy",
                             "message": f"p.v1 applied at {revision}; all 3 components are healthy"}])
    slow = "Deployment.apps q-system/q-controller: available replicas: 0/1; " + "x" * 80 + " (not healthy after 300s)"
    bad = status("q.v1", conditions=[{"type": "Ready", "status": "False", "reason": "HealthTimeout", "message": slow}])
    rows = summarize({"p": ok, "q": bad}, None, instances={"p": "default", "q": "team-b"})
    out = io.StringIO()
    print_table(rows, out, with_lock=False, with_instance=True)
    table, details = out.getvalue().split("\n\n")
    header, *lines = table.splitlines()
    assert header.split() == ["INSTANCE", "NAME", "NAMESPACE", "PACKAGE", "VERSION", "READY", "STATUS", "APPROVAL",
                              "UPDATES", "REVISION"]
    assert lines[0].split() == ["default", "p", "p-system", "p", "1.0.0", "True", "Healthy", "-", "-", "3f2a9c1d0b7e"]
    assert lines[1].split()[:7] == ["team-b", "q", "-", "p", "1.0.0", "False", "HealthTimeout"]
    assert details == f"q: HealthTimeout: {slow}\n"


def test_a_rejected_revision_is_said_once_with_the_operators_it_holds_back():
    import io

    from reconciler.commands.status import print_table

    refused = {"revision": "9" * 40, "reason": "UntrustedRevision", "message": "commit 999 is not signed",
               "applied": "3f2a9c1d0b7e" + "5" * 28, "since": "2026-11-28T03:00:00Z"}
    ready = [{"type": "Ready", "status": "True", "reason": "Healthy", "message": "applied"}]
    rows = summarize({"p": status("p.v1", conditions=ready, rejected=refused),
                      "q": status("q.v1", conditions=ready, rejected=refused),
                      "r": status("r.v1", conditions=ready)}, None)
    assert [r.get("rejected") for r in rows] == [refused, refused, None]
    out = io.StringIO()
    print_table(rows, out, with_lock=False)
    assert out.getvalue().split("\n\n")[1] == (
        "Revision 999999999999 was not applied (UntrustedRevision, since 2026-11-28T03:00:00Z): commit 999 is not "
        "signed; 3f2a9c1d0b7e stays applied for p, q\n")
