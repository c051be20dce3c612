"""Ownership by provenance, one inventory per reconciler instance, moves, releases and the CRD opt-in.

An object is the reconciler's when the Operator's recorded inventory lists it
and field manager ``reconciler`` applied it; labels alone prove nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.kube.client import Kube
from reconciler.model.kube import ANNOTATION_REPOSITORY, LABEL_INSTANCE, LABEL_OPERATOR, LABEL_PART_OF, applyset_id
from tests.loop.conftest import hand_over
from tests.support.repo import GitOpsRepo

from .support import approve, get, managed, reconcile
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

OPERATOR = ("reconciler.dev/v1alpha1", "Operator")
SA = ("v1", "ServiceAccount", "plumbus-controller", "plumbus-system")
PLUMBUS_CR = {"apiVersion": "how.theydoit.com/v1alpha1", "kind": "Plumbus",
              "metadata": {"namespace": "default"}, "spec": {"fleeb": "gently"}}


def _uninstall(repo: GitOpsRepo, kc: Path, capsys) -> None:
    for p in (repo.path / "operators").glob("*.yaml"):
        p.unlink()
    settings = (repo.path / "reconciler.yaml").read_text() if (repo.path / "reconciler.yaml").exists() else ""
    instance = [ln for ln in settings.splitlines() if ln.startswith("instance:")]
    repo.write("reconciler.yaml", "\n".join(["allowEmpty: true", *instance]) + "\n")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err


@pytest.fixture
def repo(gitops: GitOpsRepo, kc: Path, k8s: Kube, capsys: pytest.CaptureFixture[str]):
    """The example repository (instance ``default``); afterwards everything it installed is gone."""
    r = gitops
    yield r
    crd = get(k8s, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "plumbai.how.theydoit.com")
    info = k8s.resource("how.theydoit.com/v1alpha1", "Plumbus") if crd is not None else None
    if info is not None:
        for item in k8s.list(info):
            k8s.delete(info, item["metadata"]["namespace"], item["metadata"]["name"])
    _uninstall(r, kc, capsys)
    for name in ("plumbus", "plumbus-renamed"):
        assert managed(k8s, name) == set()
        assert get(k8s, *OPERATOR, name) is None


def _foreign_sa(k8s: Kube, labels: dict[str, str], manager: str = "intruder") -> dict:
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plumbus-system"}},
              field_manager="user", dry_run=False)
    info = k8s.resource("v1", "ServiceAccount")
    return k8s.apply(info, {"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system",
                                         "labels": labels}}, field_manager=manager, dry_run=False)


def _delete_sa(k8s: Kube) -> None:
    k8s.delete(k8s.resource("v1", "ServiceAccount"), "plumbus-system", "plumbus-controller")


def _uids(k8s: Kube, operator: str) -> dict[str, str]:
    status = get(k8s, *OPERATOR, operator)["status"]
    out = {}
    for ref in status["inventory"]:
        api = f"{ref['group']}/{ref['version']}" if ref["group"] else ref["version"]
        obj = get(k8s, api, ref["kind"], ref["name"], ref.get("namespace", ""))
        out[f"{ref['kind']} {ref.get('namespace', '')}/{ref['name']}"] = obj["metadata"]["uid"]
    return out


def test_a_foreign_object_with_our_labels_is_neither_applied_over_nor_pruned(repo, kc, k8s, capsys):
    live = _foreign_sa(k8s, {LABEL_OPERATOR: "plumbus", "app.kubernetes.io/managed-by": "reconciler"})
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2, run.err
        assert "ServiceAccount plumbus-system/plumbus-controller already exists and carries the label " \
               "reconciler.dev/operator=plumbus" in run.err
        assert "no Operator of reconciler instance 'default' recorded it" in run.err
        assert "delete it, or annotate it with reconciler.dev/adopt=true" in run.err
        after = get(k8s, *SA)
        assert after["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
        assert {m["manager"] for m in after["metadata"]["managedFields"]} == {"intruder"}
        assert managed(k8s, "plumbus") == {"ServiceAccount plumbus-system/plumbus-controller"}  # the foreign one
    finally:
        _delete_sa(k8s)


def test_an_inventory_object_replaced_by_someone_else_is_refused_and_not_deleted(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    _delete_sa(k8s)
    _foreign_sa(k8s, {LABEL_OPERATOR: "plumbus"})   # same name, same labels, someone else's
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2
        assert "field manager 'reconciler' did not apply it" in run.err
        repo.remove("operators/plumbus.yaml")
        repo.write("reconciler.yaml", "allowEmpty: true\n")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert "ServiceAccount plumbus-system/plumbus-controller  skipped  [plumbus]: not applied by field manager" in run.out
        assert get(k8s, *SA) is not None
        assert managed(k8s, "plumbus") == {"ServiceAccount plumbus-system/plumbus-controller"}
    finally:
        _delete_sa(k8s)


def test_an_adopt_annotation_still_lets_an_operator_take_an_object_over(repo, kc, k8s, capsys):
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plumbus-system"}},
              field_manager="user", dry_run=False)
    k8s.apply(k8s.resource("v1", "ServiceAccount"), {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system",
                     "labels": {LABEL_OPERATOR: "plumbus"}, "annotations": {"reconciler.dev/adopt": "true"}}},
        field_manager="user", dry_run=False)
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    sa = get(k8s, *SA)
    assert "reconciler" in {m["manager"] for m in sa["metadata"]["managedFields"]}
    assert {"group": "", "version": "v1", "kind": "ServiceAccount", "name": "plumbus-controller",
            "namespace": "plumbus-system"} in get(k8s, *OPERATOR, "plumbus")["status"]["inventory"]


def test_the_instance_is_an_applyset_and_its_members_say_so(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    parent = get(k8s, "v1", "ConfigMap", "reconciler-instance-default", "reconciler-system")
    assert parent is not None
    want = applyset_id("reconciler-instance-default", "reconciler-system", "ConfigMap", "")
    assert want.startswith("applyset-") and want.endswith("-v1") and len(want) <= 63
    assert parent["metadata"]["labels"]["applyset.kubernetes.io/id"] == want
    annotations = parent["metadata"]["annotations"]
    assert annotations["applyset.kubernetes.io/tooling"].startswith("reconciler/v")
    kinds = annotations["applyset.kubernetes.io/contains-group-kinds"].split(",")
    assert kinds == sorted(kinds)
    assert {"ClusterRole.rbac.authorization.k8s.io", "CustomResourceDefinition.apiextensions.k8s.io",
            "Deployment.apps", "Operator.reconciler.dev", "ServiceAccount"} <= set(kinds)
    assert annotations["applyset.kubernetes.io/additional-namespaces"] == "plumbus-system"
    dep = get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")
    assert dep["metadata"]["labels"][LABEL_PART_OF] == want
    status = get(k8s, *OPERATOR, "plumbus")
    assert status["metadata"]["labels"][LABEL_PART_OF] == want
    assert status["metadata"]["labels"][LABEL_INSTANCE] == "default"


def test_a_status_object_from_before_instances_is_adopted_by_the_default_instance(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource(*OPERATOR)
    k8s.request("PATCH", info.path("", "plumbus"), content_type="application/merge-patch+json",
                body={"metadata": {"labels": {LABEL_INSTANCE: None, LABEL_PART_OF: None}}})
    uids = _uids(k8s, "plumbus")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "0 deleted" in run.out
    assert _uids(k8s, "plumbus") == uids
    assert get(k8s, *OPERATOR, "plumbus")["metadata"]["labels"][LABEL_INSTANCE] == "default"


def _empty_repository(path: Path, settings: str = "allowEmpty: true\n") -> GitOpsRepo:
    other = GitOpsRepo(path)
    for p in (other.path / "operators").glob("*.yaml"):
        p.unlink()
    other.write("reconciler.yaml", settings)
    other.commit("an empty repository")
    return other


def _repository_of(k8s: Kube, name: str) -> str | None:
    return (get(k8s, *OPERATOR, name)["metadata"].get("annotations") or {}).get(ANNOTATION_REPOSITORY)


def test_a_second_repository_with_default_settings_cannot_uninstall_the_first(repo, tmp_path, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    assert _repository_of(k8s, "plumbus") == f"file://{repo.path.resolve()}"
    uids = _uids(k8s, "plumbus")
    other = _empty_repository(tmp_path / "other")
    for extra in (("--dry-run",), ()):
        run = reconcile(other, kc, *extra, capsys=capsys)
        assert run.code == 2, run.err
        assert f"this is repository file://{other.path.resolve()}" in run.err
        assert f"from repository file://{repo.path.resolve()}: plumbus" in run.err
        assert "nothing was applied or deleted" in run.err and "instance: <name>" in run.err
        assert "would be deleted" not in run.out and "deleted" not in run.out.replace("0 deleted", "")
    assert _uids(k8s, "plumbus") == uids

    # Declaring the same Operator is no hand-over either.
    other.write("operators/plumbus.yaml", (repo.path / "operators/plumbus.yaml").read_text())
    other.commit("plumbus here too")
    run = reconcile(other, kc, capsys=capsys)
    assert run.code == 2 and "from repository file://" in run.err, run.err
    assert _uids(k8s, "plumbus") == uids and _repository_of(k8s, "plumbus") == f"file://{repo.path.resolve()}"

    # The documented hand-over: the annotation names the repository that takes the Operator.
    hint = next(line for line in run.err.splitlines() if "hint:" in line)
    assert f"kubectl annotate operators.reconciler.dev plumbus reconciler.dev/repository=file://" \
           f"{other.path.resolve()} --overwrite" in hint
    hand_over(k8s, f"file://{other.path.resolve()}")
    assert approve(other, "plumbus", capsys=capsys).code == 0
    run = reconcile(other, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert _uids(k8s, "plumbus") == uids
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 2 and f"from repository file://{other.path.resolve()}: plumbus" in run.err
    _uninstall(other, kc, capsys)


def test_an_operator_recorded_before_repositories_stays_with_the_repository_that_has_its_revision(
        repo, tmp_path, kc, k8s, capsys):
    """Upgrading from a version that recorded no repository uninstalls nothing: an unrecorded Operator is
    claimed by the repository that declares it or holds the commit it was applied at, and by no other."""
    # Two copies of the example committed in the same second are the same commit, hence the same history:
    # give this repository a commit of its own to be applied at.
    repo.write("README.txt", f"{tmp_path}\n")
    repo.commit("this repository's own")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    uids = _uids(k8s, "plumbus")
    info = k8s.resource(*OPERATOR)

    def forget() -> None:
        k8s.request("PATCH", info.path("", "plumbus"), content_type="application/merge-patch+json",
                    body={"metadata": {"annotations": {ANNOTATION_REPOSITORY: None}}})
        assert _repository_of(k8s, "plumbus") is None

    forget()
    other = _empty_repository(tmp_path / "other")
    run = reconcile(other, kc, capsys=capsys)
    assert run.code == 2, run.err
    assert "installed before repositories were recorded" in run.err and "plumbus" in run.err
    assert _uids(k8s, "plumbus") == uids

    run = reconcile(repo, kc, capsys=capsys)   # declares it: recorded as this repository's
    assert run.code == 0, run.err
    assert "Operator plumbus was installed before repositories were recorded" in run.out + run.err
    assert _repository_of(k8s, "plumbus") == f"file://{repo.path.resolve()}"
    assert _uids(k8s, "plumbus") == uids

    forget()   # and removed in the same revision that upgrades: its applied commit is in this repository
    _uninstall(repo, kc, capsys)
    assert get(k8s, *OPERATOR, "plumbus") is None


def test_two_instances_on_one_cluster_do_not_uninstall_each_other(repo, tmp_path, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    uids = _uids(k8s, "plumbus")
    other = GitOpsRepo(tmp_path / "other")
    for p in (other.path / "operators").glob("*.yaml"):
        p.unlink()
    other.write("reconciler.yaml", "instance: team-b\nallowEmpty: true\n")
    other.commit("an empty repository of another team")
    try:
        run = reconcile(other, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert "deleted" not in run.out.replace("0 deleted", "")
        assert _uids(k8s, "plumbus") == uids
        assert get(k8s, *OPERATOR, "plumbus")["metadata"]["labels"][LABEL_INSTANCE] == "default"

        # The same name in the other instance: refused, naming both instances.
        other.write("operators/plumbus.yaml", (repo.path / "operators/plumbus.yaml").read_text())
        other.commit("plumbus here too")
        run = reconcile(other, kc, capsys=capsys)
        assert run.code == 2
        assert "Operator plumbus is declared by reconciler instance 'team-b'" in run.err
        assert "belongs to reconciler instance 'default'" in run.err

        # Another name, the same package: its objects are the first instance's, so it cannot take them.
        other.remove("operators/plumbus.yaml")
        other.write("operators/plumbus2.yaml", (repo.path / "operators/plumbus.yaml").read_text()
                    .replace("name: plumbus\n", "name: plumbus2\n", 1))
        other.commit("plumbus under another name")
        assert approve(other, "plumbus2", capsys=capsys).code == 0
        run = reconcile(other, kc, capsys=capsys)
        assert run.code == 2
        assert "no Operator of reconciler instance 'team-b' recorded it" in run.err
        assert _uids(k8s, "plumbus") == uids
        assert get(k8s, *OPERATOR, "plumbus2") is None
    finally:
        _uninstall(other, kc, capsys)
    assert _uids(k8s, "plumbus") == uids


def test_a_renamed_declaration_moves_its_objects_in_place(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    uids = _uids(k8s, "plumbus")
    text = (repo.path / "operators/plumbus.yaml").read_text().replace("name: plumbus\n", "name: plumbus-renamed\n", 1)
    repo.remove("operators/plumbus.yaml")
    repo.write("operators/plumbus-renamed.yaml", text)
    repo.commit("rename plumbus")
    assert approve(repo, "plumbus-renamed", capsys=capsys).code == 0
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "Operator plumbus was renamed to plumbus-renamed" in run.out
    assert " 0 deleted" in run.out and " 0 created" in run.out
    assert get(k8s, *OPERATOR, "plumbus") is None
    moved = _uids(k8s, "plumbus-renamed")
    assert moved == uids
    assert managed(k8s, "plumbus") == set() and len(managed(k8s, "plumbus-renamed")) == 7
    assert get(k8s, "v1", "ServiceAccount", "install-plumbus", "reconciler-system") is None


def test_an_object_kept_by_prune_disabled_is_released_and_not_readopted(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource("v1", "ServiceAccount")
    k8s.apply(info, {"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "plumbus-controller", "namespace": "plumbus-system",
                                  "annotations": {"reconciler.dev/prune": "disabled"}}},
              field_manager="user", dry_run=False)
    declaration = (repo.path / "operators/plumbus.yaml").read_text()
    repo.remove("operators/plumbus.yaml")
    repo.write("reconciler.yaml", "allowEmpty: true\n")
    repo.commit("remove plumbus")
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert "annotated reconciler.dev/prune=disabled; left in place without the reconciler's labels" in run.out
        sa = get(k8s, *SA)
        labels = sa["metadata"].get("labels") or {}
        assert LABEL_OPERATOR not in labels and LABEL_PART_OF not in labels
        assert "app.kubernetes.io/managed-by" not in labels
        assert get(k8s, *OPERATOR, "plumbus") is None
        # Declared again, the object left behind is foreign: refused, not silently adopted.
        repo.write("operators/plumbus.yaml", declaration)
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2
        assert "ServiceAccount plumbus-system/plumbus-controller already exists and was not created by the " \
               "reconciler" in run.err
    finally:
        _delete_sa(k8s)


def test_a_tampered_lock_is_refused_not_rewritten(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, "--dry-run", "--write-lock", capsys=capsys).code == 1
    lock = repo.path / "olm.lock"
    good = lock.read_text()
    for tampered, message in [
        (good.replace("name: plumbus.v1.1.0", "name: plumbus.v9.9.9"),
         "entry plumbus: names bundle plumbus.v9.9.9 (package plumbus), which catalog 'community' does not have"),
        (good.replace("source: file://bundles/plumbus/1.1.0", "source: file://bundles/plumbus/1.0.0"),
         "entry plumbus: gives bundle plumbus.v1.1.0 the source 'file://bundles/plumbus/1.0.0'"),
        (good.replace("source: file://bundles/plumbus/1.1.0", "source: file://../../elsewhere"),
         "entry plumbus: source 'file://../../elsewhere' of bundle plumbus.v1.1.0 lies outside the repository"),
        (good.replace("source: file://bundles/plumbus/1.1.0", "source: git+file:///srv/git/b.git@"
                      + "0" * 40 + "#bundle"),
         "lies outside the repository"),
    ]:
        lock.write_text(tampered)
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2, (message, run.err)
        assert "olm.lock" in run.err and message in run.err
        assert lock.read_text() == tampered
        assert managed(k8s, "plumbus") == set()
    lock.write_text(good)
    assert reconcile(repo, kc, capsys=capsys).code == 0


def test_a_tampered_lock_of_an_installed_operator_is_refused_by_reconcile_and_approve(repo, kc, k8s, capsys):
    """Once installed, what is installed comes from the cluster; a lock entry naming another bundle that no
    catalog has is still a tampered lock, refused (not rewritten) by every command that reads it."""
    from .support import cli

    assert reconcile(repo, kc, capsys=capsys).code == 0
    lock = repo.path / "olm.lock"
    good = lock.read_text()
    tampered = good.replace("name: plumbus.v1.1.0", "name: plumbus.v9.9.9")
    lock.write_text(tampered)
    message = "olm.lock: entry plumbus: names bundle plumbus.v9.9.9 (package plumbus), which catalog " \
              "'community' does not have"
    for argv in (["reconcile", str(repo.path)], ["reconcile", str(repo.path), "--dry-run"],
                 ["approve", str(repo.path), "plumbus"]):
        code, out, err = cli(*argv, "--kubeconfig", str(kc), capsys=capsys)
        assert code == 2 and message in err, (argv, out, err)
        assert lock.read_text() == tampered
    lock.write_text(good)
    assert reconcile(repo, kc, capsys=capsys).code == 0


def _custom_resources(k8s: Kube, *names: str) -> None:
    info = k8s.resource("how.theydoit.com/v1alpha1", "Plumbus")
    for name in names:
        k8s.apply(info, {**PLUMBUS_CR, "metadata": {**PLUMBUS_CR["metadata"], "name": name}},
                  field_manager="user", dry_run=False)


def test_crds_with_custom_resources_are_kept_with_an_exact_count_unless_opted_in(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    _custom_resources(k8s, "one", "two", "three")
    declaration = (repo.path / "operators/plumbus.yaml").read_text()
    repo.remove("operators/plumbus.yaml")
    repo.write("reconciler.yaml", "allowEmpty: true\n")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "plumbai.how.theydoit.com  skipped  [plumbus]: kept: 3 custom resources of it still exist" in run.out
    assert "reconciler.dev/delete-custom-resources" in run.out
    assert get(k8s, "how.theydoit.com/v1alpha1", "Plumbus", "two", "default") is not None

    # The opt-in states the count the reviewer saw; it is recorded while declared, and holds when removed.
    def opt_in(count: str) -> None:
        repo.write("operators/plumbus.yaml", declaration.replace(
            "metadata:\n  name: plumbus\n",
            f"metadata:\n  name: plumbus\n  annotations:\n    reconciler.dev/delete-custom-resources: \"{count}\"\n"))
        repo.commit(f"opt in to deleting {count} of plumbus' custom resources with it")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert get(k8s, *OPERATOR, "plumbus")["spec"]["deleteCustomResources"] == int(count)
        repo.remove("operators/plumbus.yaml")
        repo.commit("remove plumbus")

    opt_in("2")   # fewer than exist: a later, larger count needs a new opt-in
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "kept: 3 custom resources of it still exist, more than the 2 the opt-in on the declaration allows" \
        in run.out and 'delete-custom-resources: "3"' in run.out
    assert get(k8s, "how.theydoit.com/v1alpha1", "Plumbus", "two", "default") is not None
    opt_in("3")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert "plumbai.how.theydoit.com  deleted  [plumbus]: with its 3 custom resources" in run.out
    assert run.out.index("plumbai.how.theydoit.com  deleted") < \
        run.out.index("plumbus-system/plumbus-controller-manager  deleted")   # while the operator could finalize
    assert get(k8s, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "plumbai.how.theydoit.com") is None
    assert get(k8s, *OPERATOR, "plumbus") is None


@pytest.mark.parametrize("value", ["yes", "true", "-1"])
def test_the_delete_opt_in_must_state_a_count(repo, kc, k8s, capsys, value):
    text = (repo.path / "operators/plumbus.yaml").read_text().replace(
        "metadata:\n  name: plumbus\n",
        f"metadata:\n  name: plumbus\n  annotations:\n    reconciler.dev/delete-custom-resources: \"{value}\"\n")
    repo.write("operators/plumbus.yaml", text)
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 2
    assert "operators/plumbus.yaml" in run.err and "must be the number of custom resources" in run.err


def test_kubectl_recognises_the_instance_as_an_applyset_of_another_tool(repo, kc, k8s, capsys, tmp_path):
    """kubectl checks the parent's id against the one it derives from the parent, then refuses to touch a
    set another tool manages: reaching the tooling check proves the id is the one kubectl computes."""
    import os
    import subprocess

    try:
        from bench.peers.kubectl import kubectl_binary
        binary = kubectl_binary(lambda _: None)
    except Exception as exc:  # noqa: BLE001 - no Go toolchain or module cache: nothing to compare with
        not_tested("kubectl", f"kubectl is not available: {exc}")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: probe, namespace: reconciler-system}\n")
    env = {**os.environ, "KUBECTL_APPLYSET": "true", "KUBECONFIG": str(kc), "HOME": str(tmp_path)}
    run = subprocess.run([str(binary), "apply", "--server-side", "--prune", "--dry-run=server",
                          "--applyset=configmaps/reconciler-instance-default", "-n", "reconciler-system",
                          "-f", str(manifest)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert 'managed by tooling "reconciler" instead of "kubectl"' in run.stderr, run.stderr
    assert get(k8s, "v1", "ConfigMap", "probe", "reconciler-system") is None
    # Posing as kubectl's own set, it lists the members by their part-of label (a server-side dry run
    # prunes them on paper); with an id that is not the parent's, kubectl refuses the set.
    cm = k8s.resource("v1", "ConfigMap")
    path = cm.path("reconciler-system", "reconciler-instance-default")
    live = get(k8s, "v1", "ConfigMap", "reconciler-instance-default", "reconciler-system")["metadata"]
    real, tooling = live["labels"]["applyset.kubernetes.io/id"], live["annotations"]["applyset.kubernetes.io/tooling"]

    def pose(id_: str, tool: str) -> subprocess.CompletedProcess:
        k8s.request("PATCH", path, content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"applyset.kubernetes.io/id": id_},
                                       "annotations": {"applyset.kubernetes.io/tooling": tool}}})
        return subprocess.run(run.args, env=env, capture_output=True, text=True, timeout=120)
    try:
        as_kubectl = pose(real, "kubectl/v1.36.3")
        assert as_kubectl.returncode == 0, as_kubectl.stderr
        assert "deployment.apps/plumbus-controller-manager pruned (server dry run)" in as_kubectl.stdout
        assert "operator.reconciler.dev/plumbus pruned (server dry run)" in as_kubectl.stdout
        wrong = pose(applyset_id("elsewhere", "reconciler-system", "ConfigMap"), "kubectl/v1.36.3")
        assert wrong.returncode != 0 and "pruned" not in wrong.stdout, wrong.stdout
    finally:
        pose(real, tooling)
    assert len(managed(k8s, "plumbus")) == 7


def test_operators_move_to_a_named_instance_by_relabelling_their_status_objects(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, capsys=capsys).code == 0
    uids = _uids(k8s, "plumbus")
    repo.write("reconciler.yaml", "instance: team-a\n")
    repo.commit("this repository is team-a's")
    refused = reconcile(repo, kc, capsys=capsys)
    assert refused.code == 2 and "belongs to reconciler instance 'default'" in refused.err
    info = k8s.resource(*OPERATOR)
    k8s.request("PATCH", info.path("", "plumbus"), content_type="application/merge-patch+json",
                body={"metadata": {"labels": {LABEL_INSTANCE: "team-a"}}})
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert _uids(k8s, "plumbus") == uids
    team_a = applyset_id("reconciler-instance-team-a", "reconciler-system", "ConfigMap")
    assert get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")["metadata"]["labels"][
        LABEL_PART_OF] == team_a
    assert get(k8s, *OPERATOR, "plumbus")["metadata"]["labels"][LABEL_PART_OF] == team_a
