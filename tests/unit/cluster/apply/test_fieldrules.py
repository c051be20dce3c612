"""Ignore rules, create-only objects and stale managers, as pure functions over objects and managedFields."""

from __future__ import annotations

import pytest

from reconciler.cluster.apply.fields import as_taken_over, create_only, respect, stale_entries, unmatched
from reconciler.cluster.apply.changes import DesiredOperator
from reconciler.errors import InputError
from reconciler.model.fieldrules import IgnoreRule, ObjectSelector, parse_create_only, parse_ignore_rules
from reconciler.model.kube import ObjectRef

DEPLOY = ObjectRef("apps", "Deployment", "ns", "web", "v1")


def deployment(replicas: int, image: str = "app:1") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}


def test_a_pointer_keeps_the_live_value_and_nothing_else_changes():
    rule = parse_ignore_rules([{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}],
                              "ignoreDifferences", "reconciler.yaml")[0]
    sent = deployment(1, "app:2")
    out = respect(sent, deployment(5), [rule])
    assert out["spec"]["replicas"] == 5 and out["spec"]["template"]["spec"]["containers"][0]["image"] == "app:2"
    assert sent["spec"]["replicas"] == 1   # a copy
    live = deployment(5)
    del live["spec"]["replicas"]
    assert "replicas" not in respect(sent, live, [rule])["spec"]   # nothing live: nothing sent


def test_a_manager_rule_leaves_out_what_that_manager_owns():
    rule = IgnoreRule(ObjectSelector("apps", "Deployment"), managers=("hpa-controller",))
    live = deployment(4)
    live["metadata"]["managedFields"] = [
        {"manager": "reconciler", "operation": "Apply", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}},
        {"manager": "hpa-controller", "operation": "Update", "subresource": "scale", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
    out = respect(deployment(1), live, [rule])
    assert "replicas" not in out["spec"] and out["spec"]["template"]


def test_a_manager_rule_strips_keyed_list_fields():
    webhook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "w"}, "webhooks": [{"name": "a.example.com", "clientConfig": {
                   "caBundle": "Zm9v", "service": {"name": "s", "namespace": "n"}}}]}
    live = {**webhook, "metadata": {"name": "w", "managedFields": [{"manager": "cainjector", "operation": "Update",
            "fieldsV1": {"f:webhooks": {'k:{"name":"a.example.com"}': {"f:clientConfig": {"f:caBundle": {}}}}}}]}}
    from reconciler.model.fieldrules import DEFAULT_RULES

    out = respect(webhook, live, [r for r in DEFAULT_RULES if r.matches(ObjectRef.of(webhook))])
    assert out["webhooks"][0]["clientConfig"] == {"service": {"name": "s", "namespace": "n"}}


@pytest.mark.parametrize("raw, message", [
    ([{"kind": "Deployment"}], "ignores nothing"),
    ([{"group": "apps", "jsonPointers": ["/spec/replicas"]}], "kind is required"),
    ([{"kind": "Deployment", "jsonPointers": ["spec/replicas"]}], "is not a JSON pointer"),
    ([{"kind": "Deployment", "jsonPointers": ["/metadata/name"]}], "identifies the object"),
    ([{"kind": "Deployment", "jsonPointer": ["/spec/replicas"]}], "unknown field 'jsonPointer'"),
    ({"kind": "Deployment"}, "must be a list"),
])
def test_bad_rules_are_refused_naming_the_file(raw, message):
    with pytest.raises(InputError) as caught:
        parse_ignore_rules(raw, "ignoreDifferences", "reconciler.yaml")
    assert message in caught.value.message and caught.value.path == "reconciler.yaml"


def test_pointers_unescape_as_rfc_6901_says():
    rule = parse_ignore_rules([{"kind": "ConfigMap", "jsonPointers": ["/metadata/annotations/example.com~1a~0b"]}],
                              "x", "f")[0]
    assert rule.json_pointers == (("metadata", "annotations", "example.com/a~b"),)


def test_create_only_by_annotation_or_by_rule():
    obj = {"metadata": {"name": "c", "annotations": {"reconciler.dev/create-only": "true"}}}
    ref = ObjectRef("", "ConfigMap", "ns", "c", "v1")
    assert create_only(obj, ref, ())
    assert create_only({"metadata": {"name": "c"}}, ref, parse_create_only([{"kind": "ConfigMap", "name": "c"}],
                                                                            "createOnly", "f"))
    assert not create_only({"metadata": {"name": "c"}}, ref, parse_create_only([{"kind": "ConfigMap", "name": "d"}],
                                                                                 "createOnly", "f"))


def test_stale_managers_are_client_side_writers_only():
    live = {"metadata": {"managedFields": [
        {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": {}},
        {"manager": "kubectl", "operation": "Apply", "fieldsV1": {}},            # server-side: it gives fields up itself
        {"manager": "before-first-apply", "operation": "Update", "fieldsV1": {}},
        {"manager": "my-tool", "operation": "Update", "fieldsV1": {}},
        {"manager": "kubectl", "operation": "Update", "subresource": "scale", "fieldsV1": {}}]}}
    assert [m["manager"] for m in stale_entries(live)] == ["kubectl-client-side-apply", "before-first-apply"]
    assert [m["manager"] for m in stale_entries(live, ["my-tool"])][-1] == "my-tool"


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _dry_run_over_a_client_side_apply() -> dict:
    """What the API server answers to a dry-run apply of data {a}, env [A] over what `kubectl apply` (client-side)
    wrote with data {a, b}, env [A, EXTRA] and a label another tool set: the shared fields stay the client's too."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"reconciler.dev/operator": "x", "team": "payments"},
                         "annotations": {LAST_APPLIED: "{...}", "reconciler.dev/applied-digest": "d"},
                         "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": {
                    "f:data": {"f:a": {}, "f:b": {}},
                    "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}},
                              'k:{"name":"EXTRA"}': {".": {}, "f:name": {}, "f:value": {}}},
                    "f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}}}}},
                {"manager": "labeller", "operation": "Update",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:team": {}}}}},
                {"manager": "reconciler", "operation": "Apply", "fieldsV1": {
                    "f:data": {"f:a": {}},
                    "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}},
                    "f:metadata": {"f:annotations": {"f:reconciler.dev/applied-digest": {}},
                                   "f:labels": {"f:reconciler.dev/operator": {}}}}}]},
            "data": {"a": "1", "b": "2"},
            "env": [{"name": "A", "value": "1"}, {"name": "EXTRA", "value": "2"}]}


def test_a_dry_run_removes_what_the_real_runs_take_over_would():
    dry = _dry_run_over_a_client_side_apply()
    after = as_taken_over(dry)
    assert after["data"] == {"a": "1"}                              # the client's alone: taken over, then dropped
    assert after["env"] == [{"name": "A", "value": "1"}]            # a keyed item the client alone holds goes whole
    assert after["metadata"]["annotations"] == {"reconciler.dev/applied-digest": "d"}   # last-applied too
    assert after["metadata"]["labels"] == {"reconciler.dev/operator": "x", "team": "payments"}  # another's stays
    assert dry["data"] == {"a": "1", "b": "2"}                      # a copy: the answer itself is left as it was
    untouched = {**dry, "metadata": {**dry["metadata"], "managedFields": dry["metadata"]["managedFields"][1:]}}
    assert as_taken_over(untouched) is untouched                    # no client-side writer: nothing to take over


def test_a_rule_that_matches_nothing_is_reported_once():
    rule = parse_ignore_rules([{"kind": "StatefulSet", "group": "apps", "jsonPointers": ["/spec/replicas"]}],
                              "ignoreDifferences", "reconciler.yaml")[0]
    ops = [DesiredOperator(n, (deployment(1),), (), {}, {}, ignore=(rule,)) for n in ("a", "b")]
    assert unmatched(ops) == ["ignoreDifferences reconciler.yaml: ignoreDifferences[0] (StatefulSet.apps) matches "
                              "no object; it has no effect"]
    hit = IgnoreRule(ObjectSelector("apps", "Deployment"), json_pointers=(("spec", "replicas"),), origin="x")
    assert unmatched([DesiredOperator("a", (deployment(1),), (), {}, {}, ignore=(hit,))]) == []
