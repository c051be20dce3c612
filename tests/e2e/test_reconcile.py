"""`reconciler reconcile` end to end, against a real kube-apiserver and etcd."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.kube.client import Kube
from reconciler.model.kube import LABEL_OPERATOR
from tests.support.repo import GitOpsRepo

from .support import approve, get, managed, reconcile

pytestmark = pytest.mark.cluster

V100 = {"Deployment plumbus-system/plumbus-controller", "ServiceAccount plumbus-system/plumbus-controller",
        "CustomResourceDefinition plumbai.how.theydoit.com",
        "ClusterRole plumbus.v1.0.0-plumbus-controller-af1045a6", "ClusterRole plumbus.v1.0.0-plumbus-controller-bf3d272b",
        "ClusterRoleBinding plumbus.v1.0.0-plumbus-controller-af1045a6",
        "ClusterRoleBinding plumbus.v1.0.0-plumbus-controller-bf3d272b"}
V110 = {s.replace("v1.0.0", "v1.1.0").replace("Deployment plumbus-system/plumbus-controller",
                                              "Deployment plumbus-system/plumbus-controller-manager")
        for s in V100}


@pytest.fixture
def repo(gitops: GitOpsRepo, kc: Path, k8s: Kube, capsys: pytest.CaptureFixture[str]):
    """The example repository; afterwards everything it installed is uninstalled and checked gone."""
    yield gitops
    gitops.withdraw_all()
    run = reconcile(gitops, kc, capsys=capsys)
    assert run.code in (0, 1), run.err
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None


def test_install_applies_every_object_labelled_and_reports_status(repo, kc, k8s, capsys):
    new_namespace = get(k8s, "v1", "Namespace", "plumbus-system") is None  # namespaces outlive the Operators
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "plumbus.v1.1.0" in run.out and f"Summary: {7 + new_namespace} created" in run.out
    assert managed(k8s, "plumbus") == V110
    dep = get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")
    assert dep["metadata"]["labels"][LABEL_OPERATOR] == "plumbus"
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    # the CSV's annotations, then OLM's own, as OLM writes them on the pod template
    assert annotations == {"operatorframework.io/suggested-namespace": "plumbus-system",
                           "capabilities": "Basic Install", "olm.targetNamespaces": "",
                           "olm.operatorNamespace": "plumbus-system"}
    assert dep["spec"]["revisionHistoryLimit"] == 1
    # The deployment controller writes only the status subresource.
    assert {m["manager"] for m in dep["metadata"]["managedFields"] if m.get("subresource") != "status"} == {
        "reconciler"}
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert status["bundle"]["name"] == "plumbus.v1.1.0"
    assert status["revision"] == str(repo.git.head.target)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    assert len(status["inventory"]) == 7
    lock = (repo.path / "olm.lock").read_text()
    assert "name: plumbus.v1.1.0" in lock and "digest: sha256:" in lock


def test_second_reconcile_changes_nothing_and_writes_nothing(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, "--exit-code", capsys=capsys).code == 1  # applied changes
    before = _resource_versions(k8s)
    run = reconcile(repo, kc, "--exit-code", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert "0 created, 0 configured, 7 unchanged, 0 deleted" in run.out
    assert _resource_versions(k8s) == before


def test_a_second_reconcile_in_a_new_process_runs_no_cel(repo, kc, tmp_path, monkeypatch):
    """Guardrail verdicts are remembered across processes: a no-op judges nothing again (no cel-python)."""
    from tests.cli.test_startup import _cli_modules

    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    code, _, first = _cli_modules("reconcile", str(repo.path), "--kubeconfig", str(kc))
    assert code == 0 and "celpy" in first
    code, out, second = _cli_modules("reconcile", str(repo.path), "--kubeconfig", str(kc))
    assert code == 0 and "0 created, 0 configured, 7 unchanged, 0 deleted" in out, out
    assert not {"celpy", "lark"} & second


def test_applying_changes_no_rendered_object_in_place(repo, kc, k8s):
    """Desired objects share their fields with the rendered bundle (only metadata is copied to label them), so
    nothing that plans, writes, softens webhooks or judges health may change an object in place."""
    import copy

    from reconciler import pipeline

    prepared = pipeline.prepare(repo.path, k8s)
    before = copy.deepcopy([i.bundle.objects for i in prepared.installs])
    outcome = pipeline.apply(prepared, k8s, dry_run=False)
    assert outcome.sync.changed and [i.bundle.objects for i in prepared.installs] == before
    assert not pipeline.apply(prepared, k8s, dry_run=False).sync.changed
    assert [i.bundle.objects for i in prepared.installs] == before


def test_upgrade_removes_objects_renamed_between_versions(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    repo.commit("pin 1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert managed(k8s, "plumbus") == V100
    repo.set_version(">=1.0.0 <2.0.0")
    repo.commit("follow 1.x")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == V110
    assert get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system") is None
    assert "- Deployment.apps plumbus-system/plumbus-controller  deleted" in run.out
    assert "plumbus.v1.1.0" in (repo.path / "olm.lock").read_text()


def test_dry_run_changes_nothing_in_the_cluster(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 1, run.err
    assert "would be created" in run.out and "server-side dry-run" in run.out
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None
    assert reconcile(repo, kc, capsys=capsys).code == 0
    repo.set_version(">=1.0.0 <2.0.0")
    before = _resource_versions(k8s)
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 1
    assert "plumbus-system/plumbus-controller  would be deleted" in run.out
    assert "plumbus-system/plumbus-controller-manager  would be created" in run.out
    assert _resource_versions(k8s) == before
    assert managed(k8s, "plumbus") == V100


def test_removing_a_declaration_prunes_its_objects(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    repo.remove("operators/plumbus.yaml")
    repo.commit("remove plumbus")
    refused = reconcile(repo, kc, capsys=capsys)
    assert refused.code == 2
    assert "declares no Operators" in refused.err and "allowEmpty" in refused.err
    assert managed(k8s, "plumbus") == V110
    repo.write("reconciler.yaml", "allowEmpty: true\n")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "7 deleted" in run.out
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None
    assert get(k8s, "v1", "Namespace", "plumbus-system") is not None  # namespaces are never deleted


def test_crd_with_custom_resources_is_kept_until_they_are_gone(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource("how.theydoit.com/v1alpha1", "Plumbus")
    cr = {"apiVersion": "how.theydoit.com/v1alpha1", "kind": "Plumbus",
          "metadata": {"name": "mine", "namespace": "default"}, "spec": {"fleeb": "gently"}}
    k8s.apply(info, cr, field_manager="user", dry_run=False)
    repo.remove("operators/plumbus.yaml")
    repo.write("reconciler.yaml", "allowEmpty: true\n")
    run = reconcile(repo, kc, capsys=capsys)
    assert "CustomResourceDefinition.apiextensions.k8s.io plumbai.how.theydoit.com  skipped" in run.out
    assert managed(k8s, "plumbus") == {"CustomResourceDefinition plumbai.how.theydoit.com"}
    assert get(k8s, "how.theydoit.com/v1alpha1", "Plumbus", "mine", "default") is not None
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert [c["reason"] for c in status["conditions"]] == ["Uninstalling"]
    k8s.delete(info, "default", "mine")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0 and "plumbai.how.theydoit.com  deleted" in run.out


@pytest.mark.parametrize("breakage, message", [
    ("operators/broken.yaml", "operators/broken.yaml: invalid YAML (line 3, column 1): did not find "
                              "expected ',' or ']', while parsing a flow sequence that starts at line 2"),
    ("unknown-package", "package 'grumbo' not found in catalog 'community'"),
])
def test_bad_input_is_an_error_and_nothing_is_applied(repo, kc, k8s, capsys, breakage, message):
    if breakage == "unknown-package":
        text = (repo.path / "operators/plumbus.yaml").read_text().replace("package: plumbus", "package: grumbo")
        repo.write("operators/plumbus.yaml", text)
    else:
        repo.write(breakage, "apiVersion: operators.coreos.com/v1\nkind: [Operator\n")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 2
    assert message in run.err
    assert run.out == ""
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus") is None
    assert not (repo.path / "olm.lock").exists()


def test_drift_is_corrected_and_fields_of_others_are_kept(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource("apps/v1", "Deployment")
    k8s.apply(info, {"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "plumbus-controller-manager", "namespace": "plumbus-system",
                                  "annotations": {"team": "platform"}},
                     "spec": {"replicas": 3}}, field_manager="kubectl-edit", dry_run=False)
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "~ Deployment.apps plumbus-system/plumbus-controller-manager  configured" in run.out
    assert "-  replicas: 3\n" in run.out and "+  replicas: 1\n" in run.out, run.out
    dep = get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")
    assert dep["spec"]["replicas"] == 1
    assert dep["metadata"]["annotations"]["team"] == "platform"


def test_an_existing_object_not_created_by_the_reconciler_is_not_taken_over(repo, kc, k8s, capsys):
    info = k8s.resource("v1", "ServiceAccount")
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plumbus-system"}},
              field_manager="user", dry_run=False)
    k8s.apply(info, {"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system"}},
              field_manager="user", dry_run=False)
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2
        assert "ServiceAccount plumbus-system/plumbus-controller already exists and was not created" in run.err
        assert managed(k8s, "plumbus") == set()
    finally:
        k8s.delete(info, "plumbus-system", "plumbus-controller")


def _resource_versions(kube: Kube) -> dict[str, str]:
    out = {}
    for api_version, kind in [("apps/v1", "Deployment"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                              ("v1", "ServiceAccount"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                              ("reconciler.dev/v1alpha1", "Operator")]:
        info = kube.resource(api_version, kind)
        if info is None:
            continue
        for item in kube.list(info, label_selector=f"{LABEL_OPERATOR}=plumbus"):
            out[f"{kind}/{item['metadata'].get('namespace', '')}/{item['metadata']['name']}"] = \
                item["metadata"]["resourceVersion"]
    return out


def test_locked_refuses_a_stale_lockfile_and_changed_content(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    repo.commit("pin 1.0.0 and lock it")
    assert reconcile(repo, kc, "--locked", capsys=capsys).code == 0
    repo.set_version(">=1.0.0 <2.0.0")
    run = reconcile(repo, kc, "--locked", capsys=capsys)
    assert run.code == 2
    assert "olm.lock: the lockfile is stale" in run.err
    assert "plumbus: locked to plumbus.v1.0.0, resolves to plumbus.v1.1.0 (differs in name, version, source)" in run.err
    assert managed(k8s, "plumbus") == V100
    repo.set_version("1.0.0")
    csv = repo.path / "bundles/plumbus/1.0.0/manifests/plumbus.clusterserviceversion.yaml"
    csv.write_text(csv.read_text().replace("replicas: 1", "replicas: 2"))
    run = reconcile(repo, kc, "--locked", capsys=capsys)
    assert run.code == 2
    assert "the content of file://bundles/plumbus/1.0.0 changed" in run.err
    dep = get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system")
    assert dep["spec"]["replicas"] == 1


def test_status_reports_updates_outside_the_declaration(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert status["updates"] == [{"catalog": "community", "package": "plumbus", "channel": "stable",
                                  "options": ["plumbus.v1.1.0"]}]
    update = next(c for c in status["conditions"] if c["type"] == "UpdateAvailable")
    assert update["status"] == "True" and "plumbus.v1.1.0" in update["message"]
    repo.set_version(">=1.0.0 <2.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert status["updates"] == []
    assert next(c for c in status["conditions"] if c["type"] == "UpdateAvailable")["status"] == "False"


GRUMBO_CATALOG = """---
schema: olm.package
name: grumbo
defaultChannel: stable
---
schema: olm.channel
package: grumbo
name: stable
entries:
  - name: grumbo.v0.3.0
---
schema: olm.bundle
package: grumbo
name: grumbo.v0.3.0
image: file://bundles/grumbo/0.3.0
properties:
  - type: olm.package
    value: {packageName: grumbo, version: 0.3.0}
  - type: olm.gvk
    value: {group: manufacturing.how.theydoit.com, kind: Grumbo, version: v1alpha1}
"""


def _add_grumbo(repo: GitOpsRepo) -> None:
    """A second package whose API plumbus 1.1.0 requires, built from plumbus 1.0.0's bundle files."""
    src = repo.path / "bundles/plumbus/1.0.0"
    dst = repo.path / "bundles/grumbo/0.3.0"
    for f in src.rglob("*"):
        if f.is_file():
            text = (f.read_text().replace("how.theydoit.com", "manufacturing.how.theydoit.com")
                    .replace("plumbai", "grumbos")
                    .replace("Plumbus", "Grumbo").replace("plumbus", "grumbo").replace("1.0.0", "0.3.0"))
            target = dst / f.relative_to(src).as_posix().replace("plumbai.how.theydoit.com", "grumbos")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.replace("namespace: grumbo-system", "namespace: plumbus-system"))
    repo.write("catalogs/community/grumbo.yaml", GRUMBO_CATALOG)
    catalog = (repo.path / "catalogs/community/plumbus.yaml").read_text()
    repo.write("catalogs/community/plumbus.yaml", catalog.replace(
        "image: file://bundles/plumbus/1.1.0\nproperties:\n",
        "image: file://bundles/plumbus/1.1.0\nproperties:\n  - type: olm.gvk.required\n"
        "    value: {group: manufacturing.how.theydoit.com, kind: Grumbo, version: v1alpha1}\n"))


def test_a_dependency_is_installed_with_its_dependent_and_pruned_with_it(repo, kc, k8s, capsys):
    _add_grumbo(repo)
    repo.commit("plumbus 1.1.0 needs the Grumbo API")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 4, run.err  # a new package: its first install waits for approval, and so does plumbus
    assert "grumbo: grumbo.v0.3.0 WAITS FOR APPROVAL" in run.out
    assert "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL (olm.resolveset, Android): plumbus.v1.1.0 depends on " \
           "grumbo, which waits for approval" in run.out
    assert managed(k8s, "grumbo") == set() and managed(k8s, "plumbus") == set()
    assert approve(repo, "grumbo", capsys=capsys).code == 0
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "Dependency grumbo: grumbo.v0.3.0" in run.out and "[required by plumbus]" in run.out
    assert "Deployment plumbus-system/grumbo-controller-manager" not in managed(k8s, "plumbus")
    assert any(s.startswith("Deployment ") for s in managed(k8s, "grumbo"))
    assert get(k8s, "apiextensions.k8s.io/v1", "CustomResourceDefinition",
               "grumbos.manufacturing.how.theydoit.com") is not None
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "grumbo")
    assert status["spec"]["requiredBy"] == ["plumbus"]
    assert status["status"]["satisfies"] == [{"bundle": "plumbus.v1.1.0",
                                             "meets": "API Grumbo.manufacturing.how.theydoit.com/v1alpha1"}]
    plumbus = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert plumbus["dependencies"] == [{"bundle": "grumbo.v0.3.0",
                                        "meets": "API Grumbo.manufacturing.how.theydoit.com/v1alpha1"}]
    lock = (repo.path / "olm.lock").read_text()
    assert "operator: grumbo" in lock and "required_by: plumbus" in lock
    repo.set_version("1.0.0")
    repo.write("operators/plumbus.yaml", (repo.path / "operators/plumbus.yaml").read_text()
               .replace("inputClass: subscription", "inputClass: force"))
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "grumbo") == set()
    assert get(k8s, "reconciler.dev/v1alpha1", "Operator", "grumbo") is None
    assert "operator: grumbo" not in (repo.path / "olm.lock").read_text()


def test_deprecations_are_reported_by_reconcile_and_in_status(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    assert next(c for c in status["conditions"] if c["type"] == "Deprecated")["status"] == "False"
    catalog = repo.path / "catalogs/community/plumbus.yaml"
    catalog.write_text(catalog.read_text() + (
        "---\nschema: olm.deprecations\npackage: plumbus\nentries:\n"
        "  - reference: {schema: olm.bundle, name: plumbus.v1.0.0}\n    message: 1.0.0 leaks fleebs\n"
        "  - reference: {schema: olm.channel, name: stable}\n    message: follow candidate\n"))
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "deprecated: plumbus: bundle plumbus.v1.0.0: 1.0.0 leaks fleebs" in run.out
    assert "deprecated: plumbus: channel stable: follow candidate" in run.out
    conditions = {c["type"]: c for c in get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
                  ["conditions"]}
    assert conditions["BundleDeprecated"]["status"] == "True"
    assert "1.0.0 leaks fleebs" in conditions["BundleDeprecated"]["message"]
    assert conditions["ChannelDeprecated"]["status"] == "True"
    assert conditions["PackageDeprecated"]["status"] == "False"
    assert conditions["Deprecated"]["status"] == "True"


def _resolve_offline(repo, capsys):
    from reconciler.cli.parser import main
    import io
    capsys.readouterr()
    code = main(["resolve", str(repo.path), "--offline"], out=io.StringIO())
    return code, capsys.readouterr().err


def test_reverting_a_tentative_upgrade_follows_the_cluster_not_the_lock(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    repo.set_version(">=1.0.0 <2.0.0")
    assert _resolve_offline(repo, capsys)[0] == 0          # the lock now says 1.1.0; the cluster runs 1.0.0
    assert "plumbus.v1.1.0" in (repo.path / "olm.lock").read_text()
    repo.set_version("1.0.0")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == V100
    assert "plumbus.v1.0.0" in (repo.path / "olm.lock").read_text()


def test_a_fresh_cluster_installs_the_committed_lock_while_it_satisfies(repo, kc, k8s, capsys):
    repo.set_version("1.0.0")
    assert _resolve_offline(repo, capsys)[0] == 0
    repo.set_version(">=1.0.0 <2.0.0")                      # 1.1.0 satisfies too, but 1.0.0 is locked
    repo.commit("lock 1.0.0, widen the range")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == V100
    run = reconcile(repo, kc, capsys=capsys)                # installed now: the next reconcile upgrades
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == V110
