"""Every object is validated before the first write, a first install's too: a refusal leaves the cluster as it was.

A first install has nothing running to protect, but its cluster-scoped
objects (CRDs, APIServices, webhooks, cluster RBAC) act on the whole cluster
the moment they exist. So its objects are dry-run like any change, then each
is created with one request; a refusal removes the installer and the
namespace the run made, and nothing else was written. An object refused
while writing (one that could not be checked beforehand) stops only its own
Operator, which is recorded and completed or pruned by the next run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from reconciler.cluster import status as status_objects
from reconciler.cluster.apply import Action, DesiredOperator, SyncResult, sync
from reconciler.cluster.kube import Kube
from reconciler.errors import BundleError, ClusterError
from reconciler.model.kube import LABEL_OPERATOR, ObjectRef, ownership_labels
from tests.e2e.support import cluster_state, settled_state


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


def test_a_first_install_is_validated_whole_then_creates_each_object_with_one_request(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-a")
    result = _sync(kube, _operator("first-a"))
    assert Counter(c.action.value for c in result.changes) == {"created": 10}  # the namespace and 9 objects
    dry = [p for m, p, dry in kube.calls if m == "PATCH" and dry]
    assert len(dry) == 9 and len(set(dry)) == 9   # every object checked once, before any was written
    # The status CRD and object, and the instance's ApplySet parent (and its namespace), aside.
    writes = [p for m, p, dry in kube.calls
              if m == "PATCH" and not dry and "reconciler.dev" not in p and "reconciler-system" not in p]
    assert len(writes) == 10 and len(set(writes)) == 10  # one apply per object, none sent twice
    first_write = next(i for i, (m, p, dry) in enumerate(kube.calls) if m == "PATCH" and not dry and p in writes[1:])
    last_check = max(i for i, (m, p, dry) in enumerate(kube.calls) if m == "PATCH" and dry)
    assert last_check < first_write
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


def test_a_first_install_refused_by_validation_leaves_the_cluster_as_it_was(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-c")
    before = cluster_state(kube)
    broken = _operator("first-c", container="Not_A_DNS_Label")
    with pytest.raises(BundleError) as caught:
        _sync(kube, broken)
    message = caught.value.message
    assert "refused by the API server as invalid" in message and "nothing was applied" in message
    assert "Deployment.apps first-c-system/controller" in message
    # The namespace the run created for it was removed again; nothing of it was written or recorded.
    assert settled_state(kube, before) == []
    assert "first-c" not in status_objects.read_all(kube)

    fixed = _operator("first-c", configmaps=3)
    result = _sync(kube, fixed)
    assert {c.action for c in result.changes} == {Action.CREATED}
    assert _keys(_labelled(kube, "first-c")) == _keys(ObjectRef.of(o) for o in fixed.objects)


def test_a_first_install_in_a_namespace_that_exists_keeps_the_namespace_when_refused(recorded_k8s):
    """Only a namespace the refused run created is removed: one that was there before is not the run's."""
    kube, names = recorded_k8s
    names.append("first-f")
    ns = kube.resource("v1", "Namespace")
    kube.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first-f-system"}},
               field_manager="someone", dry_run=False)
    try:
        before = cluster_state(kube)
        with pytest.raises(BundleError):
            _sync(kube, _operator("first-f", container="Not_A_DNS_Label"))
        assert settled_state(kube, before) == []
    finally:
        kube.delete(ns, "", "first-f-system")


def test_a_refused_first_install_refuses_the_whole_run_before_any_write(recorded_k8s):
    """Validation covers every Operator of the run before the first write: an installed Operator's upgrade in
    the same run is not half-applied, and not applied at all (the run is refused as one)."""
    kube, names = recorded_k8s
    names += ["first-d", "first-e"]
    _sync(kube, _operator("first-d"))
    before = cluster_state(kube)
    upgrade = _operator("first-d", data="two", container="manager-two")
    with pytest.raises(BundleError) as caught:
        _sync(kube, upgrade, _operator("first-e", container="Not_A_DNS_Label"))
    message = caught.value.message
    assert "Deployment.apps first-e-system/controller" in message and "nothing was applied" in message
    assert settled_state(kube, before) == []
    ready = next(c for c in status_objects.read_all(kube)["first-d"].status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Applied"
    # The same upgrade alone goes through.
    _sync(kube, upgrade)
    info = kube.resource("apps/v1", "Deployment")
    live = kube.get(info, "first-d-system", "controller")
    assert live["spec"]["template"]["spec"]["containers"][0]["name"] == "manager-two"


def test_an_object_refused_while_writing_stops_only_its_own_operator(recorded_k8s):
    """What validation cannot catch (here a quota admitted at dry-run, then exceeded by the writes of the run
    itself) is refused while writing: that Operator is recorded and reported, the others finish."""
    kube, names = recorded_k8s
    names += ["first-g", "first-h"]
    _sync(kube, _operator("first-h"))
    ns = kube.resource("v1", "Namespace")
    quota = kube.resource("v1", "ResourceQuota")
    kube.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first-g-system"}},
               field_manager="someone", dry_run=False)
    kube.apply(quota, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "few", "namespace":
               "first-g-system"}, "spec": {"hard": {"configmaps": "4"}}}, field_manager="someone", dry_run=False)
    _wait_quota_counted(kube, "first-g-system")
    try:
        upgrade = _operator("first-h", data="two")
        with pytest.raises(ClusterError) as caught:
            _sync(kube, upgrade, _operator("first-g"))
        message = caught.value.message
        assert "exceeded quota" in message and "the other Operators were applied: first-h" in message, message
        recorded = status_objects.read_all(kube)
        ready = {name: next(c for c in recorded[name].status["conditions"] if c["type"] == "Ready")
                 for name in ("first-g", "first-h")}
        assert ready["first-h"]["reason"] == "Applied"
        assert (ready["first-g"]["status"], ready["first-g"]["reason"]) == ("False", "ApplyFailed")
        assert kube.get(kube.resource("v1", "ConfigMap"), "first-h-system", "config0")["data"] == {"value": "two"}
        assert _keys(_labelled(kube, "first-g")) <= _keys(recorded["first-g"].inventory)
        sync(kube, [], dry_run=False, allow_empty=True, revision="r2", held=frozenset(recorded) - {"first-g"})
        assert _labelled(kube, "first-g") == set()
    finally:
        kube.delete(ns, "", "first-g-system")


def _wait_quota_counted(kube: Kube, namespace: str) -> None:
    """The quota controller fills in what is used; until then the API server admits nothing it governs."""
    import time

    info = kube.resource("v1", "ResourceQuota")
    deadline = time.monotonic() + 30
    while not (kube.get(info, namespace, "few") or {}).get("status", {}).get("used"):
        assert time.monotonic() < deadline, "the quota was never counted"
        time.sleep(0.2)
