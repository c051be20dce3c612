"""Ownership decisions as pure functions: provenance, renames, the ApplySet id and parent."""

from __future__ import annotations

import base64
import hashlib

import pytest

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.ownership.applyset import Instance, parent
from reconciler.cluster.apply import DesiredOperator
from reconciler.cluster.apply.provenance import applied_by_us, check_owner
from reconciler.cluster.ownership.inventory import find_moves
from reconciler.errors import PolicyError
from reconciler.model.kube import ObjectRef, applyset_id

SA = ObjectRef("", "ServiceAccount", "ns", "sa", "v1")


def _live(*managers: str, labels: dict | None = None, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "ns", "labels": labels or {}, "annotations": annotations or {},
                         "managedFields": [{"manager": m, "operation": "Apply"} for m in managers]}}


def test_the_applyset_id_is_kubectls_formula():
    digest = hashlib.sha256(b"parent.ns.ConfigMap.").digest()
    assert applyset_id("parent", "ns", "ConfigMap") == \
        "applyset-" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "-v1"
    ids = {applyset_id("p", "a", "ConfigMap"), applyset_id("p", "b", "ConfigMap"), applyset_id("p", "a", "Secret")}
    assert len(ids) == 3 and all(len(i) <= 63 and "=" not in i for i in ids)


def test_the_parent_lists_member_kinds_and_other_namespaces_sorted():
    inst = Instance("team-a", "reconciler-system")
    body = parent(inst, [SA, ObjectRef("apps", "Deployment", "b-ns", "d"), ObjectRef("reconciler.dev", "Operator", "", "x"),
                         ObjectRef("", "ConfigMap", "reconciler-system", "c")])
    assert body["metadata"]["name"] == "reconciler-instance-team-a"
    assert body["metadata"]["labels"]["applyset.kubernetes.io/id"] == inst.id
    notes = body["metadata"]["annotations"]
    assert notes["applyset.kubernetes.io/contains-group-kinds"] == "ConfigMap,Deployment.apps,Operator.reconciler.dev," \
                                                                   "ServiceAccount"
    assert notes["applyset.kubernetes.io/additional-namespaces"] == "b-ns,ns"


def test_provenance_needs_the_inventory_and_our_field_manager():
    owned = {"op": {SA.key}}
    check_owner("op", SA, _live("reconciler"), owned, {})
    assert applied_by_us(_live("reconciler")) and not applied_by_us(_live("kubectl"))
    with pytest.raises(PolicyError, match="carries the label reconciler.dev/operator=op, but no Operator"):
        check_owner("op", SA, _live("reconciler", labels={"reconciler.dev/operator": "op"}), {}, {})
    with pytest.raises(PolicyError, match="did not apply it"):
        check_owner("op", SA, _live("intruder", labels={"reconciler.dev/operator": "op"}), owned, {})
    with pytest.raises(PolicyError, match="belongs to Operator other"):
        check_owner("op", SA, _live("reconciler"), {"other": {SA.key}}, {})
    check_owner("op", SA, _live("reconciler"), {"other": {SA.key}}, {"op": "other"})   # a rename moves it
    check_owner("op", SA, _live("user", annotations={"reconciler.dev/adopt": "true"}), {}, {})


def _op(name: str, bundle: str, package: str = "p") -> DesiredOperator:
    return DesiredOperator(name, (), (), {}, {"name": bundle, "package": package})


def _rec(name: str, bundle: str, package: str = "p") -> status_objects.Recorded:
    return status_objects.Recorded(name, (SA,), {}, {"bundle": {"name": bundle, "package": package}})


def test_a_rename_is_a_move_only_with_the_same_bundle():
    assert find_moves([_op("b", "p.v1")], {"a": _rec("a", "p.v1")}) == {"b": "a"}
    assert find_moves([_op("b", "p.v2")], {"a": _rec("a", "p.v1")}) == {}
    assert find_moves([_op("b", "p.v1"), _op("a", "p.v1")], {"a": _rec("a", "p.v1")}) == {}   # a is still declared
    assert find_moves([_op("b", "p.v1"), _op("c", "p.v1")], {"a": _rec("a", "p.v1")}) == {"b": "a"}  # once


@pytest.mark.parametrize("ref, spec, why", [
    (ObjectRef("apiextensions.k8s.io", "CustomResourceDefinition", "", "operators.reconciler.dev", "v1"), {},
     "is the reconciler's own"),
    (ObjectRef("rbac.authorization.k8s.io", "ClusterRole", "", "system:aggregate-to-edit", "v1"), {},
     "is Kubernetes' own RBAC"),
    (ObjectRef("", "Namespace", "", "kube-system", "v1"), {}, "is a namespace of Kubernetes itself"),
    (ObjectRef("apiregistration.k8s.io", "APIService", "", "v1.apps", "v1"), {"service": None},
     "is an API the API server serves itself"),
])
def test_objects_that_must_never_be_adopted_are_refused_even_when_annotated(ref, spec, why):
    live = {"metadata": {"name": ref.name, "annotations": {"reconciler.dev/adopt": "true"}, "managedFields": []},
            "spec": spec}
    with pytest.raises(PolicyError) as caught:
        check_owner("op", ref, live, {}, {})
    assert why in caught.value.message and "adopt" not in (caught.value.hint or "")


def test_an_aggregated_apiservice_of_a_bundle_may_still_be_adopted():
    ref = ObjectRef("apiregistration.k8s.io", "APIService", "", "v1.metrics.example.com", "v1")
    live = {"metadata": {"name": ref.name, "annotations": {"reconciler.dev/adopt": "true"}},
            "spec": {"service": {"name": "metrics", "namespace": "m"}}}
    check_owner("op", ref, live, {}, {})
