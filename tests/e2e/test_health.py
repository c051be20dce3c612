"""Health after applying, end to end: Ready means the components work, not only that they were applied."""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from pathlib import Path

import pytest

from reconciler.cli.parser import main
from reconciler.kube.client import Kube
from tests.docblocks import ROOT, assert_printed, indented_block
from tests.unit.helpers import crd_doc, csv_doc, deployment, operator_doc, write_bundle, write_docs
from tests.support.repo import GitOpsRepo

from .support import approving_everything, get, reconcile
from tests.support.wait import wait_until
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

OPERATOR = "reconciler.dev/v1alpha1"


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture
def repo(tmp_path: Path, kc: Path, capsys: pytest.CaptureFixture[str]):
    """An empty repository of directly referenced bundles; afterwards everything it installed is removed."""
    # Health is under test here, not approval: every bundle of these repositories is approved.
    root = approving_everything(tmp_path / "repo")
    yield root
    for p in (root / "operators").glob("*.yaml"):
        p.unlink()
    run = reconcile(root, kc, "--timeout", "60s", capsys=capsys)
    assert run.code == 0, run.out + run.err


def declare(root: Path, name: str, ref: str, namespace: str | None = None) -> None:
    spec: dict = {"bundle": {"name": name, "spec": {"refs": [ref]}}}
    if namespace:
        spec["install"] = {"namespace": namespace}
    write_docs(root, f"operators/{name}.yaml", operator_doc(name, **spec))


def conditions(k8s: Kube, name: str) -> dict[str, dict]:
    status = get(k8s, OPERATOR, "Operator", name)["status"]
    return {c["type"]: c for c in status["conditions"]}


def registry_bundle(root: Path, name: str, *, node_selector: dict | None = None, owned_crd: dict | None = None) -> str:
    dep = deployment("demo-controller", "demo-sa")
    if node_selector:
        dep["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    extra = {"displayName": f"Demo {name}", "description": "A demo operator."}
    objects = []
    if owned_crd is not None:
        spec = owned_crd["spec"]
        extra["customresourcedefinitions"] = {"owned": [{
            "name": owned_crd["metadata"]["name"], "kind": spec["names"]["kind"], "version": "v1"}]}
        objects.append(owned_crd)
    return write_bundle(root, f"bundles/{name}", csv_doc(f"{name}.v0.1.0", deployments=[dep], **extra), *objects,
                        package=name)


def test_a_broken_deployment_is_not_ready_and_does_not_block_another_operator(repo, kc, k8s, uid, capsys):
    good, bad = f"good-{uid}", f"bad-{uid}"
    crd = crd_doc(plural="gizmos", group=f"g{uid}.example.com")
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] = True
    declare(repo, good, registry_bundle(repo, good, owned_crd=crd), f"ns-{good}")
    declare(repo, bad, registry_bundle(repo, bad, node_selector={"reconciler.test/no-such-node": "x"}),
            f"ns-{bad}")

    run = reconcile(repo, kc, "--timeout", "20s", capsys=capsys)

    assert run.code == 5, run.out + run.err
    assert f"  {good}: healthy" in run.out
    assert f"  {bad}: not healthy after 2" in run.out
    assert f"Deployment.apps ns-{bad}/demo-controller: InProgress: pod demo-controller-" in run.out
    assert "cannot be scheduled (Unschedulable): 0/3 nodes are available" in run.out, run.out

    def normalise(text: str) -> str:   # the names made unique here, the pod's hash, the counts and seconds
        text = re.sub(r"pod \S+-[a-z0-9]+-[a-z0-9]{5} ", "pod POD ", text.replace(f"-{uid}", ""))
        return re.sub(r"after \d+s", "after Ns", re.sub(r"\(\d+ components?, \d+s\)", "(N components, Ns)", text))
    assert_printed(indented_block("docs/health.md", "Health:"), run.out, normalise=normalise, section=True)

    # The healthy one is Ready, and its Deployment really is available.
    dep = get(k8s, "apps/v1", "Deployment", "demo-controller", f"ns-{good}")
    assert dep["status"]["availableReplicas"] == 1
    ready = conditions(k8s, good)
    assert (ready["Ready"]["status"], ready["Ready"]["reason"]) == ("True", "Healthy")
    assert ready["Degraded"]["status"] == "False"
    status = get(k8s, OPERATOR, "Operator", good)["status"]
    assert status["metadata"]["displayName"] == f"Demo {good}"
    assert status["metadata"]["apis"]["provides"] == [{"group": f"g{uid}.example.com", "version": "v1",
                                                       "kind": "Widget", "plural": "gizmos", "singular": "gizmo"}]
    refs = {(r["kind"], r["name"]): r for r in status["components"]["refs"]}
    assert refs[("Deployment", "demo-controller")]["uid"] == dep["metadata"]["uid"]
    assert "conditions" not in refs[("Deployment", "demo-controller")]
    assert all(c["observedGeneration"] >= 1 for c in status["conditions"])

    # The broken one says which component, why, and for how long.
    broken = conditions(k8s, bad)
    assert (broken["Ready"]["status"], broken["Ready"]["reason"]) == ("False", "HealthTimeout")
    assert broken["Ready"]["message"].startswith(f"Deployment.apps ns-{bad}/demo-controller: pod demo-controller-")
    assert "cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node " \
           "affinity/selector" in broken["Ready"]["message"], broken["Ready"]["message"]
    assert "; available replicas: 0/1" in broken["Ready"]["message"]
    assert "not healthy after" in broken["Ready"]["message"]
    assert broken["Degraded"]["status"] == "True"
    ref = next(r for r in get(k8s, OPERATOR, "Operator", bad)["status"]["components"]["refs"]
               if r["kind"] == "Deployment")
    assert {"type": "Available", "status": "False"}.items() <= ref["conditions"][0].items()

    # `reconciler status` shows both, one line each.
    out = io.StringIO()
    assert main(["status", str(repo), "--kubeconfig", str(kc), "-o", "json"], out=out) == 0
    rows = {r["name"]: r for r in json.loads(out.getvalue())["operators"]}
    assert (rows[good]["ready"], rows[good]["lock"]) == ("True", "in sync")
    assert (rows[bad]["ready"], rows[bad]["reason"]) == ("False", "HealthTimeout")
    out = io.StringIO()
    assert main(["status", "--kubeconfig", str(kc)], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:7] == ["INSTANCE", "NAME", "NAMESPACE", "PACKAGE", "VERSION", "READY", "STATUS"]
    assert any(bad in line.split() and "HealthTimeout" in line.split() for line in lines)

    # Fixed in the repository, it becomes Ready on the next reconcile, and the transition is recorded.
    # Meanwhile a user created a custom resource of the good one's CRD, which is not ready yet.
    gizmos = k8s.resource(f"g{uid}.example.com/v1", "Widget")
    k8s.apply(gizmos, {"apiVersion": f"g{uid}.example.com/v1", "kind": "Widget",
                       "metadata": {"name": "g1", "namespace": "default"},
                       "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]}},
              field_manager="user", dry_run=False)
    fixed = write_bundle(repo, f"bundles/{bad}-fixed", csv_doc(f"{bad}.v0.1.1", version="0.1.1"), package=bad)
    declare(repo, bad, fixed, f"ns-{bad}")
    run = reconcile(repo, kc, "--timeout", "60s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert conditions(k8s, bad)["Ready"]["status"] == "True"
    operands = get(k8s, OPERATOR, "Operator", good)["status"]["components"]["operands"]
    assert operands == [{"crd": f"gizmos.g{uid}.example.com", "kind": "Widget", "total": 1, "ready": 0,
                         "notReady": [{"namespace": "default", "name": "g1", "reason": "Provisioning",
                                       "message": "Ready=False: Provisioning"}]}]
    assert conditions(k8s, good)["Ready"]["status"] == "True"   # operands do not decide the Operator's health
    k8s.delete(gizmos, "default", "g1")
    events = k8s.request("GET", "/api/v1/namespaces/default/events",
                         query=[("fieldSelector", f"involvedObject.name={bad}")])["items"]
    assert {"HealthTimeout", "Healthy"} <= {e["reason"] for e in events}


def test_a_crd_and_its_custom_resource_in_two_operators_install_in_one_run(repo, kc, k8s, uid, capsys):
    """The CR's Operator sorts first, yet every CRD is established before any custom resource is applied.

    The CR's bundle is a plain one that ships its own Namespace; removing it deletes the namespace, and the
    namespace controller finishes that deletion.
    """
    group, ns = f"w{uid}.example.com", f"widgets-{uid}"
    write_docs(repo, f"bundles/crd-{uid}/manifests/crd.yaml", crd_doc(group=group))
    write_docs(repo, f"bundles/cr-{uid}/manifests/objects.yaml",
               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
               {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}})
    declare(repo, f"a-{uid}", f"file://bundles/cr-{uid}")
    declare(repo, f"b-{uid}", f"file://bundles/crd-{uid}")

    run = reconcile(repo, kc, capsys=capsys)

    assert run.code == 0, run.out + run.err
    assert get(k8s, f"{group}/v1", "Widget", "w", ns) is not None
    assert conditions(k8s, f"a-{uid}")["Ready"]["status"] == "True"

    (repo / "operators" / f"a-{uid}.yaml").unlink()
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert f"Namespace {ns}  deleted" in run.out
    wait_until(lambda: get(k8s, "v1", "Namespace", ns) is None, f"namespace {ns} deleted", timeout=120, every=0.5)


def test_the_example_repository_installs_and_becomes_healthy(tmp_path, kc, k8s, capsys):
    repo = GitOpsRepo(tmp_path / "example")
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.out + run.err
        assert "  plumbus: healthy" in run.out
        assert conditions(k8s, "plumbus")["Ready"]["reason"] == "Healthy"
    finally:
        (repo.path / "operators" / "plumbus.yaml").unlink()
        repo.write("reconciler.yaml", "allowEmpty: true\n")
        assert reconcile(repo, kc, capsys=capsys).code == 0
        # Install namespaces are never pruned; remove it so that later tests meet a clean cluster.
        k8s.delete(k8s.resource("v1", "Namespace"), "", "plumbus-system")
        wait_until(lambda: get(k8s, "v1", "Namespace", "plumbus-system") is None, "namespace plumbus-system deleted",
                   timeout=120, every=0.5)


def test_drift_sets_components_diverge_and_is_corrected(repo, kc, k8s, uid, capsys):
    name = f"drift-{uid}"
    declare(repo, name, registry_bundle(repo, name), f"ns-{name}")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert conditions(k8s, name)["ComponentsDiverge"]["status"] == "False"

    info = k8s.resource("apps/v1", "Deployment")
    k8s.request("PATCH", info.path(f"ns-{name}", "demo-controller"), query=[("fieldManager", "someone-else"),
                                                                             ("force", "true")],
                body={"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "demo-controller", "namespace": f"ns-{name}"},
                      "spec": {"template": {"spec": {"containers": [{"name": "manager",
                                                                      "image": "example.invalid/x:1"}]}}}},
                content_type="application/apply-patch+yaml")

    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.out + run.err
    diverge = conditions(k8s, name)["ComponentsDiverge"]
    assert (diverge["status"], diverge["reason"]) == ("True", "DriftCorrected")
    assert f"Deployment.apps ns-{name}/demo-controller" in diverge["message"]
    dep = get(k8s, "apps/v1", "Deployment", "demo-controller", f"ns-{name}")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/demo:v0.1.0"

    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert conditions(k8s, name)["ComponentsDiverge"]["status"] == "False"


def test_a_webhook_bundle_installs_without_locking_itself_out(repo, kc, k8s, uid, capsys):
    """Its webhooks are harmless until the Deployment serving them is available, then get their policy."""
    name, group = f"hook-{uid}", f"h{uid}.example.com"
    rules = [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["widgets"]}]
    common = {"deploymentName": "demo-webhook", "admissionReviewVersions": ["v1"], "sideEffects": "None",
              "failurePolicy": "Fail", "containerPort": 443, "targetPort": 9443, "rules": rules}
    csv = csv_doc(f"{name}.v0.1.0", deployments=[deployment("demo-webhook", "demo-sa")], webhookdefinitions=[
        {**common, "type": "ValidatingAdmissionWebhook", "generateName": f"v{uid}.{group}", "webhookPath": "/v"}])
    declare(repo, name, write_bundle(repo, f"bundles/{name}", csv, crd_doc(group=group), package=name),
            f"ns-{name}")

    run = reconcile(repo, kc, capsys=capsys)

    assert run.code == 0, run.out + run.err
    assert "got its failure policy once its Service had a ready endpoint" in run.out
    hooks = [h for h in k8s.list(k8s.resource("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                                 label_selector=f"reconciler.dev/operator={name}")]
    assert [w["failurePolicy"] for h in hooks for w in h["webhooks"]] == ["Fail"]
    assert conditions(k8s, name)["Ready"]["status"] == "True"
    again = reconcile(repo, kc, capsys=capsys)
    assert again.code == 0 and "Summary: 0 created, 0 configured" in again.out, again.out


CORPUS_BUNDLE = "rabbitmq-messaging-topology-operator/1.19.3"


def test_a_real_operator_reports_every_field_of_the_seed_status(repo, kc, k8s, uid, capsys):
    """A community bundle (from the corpus, copied into the test's repository) with 13 CRDs and webhooks."""
    import shutil

    from bench import bundle_corpus as bc

    source = bc.DEFAULT_CORPUS / CORPUS_BUNDLE
    if not source.is_dir():
        not_tested("corpus", f"no corpus at {bc.DEFAULT_CORPUS}")
    shutil.copytree(source, repo / "bundles" / "rabbitmq")
    name = f"rabbitmq-{uid}"
    declare(repo, name, "file://bundles/rabbitmq", f"ns-{name}")

    run = reconcile(repo, kc, capsys=capsys)

    assert run.code == 0, run.out + run.err
    status = get(k8s, OPERATOR, "Operator", name)["status"]
    meta = status["metadata"]
    assert meta["version"] == "1.19.3" and meta["displayName"] and meta["description"]
    assert len(meta["apis"]["provides"]) == 13
    assert meta["apis"]["requires"][0]["kind"] == "RabbitmqCluster"
    assert status["components"]["matchLabels"] == {"reconciler.dev/operator": name}
    refs = status["components"]["refs"]
    assert len(refs) == len(status["inventory"])
    assert all(r["uid"] and r["resourceVersion"] and r["apiVersion"] and r["kind"] and r["name"] for r in refs)
    conds = {c["type"]: c for c in status["conditions"]}
    assert {"Ready", "Progressing", "Degraded", "UpdateAvailable", "ComponentsDiverge"} <= set(conds)
    assert conds["Ready"]["status"] == "True"
    assert all(c["lastTransitionTime"] and c["observedGeneration"] for c in conds.values())
    assert {o["kind"] for o in status["components"]["operands"]} >= {"Queue", "Exchange", "User"}


def test_a_release_whose_new_pod_fits_no_node_names_the_pod_and_the_schedulers_message(repo, kc, k8s, uid, capsys):
    """The old pod still serves, so the Deployment only says an old replica waits to go: the cause is the new
    pod, which no node fits. It is what reconcile, the status and `reconciler status` say."""
    name = f"release-{uid}"
    declare(repo, name, registry_bundle(repo, name), f"ns-{name}")
    assert reconcile(repo, kc, "--timeout", "60s", capsys=capsys).code == 0
    dep = deployment("demo-controller", "demo-sa")
    dep["spec"]["template"]["spec"]["nodeSelector"] = {"reconciler.test/no-such-node": "x"}
    newer = write_bundle(repo, f"bundles/{name}-2", csv_doc(f"{name}.v0.2.0", version="0.2.0", deployments=[dep]),
                         package=name)
    declare(repo, name, newer, f"ns-{name}")
    run = reconcile(repo, kc, "--timeout", "10s", "-o", "json", capsys=capsys)
    assert run.code == 5, run.out + run.err
    (health,) = [h for h in json.loads(run.out)["health"] if h["operator"] == name]
    (stuck,) = health["unhealthy"]
    assert stuck["object"] == f"Deployment.apps ns-{name}/demo-controller" and stuck["reason"] == "Unschedulable"
    assert stuck["message"].startswith("pod demo-controller-"), stuck
    assert "cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node " \
           "affinity/selector" in stuck["message"], stuck
    assert stuck["message"].endswith("; pending termination: 1 old replica"), stuck
    # docs/health.md prints this line as `reconcile` does (names and the pod's hash aside)
    line = f"{stuck['object']}: {stuck['status']}: {stuck['message']}"
    (shown,) = indented_block("docs/health.md", next(
        text.strip() for text in (ROOT / "docs/health.md").read_text().splitlines()
        if text.startswith("    Deployment.apps plumbus-system/plumbus-controller-manager: InProgress: pod")))

    def normalise(text: str) -> str:
        return re.sub(r"pod \S+-[a-z0-9]+-[a-z0-9]{5} ", "pod POD ", text.replace(f"ns-{name}/demo-controller", "NAME")
                      .replace("plumbus-system/plumbus-controller-manager", "NAME"))
    assert normalise(line) == normalise(shown), line
    ready = conditions(k8s, name)["Ready"]
    assert ready["reason"] == "HealthTimeout" and "cannot be scheduled (Unschedulable)" in ready["message"], ready
    ref = next(r for r in get(k8s, OPERATOR, "Operator", name)["status"]["components"]["refs"]
               if r["kind"] == "Deployment")
    assert ref["health"]["reason"] == "Unschedulable", ref
    out = io.StringIO()
    assert main(["status", "--kubeconfig", str(kc)], out=out) == 0
    assert f"{name}: HealthTimeout: Deployment.apps ns-{name}/demo-controller: pod demo-controller-" in out.getvalue()


SIMULATED = {"CrashLoopBackOff": "container manager is CrashLoopBackOff: back-off 5m0s restarting failed container="
                                 "manager pod=", "ImagePullBackOff": "container manager is ImagePullBackOff: Back-off "
                                 "pulling image \"registry.example.com/demo:v0.1.0\"",
             "ErrImagePull": "container manager is ErrImagePull: failed to pull and unpack image "
                             "\"registry.example.com/demo:v0.1.0\"",
             "ReadinessProbeFailed": "container manager runs but its readiness probe does not pass: Readiness probe "
                                     "failed: HTTP probe failed with statuscode: 503"}


def test_each_cause_a_kubelet_reports_is_the_reason_of_the_component(repo, kc, uid, capsys):
    """kwok makes each pod fail as a kubelet reports it (reconciler.dev/simulate on the pod template): the
    reason of each Deployment is what stops its pods, with what the kubelet said."""
    name = f"causes-{uid}"
    deployments = []
    for reason in SIMULATED:
        dep = deployment(f"sim-{reason.lower()}", "demo-sa")
        template = dep["spec"]["template"]
        template["metadata"]["annotations"] = {"reconciler.dev/simulate": reason}
        template["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": 8081}}
        deployments.append(dep)
    declare(repo, name, write_bundle(repo, f"bundles/{name}", csv_doc(f"{name}.v0.1.0", deployments=deployments),
                                     package=name), f"ns-{name}")
    run = reconcile(repo, kc, "--timeout", "10s", "-o", "json", capsys=capsys)
    assert run.code == 5, run.out + run.err
    (health,) = [h for h in json.loads(run.out)["health"] if h["operator"] == name]
    found = {c["object"].rsplit("/", 1)[1]: c for c in health["unhealthy"]}
    for reason, said in SIMULATED.items():
        component = found[f"sim-{reason.lower()}"]
        assert component["reason"] == reason, component
        assert said in component["message"], component
