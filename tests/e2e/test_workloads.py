"""The local cluster runs workloads: kwok nodes, a scheduler and the controllers act on what is stored."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.localcluster.plane import NODE_COUNT, NODE_PREFIX
from reconciler.cluster.health.judge import Status, judge
from tests.support.wait import wait_until

pytestmark = pytest.mark.cluster


@pytest.fixture
def namespace(kube: client.ApiClient) -> str:
    name = f"w-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": name}})
    return name


def deployment(name: str, replicas: int = 2, node_selector: dict | None = None) -> dict:
    pod: dict = {"containers": [{"name": "main", "image": "registry.invalid/app:1"}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}}


def live_deployment(kube: client.ApiClient, namespace: str, name: str) -> dict:
    return kube.sanitize_for_serialization(client.AppsV1Api(kube).read_namespaced_deployment(name, namespace))


def test_the_simulated_nodes_are_ready(kube: client.ApiClient) -> None:
    nodes = client.CoreV1Api(kube).list_node().items
    ready = [n.metadata.name for n in nodes if n.metadata.name.startswith(NODE_PREFIX)
             and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
    assert len(ready) == NODE_COUNT
    # Their heartbeat is a Lease kwok renews; without one they would turn NotReady after the grace period.
    leases = client.CoordinationV1Api(kube).list_namespaced_lease("kube-node-lease").items
    assert sorted(lease.metadata.name for lease in leases if lease.spec.renew_time) == sorted(ready)


def test_a_deployment_rolls_out_to_available(kube: client.ApiClient, namespace: str) -> None:
    client.AppsV1Api(kube).create_namespaced_deployment(namespace, deployment("web"))
    wait_until(lambda: judge(live_deployment(kube, namespace, "web")).healthy, "the rollout", every=0.2)
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector="app=web").items
    assert len(pods) == 2
    assert {p.status.phase for p in pods} == {"Running"}
    assert all(p.spec.node_name.startswith(NODE_PREFIX) for p in pods)
    # The EndpointSlice controller publishes ready pods behind a Service.
    client.CoreV1Api(kube).create_namespaced_service(namespace, {
        "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    discovery = client.DiscoveryV1Api(kube)

    def ready_endpoints() -> int:
        slices = discovery.list_namespaced_endpoint_slice(
            namespace, label_selector="kubernetes.io/service-name=web").items
        return sum(1 for s in slices for e in s.endpoints or [] if e.conditions.ready)
    wait_until(lambda: ready_endpoints() == 2, "two ready endpoints", every=0.2)


def test_new_namespaces_get_a_default_service_account(kube: client.ApiClient, namespace: str) -> None:
    wait_until(lambda: any(sa.metadata.name == "default" for sa in
                           client.CoreV1Api(kube).list_namespaced_service_account(namespace).items),
               "the default ServiceAccount", every=0.2)


def test_an_unschedulable_pod_stays_pending_and_the_deployment_in_progress(
        kube: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(kube)
    apps.create_namespaced_deployment(namespace, deployment("stuck", 1, {"reconciler.test/no-such-node": "x"}))
    core = client.CoreV1Api(kube)

    def unschedulable() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="app=stuck").items
        return bool(pods) and any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                                  for c in pods[0].status.conditions or [])
    wait_until(unschedulable, "the scheduler's verdict", every=0.2)
    # The deployment controller reports the new ReplicaSet's pod in its own time; judge once it has.
    wait_until(lambda: (live_deployment(kube, namespace, "stuck").get("status") or {}).get("updatedReplicas") == 1,
               "the deployment controller's status", every=0.2)
    health = judge(live_deployment(kube, namespace, "stuck"))
    assert health.status == Status.IN_PROGRESS
    assert health.message.startswith("available replicas: 0/1")


def test_namespace_deletion_completes(kube: client.ApiClient, namespace: str) -> None:
    client.AppsV1Api(kube).create_namespaced_deployment(namespace, deployment("web", 1))
    core = client.CoreV1Api(kube)
    wait_until(lambda: core.list_namespaced_pod(namespace).items, "a pod", every=0.2)
    core.delete_namespace(namespace)

    def gone() -> bool:
        try:
            core.read_namespace(namespace)
        except ApiException as exc:
            return exc.status == 404
        return False
    wait_until(gone, "the namespace's deletion", timeout=120, every=0.2)


def test_garbage_collection_cascades(kube: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "dependent", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})
    core.delete_namespaced_config_map("owner", namespace)
    wait_until(lambda: not [c for c in core.list_namespaced_config_map(namespace).items
                            if c.metadata.name == "dependent"], "the dependent's deletion", every=0.2)
