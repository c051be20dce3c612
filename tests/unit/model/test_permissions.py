"""Permission sets compare as the RBAC authoriser decides: wildcards, subresources, names, scopes, URLs."""

from __future__ import annotations

import pytest

from reconciler.model.permissions import CLUSTER, PermissionSet, Rule, compact
from reconciler.approve.required import required_permissions


def rules(*specs: tuple) -> PermissionSet:
    out = []
    for spec in specs:
        scope, verbs, groups, resources, *rest = spec
        names = rest[0] if rest else ()
        out.append(Rule.make(scope, verbs=verbs, api_groups=groups, resources=resources, resource_names=names))
    return PermissionSet.of(out)


def urls(verbs, paths) -> PermissionSet:
    return PermissionSet.of([Rule.make(CLUSTER, verbs=verbs, non_resource_urls=paths)])


NS = "team-a"
CASES = [
    # (have, want, covered)
    (rules((CLUSTER, ["*"], ["*"], ["*"])), rules((NS, ["get"], [""], ["pods"])), True),
    (rules((CLUSTER, ["*"], ["*"], ["*"])), rules((CLUSTER, ["*"], ["*"], ["*"])), True),
    (rules((CLUSTER, ["get"], [""], ["pods"])), rules((CLUSTER, ["*"], [""], ["pods"])), False),
    (rules((CLUSTER, ["get", "list"], [""], ["pods"])), rules((CLUSTER, ["get"], [""], ["*"])), False),
    (rules((CLUSTER, ["get"], ["apps"], ["*"])), rules((CLUSTER, ["get"], ["*"], ["deployments"])), False),
    (rules((CLUSTER, ["get"], ["*"], ["deployments"])), rules((NS, ["get"], ["apps"], ["deployments"])), True),
    # scope: cluster-wide covers a namespace, a namespace covers neither another nor the cluster
    (rules((NS, ["get"], [""], ["pods"])), rules((NS, ["get"], [""], ["pods"])), True),
    (rules((NS, ["get"], [""], ["pods"])), rules(("team-b", ["get"], [""], ["pods"])), False),
    (rules((NS, ["get"], [""], ["pods"])), rules((CLUSTER, ["get"], [""], ["pods"])), False),
    (rules((CLUSTER, ["get"], [""], ["pods"])), rules((NS, ["get"], [""], ["pods"])), True),
    # subresources
    (rules((CLUSTER, ["get"], ["apps"], ["*/scale"])), rules((NS, ["get"], ["apps"], ["deployments/scale"])), True),
    (rules((CLUSTER, ["get"], ["apps"], ["*/scale"])), rules((NS, ["get"], ["apps"], ["deployments"])), False),
    (rules((CLUSTER, ["get"], ["apps"], ["deployments"])), rules((NS, ["get"], ["apps"], ["deployments/scale"])),
     False),
    (rules((CLUSTER, ["get"], [""], ["*"])), rules((NS, ["get"], [""], ["pods/log"])), True),
    # resource names
    (rules((NS, ["get"], [""], ["secrets"], ["a"])), rules((NS, ["get"], [""], ["secrets"], ["a"])), True),
    (rules((NS, ["get"], [""], ["secrets"], ["a"])), rules((NS, ["get"], [""], ["secrets"], ["b"])), False),
    (rules((NS, ["get"], [""], ["secrets"], ["a"])), rules((NS, ["get"], [""], ["secrets"])), False),
    (rules((NS, ["get"], [""], ["secrets"])), rules((NS, ["get"], [""], ["secrets"], ["a", "b"])), True),
    # several rules together cover what none covers alone
    (rules((NS, ["get"], [""], ["pods"]), (NS, ["list"], [""], ["pods"])), rules((NS, ["get", "list"], [""], ["pods"])),
     True),
    (rules((NS, ["get"], [""], ["pods"])), PermissionSet(), True),
    (PermissionSet(), rules((NS, ["get"], [""], ["pods"])), False),
    # non-resource URLs
    (urls(["get"], ["*"]), urls(["get"], ["/metrics"]), True),
    (urls(["get"], ["/healthz/*"]), urls(["get"], ["/healthz/ready"]), True),
    (urls(["get"], ["/healthz/*"]), urls(["get"], ["/metrics"]), False),
    (urls(["get"], ["/metrics"]), urls(["get", "post"], ["/metrics"]), False),
    (urls(["get"], ["/metrics"]), urls(["get"], ["*"]), False),
    (rules((CLUSTER, ["*"], ["*"], ["*"])), urls(["get"], ["/metrics"]), False),  # resource rules grant no URL
    (urls(["*"], ["*"]), rules((CLUSTER, ["get"], [""], ["pods"])), False),
]


@pytest.mark.parametrize("have,want,covered", CASES)
def test_covers(have: PermissionSet, want: PermissionSet, covered: bool) -> None:
    assert have.covers(want) is covered
    assert (not have.missing(want)) is covered


def test_missing_is_only_the_escalation_regrouped() -> None:
    have = rules((NS, ["get", "list", "watch"], [""], ["pods", "services"]))
    want = rules((NS, ["get", "list", "watch", "delete"], [""], ["pods", "services"]),
                 (CLUSTER, ["get"], ["apps"], ["deployments"]))
    missing = have.missing(want)
    assert missing == rules((NS, ["delete"], [""], ["pods", "services"]), (CLUSTER, ["get"], ["apps"], ["deployments"]))
    assert have.covers(want) is False and (have | missing).covers(want)


def test_round_trip_through_the_record_shape() -> None:
    perms = rules((NS, ["get"], [""], ["secrets"], ["tls"]), (CLUSTER, ["*"], ["*"], ["*"])) | urls(["get"], ["/m"])
    listed = perms.to_list()
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["tls"], "verbs": ["get"],
            "namespaces": [NS]} in listed
    assert {"nonResourceURLs": ["/m"], "verbs": ["get"]} in listed
    assert PermissionSet.from_list(listed) == perms


def test_a_record_with_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown field 'verb'"):
        PermissionSet.from_list([{"verb": ["get"]}])


def test_describe_groups_by_scope_cluster_first() -> None:
    lines = rules((NS, ["get"], [""], ["pods"]), (CLUSTER, ["list"], ["apps"], ["deployments"])).describe()
    assert lines == ["  cluster-wide:", "    list  deployments (apps)", f"  in namespace {NS}:",
                     "    get  pods (core)"]


def _role(kind: str, name: str, rules_: list, ns: str = "") -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules_}


def test_required_permissions_of_rendered_objects() -> None:
    objects = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": NS}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "ws.x.io"},
         "spec": {"group": "x.io", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"}}},
        {"apiVersion": "x.io/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": NS}},
        _role("ClusterRole", "op", [{"apiGroups": ["x.io"], "resources": ["widgets"], "verbs": ["*"]}]),
        _role("Role", "op", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], NS),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "op"},
         "roleRef": {"kind": "ClusterRole", "name": "op"}, "subjects": []},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "admin"},
         "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}, "subjects": []},
    ]
    req = required_permissions(objects)
    verbs = ["create", "delete", "patch", "update"]
    assert req.manages == compact(rules(
        (NS, verbs, ["apps"], ["deployments"]), (CLUSTER, verbs, ["apiextensions.k8s.io"], ["customresourcedefinitions"]),
        (NS, verbs, ["x.io"], ["widgets"]),
        (CLUSTER, verbs, ["rbac.authorization.k8s.io"], ["clusterroles", "clusterrolebindings"]),
        (NS, verbs, ["rbac.authorization.k8s.io"], ["roles"])).atoms())
    assert req.grants == compact(rules(
        (CLUSTER, ["*"], ["x.io"], ["widgets"]), (NS, ["get"], [""], ["configmaps"]),
        (CLUSTER, ["bind"], ["rbac.authorization.k8s.io"], ["clusterroles"], ["cluster-admin"])).atoms())
    assert len(req.manages.rules) == 5  # kinds sharing scope, group and verbs are one rule
    assert req.all.covers(req.grants) and req.all.covers(req.manages)


def test_the_installer_rule_set_is_merged_without_changing_what_it_allows():
    """Rules that differ in one list merge into one: the installer's Role stays short, allowing the same."""
    import random

    from reconciler.cluster.ownership.installer import merged_rules

    binds = [Rule.make("ns", verbs=["bind"], api_groups=["rbac.authorization.k8s.io"], resources=["roles"],
                       resource_names=[f"role{i:02d}"]) for i in range(24)]
    merged = merged_rules(binds + [Rule.make("ns", verbs=["get"], api_groups=[""], resources=["pods"])])
    assert len(merged) == 2 and len(merged[1].resource_names) == 24
    # a rule without names allows every name: it never absorbs one with names
    named = Rule.make(CLUSTER, verbs=["get"], api_groups=[""], resources=["secrets"], resource_names=["a"])
    assert merged_rules([named, Rule.make(CLUSTER, verbs=["get"], api_groups=[""], resources=["secrets"])]) == \
        sorted([named, Rule.make(CLUSTER, verbs=["get"], api_groups=[""], resources=["secrets"])])
    rng = random.Random(7)
    for _ in range(300):
        rules = [Rule.make(rng.choice([CLUSTER, "a", "b"]), verbs=rng.sample(["get", "list", "create", "*"], 2),
                           api_groups=rng.sample(["", "apps", "*"], rng.randint(1, 2)),
                           resources=rng.sample(["pods", "secrets", "deployments", "*/scale"], rng.randint(1, 2)),
                           resource_names=rng.sample(["x", "y"], rng.randint(0, 1)))
                 for _ in range(rng.randint(1, 12))]
        rules += [Rule.make(CLUSTER, verbs=[rng.choice(["get", "post"])], non_resource_urls=[rng.choice(["/a", "/b*"])])
                  for _ in range(rng.randint(0, 3))]
        out = merged_rules(rules)
        assert set(PermissionSet.of(out).atoms()) == set(PermissionSet.of(rules).atoms())
        assert len(out) <= len(set(rules))
