"""kube-apiserver stops in the middle of a reconcile of several real operators, then comes back.

The failing run must end with the cluster's exit code (3) and one error line,
no traceback; the next run, once the server is back, must converge: every
Operator's inventory equal to what carries its owner label, nothing desired
missing (a further run changes nothing), nothing orphaned. Under
``reconciler watch`` the loop must survive the outage, report it, and
converge on a change made while the server was away.

The module runs its own control plane, since it stops and restarts its API
server. The outage falls at an exact point: the CLI talks to the server
through a loopback proxy that, after forwarding the third write of a
bundle's CRD (namespaces, installer accounts and the inventories are written
by then; most bundle objects are not), stops kube-apiserver before answering
and then refuses every connection.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.kube.client import Kube
from reconciler.model.kube import LABEL_OPERATOR
from tests.e2e.faultproxy import FaultProxy
from tests.e2e.support import get
from tests.support.repo import GitOpsRepo
from tests.support.wait import wait_until
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "operators"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus/operators")
# Real community bundles, installed next to the example's plumbus (which comes from its catalog).
BUNDLES = {"ruptura": "ruptura-operator/0.6.9", "rabbitmq-topology": "rabbitmq-messaging-topology-operator/1.19.3"}
OPERATORS = ("plumbus", *BUNDLES)
STATUS = "reconciler.dev/v1alpha1"
CRDS_BEFORE_OUTAGE = 3  # of 15 the three bundles carry

ALLOW_ALL = """\
apiVersion: rukpak.io/v1
kind: ProvisionerClass
metadata:
  name: restart-allow-all
provisioner: operators.coreos.com/operators
parameters:
  approval: AllowAll
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binaries = ensure_binaries(log=print)
    plane = ControlPlane(tmp_path_factory.mktemp("restart-plane"), binaries)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def declaration(name: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": name},
        "spec": {"bundle": {"name": name, "spec": {"refs": [f"file://bundles/{name}"]}},
                 "install": {"namespace": f"{name}-system"}, "provisionerClassName": "restart-allow-all"}})


def make_repo(path: Path) -> GitOpsRepo:
    for source in BUNDLES.values():
        if not (CORPUS / source).is_dir():
            not_tested("corpus", f"no corpus bundle {source}")
    repo = GitOpsRepo(path)
    # Each test makes its own checkout of one repository, and the module's cluster carries installs over.
    repo.write("reconciler.yaml", "repository: example.test/restart\n")
    repo.write("classes/allow-all.yaml", ALLOW_ALL)
    for name, source in BUNDLES.items():
        shutil.copytree(CORPUS / source, path / "bundles" / name)
        repo.write(f"operators/{name}.yaml", declaration(name))
    repo.commit("three operators")
    return repo


def proxy_kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
        "clusters": [{"name": "proxy", "cluster": {"server": url}}],
        "users": [{"name": "proxy", "user": {}}],
        "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}]}))
    return path


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    out["PYTHONPATH"] = str(ROOT)
    return out


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], env=env(), capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def is_write(method: str, path: str) -> bool:
    return method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun" not in path


def inventory(kube: Kube, operator: str) -> set[tuple[str, str, str, str]]:
    obj = get(kube, STATUS, "Operator", operator) or {}
    return {(r.get("group", ""), r["kind"], r.get("namespace", ""), r["name"])
            for r in (obj.get("status") or {}).get("inventory") or []}


def labelled(kube: Kube, operator: str, kinds: set[tuple[str, str]]) -> set[tuple[str, str, str, str]]:
    """Every object of ``kinds`` that carries ``operator``'s owner label."""
    found = set()
    for group, kind in kinds:
        info = next((kube.resource(f"{group}/{v}" if group else v, kind) for v in ("v1", "v1beta1", "v1alpha1")
                     if kube.resource(f"{group}/{v}" if group else v, kind)), None)
        assert info is not None, f"{group}/{kind} is not served"
        for item in kube.list(info, label_selector=f"{LABEL_OPERATOR}={operator}"):
            meta = item["metadata"]
            found.add((group, kind, meta.get("namespace", ""), meta["name"]))
    return found


BASE_KINDS = {("apiextensions.k8s.io", "CustomResourceDefinition"), ("rbac.authorization.k8s.io", "ClusterRole"),
              ("rbac.authorization.k8s.io", "ClusterRoleBinding"), ("rbac.authorization.k8s.io", "Role"),
              ("rbac.authorization.k8s.io", "RoleBinding"), ("", "ServiceAccount"), ("", "Service"),
              ("", "Secret"), ("apps", "Deployment"),
              ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
              ("admissionregistration.k8s.io", "MutatingWebhookConfiguration")}


def assert_converged(kube: Kube, operators: tuple[str, ...], where: str) -> None:
    """Each Operator's inventory is what carries its label (nothing orphaned, nothing untracked)."""
    for operator in operators:
        inv = inventory(kube, operator)
        assert inv, f"{where}: Operator {operator} has an empty inventory"
        kinds = BASE_KINDS | {(g, k) for g, k, _, _ in inv}
        assert labelled(kube, operator, kinds) == inv, f"{where}: {operator}'s inventory differs from its labels"


# After a restart the cluster's own controllers (and kwok, which plays the kubelet) take a while, varying from
# seconds to minutes, to resume their watches; health then is theirs to restore. So the runs after the outage
# judge health once (--no-wait) and the test checks what the reconciler owns: objects, labels, inventories.
def test_apiserver_stops_mid_reconcile_then_the_next_run_converges(plane, tmp_path):
    repo = make_repo(tmp_path / "repo")
    kube = Kube(plane.admin_client())
    with FaultProxy(plane.kubeconfig_path) as proxy:
        crds = []

        def third_bundle_crd(method: str, path: str) -> bool:
            if is_write(method, path) and "/customresourcedefinitions/" in path and "reconciler.dev" not in path:
                crds.append(path)
            return len(crds) >= CRDS_BEFORE_OUTAGE

        proxy.outage_after(third_bundle_crd, plane.stop_apiserver)
        failed = cli("reconcile", str(repo.path), "--kubeconfig",
                     str(proxy_kubeconfig(tmp_path / "proxy.kubeconfig", proxy.url)))
        assert proxy.down.is_set(), f"the run ended before the outage: {failed.stderr}"
    try:
        assert failed.returncode == 3, failed.stderr
        assert "Traceback" not in failed.stderr, failed.stderr
        errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "cannot reach the API server" in errors[0], failed.stderr
        assert [line for line in failed.stderr.splitlines() if not line.startswith(("error:", "  hint:"))] == [], \
            failed.stderr
    finally:
        plane.start_apiserver()

    # Some objects were written before the outage: the interrupted run recorded its intent first.
    assert any(inventory(kube, op) for op in OPERATORS)
    again = cli("reconcile", str(repo.path), "--kubeconfig", str(plane.kubeconfig_path), "--no-wait")
    assert again.returncode == 0, again.stderr
    assert_converged(kube, OPERATORS, "after the server came back")
    steady = cli("reconcile", str(repo.path), "--kubeconfig", str(plane.kubeconfig_path), "--no-wait")
    assert steady.returncode == 0, steady.stderr
    assert "Summary: 0 created, 0 configured" in steady.stdout and " 0 deleted" in steady.stdout, steady.stdout

    # Removal converges too: nothing of the removed operator is left with its label.
    repo.remove("operators/ruptura.yaml")
    repo.commit("remove ruptura")
    removed = cli("reconcile", str(repo.path), "--kubeconfig", str(plane.kubeconfig_path), "--no-wait")
    assert removed.returncode == 0, removed.stderr
    assert get(kube, STATUS, "Operator", "ruptura") is None
    assert labelled(kube, "ruptura", BASE_KINDS - {("apiextensions.k8s.io", "CustomResourceDefinition")}) == set()
    assert_converged(kube, ("plumbus", "rabbitmq-topology"), "after the removal")


class Lines:
    """Collects a process's stderr lines in a thread, so the test can wait for one."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, *texts: str, start: int = 0, timeout: float = 240.0) -> int:
        """The index of the first line from ``start`` on that contains all of ``texts``."""
        def found() -> list[int]:
            with self._lock:
                return [i for i in range(start, len(self.lines)) if all(t in self.lines[i] for t in texts)][:1]

        return wait_until(found, f"a line with {texts!r}", timeout=timeout,
                          diagnose=lambda: "\n".join(self.lines[-40:]))[0]


def test_watch_survives_an_apiserver_outage_and_converges_after_it(plane, tmp_path):
    repo = make_repo(tmp_path / "repo")
    repo.remove("operators/rabbitmq-topology.yaml")
    repo.commit("two operators")
    kube = Kube(plane.admin_client())
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", "watch", str(repo.path), "--kubeconfig",
                             str(plane.kubeconfig_path), "--interval", "2", "--debounce", "0.2",
                             "--log-level", "info"],
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    lines = Lines(proc)
    try:
        first = lines.wait_for("applied ", "created")
        assert_converged(kube, ("plumbus", "ruptura"), "after the first step of watch")
        plane.stop_apiserver()
        try:
            # A change made while the server is away: the loop tries, reports the cluster error, keeps running.
            repo.write("operators/rabbitmq-topology.yaml", declaration("rabbitmq-topology"))
            failed = lines.wait_for("failed (attempt", "cannot reach the API server", start=first)
            assert proc.poll() is None, "the loop stopped on a cluster error"
        finally:
            plane.start_apiserver()
        applied = lines.wait_for("applied ", "created", start=failed)
        assert proc.poll() is None
        assert_converged(kube, OPERATORS, "after the outage under watch")
        # Nothing desired is missing: a later drift correction finds nothing to change.
        lines.wait_for("is applied: no changes", start=applied)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert "Traceback" not in "\n".join(lines.lines), "\n".join(lines.lines)
