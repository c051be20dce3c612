"""The local control plane is a real, authorising Kubernetes API server."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.localcluster import (
    KUBERNETES_VERSION,
    ControlPlane,
    cluster_down,
    cluster_kubeconfig,
    cluster_up,
    ensure_binaries,
)
from reconciler.errors import ControlPlaneError
from tests.support.wait import wait_until

CONFIGMAP_WRITER_RULES = [{"apiGroups": [""], "resources": ["configmaps"],
                           "verbs": ["create", "get"]}]


@pytest.fixture
def namespace(kube: client.ApiClient) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": name}})
    return name


def create_configmap(api_client: client.ApiClient, namespace: str, name: str) -> client.V1ConfigMap:
    return client.CoreV1Api(api_client).create_namespaced_config_map(
        namespace, {"metadata": {"name": name}, "data": {"key": "value"}})


def grant_configmap_writer(kube: client.ApiClient, namespace: str, subject: dict) -> None:
    rbac = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "configmap-writer"},
                                            "rules": CONFIGMAP_WRITER_RULES})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "configmap-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "configmap-writer"},
        "subjects": [subject],
    })


def forbidden(exc: BaseException) -> bool:
    """A 403: what a write meets until an RBAC change reaches the authoriser (asynchronously)."""
    return isinstance(exc, ApiException) and exc.status == 403


def assert_forbidden(action: Callable[[], None]) -> None:
    with pytest.raises(ApiException) as caught:
        action()
    assert caught.value.status == 403


def test_server_reports_the_pinned_version(kube: client.ApiClient) -> None:
    assert client.VersionApi(kube).get_code().git_version == KUBERNETES_VERSION


def test_admin_creates_a_namespace_and_a_configmap(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    name = f"admin-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    create_configmap(kube, name, "settings")
    assert core.read_namespaced_config_map("settings", name).data == {"key": "value"}


def test_client_certificate_identity_is_bound_by_rbac(
        control_plane: ControlPlane, kube: client.ApiClient, namespace: str) -> None:
    with control_plane.client_cert_identity("alice", ["team-a"]) as alice:
        review = client.AuthenticationV1Api(alice).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review.status.user_info.username == "alice"
        assert "team-a" in review.status.user_info.groups

        assert_forbidden(lambda: create_configmap(alice, namespace, "by-alice"))
        grant_configmap_writer(kube, namespace, {"kind": "Group", "name": "team-a",
                                                 "apiGroup": "rbac.authorization.k8s.io"})
        wait_until(lambda: create_configmap(alice, namespace, "by-alice"), "alice's grant to reach the authoriser",
                   ignoring=forbidden)


def test_service_account_token_is_bound_by_rbac(
        control_plane: ControlPlane, kube: client.ApiClient, namespace: str) -> None:
    with control_plane.service_account_client(namespace, "deployer") as deployer:
        assert_forbidden(lambda: create_configmap(deployer, namespace, "by-deployer"))
        grant_configmap_writer(kube, namespace, {"kind": "ServiceAccount", "name": "deployer",
                                                 "namespace": namespace})
        wait_until(lambda: create_configmap(deployer, namespace, "by-deployer"),
                   "the deployer's grant to reach the authoriser", ignoring=forbidden)


def test_pods_are_admitted_with_the_namespace_default_service_account(
        kube: client.ApiClient, namespace: str) -> None:
    """ServiceAccount admission is on: the serviceaccounts controller creates each namespace's "default"."""
    core = client.CoreV1Api(kube)
    body = {"metadata": {"name": "idle"}, "spec": {"containers": [{"name": "main", "image": "registry.invalid/idle:1"}]}}
    # the ServiceAccount may lag the namespace by a moment: until then the pod is refused naming it
    pod = wait_until(lambda: core.create_namespaced_pod(namespace, body), "the default ServiceAccount to admit a pod",
                     timeout=30, ignoring=lambda exc: forbidden(exc) and "serviceaccount" in (exc.body or ""))
    assert pod.spec.service_account_name == "default"


def test_stop_leaves_no_process_or_port_behind(tmp_path: Path, control_plane: ControlPlane) -> None:
    with ControlPlane(tmp_path, ensure_binaries()) as plane:
        pids, ports = dict(plane.pids), dict(plane.ports)
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
        assert len(ports) == 5
        with plane.admin_client() as admin:
            assert client.VersionApi(admin).get_code().git_version == KUBERNETES_VERSION
    assert_stopped(pids, ports)


def test_detached_cluster_lifecycle(tmp_path: Path, control_plane: ControlPlane) -> None:
    state_dir = tmp_path / "cluster"
    messages: list[str] = []
    first = cluster_up(state_dir, log=messages.append)
    try:
        assert cluster_kubeconfig(state_dir) == first.kubeconfig_path
        again = cluster_up(state_dir, log=messages.append)
        assert again.pids == first.pids
        assert "already running" in messages[-1]

        for pid in first.pids.values():  # a crash, or a reboot
            os.killpg(pid, signal.SIGKILL)
        restarted = cluster_up(state_dir, log=messages.append)
        assert set(restarted.pids.values()).isdisjoint(first.pids.values())
        assert_stopped(first.pids, {k: v for k, v in first.ports.items()
                                    if v not in restarted.ports.values()})
    finally:
        cluster_down(state_dir, log=messages.append)
    assert_stopped(restarted.pids, restarted.ports)
    assert not state_dir.exists()
    with pytest.raises(ControlPlaneError, match="cluster up"):
        cluster_kubeconfig(state_dir)


def running(pid: int) -> bool:
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())  # a zombie's is empty
    except FileNotFoundError:
        return False


def assert_stopped(pids: dict[str, int], ports: dict[str, int]) -> None:
    for name, pid in pids.items():
        assert not running(pid), f"{name} (pid {pid}) is still running"
    for name, port in ports.items():
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"{name} port {port} still accepts"
        with socket.socket() as server:  # a new server could listen there, as etcd/Go would
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))


def test_a_webhook_call_never_leaves_loopback(kube: client.ApiClient, namespace: str) -> None:
    """The service range is inside 127.0.0.0/8: a webhook's Service address is dialled on this machine."""
    core = client.CoreV1Api(kube)
    svc = core.create_namespaced_service(namespace, {
        "metadata": {"name": "hook"},
        "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app": "nothing"}}})
    assert svc.spec.cluster_ip.startswith("127.0.100."), svc.spec.cluster_ip
    name = f"deny-{namespace}"
    client.AdmissionregistrationV1Api(kube).create_validating_webhook_configuration({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "deny.reconciler.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"service": {"namespace": namespace, "name": "hook", "port": 443}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}]}]})
    try:
        def refused() -> str:
            try:
                create_configmap(kube, namespace, f"cm-{uuid.uuid4().hex[:6]}")
            except ApiException as exc:
                return f"{exc.status}: {exc.body or ''}"
            return ""

        # the webhook reaches the admission chain asynchronously
        message = wait_until(refused, "the webhook to be called", timeout=30, every=0.2)
        assert "failed calling webhook" in message, message
        # Refused on this machine: the address dialled is the Service's loopback cluster IP.
        assert svc.spec.cluster_ip in message and "connection refused" in message, message
    finally:
        client.AdmissionregistrationV1Api(kube).delete_validating_webhook_configuration(name)


def test_a_named_cluster_is_private_to_its_name(control_plane: ControlPlane) -> None:
    """`cluster up --name` starts a cluster of its own: `down` of another name (or of the default) leaves it."""
    import subprocess
    import sys

    name, other = f"test-{os.getpid()}", f"other-{os.getpid()}"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "reconciler", "cluster", *args], capture_output=True,
                              text=True, timeout=300)

    up = cli("up", "--name", name)
    assert up.returncode == 0, up.stderr
    try:
        path = Path(cli("kubeconfig", "--name", name).stdout.strip())
        assert path.parent.name == name and path.is_file()
        down = cli("down", "--name", other)
        assert down.returncode == 0 and "no local cluster was running" in down.stdout
        plane = ControlPlane.attach(path.parent)
        assert plane.healthy()
        assert cli("kubeconfig", "--name", other).returncode == 2
        bad = cli("up", "--name", "Not_A_Name")
        assert bad.returncode == 64 and "a cluster name is lowercase letters" in bad.stderr
    finally:
        assert cli("down", "--name", name).returncode == 0
    assert_stopped(plane.pids, plane.ports)
