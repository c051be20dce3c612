"""A first install creates directly; an installed Operator is still validated in full before anything is written.

A first install has nothing running to protect, so its new objects are
created with one request each (no dry-run pass), after its inventory is
recorded: an object refused midway leaves a recorded, reported partial
install, which the next run completes and prunes. A change to an installed
Operator is dry-run first, and an invalid object stops it with nothing written.
"""

from __future__ import annotations

from collections import Counter

import pytest

from reconciler.cluster import status as status_objects
from reconciler.cluster.apply import Action, DesiredOperator, SyncResult, sync
from reconciler.cluster.kube import Kube
from reconciler.errors import BundleError
from reconciler.model.kube import LABEL_OPERATOR, ObjectRef, ownership_labels


pytestmark = pytest.mark.cluster


def _operator(name: str, *, data: str = "one", container: str = "manager", configmaps: int = 5) -> DesiredOperator:
    """Objects over several stages: RBAC and a ServiceAccount, ConfigMaps, a Service, then the Deployment."""
    ns = f"{name}-system"
    objs: list[dict] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{name}-reader"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller", "namespace": ns}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "namespace": ns},
         "spec": {"selector": {"app": name}, "ports": [{"port": 8443, "targetPort": 8443}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "controller", "namespace": ns},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": {
                      "serviceAccountName": "controller",
                      "containers": [{"name": container, "image": "example.invalid/manager:1"}]}}}},
    ]
    objs += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"config{i}", "namespace": ns},
              "data": {"value": data}} for i in range(configmaps)]
    for o in objs:
        o["metadata"]["labels"] = {**o["metadata"].get("labels", {}), **ownership_labels(name)}
    return DesiredOperator(name, tuple(objs), (ns,), {"package": name}, {"name": f"{name}.v1"})


def _sync(kube: Kube, *ops: DesiredOperator) -> SyncResult:
    others = frozenset(status_objects.read_all(kube)) - {op.name for op in ops}
    return sync(kube, list(ops), dry_run=False, allow_empty=True, revision="r1", held=others)


def _labelled(kube: Kube, name: str) -> set[ObjectRef]:
    """Every object of the kinds ``_operator`` makes that carries ``name``'s owner label."""
    found = set()
    for api_version, kind in [("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "ServiceAccount"),
                              ("v1", "Service"), ("apps/v1", "Deployment"), ("v1", "ConfigMap")]:
        info = kube.resource(api_version, kind)
        assert info is not None
        found |= {ObjectRef.of(o) for o in kube.list(info, label_selector=f"{LABEL_OPERATOR}={name}")}
    return found


def _keys(refs) -> set[tuple[str, str, str, str]]:
    return {r.key for r in refs}


def test_a_first_install_creates_each_object_with_one_request_and_no_dry_run(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-a")
    result = _sync(kube, _operator("first-a"))
    assert Counter(c.action.value for c in result.changes) == {"created": 10}  # the namespace and 9 objects
    verbs = kube.verbs()
    assert "PATCH dry-run" not in verbs, verbs
    # The status CRD and object, and the instance's ApplySet parent (and its namespace), aside.
    writes = [p for m, p, dry in kube.calls
              if m == "PATCH" and not dry and "reconciler.dev" not in p and "reconciler-system" not in p]
    assert len(writes) == 10 and len(set(writes)) == 10  # one apply per object, none sent twice
    assert _keys(_labelled(kube, "first-a")) == _keys(ObjectRef.of(o) for o in _operator("first-a").objects)


def test_an_invalid_object_in_a_change_to_an_installed_operator_writes_nothing(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-b")
    _sync(kube, _operator("first-b"))
    before = status_objects.read_all(kube)["first-b"]
    kube.calls.clear()
    with pytest.raises(BundleError) as caught:
        _sync(kube, _operator("first-b", data="two", container="Not_A_DNS_Label"))
    assert "Deployment.apps first-b-system/controller" in caught.value.message
    assert "nothing was applied" in caught.value.message
    assert [p for m, p, dry in kube.calls if m == "PATCH" and not dry] == []  # validated first, nothing written
    assert ("PATCH", "/apis/apps/v1/namespaces/first-b-system/deployments/controller", True) in kube.calls
    info = kube.resource("v1", "ConfigMap")
    assert kube.get(info, "first-b-system", "config0")["data"] == {"value": "one"}
    assert status_objects.read_all(kube)["first-b"].inventory == before.inventory


def test_a_first_install_refused_midway_is_recorded_reported_and_completed_by_the_next_run(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-c")
    broken = _operator("first-c", container="Not_A_DNS_Label")
    with pytest.raises(BundleError) as caught:
        _sync(kube, broken)
    message = caught.value.message
    assert "refused by the API server as invalid" in message
    assert "Deployment.apps first-c-system/controller" in message
    assert "recorded in the inventory: 8 object(s) of Operator first-c" in message  # all but the Deployment
    # The stages before the Deployment were written, and everything written is in the recorded inventory.
    written = _labelled(kube, "first-c")
    assert ("ConfigMap", "config4") in {(r.kind, r.name) for r in written}
    assert ("Deployment", "controller") not in {(r.kind, r.name) for r in written}
    rec = status_objects.read_all(kube)["first-c"]
    assert _keys(written) <= _keys(rec.inventory)
    ready = next(c for c in rec.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ApplyFailed")
    assert "controller" in ready["message"]

    # The corrected bundle no longer has two ConfigMaps the partial install wrote: they are pruned, not orphaned.
    fixed = _operator("first-c", configmaps=3)
    result = _sync(kube, fixed)
    actions = {(c.ref.kind, c.ref.name): c.action for c in result.changes}
    assert actions[("Deployment", "controller")] == Action.CREATED
    assert actions[("ConfigMap", "config4")] == Action.DELETED
    assert actions[("ConfigMap", "config0")] == Action.UNCHANGED
    want = _keys(ObjectRef.of(o) for o in fixed.objects)
    assert _keys(_labelled(kube, "first-c")) == want
    rec = status_objects.read_all(kube)["first-c"]
    assert _keys(rec.inventory) == want
    ready = next(c for c in rec.status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] != "ApplyFailed"


def test_a_refused_first_install_stops_only_its_own_operator(recorded_k8s):
    """An installed Operator upgraded in the same run goes through every stage: never left half-upgraded."""
    kube, names = recorded_k8s
    names += ["first-d", "first-e"]
    _sync(kube, _operator("first-d"))
    upgrade = _operator("first-d", data="two", container="manager-two")
    with pytest.raises(BundleError) as caught:
        _sync(kube, upgrade, _operator("first-e", container="Not_A_DNS_Label"))
    message = caught.value.message
    assert "Deployment.apps first-e-system/controller" in message
    assert "the other Operators were applied: first-d" in message
    # first-d was upgraded through its last stage, the Deployment, and is recorded as applied.
    info = kube.resource("apps/v1", "Deployment")
    live = kube.get(info, "first-d-system", "controller")
    assert live["spec"]["template"]["spec"]["containers"][0]["name"] == "manager-two"
    assert kube.get(kube.resource("v1", "ConfigMap"), "first-d-system", "config0")["data"] == {"value": "two"}
    recorded = status_objects.read_all(kube)
    ready = {name: next(c for c in recorded[name].status["conditions"] if c["type"] == "Ready")
             for name in ("first-d", "first-e")}
    assert ready["first-d"]["reason"] == "Applied"
    assert (ready["first-e"]["status"], ready["first-e"]["reason"]) == ("False", "ApplyFailed")
    # What first-e wrote before its Deployment is in its inventory; removing it leaves nothing behind.
    assert _keys(_labelled(kube, "first-e")) <= _keys(recorded["first-e"].inventory)
    sync(kube, [], dry_run=False, allow_empty=True, revision="r2", held=frozenset(recorded) - {"first-e"})
    assert _labelled(kube, "first-e") == set()
