"""The cluster stage's no-op path against a real API server: few reads, no writes, and no drift missed."""

from __future__ import annotations

import copy
import re
from collections import Counter

import pytest

from reconciler.cluster.apply import ANNOTATION_DIGEST, Action, DesiredOperator
from reconciler.cluster.ownership import Request, SyncResult, sync
from reconciler.kube.client import Kube
from reconciler.model.kube import ownership_labels


pytestmark = pytest.mark.cluster


def _operator(name: str, *, data: str = "one", replicas: int = 1) -> DesiredOperator:
    ns = f"{name}-system"
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller", "namespace": ns}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "controller", "namespace": ns},
         "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": {
                      "serviceAccountName": "controller",
                      "containers": [{"name": "manager", "image": "example.invalid/manager:1", "args": ["--a"],
                                      "ports": [{"containerPort": 8443, "name": "metrics"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "namespace": ns},
         "spec": {"selector": {"app": name}, "ports": [{"port": 8443, "targetPort": 8443}]}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{name}-reader"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
    ]
    objs += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"config{i}", "namespace": ns},
              "data": {"value": data}} for i in range(5)]
    for o in objs:
        o["metadata"]["labels"] = {**o["metadata"].get("labels", {}), **ownership_labels(name)}
    return DesiredOperator(name, tuple(objs), (ns,), {"package": name}, {"name": f"{name}.v1"})


def _sync(kube: Kube, *ops: DesiredOperator) -> SyncResult:
    return sync(kube, Request(list(ops), dry_run=False, allow_empty=True, revision="r1"))


def _actions(result: SyncResult) -> Counter[str]:
    return Counter(c.action.value for c in result.changes)


def _configmap(kube: Kube, name: str, ns: str) -> dict:
    info = kube.resource("v1", "ConfigMap")
    obj = kube.get(info, ns, name)
    assert obj is not None
    return obj


def test_a_noop_sync_lists_each_kind_once_and_writes_nothing(recorded_k8s):
    kube, names = recorded_k8s
    names += ["fast-a", "fast-b"]
    ops = [_operator("fast-a"), _operator("fast-b")]
    first = _sync(kube, *ops)
    assert _actions(first)["created"] == 20  # 2 namespaces + 2 x 9 objects
    live = _configmap(kube, "config0", "fast-a-system")
    assert live["metadata"]["annotations"][ANNOTATION_DIGEST].startswith("sha256:")
    kube.calls.clear()
    second = _sync(kube, *ops)
    assert _actions(second) == {"unchanged": 18}
    verbs = kube.verbs()
    assert set(verbs) == {"GET"}, verbs  # no dry-run, no write
    kinds = "configmaps|deployments|services|serviceaccounts|clusterroles"
    assert [p for _, p, _ in kube.calls if re.search(rf"/({kinds})/[^/]+$", p)] == []  # no object read alone
    # with no Operator needing an installer, one labelled LIST looks for installers left over
    lists = [p for _, p, _ in kube.calls if re.search(rf"/({kinds})$", p) and "/reconciler-system/" not in p]
    assert len(lists) == len(set(lists)) == 5  # one LIST per kind for 18 objects


def test_a_field_changed_by_another_client_is_put_back(recorded_k8s):
    kube, names = recorded_k8s
    names.append("fast-c")
    op = _operator("fast-c")
    _sync(kube, op)
    info = kube.resource("v1", "ConfigMap")
    kube.request("PATCH", info.path("fast-c-system", "config1"), query=[("fieldManager", "kubectl-edit")],
                 body={"data": {"value": "edited"}}, content_type="application/merge-patch+json")
    kube.request("PATCH", info.path("fast-c-system", "config2"), query=[("fieldManager", "kubectl-label")],
                 body={"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
                 content_type="application/merge-patch+json")
    result = _sync(kube, op)
    changed = {c.ref.name: c for c in result.changes if c.action == Action.CONFIGURED}
    assert set(changed) == {"config1", "config2"}
    assert changed["config1"].diff == ("data.value: edited -> one",)
    assert changed["config2"].diff == ("metadata.labels.app.kubernetes.io/managed-by: added reconciler",)
    assert _configmap(kube, "config1", "fast-c-system")["data"] == {"value": "one"}
    assert _configmap(kube, "config2", "fast-c-system")["metadata"]["labels"]["app.kubernetes.io/managed-by"] \
        == "reconciler"
    # The next run finds no drift: its status says so once (ComponentsDiverge turns False, an Event) ...
    assert _actions(_sync(kube, op)) == {"unchanged": 9}
    kube.calls.clear()
    # ... and the run after that reads and writes nothing.
    assert _actions(_sync(kube, op)) == {"unchanged": 9}
    assert set(kube.verbs()) == {"GET"}


def test_a_changed_declaration_is_dry_run_and_applied_and_nothing_else_is(recorded_k8s):
    kube, names = recorded_k8s
    names.append("fast-d")
    _sync(kube, _operator("fast-d"))
    before = _configmap(kube, "config0", "fast-d-system")["metadata"]["annotations"][ANNOTATION_DIGEST]
    kube.calls.clear()
    result = _sync(kube, _operator("fast-d", replicas=2))
    assert _actions(result) == {"unchanged": 8, "configured": 1}
    dep = next(c for c in result.changes if c.action == Action.CONFIGURED)
    assert dep.ref.kind == "Deployment" and dep.diff == ("spec.replicas: 1 -> 2",)
    assert kube.verbs()["PATCH dry-run"] == 1 and kube.verbs()["PATCH"] == 1
    assert _configmap(kube, "config0", "fast-d-system")["metadata"]["annotations"][ANNOTATION_DIGEST] == before


def test_an_object_applied_without_a_digest_is_recorded_once_then_skipped(recorded_k8s):
    kube, names = recorded_k8s
    names.append("fast-e")
    op = _operator("fast-e")
    _sync(kube, op)
    info = kube.resource("v1", "ConfigMap")
    plain = copy.deepcopy(next(o for o in op.objects if o["metadata"]["name"] == "config3"))
    kube.request("PATCH", info.path("fast-e-system", "config3"), query=[("fieldManager", "reconciler")],
                 body={"metadata": {"annotations": {ANNOTATION_DIGEST: None}}},
                 content_type="application/merge-patch+json")
    assert ANNOTATION_DIGEST not in (_configmap(kube, "config3", "fast-e-system")["metadata"].get("annotations") or {})
    kube.calls.clear()
    result = _sync(kube, op)
    assert _actions(result) == {"unchanged": 9}  # nothing the user sees changed ...
    assert kube.verbs()["PATCH"] == 1            # ... but the digest is written, once
    assert _configmap(kube, "config3", "fast-e-system")["data"] == plain["data"]
    kube.calls.clear()
    _sync(kube, op)
    assert set(kube.verbs()) == {"GET"}


def test_judging_health_lists_each_kind_once_instead_of_reading_each_object(recorded_k8s):
    from reconciler.cluster.health.wait import wait_healthy

    kube, names = recorded_k8s
    names += ["fast-h1", "fast-h2"]
    ops = [_operator("fast-h1"), _operator("fast-h2")]
    _sync(kube, *ops)
    kube.calls.clear()
    health = wait_healthy(kube, {op.name: op.objects for op in ops}, timeout=0)
    kinds = "configmaps|deployments|services|serviceaccounts|clusterroles"
    assert [p for _, p, _ in kube.calls if re.search(rf"/({kinds})/[^/]+$", p)] == []  # no object read alone
    lists = [p for _, p, _ in kube.calls if re.search(rf"/({kinds})$", p)]
    assert len(lists) == len(set(lists)) == 5
    for op in ops:
        components = health[op.name].components
        assert len(components) == 9 and all(c.uid for c in components)  # every one was found and judged
        configmaps = [c for c in components if c.ref.kind == "ConfigMap"]
        assert configmaps and all(c.health.healthy for c in configmaps)


def test_webhooks_that_share_a_service_ask_for_its_endpoints_once(recorded_k8s):
    from reconciler.cluster.health.wait import soften_webhooks

    kube, _ = recorded_k8s
    service = {"namespace": "fast-wh-system", "name": "webhook-service", "path": "/validate"}
    configs = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": f"fast-wh-{i}"},
                "webhooks": [{"name": f"w{j}.example.com", "clientConfig": {"service": service},
                              "failurePolicy": "Fail"} for j in range(3)]}
               for i, kind in enumerate(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])]
    kube.calls.clear()
    softened, refs = soften_webhooks(kube, configs)
    assert len(refs) == 2 and all(h["failurePolicy"] == "Ignore" for o in softened for h in o["webhooks"])
    assert [p for _, p, _ in kube.calls if p.endswith("/endpointslices")] == [
        "/apis/discovery.k8s.io/v1/namespaces/fast-wh-system/endpointslices"]
