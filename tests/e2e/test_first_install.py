"""A refused run leaves the cluster as it was, a first install's included.

A first install has nothing running to protect, but its cluster-scoped
objects (CRDs, APIServices, webhooks, cluster RBAC) act on the whole cluster
the moment they exist. So every object that reaches beyond the namespace the
run made for it is dry-run before the first write; the objects inside that
namespace are validated as they are created, one request each, and a refusal
there removes the first install whole (what it wrote, its installer, its new
namespace). A change to an installed Operator is dry-run whole, and a refusal
writes nothing; one refused while writing stops only its own Operator, which
is recorded and completed or pruned by the next run.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import Action, DesiredOperator
from reconciler.cluster.ownership import Request, SyncResult, sync
from reconciler.kube.client import Kube
from reconciler.errors import BundleError, ClusterError
from reconciler.model.kube import LABEL_OPERATOR, ObjectRef, ownership_labels
from tests.e2e.support import cluster_state, wait_unchanged
from tests.support.wait import wait_until


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
    """Sync ``ops``; every other Operator is held (with none: the test's Operators are removed)."""
    others = frozenset(status_objects.read_all(kube)) - {op.name for op in ops}
    return sync(kube, Request(list(ops), dry_run=False, allow_empty=True, revision="r1", held=others))


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


def test_a_first_install_checks_what_reaches_beyond_its_new_namespace_then_creates_each_object_once(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-a")
    result = _sync(kube, _operator("first-a"))
    assert Counter(c.action.value for c in result.changes) == {"created": 10}  # the namespace and 9 objects
    # The ClusterRole acts beyond the namespace this run made: dry-run before the first write of the bundle.
    # The objects inside the new namespace are validated as they are created (a refusal removes them whole).
    dry = [p for m, p, dry in kube.calls if m == "PATCH" and dry]
    assert dry == ["/apis/rbac.authorization.k8s.io/v1/clusterroles/first-a-reader"]
    # The status CRD and object, and the instance's ApplySet parent (and its namespace), aside.
    writes = [(i, p) for i, (m, p, dry) in enumerate(kube.calls)
              if m == "PATCH" and not dry and "reconciler.dev" not in p and "reconciler-system" not in p]
    assert len(writes) == 10 and len({p for _, p in writes}) == 10  # one apply per object, none sent twice
    checked = next(i for i, (m, p, dry) in enumerate(kube.calls) if m == "PATCH" and dry)
    assert checked < min(i for i, p in writes if "/namespaces/first-a-system/" in p or "clusterroles" in p)
    assert _keys(_labelled(kube, "first-a")) == _keys(ObjectRef.of(o) for o in _operator("first-a").objects)


def test_a_first_install_into_a_namespace_that_exists_is_validated_whole_before_its_first_write(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-i")
    with _someone_elses_namespace(kube, "first-i-system"):
        kube.calls.clear()
        _sync(kube, _operator("first-i"))
        dry = [i for i, (m, p, dry) in enumerate(kube.calls) if m == "PATCH" and dry]
        writes = [i for i, (m, p, dry) in enumerate(kube.calls) if m == "PATCH" and not dry
                  and ("first-i" in p) and "reconciler.dev" not in p]
        assert len(dry) == 9 and len(writes) == 9 and max(dry) < min(writes)
        _sync(kube)


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


def test_a_first_install_refused_while_writing_is_removed_whole(recorded_k8s):
    kube, names = recorded_k8s
    names.append("first-c")
    _reconciler_in_place(kube, "first-c")
    before = cluster_state(kube, except_operator="first-c")
    broken = _operator("first-c", container="Not_A_DNS_Label")
    with pytest.raises(BundleError) as caught:
        _sync(kube, broken)
    message = caught.value.message
    assert "refused by the API server as invalid" in message and "Deployment.apps first-c-system/controller" in message
    assert "Operator first-c was a first install and was removed again (8 objects" in message, message
    # What it wrote before the Deployment, its installer and the namespace made for it are gone; its status
    # object says why, with nothing in its inventory.
    wait_unchanged(kube, before, except_operator="first-c")
    rec = status_objects.read_all(kube)["first-c"]
    assert rec.inventory == ()
    ready = next(c for c in rec.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ApplyFailed")

    fixed = _operator("first-c", configmaps=3)
    result = _sync(kube, fixed)
    assert {c.action for c in result.changes} == {Action.CREATED}
    assert _keys(_labelled(kube, "first-c")) == _keys(ObjectRef.of(o) for o in fixed.objects)


def test_a_first_install_in_a_namespace_that_exists_keeps_the_namespace_when_refused(recorded_k8s):
    """Only a namespace the refused run created is removed: one that was there before is not the run's."""
    kube, names = recorded_k8s
    names.append("first-f")
    with _someone_elses_namespace(kube, "first-f-system"):
        before = cluster_state(kube)
        with pytest.raises(BundleError):
            _sync(kube, _operator("first-f", container="Not_A_DNS_Label"))
        wait_unchanged(kube, before)


def test_a_refused_first_install_stops_only_its_own_operator_and_leaves_nothing(recorded_k8s):
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
    info = kube.resource("apps/v1", "Deployment")
    live = kube.get(info, "first-d-system", "controller")
    assert live["spec"]["template"]["spec"]["containers"][0]["name"] == "manager-two"
    assert kube.get(kube.resource("v1", "ConfigMap"), "first-d-system", "config0")["data"] == {"value": "two"}
    recorded = status_objects.read_all(kube)
    assert next(c for c in recorded["first-d"].status["conditions"] if c["type"] == "Ready")["reason"] == "Applied"
    assert _labelled(kube, "first-e") == set() and recorded["first-e"].inventory == ()


def test_an_object_refused_while_writing_stops_only_its_own_operator(recorded_k8s):
    """What validation cannot catch (here a quota admitted at dry-run, then exceeded by the writes of the run
    itself) is refused while writing: that Operator is recorded and reported, the others finish."""
    kube, names = recorded_k8s
    names += ["first-g", "first-h"]
    _sync(kube, _operator("first-h"))
    quota = kube.resource("v1", "ResourceQuota")
    with _someone_elses_namespace(kube, "first-g-system"):
        kube.apply(quota, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
            "name": "few", "namespace": "first-g-system"}, "spec": {"hard": {"configmaps": "4"}}},
            field_manager="someone", dry_run=False)
        _wait_quota_counted(kube, "first-g-system")
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
        sync(kube, Request([], dry_run=False, allow_empty=True, revision="r2",
                             held=frozenset(recorded) - {"first-g"}))
        assert _labelled(kube, "first-g") == set()


@contextlib.contextmanager
def _someone_elses_namespace(kube: Kube, name: str) -> Iterator[None]:
    """A namespace that exists before the test's runs (not made by the reconciler); deleted afterwards."""
    ns = kube.resource("v1", "Namespace")
    kube.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, field_manager="someone",
               dry_run=False)
    try:
        yield
    finally:
        kube.delete(ns, "", name)


def _reconciler_in_place(kube: Kube, refused: str) -> None:
    """What any first run makes for the reconciler itself (the status CRD, the instance's namespace and ApplySet
    parent, which lists the kind of the status object a refusal is reported on), made before a test compares
    the cluster around a refusal: no Operator's doing."""
    from reconciler.cluster.ownership.applyset import Instance, write_parent
    from reconciler.cluster.ownership.record import ensure_status_crd
    from reconciler.model.kube import API_GROUP

    ensure_status_crd(kube)
    write_parent(kube, Instance(), {ObjectRef(API_GROUP, status_objects.KIND, "", refused)})


def _wait_quota_counted(kube: Kube, namespace: str) -> None:
    """The quota controller fills in what is used; until then the API server admits nothing it governs."""
    info = kube.resource("v1", "ResourceQuota")
    wait_until(lambda: (kube.get(info, namespace, "few") or {}).get("status", {}).get("used"), "the quota counted",
               timeout=30, every=0.2)


def test_every_write_of_a_run_is_in_its_change_set(recorded_k8s):
    """What the run writes besides the bundle (status object and CRD, ApplySet parent, Events) is entered in
    the change set's bookkeeping as the API server accepts it: no write of a run goes unrecorded."""
    kube, names = recorded_k8s
    names.append("first-k")
    start = len(kube.calls)
    result = _sync(kube, _operator("first-k", configmaps=2))
    writes = [(m, p) for m, p, dry in kube.calls[start:] if m != "GET" and not dry]
    done = [c for c in result.changes if c.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED)]
    assert len(writes) == len(done) + len(result.bookkeeping), (writes, done, result.bookkeeping)
    mine = {(c.ref.kind, c.ref.name, c.detail) for c in result.bookkeeping if c.operator == "first-k"}
    assert ("Operator", "first-k", "") in mine and ("Operator", "first-k", "its status") in mine
    assert all(c.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED) for c in result.bookkeeping)
    again = _sync(kube, _operator("first-k", configmaps=2))   # a no-op writes nothing, records nothing
    assert again.bookkeeping == [] and not again.changed
    names.remove("first-k")
    others = frozenset(status_objects.read_all(kube)) - {"first-k"}
    gone = sync(kube, Request([], dry_run=False, allow_empty=True, revision="r2", held=others))
    # uninstalled: its objects pruned (changes), its status object deleted (bookkeeping)
    assert ("Operator", "first-k", Action.DELETED) in {(c.ref.kind, c.ref.name, c.action) for c in gone.bookkeeping}
