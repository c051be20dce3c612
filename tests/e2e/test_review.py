"""`reconciler diff` and dry-run-next on real git repositories (pygit2), offline: no cluster is needed.

The pull request of the golden test upgrades plumbus (1.1.0 -> 1.2.0, which
gains a permission and a CRD version) and adds widget, a plain bundle that
ships a Secret and a PodDisruptionBudget on policy/v1beta1 (deprecated at
the repository's Kubernetes 1.24, removed in 1.25).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.support import cli
from tests.support.repo import GitOpsRepo
from tests.support.parts import not_tested

GOLDEN = Path(__file__).parent / "golden" / "diff-upgrade-and-add.md"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "operators"
NFS_ROLE = (CORPUS / "nfs-provisioner-operator" / "0.0.2" / "manifests"
            / "nfs-provisioner-operator-metrics-reader_rbac.authorization.k8s.io_v1beta1_clusterrole.yaml")

WIDGET = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: widget
spec:
  bundle:
    name: widget.v0.1.0
    spec:
      refs: [file://bundles/widget]
  install:
    namespace: widget-system
"""

WIDGET_OBJECTS = """\
apiVersion: v1
kind: Secret
metadata: {name: widget-credentials, namespace: widget-system}
stringData:
  token: s3cr3t-widget-token
---
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: widget, namespace: widget-system}
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: widget}
"""

CATALOG_ENTRY = """\
---
schema: olm.bundle
package: plumbus
name: plumbus.v1.2.0
image: file://bundles/plumbus/1.2.0
properties:
  - type: olm.package
    value: {packageName: plumbus, version: 1.2.0}
  - type: olm.gvk
    value: {group: how.theydoit.com, kind: Plumbus, version: v1alpha1}
"""


@pytest.fixture(autouse=True)
def no_cluster_configured(monkeypatch, tmp_path):
    """`diff` reads the cluster configured (for its version) as every command does: here, none."""
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def based(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> GitOpsRepo:
    """The example at plumbus 1.1.0 on Kubernetes 1.24, resolved and committed: the target branch."""
    repo = GitOpsRepo(tmp_path / "repo")
    repo.write("reconciler.yaml", 'defaultInstallNamespace: operators\nkubernetesVersion: "1.24.3"\n')
    assert cli("resolve", str(repo.path), "--offline", capsys=capsys).code == 0
    repo.commit("Lock plumbus 1.1.0")
    return repo


def upgrade_plumbus(repo: GitOpsRepo) -> None:
    src, dest = repo.path / "bundles/plumbus/1.1.0", repo.path / "bundles/plumbus/1.2.0"
    shutil.copytree(src, dest)
    csv = (dest / "manifests/plumbus.clusterserviceversion.yaml").read_text()
    csv = (csv.replace("plumbus.v1.1.0", "plumbus.v1.2.0").replace("version: 1.1.0", "version: 1.2.0")
           .replace("replaces: plumbus.v1.0.0", "replaces: plumbus.v1.1.0")
           .replace("controller:v1.1.0", "controller:v1.2.0")
           .replace("              verbs: [get, list, watch, update, patch]\n",
                    "              verbs: [get, list, watch, update, patch]\n"
                    "            - apiGroups: [\"\"]\n              resources: [secrets]\n"
                    "              verbs: [get, list, watch]\n"))
    (dest / "manifests/plumbus.clusterserviceversion.yaml").write_text(csv)
    crd = (dest / "manifests/plumbai.how.theydoit.com.crd.yaml").read_text()
    v1beta1 = crd[crd.index("    - name: v1alpha1"):].replace("v1alpha1", "v1beta1").replace("storage: true",
                                                                                              "storage: false")
    (dest / "manifests/plumbai.how.theydoit.com.crd.yaml").write_text(crd + v1beta1)
    catalog = (repo.path / "catalogs/community/plumbus.yaml").read_text()
    catalog = catalog.replace("    replaces: plumbus.v1.0.0\n",
                              "    replaces: plumbus.v1.0.0\n  - name: plumbus.v1.2.0\n    replaces: plumbus.v1.1.0\n")
    (repo.path / "catalogs/community/plumbus.yaml").write_text(catalog + CATALOG_ENTRY)


def add_widget(repo: GitOpsRepo) -> None:
    repo.write("operators/widget.yaml", WIDGET)
    repo.write("bundles/widget/manifests/objects.yaml", WIDGET_OBJECTS)


def normalised(text: str, repo: GitOpsRepo) -> str:
    return re.sub(r"\(([0-9a-f]{7})\)", "(BASE)", text)


def test_pull_request_report_matches_the_golden_markdown(tmp_path, capsys):
    repo = based(tmp_path, capsys)
    upgrade_plumbus(repo)
    add_widget(repo)
    repo.commit("Upgrade plumbus to 1.2.0, add widget")   # a clean tree: the base is HEAD^
    run = cli("diff", str(repo.path), "-o", "markdown", capsys=capsys)
    assert run.code == 1, run.err
    report = normalised(run.out, repo)
    if os.environ.get("RECONCILER_UPDATE_GOLDEN"):
        GOLDEN.write_text(report)
    assert report == GOLDEN.read_text()
    # What the golden file holds, said once more so a regenerated file cannot silently lose it.
    assert "| plumbus | upgraded | plumbus.v1.1.0 | plumbus.v1.2.0 | replaces plumbus.v1.1.0 (channel stable)" in report
    assert "| widget | added | - | widget.v0.1.0 | new install |" in report
    assert "+        image: registry.example.com/plumbus/controller:v1.2.0" in report
    assert "secrets (core)" in report and "version v1beta1 added" in report
    assert "| widget | PodDisruptionBudget widget-system/widget | policy/v1beta1 | 1.25 | removed | policy/v1 |" in report
    assert "s3cr3t" not in report


def test_json_and_text_and_exit_codes(tmp_path, capsys):
    repo = based(tmp_path, capsys)
    same = cli("diff", str(repo.path), "--base", "HEAD", "-o", "json", capsys=capsys)
    assert same.code == 0, same.err
    assert json.loads(same.out)["operators"] == []
    add_widget(repo)   # uncommitted: the base is HEAD
    run = cli("diff", str(repo.path), "-o", "json", capsys=capsys)
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    assert doc["schemaVersion"] == 1 and doc["before"].startswith("base HEAD (")
    [widget] = doc["operators"]
    assert (widget["operator"], widget["change"], widget["after"]["name"]) == ("widget", "added", "widget.v0.1.0")
    assert {o["kind"] for o in widget["objects"]} == {"Secret", "PodDisruptionBudget"}
    assert widget["approval"]["approved"] is False
    assert [(f["kubernetesVersion"], f["status"]) for f in doc["apiRemovals"]] == [("1.24", "deprecated"),
                                                                                   ("1.25", "removed")]
    text = cli("diff", str(repo.path), capsys=capsys)
    assert text.code == 1 and "\033[" not in text.out
    assert "widget (Operator): added - -> widget.v0.1.0  [new install]" in text.out


def test_bad_base_and_broken_side_are_errors_not_differences(tmp_path, capsys):
    repo = based(tmp_path, capsys)
    run = cli("diff", str(repo.path), "--base", "no-such-branch", capsys=capsys)
    assert run.code == 64 and "does not name a commit" in run.err
    repo.write("operators/broken.yaml", "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {}\n")
    run = cli("diff", str(repo.path), capsys=capsys)
    assert run.code == 2 and "broken.yaml" in run.err
    plain = tmp_path / "plain"
    shutil.copytree(repo.path, plain, ignore=shutil.ignore_patterns(".git"))
    run = cli("diff", str(plain), capsys=capsys)
    assert run.code == 2 and "not in a git work tree" in run.err
    # a .git file that is malformed, or that names a repository whose work tree is elsewhere
    (plain / ".git").write_bytes(b"\xff\xfe not a gitdir line\n")
    run = cli("diff", str(plain), capsys=capsys)
    assert run.code == 2 and "cannot open its git repository" in run.err and "malformed" in run.err, run.err
    (plain / ".git").write_text(f"gitdir: {repo.path / '.git'}\n")
    run = cli("diff", str(plain), capsys=capsys)
    assert run.code == 2 and f"has its work tree at {repo.path}" in run.err and "which does not hold it" in run.err


@pytest.mark.corpus
def test_dry_run_next_flags_an_api_the_next_minor_removes(tmp_path, capsys):
    """A real old bundle's ClusterRole on rbac.authorization.k8s.io/v1beta1 (served until 1.21), shipped as a
    plain bundle, declared dry-run-next on a 1.21 cluster: the check assumes 1.22 and says so."""
    if not NFS_ROLE.is_file():
        not_tested("corpus", f"no corpus at {CORPUS}")
    repo = GitOpsRepo(tmp_path / "repo")
    repo.write("reconciler.yaml", 'kubernetesVersion: "1.21.5"\n')
    repo.write("bundles/nfs/manifests/metrics-reader.yaml", NFS_ROLE.read_text())
    repo.write("operators/nfs.yaml", WIDGET.replace("widget.v0.1.0", "nfs-provisioner-operator.v0.0.2")
               .replace("name: widget", "name: nfs").replace("bundles/widget", "bundles/nfs")
               .replace("spec:\n  bundle:", "spec:\n  inputClass: dry-run-next\n  bundle:"))
    repo.commit("nfs, looked at one minor ahead")
    resolved = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert resolved.code == 0, resolved.err
    assert "API check assuming Kubernetes 1.22 (the cluster's next minor)" in resolved.out
    assert ("ClusterRole nfs-provisioner-operator-metrics-reader: rbac.authorization.k8s.io/v1beta1 is not "
            "served in Kubernetes 1.22") in resolved.out
    doc = json.loads(cli("resolve", str(repo.path), "--offline", "--no-write", "-o", "json", capsys=capsys).out)
    [check] = doc["nextMinorChecks"]
    assert check["assumedKubernetesVersion"] == "1.22"
    assert [f["status"] for f in check["apiRemovals"]] == ["removed"]
    dry = cli("reconcile", str(repo.path), "--dry-run", capsys=capsys)
    assert "API check assuming Kubernetes 1.22" in dry.out and "not served in Kubernetes 1.22" in dry.out
    assert "[input class only reports: not applied]" in dry.out
    # The same bundle on a 1.20 cluster: 1.21 only deprecates it.
    repo.write("reconciler.yaml", 'kubernetesVersion: "1.20.0"\n')
    later = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert "assuming Kubernetes 1.21" in later.out and "is deprecated in Kubernetes 1.21" in later.out


def test_an_unchanged_webhook_bundle_is_not_a_change(tmp_path, capsys):
    """Self-signed webhook certificates are generated per render; the working tree reuses the base's, so a
    webhook Operator nobody touched does not show up as a changed caBundle."""
    from tests.unit.helpers import csv_doc, write_bundle

    repo = based(tmp_path, capsys)
    csv = csv_doc("hooks.v0.1.0", webhookdefinitions=[{
        "type": "ValidatingAdmissionWebhook", "generateName": "v.hooks.example.com",
        "deploymentName": "demo-controller", "containerPort": 443, "targetPort": 9443,
        "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
        "webhookPath": "/validate"}])
    ref = write_bundle(repo.path, "bundles/hooks", csv, package="hooks")
    repo.write("operators/hooks.yaml", WIDGET.replace("widget.v0.1.0", "hooks.v0.1.0")
               .replace("name: widget", "name: hooks").replace("file://bundles/widget", ref)
               .replace("widget-system", "hooks-system"))
    assert cli("resolve", str(repo.path), "--offline", capsys=capsys).code == 0
    repo.commit("hooks")
    add_widget(repo)
    doc = json.loads(cli("diff", str(repo.path), "-o", "json", capsys=capsys).out)
    assert [o["operator"] for o in doc["operators"]] == ["widget"]


@pytest.mark.cluster
def test_the_cluster_named_gives_the_kubernetes_version(tmp_path, capsys, kc):
    """Only /version is read: the cluster's minor (1.36) overrides reconciler.yaml's 1.24."""
    repo = based(tmp_path, capsys)
    repo.write("operators/widget.yaml", WIDGET)
    repo.write("bundles/widget/manifests/objects.yaml",
               "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\nmetadata: {name: widget}\n"
               "spec: {priorityLevelConfiguration: {name: workload-low}}\n")
    run = cli("diff", str(repo.path), "-o", "json", "--kubeconfig", str(kc), capsys=capsys)
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    assert (doc["kubernetesVersion"], doc["nextKubernetesVersion"]) == ("1.36", "1.37")
    assert [(f["kind"], f["kubernetesVersion"], f["status"], f["replacement"]) for f in doc["apiRemovals"]] == [
        ("FlowSchema", "1.36", "removed", "flowcontrol.apiserver.k8s.io/v1")]


@pytest.mark.cluster
def test_diff_reads_the_cluster_of_kubeconfig_as_every_command_does(tmp_path, capsys, kc, monkeypatch):
    """$KUBECONFIG is the default of --kubeconfig, as `--help` says; --offline does without the cluster."""
    repo = based(tmp_path, capsys)
    repo.write("operators/widget.yaml", WIDGET)
    repo.write("bundles/widget/manifests/objects.yaml",
               "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\nmetadata: {name: widget}\n"
               "spec: {priorityLevelConfiguration: {name: workload-low}}\n")
    monkeypatch.setenv("KUBECONFIG", str(kc))
    run = cli("diff", str(repo.path), "-o", "json", capsys=capsys)
    assert run.code == 1, run.err
    assert json.loads(run.out)["kubernetesVersion"] == "1.36"
    run = cli("diff", str(repo.path), "-o", "json", "--offline", capsys=capsys)
    assert run.code == 1, run.err
    assert json.loads(run.out)["kubernetesVersion"] == "1.24"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    run = cli("diff", str(repo.path), "-o", "json", capsys=capsys)
    assert run.code == 3 and "missing" in run.err, run.err   # a kubeconfig that cannot be read is said so
    assert cli("diff", str(repo.path), "-o", "json", "--offline", capsys=capsys).code == 1


def test_dry_run_next_shows_what_would_change_from_the_installed_bundle(tmp_path, capsys):
    """plumbus is installed at 1.0.0 (olm.lock); declared dry-run-next, its next-minor resolution picks 1.1.0
    (here keeping its Deployment's name, with a new image), and resolve and a dry run show the objects that
    would change, by the review's own object diff."""
    repo = GitOpsRepo(tmp_path / "repo")
    repo.write("reconciler.yaml", 'defaultInstallNamespace: operators\nkubernetesVersion: "1.30.0"\n')
    csv = repo.path / "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"
    csv.write_text(csv.read_text().replace("name: plumbus-controller-manager", "name: plumbus-controller"))
    repo.set_version(">=1.0.0 <1.1.0")
    assert cli("resolve", str(repo.path), "--offline", capsys=capsys).code == 0
    repo.set_version(">=1.0.0 <2.0.0")
    declaration = (repo.path / "operators/plumbus.yaml").read_text()
    repo.write("operators/plumbus.yaml", declaration.replace("inputClass: subscription", "inputClass: dry-run-next"))
    repo.commit("plumbus at 1.0.0, looked at one minor ahead")

    resolved = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert resolved.code == 0, resolved.err
    assert "plumbus (dry-run-next, plumbus.v1.1.0): API check assuming Kubernetes 1.31" in resolved.out
    # the Deployment changes; the RBAC objects are named after the bundle, so they are replaced
    assert "plumbus: objects that would change (plumbus.v1.0.0, installed per olm.lock): +4 ~1 -4" in resolved.out
    shown = resolved.out.split("objects that would change", 1)[1].splitlines()[1:]
    assert shown[0] == "  ~ Deployment.apps plumbus-system/plumbus-controller  changed"
    assert "      -        image: registry.example.com/plumbus/controller:v1.0.0" in shown
    assert "      +        image: registry.example.com/plumbus/controller:v1.1.0" in shown
    assert "  + ClusterRole.rbac.authorization.k8s.io plumbus.v1.1.0-plumbus-controller-af1045a6  created" in shown

    doc = json.loads(cli("resolve", str(repo.path), "--offline", "--no-write", "-o", "json", capsys=capsys).out)
    [check] = doc["nextMinorChecks"]
    assert check["installed"] == "plumbus.v1.0.0"
    [changed] = [o for o in check["objects"] if o["action"] == "changed"]
    assert (changed["action"], changed["kind"], changed["name"]) == ("changed", "Deployment", "plumbus-controller")
    assert changed["diff"][:2] == ["--- before", "+++ after"]

    dry = cli("reconcile", str(repo.path), "--dry-run", capsys=capsys)
    assert "  plumbus: objects that would change (plumbus.v1.0.0, installed per olm.lock): +4 ~1 -4" in dry.out
    assert "    ~ Deployment.apps plumbus-system/plumbus-controller  changed" in dry.out

    # Looked at one minor ahead, the same bundle as installed: nothing would change.
    repo.set_version(">=1.0.0 <1.1.0")
    same = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert "plumbus: no object would change (plumbus.v1.0.0, installed per olm.lock)" in same.out
    # Nothing installed yet: every object would be created.
    repo.remove("olm.lock")
    fresh = cli("resolve", str(repo.path), "--offline", "--no-write", capsys=capsys)
    assert "plumbus: objects that would change (nothing installed): +" in fresh.out
