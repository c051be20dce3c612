"""Guardrail policies: ValidatingAdmissionPolicy documents evaluated offline on objects and resolutions."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.approve import guardrails
from reconciler.errors import InputError

PARAMS = {"catalogs": ["community"]}


def policy(body: str, name: str = "p") -> guardrails.Policy:
    import yaml

    doc = yaml.safe_load(f"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
                         f"metadata: {{name: {name}}}\nspec:\n{body}")
    return guardrails.parse_policy(doc, "policies/p.yaml")


ANY_OBJECT = """  matchConstraints:
    resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], operations: ["CREATE"]}]
"""


def resource_of(api_version: str, kind: str) -> str:
    return {"Deployment": "deployments", "ClusterRole": "clusterroles", "ConfigMap": "configmaps"}[kind]


def cm(ns: str = "team", name: str = "c", **extra) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, **extra}


def test_defaults_pass_an_ordinary_bundle_and_catch_each_kind_of_abuse() -> None:
    policies = guardrails.load_policies(None)
    assert {p.name for p in policies} >= {"no-system-namespaces", "no-cluster-admin-binding",
                                          "no-wildcard-cluster-rules", "catalogs-of-the-repository",
                                          "no-catch-all-webhooks", "no-builtin-apiservices"}
    ok = [cm(), {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
                 "rules": [{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get"]}]}]
    assert guardrails.check_objects(policies, ok, resource_of, PARAMS) == []
    bad = [cm(ns="kube-system"),
           {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "god"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
           {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": []}]
    found = guardrails.check_objects(policies, bad, lambda av, k: {"ClusterRoleBinding": "clusterrolebindings"}.get(
        k) or resource_of(av, k), PARAMS)
    assert [(v.policy, v.subject) for v in found] == [
        ("no-system-namespaces", "ConfigMap kube-system/c"), ("no-wildcard-cluster-rules", "ClusterRole god"),
        ("no-cluster-admin-binding", "ClusterRoleBinding b")]
    assert found[0].message == "objects may not be installed in namespace kube-system"


def test_resolutions_are_checked_only_by_policies_naming_their_group() -> None:
    policies = guardrails.load_policies(None)
    base = {"operator": "x", "kind": "Operator", "package": "x", "bundle": "x.v1", "version": "1", "channel": "s",
            "source": "file://b", "declaredBundle": False}
    assert guardrails.check_resolution(policies, {**base, "catalog": "community"}, PARAMS) == []
    found = guardrails.check_resolution(policies, {**base, "catalog": "elsewhere"}, PARAMS)
    assert [v.message for v in found] == ["resolved from catalog elsewhere, which the repository does not list"]
    assert guardrails.check_resolution(policies, {**base, "catalog": "", "declaredBundle": True}, PARAMS) == []


def test_match_conditions_exclusions_and_message_expression() -> None:
    p = policy(ANY_OBJECT + """    excludeResourceRules: [{apiGroups: ["apps"], apiVersions: ["*"], resources: ["deployments"]}]
  matchConditions:
    - name: labelled
      expression: "has(object.metadata.labels) && 'tier' in object.metadata.labels"
  validations:
    - expression: "object.metadata.labels.tier != 'forbidden'"
      messageExpression: "'tier ' + object.metadata.labels.tier + ' is not allowed'"
""")
    objs = [cm(name="a"), cm(name="b", metadata={"name": "b", "namespace": "t", "labels": {"tier": "forbidden"}}),
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "d", "namespace": "t", "labels": {"tier": "forbidden"}}}]
    found = guardrails.check_objects([p], objs, resource_of, PARAMS)
    assert [(v.subject, v.message) for v in found] == [("ConfigMap t/b", "tier forbidden is not allowed")]


def test_a_non_boolean_result_or_an_error_fails_closed_unless_ignored() -> None:
    strict = policy(ANY_OBJECT + "  validations:\n    - expression: \"object.metadata.name\"\n")
    found = guardrails.check_objects([strict], [cm()], resource_of, PARAMS)
    assert len(found) == 1 and "returned StringType, not a boolean" in found[0].message
    missing = ANY_OBJECT + "  validations:\n    - expression: \"object.spec.replicas > 1\"\n"
    assert len(guardrails.check_objects([policy(missing)], [cm()], resource_of, PARAMS)) == 1
    lenient = policy(missing + "  failurePolicy: Ignore\n")
    assert guardrails.check_objects([lenient], [cm()], resource_of, PARAMS) == []


@pytest.mark.parametrize("body,message", [
    (ANY_OBJECT + "  validations:\n    - expression: \"object.metadata.name ==\"\n", "does not compile"),
    (ANY_OBJECT + "  validations:\n    - message: no expression\n", "needs an expression"),
    (ANY_OBJECT + "  failurePolicy: Sometimes\n  validations: []\n", "failurePolicy must be Fail or Ignore"),
    ("  matchConstraints:\n    resourceRules: [{apiGroups: apps}]\n  validations: []\n", "must be a list of strings"),
])
def test_bad_policies_are_errors_naming_the_file(body: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        policy(body)
    assert message in caught.value.message and caught.value.path == "policies/p.yaml"


def test_a_repository_replaces_or_switches_off_a_default(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "off.yaml").write_text(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
        "metadata: {name: no-cluster-admin-binding}\nspec: {validations: []}\n---\n"
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
        "metadata: {name: only-team-namespaces}\nspec:\n" + ANY_OBJECT
        + "  validations:\n    - expression: \"request.namespace == '' || request.namespace.startsWith('team-')\"\n"
          "      message: only team namespaces\n")
    names = {p.name for p in guardrails.load_policies(tmp_path)}
    assert "no-cluster-admin-binding" not in names and {"only-team-namespaces", "no-system-namespaces"} <= names
    found = guardrails.check_objects(guardrails.load_policies(tmp_path), [cm(ns="other")], resource_of, PARAMS)
    assert [(v.policy, v.path) for v in found] == [("only-team-namespaces", "policies/off.yaml")]


def _reader_binding(*subjects: dict, role: str = "extension-apiserver-authentication-reader", kind: str = "Role",
                    namespace: str = "kube-system") -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "x-auth-reader", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": list(subjects)}


def _sa(name: str, namespace: str = "op-system") -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def _policies_of(objects: list[dict], service_accounts: list[str]) -> list[tuple[str, str]]:
    from reconciler.approve.required import guess_plural

    params = {**PARAMS, "serviceAccounts": service_accounts}
    return [(v.policy, v.subject) for v in guardrails.check_objects(
        guardrails.load_policies(None), objects, lambda av, k: guess_plural(k), params)]


def test_the_binding_an_aggregated_api_server_needs_is_the_one_exception_in_kube_system() -> None:
    own = ["op-system/op-controller"]
    assert _policies_of([_reader_binding(_sa("op-controller"))], own) == []
    held = [_reader_binding(_sa("other")), _reader_binding(_sa("op-controller"), _sa("default", "kube-system")),
            _reader_binding(), _reader_binding(_sa("op-controller"), role="system:controller:bootstrap-signer"),
            _reader_binding(_sa("op-controller"), kind="ClusterRole"),
            _reader_binding({"kind": "User", "name": "op-controller"}),
            _reader_binding(_sa("op-controller"), namespace="kube-public"),
            {**cm(ns="kube-system"), "metadata": {"name": "x-auth-reader", "namespace": "kube-system"}}]
    found = _policies_of(held, own)
    assert [p for p, _ in found] == ["no-system-namespaces"] * len(held), found


def test_webhooks_that_intercept_everything_and_fail_closed_are_refused() -> None:
    def hook(kind: str, failure: str | None, resources: list[str], groups: list[str] = ["*"]) -> dict:
        narrow = {"name": "narrow.example.com", "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                           "resources": ["deployments"]}]}
        wide = {"name": "wide.example.com", "rules": [{"apiGroups": groups, "apiVersions": ["*"],
                                                       "resources": resources, "operations": ["*"]}]}
        if failure:
            wide["failurePolicy"] = failure
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": kind.lower()},
                "webhooks": [narrow, wide]}
    refused = [hook("ValidatingWebhookConfiguration", None, ["*/*"]),
               hook("ValidatingWebhookConfiguration", "Fail", ["*"]),
               hook("MutatingWebhookConfiguration", "Fail", ["*"])]
    assert [p for p, _ in _policies_of(refused, [])] == ["no-catch-all-webhooks"] * 3
    allowed = [hook("ValidatingWebhookConfiguration", "Ignore", ["*/*"]),
               hook("MutatingWebhookConfiguration", "Fail", ["pods"]),
               hook("ValidatingWebhookConfiguration", None, ["*"], groups=["apps"])]
    assert _policies_of(allowed, []) == []
    [violation] = guardrails.check_objects(guardrails.load_policies(None), refused[:1],
                                           lambda av, k: k.lower() + "s", PARAMS)
    assert violation.message.startswith("webhook wide.example.com intercepts every resource of every API group "
                                        "with failurePolicy Fail (the default)")


def test_an_apiservice_may_not_claim_a_group_kubernetes_serves() -> None:
    def api(group: str | None) -> dict:
        spec = {"version": "v1", "service": {"name": "s", "namespace": "n"}}
        if group is not None:
            spec["group"] = group
        return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": f"v1.{group or ''}"}, "spec": spec}
    refused = ["apps", "batch", "", None, "storage.k8s.io", "node.kubernetes.io"]
    assert [p for p, _ in _policies_of([api(g) for g in refused], [])] == ["no-builtin-apiservices"] * 6
    allowed = ["metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io", "metrics.example.com",
               "cluster.x-k8s.io"]
    assert _policies_of([api(g) for g in allowed], []) == []
