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
    from reconciler.model.resources import guess_plural

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


# --- verdicts remembered across processes ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own verdict store (the store of a cache directory is kept per process, by its path)."""
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def evaluations(monkeypatch) -> list[str]:
    """The subjects each evaluation of a policy judged, in order."""
    seen: list[str] = []
    real = guardrails._check

    def counting(policy, activation, subject, load_object=None):
        seen.append(f"{policy.name}: {subject}")
        return real(policy, activation, subject, load_object)
    monkeypatch.setattr(guardrails, "_check", counting)
    return seen


def new_process() -> None:
    """What a new process starts with: no store in memory (its file stays)."""
    from reconciler.approve import verdicts

    verdicts._stores.clear()


def test_a_policy_is_evaluated_once_per_distinct_input_it_reads(evaluations) -> None:
    policies = [p for p in guardrails.load_policies(None) if p.name == "no-system-namespaces"]
    many = [cm(ns="team", name=f"c{i}") for i in range(1000)]
    assert guardrails.check_objects(policies, many, resource_of, PARAMS) == []
    assert evaluations == ["no-system-namespaces: ConfigMap team/c0"]  # it reads request.namespace, nothing else
    found = guardrails.check_objects(policies, [*many, cm(ns="kube-system", name="x")], resource_of, PARAMS)
    assert [(v.subject, v.message) for v in found] == [
        ("ConfigMap kube-system/x", "objects may not be installed in namespace kube-system")]
    assert len(evaluations) == 2


def test_a_new_process_judges_nothing_it_judged_before_and_builds_no_parser(evaluations, monkeypatch) -> None:
    from celpy import celparser

    objs = [cm(name="a"), {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": "god"}, "rules": [{"apiGroups": ["*"], "resources": ["*"],
                                                                   "verbs": ["*"]}]}]
    first = guardrails.check_objects(guardrails.load_policies(None), objs, resource_of, PARAMS)
    assert [v.policy for v in first] == ["no-wildcard-cluster-rules"] and len(evaluations) == 3
    new_process()
    guardrails._compiled.cache_clear()
    monkeypatch.setattr(celparser.CELParser, "CEL_PARSER", None)
    again = guardrails.check_objects(guardrails.load_policies(None), objs, resource_of, PARAMS)
    assert again == first and len(evaluations) == 3
    assert celparser.CELParser.CEL_PARSER is None and guardrails._compiled.cache_info().currsize == 0
    changed = [objs[0], {**objs[1], "rules": [{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}]}]
    assert guardrails.check_objects(guardrails.load_policies(None), changed, resource_of, PARAMS) == []
    assert evaluations[3:] == ["no-wildcard-cluster-rules: ClusterRole god"]   # only what changed


def test_a_changed_policy_judges_again(evaluations) -> None:
    body = ANY_OBJECT + "  validations:\n    - expression: \"request.namespace != 'team'\"\n      message: MESSAGE\n"
    assert len(guardrails.check_objects([policy(body.replace("MESSAGE", "one"))], [cm()], resource_of, PARAMS)) == 1
    found = guardrails.check_objects([policy(body.replace("MESSAGE", "two"))], [cm()], resource_of, PARAMS)
    assert [v.message for v in found] == ["two"] and len(evaluations) == 2


def test_a_corrupt_store_is_an_empty_one(tmp_path, evaluations) -> None:
    from reconciler.approve import verdicts

    policies = guardrails.load_policies(None)
    guardrails.check_objects(policies, [cm()], resource_of, PARAMS)
    new_process()
    Path(verdicts.store().path).write_text("{not json")
    new_process()
    assert guardrails.check_objects(policies, [cm()], resource_of, PARAMS) == [] and len(evaluations) == 2


@pytest.mark.parametrize("expression, expected", [
    ("request.namespace == 'x'", {"request": frozenset({"namespace"})}),
    ("request.kind.group == '' && has(request.name)", {"request": frozenset({"kind", "name"})}),
    ("object.rules.exists(r, r.verbs.exists(v, v == '*'))", {"object": frozenset({"rules"})}),
    ("object . metadata . name == params.catalogs[0]",
     {"object": frozenset({"metadata"}), "params": frozenset({"catalogs"})}),
    ("request.all(k, k != 'x')", {"request": None}),            # a macro over the whole map
    ("request['namespace'] == 'x'", {"request": None}),         # indexing
    ("object.?spec.orValue({}) == {}", {"object": None}),       # optional access
    ("size(object) > 2", {"object": None}),                      # the value itself
    ("[1].all(request, request > 0)", {"request": None}),       # a comprehension variable of that name
    ("'request' == 'x'", {"request": None}),                    # the word in a string literal
    (".object.metadata.name == 'x'", {"object": frozenset({"metadata"})}),   # a leading-dot name
    ("true", {}),
])
def test_what_an_expression_reads_is_read_conservatively(expression, expected) -> None:
    assert guardrails.reads([expression]) == expected


def test_remembered_verdicts_equal_fresh_ones_on_every_default_and_object(evaluations) -> None:
    from reconciler.approve import verdicts

    objs = [cm(name=f"c{i}", ns=ns) for i, ns in enumerate(["a", "kube-system", "a", "kube-public"])] + [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"r{i}"},
         "rules": rules} for i, rules in enumerate([[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}],
                                                    [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["*"]}],
                                                    [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]])]
    policies = guardrails.load_policies(None)
    remembered = guardrails.check_objects(policies, objs, resource_of, PARAMS)
    fresh = [v for o in objs for v in guardrails.check_objects(policies, [o], resource_of, PARAMS)]
    direct = []
    for o in objs:  # each judged by an empty store
        new_process()
        Path(verdicts.store().path).unlink(missing_ok=True)
        direct.extend(guardrails.check_objects(policies, [o], resource_of, PARAMS))
    assert remembered == fresh == direct and len(remembered) == 4


def test_the_cel_parser_is_built_once_per_machine(tmp_path) -> None:
    """cel-python's Lark parser is analysed by the first process and loaded from the cache by the next."""
    import os
    import subprocess
    import sys

    child = ("import sys, lark.lark\nbuilt = []\nreal = lark.lark.Lark._build_parser\n"
             "def spy(self):\n    built.append(1)\n    return real(self)\nlark.lark.Lark._build_parser = spy\n"
             "from reconciler.model import celbudget\nenv = celbudget.environment()\n"
             "result = env.program(env.compile('true && [1, 2].exists(x, x == 2)')).evaluate({})\n"
             "print(len(built), result)\n")
    env = {**os.environ, "RECONCILER_CACHE_DIR": str(tmp_path / "machine")}
    runs = [subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["1", "True"], ["0", "True"]], [r.stderr for r in runs]
