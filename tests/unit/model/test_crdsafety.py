"""CRD upgrade safety: each unsafe change is found and named by CRD, version and JSON path; safe ones pass."""

from __future__ import annotations

import copy

import pytest

from reconciler.model.crdsafety import allowed, check_crd_upgrade


def crd(schema=None, versions=None, scope="Namespaced"):
    schema = schema if schema is not None else {
        "type": "object",
        "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "name": {"type": "string", "maxLength": 63},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        }}}}
    versions = versions or [{"name": "v1", "served": True, "storage": True}]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": scope, "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": [{**v, "schema": {"openAPIV3Schema": copy.deepcopy(schema)}} for v in versions]}}


def changed(edit):
    new = crd()
    edit(new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return check_crd_upgrade(crd(), new, ["v1"], [])


def rules(findings):
    return [(f.version, f.path, f.rule) for f in findings]


def test_an_identical_crd_is_safe():
    assert check_crd_upgrade(crd(), crd(), ["v1"], ["v1"]) == []


@pytest.mark.parametrize("edit", [
    lambda s: s["properties"].update(new={"type": "string"}),                  # a new optional field
    lambda s: s["properties"]["mode"]["enum"].append("medium"),                 # enum widened
    lambda s: s["properties"]["size"].update(maximum=100),                      # bound loosened
    lambda s: s["properties"]["size"].pop("minimum"),                           # bound removed
    lambda s: s.update(required=[]),                                            # requirement dropped
    lambda s: s["properties"]["name"].update(description="changed"),            # documentation
])
def test_loosening_changes_are_safe(edit):
    assert changed(edit) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda s: s["properties"]["size"].update(type="string"), (".spec.size", "type-changed")),
    (lambda s: s["properties"].pop("mode"), (".spec.mode", "field-removed")),
    (lambda s: s.update(required=["size", "mode"]), (".spec.mode", "required-added")),
    (lambda s: s["properties"]["mode"].update(enum=["fast"]), (".spec.mode", "enum-narrowed")),
    (lambda s: s["properties"]["name"].update(enum=["a"]), (".spec.name", "enum-added")),
    (lambda s: s["properties"]["size"].update(maximum=5), (".spec.size", "bound-tightened")),
    (lambda s: s["properties"]["size"].update(minimum=2), (".spec.size", "bound-tightened")),
    (lambda s: s["properties"]["name"].update(maxLength=10), (".spec.name", "bound-tightened")),
    (lambda s: s["properties"]["name"].update(minLength=3), (".spec.name", "bound-added")),
    (lambda s: s["properties"]["tags"].update(maxItems=2), (".spec.tags", "bound-tightened")),
    (lambda s: s["properties"]["tags"]["items"].update(type="integer"), (".spec.tags[*]", "type-changed")),
    (lambda s: s["properties"]["tags"]["items"].update(maxLength=8), (".spec.tags[*]", "bound-added")),
    (lambda s: s["properties"]["extra"]["additionalProperties"].update(enum=["x"]), (".spec.extra.*", "enum-added")),
    (lambda s: s["properties"]["size"].update(exclusiveMaximum=True), (".spec.size", "bound-tightened")),
])
def test_each_unsafe_schema_change_is_named_with_version_and_path(edit, expected):
    found = changed(edit)
    assert [(f.path, f.rule) for f in found] == [expected]
    assert found[0].crd == "widgets.example.com" and found[0].version == "v1"
    assert str(found[0]).startswith(f"widgets.example.com version v1 {expected[0]}: ")


def test_removing_a_stored_version_is_refused():
    old = crd(versions=[{"name": "v1alpha1", "served": True, "storage": False},
                        {"name": "v1", "served": True, "storage": True}])
    new = crd()
    assert rules(check_crd_upgrade(old, new, ["v1alpha1", "v1"], [])) == [("v1alpha1", "", "stored-version-removed")]
    assert check_crd_upgrade(old, new, ["v1"], []) == []  # never stored: free to go when nothing is read through it


def test_removing_or_unserving_a_version_that_objects_are_read_through_is_refused():
    old = crd(versions=[{"name": "v1alpha1", "served": True, "storage": False},
                        {"name": "v1", "served": True, "storage": True}])
    unserved = crd(versions=[{"name": "v1alpha1", "served": False, "storage": False},
                             {"name": "v1", "served": True, "storage": True}])
    assert rules(check_crd_upgrade(old, crd(), ["v1"], ["v1alpha1", "v1"])) == [
        ("v1alpha1", "", "served-version-removed")]
    assert rules(check_crd_upgrade(old, unserved, ["v1"], ["v1alpha1", "v1"])) == [
        ("v1alpha1", "", "served-version-removed")]
    assert check_crd_upgrade(old, unserved, ["v1"], []) == []  # no custom resources: nothing breaks


def test_a_scope_change_is_refused():
    assert rules(check_crd_upgrade(crd(), crd(scope="Cluster"), ["v1"], [])) == [("", "spec.scope", "scope")]


def test_every_version_present_in_both_is_compared():
    versions = [{"name": "v1beta1", "served": True, "storage": False}, {"name": "v1", "served": True, "storage": True}]
    old, new = crd(versions=versions), crd(versions=versions)
    new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("name")
    assert rules(check_crd_upgrade(old, new, ["v1"], [])) == [("v1beta1", ".spec.name", "field-removed")]


def test_several_findings_are_all_listed():
    def edit(s):
        s["properties"].pop("mode")
        s["properties"]["size"]["type"] = "string"
    assert {f.rule for f in changed(edit)} == {"field-removed", "type-changed"}


def test_the_override_annotation_names_crds_or_all():
    assert allowed("widgets.example.com", "widgets.example.com")
    assert allowed("a.example.com, widgets.example.com", "widgets.example.com")
    assert allowed("*", "widgets.example.com")
    assert not allowed("", "widgets.example.com") and not allowed(None, "widgets.example.com")
    assert not allowed("gadgets.example.com", "widgets.example.com")
