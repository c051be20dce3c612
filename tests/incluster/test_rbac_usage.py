"""The audit-log reading behind the in-cluster suite's RBAC check, on hand-made audit events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .rbac_usage import unused

pytestmark = pytest.mark.incluster

USER = "system:serviceaccount:reconciler-system:reconciler"
SUBJECTS = [{"kind": "ServiceAccount", "name": "reconciler", "namespace": "reconciler-system"}]
RBAC = [
    {"kind": "ClusterRole", "metadata": {"name": "reads"},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "delete"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "reads"}, "subjects": SUBJECTS,
     "roleRef": {"kind": "ClusterRole", "name": "reads"}},
    {"kind": "Role", "metadata": {"name": "own", "namespace": "reconciler-system"},
     "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create", "patch", "get",
                                                                              "impersonate"]},
               {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]},
    {"kind": "RoleBinding", "metadata": {"name": "own", "namespace": "reconciler-system"}, "subjects": SUBJECTS,
     "roleRef": {"kind": "Role", "name": "own"}},
    {"kind": "ClusterRole", "metadata": {"name": "unbound"},
     "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]},
]


def _event(verb: str, resource: str, *, code: int = 200, group: str = "", namespace: str = "reconciler-system",
           name: str = "x", user: str = USER, impersonated: str = "", decision: str = "allow") -> dict:
    event = {"stage": "ResponseComplete", "verb": verb, "user": {"username": user},
             "objectRef": {"resource": resource, "apiGroup": group, "namespace": namespace, "name": name},
             "responseStatus": {"code": code}, "annotations": {"authorization.k8s.io/decision": decision}}
    if impersonated:
        event["impersonatedUser"] = {"username": impersonated}
    return event


def _log(tmp_path: Path, *events: dict) -> Path:
    path = tmp_path / "audit.log"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_each_grant_is_used_by_a_request_or_the_check_it_causes(tmp_path):
    log = _log(tmp_path,
               _event("patch", "serviceaccounts", code=201),      # server-side apply creating: patch and create
               _event("delete", "configmaps"),
               _event("get", "deployments", group="apps", impersonated=f"{USER[:-10]}install-a"),  # impersonate
               _event("patch", "roles", group="rbac.authorization.k8s.io", code=500),   # failed: no escalate
               _event("get", "serviceaccounts", user="someone-else"),
               _event("list", "secrets", decision="forbid"))
    left, redundant, count = unused(RBAC, log, USER)
    assert count == 5   # the patch that created, its create, the delete, the impersonation, the failed patch
    assert sorted(map(str, left)) == ["ClusterRole reads rules[0]: get *",
                                      "Role own (reconciler-system) rules[0]: get serviceaccounts",
                                      "Role own (reconciler-system) rules[1]: escalate roles"]
    assert redundant == []


def test_a_grant_another_rule_always_covers_is_redundant(tmp_path):
    log = _log(tmp_path, _event("get", "serviceaccounts"), _event("get", "pods", namespace="default"),
               _event("patch", "roles", group="rbac.authorization.k8s.io"))
    left, redundant, _ = unused(RBAC, log, USER)
    assert [str(g) for g in redundant] == ["Role own (reconciler-system) rules[0]: get serviceaccounts"]
    assert "Role own (reconciler-system) rules[1]: escalate roles" not in map(str, left)   # a write of a role
