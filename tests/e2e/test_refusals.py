"""A refused run writes nothing: the cluster before and after are equal, but for the refused Operator's status.

A repository runs two healthy Operators (plumbus from the example catalog,
and one whose webhook's server is not ready, which an older engine relaxed
on every run); a commit adds a real community bundle made bad in one way.
Whatever refuses it (the API server's validation, a guardrail, a pending
approval), every object of the kinds a run writes is read before and after:
nothing was created, changed or deleted, another Operator's webhook
included, and no installer or namespace of the refused one is left.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from reconciler import yamlio
from reconciler.kube.client import Kube
from reconciler.model.kube import LABEL_OPERATOR
from tests.hostile.test_hostile import CORPUS as HOSTILE_CORPUS
from tests.e2e.support import cluster_state, reconcile, wait_unchanged
from tests.support.repo import GitOpsRepo
from tests.unit.helpers import crd_doc, csv_doc, deployment, operator_doc, write_bundle, write_docs
from tests.support.wait import wait_until
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

CORPUS = HOSTILE_CORPUS / "ruptura-operator" / "0.6.9"
CSV = "bundles/hostile/manifests/ruptura-operator.clusterserviceversion.yaml"
CRD = "bundles/hostile/manifests/ruptura.io_rupturainstances.yaml"

CLASSES = """\
apiVersion: rukpak.io/v1
kind: ProvisionerClass
metadata: {name: allow-all}
provisioner: operators.coreos.com/operators
parameters: {approval: AllowAll}
---
apiVersion: rukpak.io/v1
kind: ProvisionerClass
metadata: {name: ask-first}
provisioner: operators.coreos.com/operators
parameters: {approval: Android}
"""


@pytest.fixture(scope="module")
def healthy(control_plane, tmp_path_factory):
    """The repository with its two healthy Operators installed; they are removed after the module."""
    if not CORPUS.is_dir():
        not_tested("corpus", f"no corpus bundle at {CORPUS}")
    from reconciler.cli.parser import main

    repo = GitOpsRepo(tmp_path_factory.mktemp("refusals") / "repo")
    repo.write("classes.yaml", CLASSES)
    _webhook_operator(repo, "guard")
    repo.commit("two healthy Operators")
    kc = str(control_plane.kubeconfig_path)
    assert main(["reconcile", str(repo.path), "--kubeconfig", kc, "--no-wait", "-q"]) in (0, 5)
    # Relaxed while the run lasted, the webhook has its bundle's policy now that it is over, ready or not.
    assert _failure_policies(Kube(control_plane.admin_client()), "guard") == ["Fail"]
    yield repo, kc
    for name in ("guard", "plumbus", "hostile", "latch"):
        (repo.path / "operators" / f"{name}.yaml").unlink(missing_ok=True)
    repo.write("reconciler.yaml", "defaultInstallNamespace: operators\nallowEmpty: true\n")
    repo.commit("remove everything")
    assert main(["reconcile", str(repo.path), "--kubeconfig", kc, "--no-wait", "-q"]) == 0


def _webhook_operator(repo: GitOpsRepo, name: str) -> None:
    """An approved Operator with a validating webhook whose Deployment is never scheduled: never ready."""
    group = f"{name}.example.com"
    rules = [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]
    dep = deployment(f"{name}-webhook", "demo-sa")
    dep["spec"]["template"]["spec"]["nodeSelector"] = {"reconciler.test/no-such-node": "x"}
    csv = csv_doc(f"{name}.v0.1.0", deployments=[dep], webhookdefinitions=[{
        "type": "ValidatingAdmissionWebhook", "generateName": f"v{name}.{group}", "webhookPath": "/v",
        "deploymentName": f"{name}-webhook", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail", "containerPort": 443, "targetPort": 9443, "rules": rules}])
    ref = write_bundle(repo.path, f"bundles/{name}", csv, crd_doc(group=group), package=name)
    write_docs(repo.path, f"operators/{name}.yaml", operator_doc(
        name, bundle={"name": name, "spec": {"refs": [ref]}}, install={"namespace": f"{name}-system"},
        provisionerClassName="allow-all"))


def _failure_policies(kube: Kube, operator: str) -> list[str]:
    info = kube.resource("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
    return [w.get("failurePolicy") for h in kube.list(info, label_selector=f"{LABEL_OPERATOR}={operator}")
            for w in h["webhooks"]]


def _edit(repo: GitOpsRepo, rel: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = repo.path / rel
    docs = yamlio.load_all(path.read_text(), str(path))
    for doc in docs:
        change(doc)
    path.write_text(yamlio.dump_all(docs))


def _deployment(csv: dict[str, Any]) -> dict[str, Any]:
    return csv["spec"]["install"]["spec"]["deployments"][0]


def _schema(crd: dict[str, Any]) -> None:
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] = "strin"


def _name(csv: dict[str, Any]) -> None:
    _deployment(csv)["name"] = "Ruptura_Operator"


def _selector(csv: dict[str, Any]) -> None:
    _deployment(csv)["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "something-else"}


def _catch_all_webhook(csv: dict[str, Any]) -> None:
    csv["spec"]["webhookdefinitions"] = [{
        "type": "ValidatingAdmissionWebhook", "generateName": "vall.ruptura.example.com",
        "deploymentName": "ruptura-operator", "containerPort": 443, "targetPort": 9443, "webhookPath": "/validate",
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": ["CREATE"]}]}]


CASES = {
    # what is made bad: (file, change, provisioner class, exit code, a fragment of what the run says)
    "schema": (CRD, _schema, "allow-all", 2, "Unsupported value: \"strin\""),
    "name": (CSV, _name, "allow-all", 2, "Ruptura_Operator"),
    "selector": (CSV, _selector, "allow-all", 2, "`selector` does not match template `labels`"),
    "guardrail": (CSV, _catch_all_webhook, "allow-all", 2, "policy no-catch-all-webhooks"),
    "approval": (CSV, lambda csv: None, "ask-first", 4, "hostile"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_bundle_leaves_the_cluster_as_it_was(healthy, control_plane, case, capsys):
    repo, kc = healthy
    kube = Kube(control_plane.admin_client())
    rel, change, klass, code, says = CASES[case]
    shutil.copytree(CORPUS, repo.path / "bundles" / "hostile")
    try:
        want = "ClusterServiceVersion" if rel == CSV else "CustomResourceDefinition"
        _edit(repo, rel, lambda doc: change(doc) if doc.get("kind") == want else None)
        write_docs(repo.path, "operators/hostile.yaml", operator_doc(
            "hostile", bundle={"name": "hostile", "spec": {"refs": ["file://bundles/hostile"]}},
            install={"namespace": "hostile-system"}, provisionerClassName=klass))
        repo.commit(f"add a bundle made bad: {case}")
        before = cluster_state(kube, except_operator="hostile")

        run = reconcile(repo, Path(kc), "--no-wait", capsys=capsys)

        assert run.code == code, run.out + run.err
        assert says in run.out + run.err, run.out + run.err
        wait_unchanged(kube, before, except_operator="hostile")
    finally:
        shutil.rmtree(repo.path / "bundles" / "hostile")
        (repo.path / "operators" / "hostile.yaml").unlink(missing_ok=True)
        repo.commit(f"withdraw the bad bundle: {case}")
        assert reconcile(repo, Path(kc), "--no-wait", capsys=capsys).code in (0, 5)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_webhook_relaxed_by_a_run_that_is_stopped_gets_its_policy_back(healthy, control_plane, how, capsys):
    """SIGTERM interrupts the run, which restores the policy on its way out; after kill -9 nothing but the next
    run restores it, and it does."""
    import os
    import signal
    import subprocess
    import sys
    import time

    repo, kc = healthy
    kube = Kube(control_plane.admin_client())
    _webhook_operator(repo, "latch")
    repo.commit("an Operator whose webhook server never gets ready")
    env = {**{k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")},
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.Popen([sys.executable, "-m", "reconciler", "reconcile", str(repo.path), "--kubeconfig", kc,
                            "--timeout", "10m", "-q"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def relaxed() -> bool:
            assert run.poll() is None, run.stderr.read().decode() if run.stderr else ""
            return _failure_policies(kube, "latch") == ["Ignore"]

        wait_until(relaxed, "the webhook written relaxed (the run then waits for health)", timeout=120, every=0.2)
        time.sleep(0.5)   # into the wait for health
        os.killpg(run.pid, getattr(signal, how))
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    if how == "SIGTERM":
        assert run.returncode != 0 and "interrupted" in err.decode(), err.decode()
        assert _failure_policies(kube, "latch") == ["Fail"]
    else:
        time.sleep(2)
        assert _failure_policies(kube, "latch") == ["Ignore"]   # nothing but a run restores it

        again = reconcile(repo, Path(kc), "--no-wait", capsys=capsys)

        assert again.code in (0, 5), again.out + again.err
        assert _failure_policies(kube, "latch") == ["Fail"]
        assert "latch: ValidatingWebhookConfiguration" in again.out and "applied again as the run ended" in again.out
    (repo.path / "operators" / "latch.yaml").unlink()
    repo.commit("withdraw latch")
    assert reconcile(repo, Path(kc), "--no-wait", capsys=capsys).code in (0, 5)
