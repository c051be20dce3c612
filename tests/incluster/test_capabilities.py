"""Everything the command line does, done as deploy/'s ServiceAccount with exactly deploy/'s RBAC.

Each test runs one capability through the CLI with a kubeconfig holding only a TokenRequest token of
``reconciler-system/reconciler`` (what its pod is given), against the local control plane on which an
administrator applied deploy/base. The last test reads the API server's audit log of the whole suite and
fails on any rule of deploy/ that no capability used.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.cluster.apply.digest import ANNOTATION_DIGEST
from reconciler.kube.client import Kube
from tests.e2e.support import approve, approving_everything, cli, get, managed
from tests.support.repo import GitOpsRepo, commit_all
from tests.e2e.test_reconcile import V100, V110
from tests.loop.test_watch_local import events
from tests.unit.helpers import crd_doc, csv_doc, deployment, operator_doc, write_bundle, write_docs
from tests.support.wait import wait_until

from .conftest import CAPABILITIES, passed, proven
from tests.support.parts import not_tested

pytestmark = pytest.mark.incluster

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "reconciler.dev/v1alpha1"
CSV = "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"


def conditions(k8s: Kube, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in get(k8s, OPERATOR, "Operator", name)["status"]["conditions"]}


@pytest.fixture
def gitops(gitops: GitOpsRepo) -> GitOpsRepo:
    """The example repository at plumbus 1.0.0."""
    gitops.set_version("1.0.0")
    gitops.commit("plumbus 1.0.0")
    return gitops


def test_first_install_and_upgrade(deployed, k8s, gitops, clean, capsys):
    # The status CRD as deploy/base ships it, never applied by the reconciler yet: its first run takes it over.
    crd = k8s.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    k8s.request("PATCH", crd.path("", "operators.reconciler.dev"), content_type="application/merge-patch+json",
                body={"metadata": {"annotations": {ANNOTATION_DIGEST: None}}})
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert managed(k8s, "plumbus") == V100
    assert conditions(k8s, "plumbus")["Ready"]["status"] == "True"
    assert ANNOTATION_DIGEST in k8s.get(crd, "", "operators.reconciler.dev")["metadata"]["annotations"]
    installer = get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system")
    assert installer is not None   # the bundle was written by it, not by the deployed ServiceAccount

    gitops.set_version(">=1.0.0 <2.0.0")
    gitops.commit("follow 1.x")
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "Deployment.apps plumbus-system/plumbus-controller  deleted" in run.out   # pruned
    assert managed(k8s, "plumbus") == V110
    passed("first install", "upgrade")


def _release_reading_a_secret(gitops: GitOpsRepo) -> None:
    """plumbus 1.2.0 in the catalog: a Secret of its own and the permission to read it (so a new approval), and
    a changed pod template."""
    shutil.copytree(gitops.path / "bundles/plumbus/1.1.0", gitops.path / "bundles/plumbus/1.2.0")
    [csv] = yamlio.read_all(gitops.path / CSV)
    csv["metadata"]["name"], csv["spec"]["version"], csv["spec"]["replaces"] = "plumbus.v1.2.0", "1.2.0", \
        "plumbus.v1.1.0"
    csv["spec"]["install"]["spec"]["permissions"][0]["rules"].append(
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "patch"]})
    csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["metadata"]["labels"]["tier"] = "backend"
    gitops.write(CSV.replace("1.1.0", "1.2.0"), yamlio.dump_all([csv]))
    gitops.write("bundles/plumbus/1.2.0/manifests/settings.yaml",
                 "apiVersion: v1\nkind: Secret\nmetadata: {name: plumbus-settings}\nstringData: {level: info}\n")
    catalog = gitops.path / "catalogs/community/plumbus.yaml"
    catalog.write_text(catalog.read_text().replace(
        "    replaces: plumbus.v1.0.0\n", "    replaces: plumbus.v1.0.0\n  - name: plumbus.v1.2.0\n"
        "    replaces: plumbus.v1.1.0\n") + "---\nschema: olm.bundle\npackage: plumbus\nname: plumbus.v1.2.0\n"
        "image: file://bundles/plumbus/1.2.0\nproperties:\n  - type: olm.package\n"
        "    value: {packageName: plumbus, version: 1.2.0}\n  - type: olm.gvk\n"
        "    value: {group: how.theydoit.com, kind: Plumbus, version: v1alpha1}\n")


def test_dry_run_and_diff_of_a_change_then_the_approval_wait(deployed, k8s, gitops, clean, capsys):
    """A dry run of a changed bundle needs no right deploy/ does not grant, before and after
    the approval that the change needs; the real run waits for that approval (exit 4), then applies it."""
    gitops.set_version(">=1.0.0 <2.0.0")
    gitops.commit("follow 1.x")
    assert cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys).code == 0
    base = gitops.commit("olm.lock of 1.1.0")
    _release_reading_a_secret(gitops)
    assert cli("resolve", str(gitops.path), capsys=capsys).code == 0
    assert "plumbus.v1.2.0" in (gitops.path / "olm.lock").read_text()
    gitops.commit("plumbus 1.2.0 reads a Secret of its own")

    dry = cli("reconcile", str(gitops.path), "--dry-run", "--kubeconfig", str(deployed), capsys=capsys)
    assert dry.code == 1, dry.out + dry.err
    assert "Secret plumbus-system/plumbus-settings" in dry.out and "WAITS FOR APPROVAL" in dry.out, dry.out
    # planned as the installer in place: what its current approval allows is checked by the API server (the
    # Deployment's change), what only the pending one allows is said to be unchecked
    assert "~ Deployment.apps plumbus-system/plumbus-controller-manager  would be configured once approved" in dry.out
    assert "tier: backend" in dry.out, dry.out
    assert "the objects of plumbus that only the newly approved permissions allow" in dry.out, dry.out

    diff = cli("diff", str(gitops.path), "--base", base, "--kubeconfig", str(deployed), capsys=capsys)
    assert diff.code == 1, diff.out + diff.err
    assert "plumbus-settings" in diff.out and "secrets" in diff.out, diff.out

    waits = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert waits.code == 4, waits.out + waits.err
    assert get(k8s, "v1", "Secret", "plumbus-settings", "plumbus-system") is None
    assert conditions(k8s, "plumbus")["InstallPendingApproval"]["status"] == "True"
    assert get(k8s, OPERATOR, "Operator", "plumbus")["status"]["pending"]["bundle"]["name"] == "plumbus.v1.2.0"

    assert approve(gitops, "plumbus", capsys=capsys).code == 0
    dry = cli("reconcile", str(gitops.path), "--dry-run", "--kubeconfig", str(deployed), capsys=capsys)
    assert dry.code == 1, dry.out + dry.err
    assert "WAITS FOR APPROVAL" not in dry.out, dry.out
    # the waiting run removed the installer (none outlives its approval): a real run creates it first
    assert "the objects of plumbus, whose installer a real run creates first" in dry.out, dry.out
    assert "Deployment.apps plumbus-system/plumbus-controller-manager  would be configured  [plumbus]: not checked" \
        in dry.out, dry.out

    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert get(k8s, "v1", "Secret", "plumbus-settings", "plumbus-system") is not None
    passed("dry run", "diff", "approval wait")


def test_prune_removes_what_the_repository_no_longer_declares(deployed, k8s, gitops, clean, capsys):
    assert cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys).code == 0
    assert managed(k8s, "plumbus") == V100
    gitops.remove("operators/plumbus.yaml")
    gitops.write("reconciler.yaml", (gitops.path / "reconciler.yaml").read_text() + "allowEmpty: true\n")
    gitops.commit("plumbus goes")
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system") is None
    assert get(k8s, OPERATOR, "Operator", "plumbus") is None
    passed("prune")


@pytest.fixture
def bundles(tmp_path: Path, deployed: Path, capsys):
    """A repository of directly referenced bundles, each approved (AllowAll); afterwards emptied, as deploy/'s
    ServiceAccount."""
    root = approving_everything(tmp_path / "bundles")
    yield root
    for p in (root / "operators").glob("*.yaml"):
        p.unlink()
    run = cli("reconcile", str(root), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err


def _declare(root: Path, name: str, csv: dict, *objects: dict) -> None:
    ref = write_bundle(root, f"bundles/{name}", csv, *objects, package=name)
    write_docs(root, f"operators/{name}.yaml", operator_doc(name, bundle={"name": name, "spec": {"refs": [ref]}},
                                                            install={"namespace": f"ns-{name}"}))


def test_an_apiservice_bundle(deployed, k8s, bundles, capsys):
    uid = uuid.uuid4().hex[:6]
    name, group = f"api-{uid}", f"m{uid}.example.com"
    csv = csv_doc(f"{name}.v0.1.0", apiservicedefinitions={"owned": [
        {"group": group, "version": "v1beta1", "kind": "Metric", "name": "metrics",
         "deploymentName": "demo-controller", "containerPort": 6443}]})
    _declare(bundles, name, csv)
    # Applied whole; no container serves it (kwok), so it is judged once, not awaited.
    run = cli("reconcile", str(bundles), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "Summary: 12 created" in run.out, run.out
    service = get(k8s, "apiregistration.k8s.io/v1", "APIService", f"v1beta1.{group}")
    assert service is not None and service["metadata"]["labels"]["reconciler.dev/operator"] == name
    # served on the CSV's containerPort, as OLM v0 serves an APIService (its Service's port is that port too)
    assert service["spec"]["service"] == {"name": "demo-controller-service", "namespace": f"ns-{name}",
                                          "port": 6443}
    assert service["spec"]["caBundle"]
    passed("APIService bundle")


def test_a_webhook_bundle(deployed, k8s, bundles, capsys):
    uid = uuid.uuid4().hex[:6]
    name, group = f"hook-{uid}", f"h{uid}.example.com"
    rules = [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["widgets"]}]
    csv = csv_doc(f"{name}.v0.1.0", deployments=[deployment("demo-webhook", "demo-sa")], webhookdefinitions=[
        {"deploymentName": "demo-webhook", "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "failurePolicy": "Fail", "containerPort": 443, "targetPort": 9443, "rules": rules,
         "type": "ValidatingAdmissionWebhook", "generateName": f"v{uid}.{group}", "webhookPath": "/v"}])
    _declare(bundles, name, csv, crd_doc(group=group))
    run = cli("reconcile", str(bundles), "--kubeconfig", str(deployed), "--timeout", "120s", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "got its failure policy once its Service had a ready endpoint" in run.out
    hooks = k8s.list(k8s.resource("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                     label_selector=f"reconciler.dev/operator={name}")
    assert [w["failurePolicy"] for h in hooks for w in h["webhooks"]] == ["Fail"]
    passed("webhook bundle")


def test_drift_correction(deployed, k8s, gitops, clean, capsys):
    """Corrected every time; the same correction again is counted on its Event (events/patch)."""
    assert cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys).code == 0
    info = k8s.resource("apps/v1", "Deployment")
    for _ in range(2):
        k8s.request("PATCH", info.path("plumbus-system", "plumbus-controller"),
                    query=[("fieldManager", "someone-else"), ("force", "true")],
                    body={"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system"},
                          "spec": {"template": {"spec": {"containers": [{"name": "manager",
                                                                          "image": "example.invalid/x:1"}]}}}},
                    content_type="application/apply-patch+yaml")
        run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
        assert run.code == 0, run.out + run.err
        diverge = conditions(k8s, "plumbus")["ComponentsDiverge"]
        assert (diverge["status"], diverge["reason"]) == ("True", "DriftCorrected"), diverge
        dep = get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system")
        assert dep["spec"]["template"]["spec"]["containers"][0]["image"] != "example.invalid/x:1"
        assert cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait",
                   capsys=capsys).code == 0
        assert conditions(k8s, "plumbus")["ComponentsDiverge"]["status"] == "False"
    drift = [e for e in events(k8s) if e["reason"] == "DriftCorrected"]
    assert drift and max(e.get("count", 1) for e in drift) >= 2, drift
    passed("drift correction")


@pytest.fixture
def fleet(tmp_path: Path, deployed: Path, clean, capsys):
    """The example fleet as a git repository; afterwards emptied on cluster dev, as deploy/'s ServiceAccount."""
    root = tmp_path / "fleet"
    shutil.copytree(ROOT / "examples" / "fleet-repo", root)
    commit_all(root, "a fleet")
    yield root
    (root / "operators" / "plumbus.yaml").unlink()
    (root / "reconciler.yaml").write_text((root / "reconciler.yaml").read_text() + "allowEmpty: true\n")
    commit_all(root, "empty")
    run = cli("reconcile", str(root), "--cluster", "dev", "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err


def test_the_fleet_loop(deployed, k8s, fleet, tmp_path):
    """`watch --cluster dev` as its own process, leader-elected, as deploy/'s sidecar runs it."""
    log = (tmp_path / "watch.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", "watch", str(fleet), "--cluster", "dev",
                             "--kubeconfig", str(deployed), "--interval", "3600", "--leader-elect",
                             "--identity", "incluster-test", "--lease-duration", "5"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RECONCILER_TRACEBACK": "1"})
    try:
        def applied() -> bool:
            assert proc.poll() is None, (tmp_path / "watch.log").read_text()
            op = get(k8s, OPERATOR, "Operator", "plumbus")
            return bool(op) and op["metadata"].get("annotations", {}).get("reconciler.dev/cluster") == "dev" and \
                any(c["type"] == "Ready" and c["status"] == "True" for c in op.get("status", {}).get("conditions", []))
        wait_until(applied, "cluster dev's Operators applied by the loop")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system") is not None
    passed("fleet loop")


VERIFY_FIRST = ("kubectl -n reconciler-system create secret generic reconciler-trusted-keys "
                "--from-file=keys=trusted-keys")


@pytest.fixture
def verified(control_plane, deployed, k8s, tmp_path: Path):
    """docs/deploy.md's lines turning verification on, run as printed in a copy of deploy/; afterwards the
    Deployment and the Secret are removed."""
    from bench.peers.kubectl import kubectl_binary
    from tests.docblocks import indented_block
    from tests.signing import SshSigner, tools_or_skip, trusted_keys

    tools_or_skip()
    alice = SshSigner(tmp_path / "signer", "alice@example.invalid")
    work = tmp_path / "deploy-copy"
    shutil.copytree(ROOT / "deploy", work / "deploy")
    trusted_keys(work / "trusted-keys", alice)
    env = {**os.environ, "PATH": f"{kubectl_binary(log=lambda _: None).parent}:{os.environ['PATH']}",
           "KUBECONFIG": str(control_plane.kubeconfig_path)}
    try:
        run = subprocess.run(["bash", "-c", "\n".join(["set -euo pipefail",
                                                        *indented_block("docs/deploy.md", VERIFY_FIRST)])],
                             cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        yield alice
    finally:
        for api_version, kind, name in (("apps/v1", "Deployment", "reconciler"),
                                        ("v1", "Secret", "reconciler-trusted-keys")):
            info = k8s.resource(api_version, kind)
            if k8s.get(info, "reconciler-system", name):
                k8s.delete(info, "reconciler-system", name)


def test_commit_verification_with_keys_from_a_secret(deployed, k8s, gitops, clean, verified, tmp_path,
                                                     monkeypatch, capsys):
    """The Secret mounted as deploy/verify-commits mounts it; a signed commit is applied as deploy/'s
    ServiceAccount, the unsigned one after it refused with nothing applied."""
    import base64

    pod = get(k8s, "apps/v1", "Deployment", "reconciler", "reconciler-system")["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "reconciler"]
    path = {e["name"]: e.get("value") for e in container["env"]}["RECONCILER_TRUSTED_KEYS"]
    [mount] = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "optional" not in volume["secret"]
    # what the kubelet mounts: each key of the Secret as a file of the mount's directory
    secret = get(k8s, "v1", "Secret", volume["secret"]["secretName"], "reconciler-system")
    mounted = tmp_path / "mounted" / path.removeprefix(mount["mountPath"] + "/")
    mounted.parent.mkdir()
    for key, value in secret["data"].items():
        (mounted.parent / key).write_bytes(base64.b64decode(value))
    monkeypatch.setenv("RECONCILER_TRUSTED_KEYS", str(mounted))

    signed = gitops.commit("plumbus 1.0.0, signed", signer=verified)
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert managed(k8s, "plumbus") == V100
    assert get(k8s, OPERATOR, "Operator", "plumbus")["status"]["revision"] == signed

    gitops.set_version(">=1.0.0 <2.0.0")
    unsigned = gitops.commit("follow 1.x, unsigned")
    dry = cli("reconcile", str(gitops.path), "--dry-run", "--kubeconfig", str(deployed), capsys=capsys)
    # the plan, with the refusal above it
    assert dry.code == 2 and f"commit {unsigned}" in dry.out and "is not signed" in dry.out, dry.out + dry.err
    run = cli("reconcile", str(gitops.path), "--kubeconfig", str(deployed), "--no-wait", capsys=capsys)
    assert run.code == 2 and f"commit {unsigned}" in run.err and "is not signed" in run.err, run.out + run.err
    assert managed(k8s, "plumbus") == V100   # nothing of the unsigned commit applied
    assert get(k8s, OPERATOR, "Operator", "plumbus")["status"]["revision"] == signed
    passed("commit verification")


def test_no_rule_of_deploy_is_unused(control_plane, audit_start, tmp_path):
    """Read last: every request deploy/'s ServiceAccount sent while the suite ran, from the audit log (and those
    it sent to the plane running OLM v0, kept by test_adoption)."""
    from reconciler.localcluster.plane import DEPLOYED_USER

    from .conftest import kept_audit

    from .rbac_usage import deploy_rbac, unused_across

    missing = set(CAPABILITIES) - proven()
    if missing:
        not_tested("incluster", f"needs the whole in-cluster suite (not run or failed here: {', '.join(sorted(missing))})")
    (tmp_path / "olm-plane.log").write_bytes(kept_audit())
    left, redundant, count = unused_across([(deploy_rbac(ROOT / "deploy"), control_plane.audit_log, audit_start),
                                            (deploy_rbac(ROOT / "deploy", "olm-takeover"),
                                             tmp_path / "olm-plane.log", 0)], DEPLOYED_USER)
    assert count > 100, f"only {count} requests recorded in {control_plane.audit_log}"
    assert not left, "grants of deploy/'s RBAC that no capability used:\n  " + "\n  ".join(map(str, left))
    assert not redundant, "grants of deploy/'s RBAC that another rule always covered:\n  " + \
        "\n  ".join(map(str, redundant))


