"""The manifests under deploy/: server-side dry-run on the real control plane, and the RBAC actually suffices."""

from __future__ import annotations

import threading

import pytest

from reconciler import yamlio
from reconciler.kube.client import Kube
from reconciler.cluster.status.objects import STATUS_CRD
from reconciler.loop import LeaderElector, LocalSource, Loop
from tests.rollout.harness import DEPLOY
from tests.rollout.harness import deploy_objects as objects
from tests.support.wait import wait_until

from .conftest import uninstall
from .test_watch_local import applied_at, clean, events  # noqa: F401  (clean is a fixture)

VARIANTS = ("base", "remote", "sidecar")


def test_the_shipped_status_crd_is_the_one_the_reconciler_applies():
    assert yamlio.read_all(DEPLOY / "base" / "crd.yaml") == [STATUS_CRD]


@pytest.mark.parametrize("variant", VARIANTS)
def test_manifests_pass_server_side_dry_run(variant, k8s):
    docs = objects(variant)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Role", "Lease"} <= kinds
    if variant != "base":
        assert "Deployment" in kinds
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    k8s.apply(k8s.resource("v1", "Namespace"), namespace, field_manager="deploy-test", dry_run=False)
    for doc in docs:
        info = k8s.require_resource(doc)
        result = k8s.apply(info, doc, field_manager="deploy-test", dry_run=True)
        assert result["metadata"]["name"] == doc["metadata"]["name"]


def test_the_service_account_rbac_is_enough_to_lead_apply_and_report(control_plane, k8s, gitops, clean):
    """Apply deploy/base for real, then run the loop as its ServiceAccount, not as an administrator."""
    for doc in objects("base"):
        info = k8s.require_resource(doc)
        k8s.apply(info, doc, field_manager="deploy-test", dry_run=False)
    sa = Kube(control_plane.service_account_client("reconciler-system", "reconciler"))
    elector = LeaderElector(Kube(control_plane.service_account_client("reconciler-system", "reconciler")),
                            "reconciler-system", "reconciler", "deploy-test", lease_duration=3,
                            renew_deadline=2, retry_period=0.2)
    loop = Loop(LocalSource(gitops.path, debounce=0.1), sa, interval=3600, elector=elector, identity="deploy-test")
    elector.on_change = lambda leading: loop.trigger("leadership acquired") if leading else None
    elector.start()
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        head = str(gitops.git.head.target)
        wait_until(lambda: loop.last and (loop.last.error or applied_at(k8s, head)), "the example applied")
        assert loop.last.error is None, loop.last.error
        assert applied_at(k8s, head)
        gitops.write("operators/broken.yaml", "apiVersion: example.invalid/v1\nkind: Nonsense\n")
        bad = gitops.commit("bad")
        wait_until(lambda: loop.last.revision == bad, "the bad commit read")
        wait_until(lambda: any(e["reason"] == "RevisionRejected" and bad in e["message"] for e in events(k8s)),
                   "the rejection recorded as an Event by the service account")
    finally:
        loop.stop()
        thread.join(60)
        elector.stop()
    lease = k8s.get(k8s.resource("coordination.k8s.io/v1", "Lease"), "reconciler-system", "reconciler")
    assert lease["spec"].get("leaseTransitions", 0) >= 0 and not lease["spec"].get("holderIdentity")
    uninstall(k8s)


def _as_deployed(control_plane, k8s) -> Kube:
    """deploy/base applied for real; a client acting as its ServiceAccount, not as an administrator."""
    for doc in objects("base"):
        k8s.apply(k8s.require_resource(doc), doc, field_manager="deploy-test", dry_run=False)
    return Kube(control_plane.service_account_client("reconciler-system", "reconciler"))


def _drift(k8s: Kube) -> None:
    """Someone edits a field the reconciler applies: the next plan dry-runs the Deployment to put it back."""
    info = k8s.resource("apps/v1", "Deployment")
    k8s.request("PATCH", info.path("plumbus-system", "plumbus-controller-manager"),
                body={"spec": {"revisionHistoryLimit": 3}}, content_type="application/merge-patch+json")


def test_an_installed_operators_installer_is_found_in_place_without_a_write(control_plane, k8s, gitops, clean):
    from reconciler import pipeline
    from reconciler.pipeline.desired import desired_state
    from reconciler.model.permissions import PermissionSet, Rule
    from reconciler.cluster.ownership import installer
    from tests.e2e.support import RecordingKube

    sa = _as_deployed(control_plane, k8s)
    assert pipeline.reconcile(gitops.path, sa, dry_run=False).sync.changed
    prepared = pipeline.prepare(gitops.path, sa)
    [op] = desired_state(prepared.installs, prepared.resolution, prepared.decisions)
    wanted = {"plumbus": (op.installer, op.shipped_namespaces)}
    reader = RecordingKube(control_plane.service_account_client("reconciler-system", "reconciler"))
    found = installer.in_place(reader, "reconciler-system", wanted)
    assert set(found) == {"plumbus"} and {m for m, _, _ in reader.calls} == {"GET"}   # reads only
    _drift(k8s)
    deployment = next(o for o in op.objects if o["kind"] == "Deployment")
    writer = found["plumbus"]
    dry = writer.apply(writer.require_resource(deployment), deployment, field_manager="reconciler", dry_run=True)
    assert dry["spec"].get("revisionHistoryLimit", 10) != 3   # validated as the installer, as the real run writes it
    more = op.installer | PermissionSet.of([Rule("*", ("",), ("secrets",), ("get",))])
    assert installer.in_place(sa, "reconciler-system", {"plumbus": (more, set())}) == {}   # other permissions
    assert installer.in_place(sa, "reconciler-system", {"fleeb": (op.installer, set())}) == {}   # none at all


def test_a_dry_run_as_the_deployed_service_account_plans_as_each_installer(control_plane, k8s, gitops, clean):
    from reconciler import pipeline

    sa = _as_deployed(control_plane, k8s)
    assert pipeline.reconcile(gitops.path, sa, dry_run=False).sync.changed
    _drift(k8s)
    outcome = pipeline.reconcile(gitops.path, sa, dry_run=True)   # 403 on every kind it dry-runs, as itself
    [change] = [c for c in outcome.sync.changes if c.action.value == "configured"]
    assert change.ref.kind == "Deployment" and any("revisionHistoryLimit" in d for d in change.diff)


def test_a_dry_run_of_a_bundle_that_needs_more_permissions_needs_no_more_rights_than_deploy_grants(
        control_plane, k8s, gitops, clean):
    """The installer in place has the old permissions, so the new objects cannot be checked as the identity that
    will write them; planned as the deployed ServiceAccount, which may not write bundles, they are reported as
    not checked, not refused (403)."""
    from reconciler import pipeline

    sa = _as_deployed(control_plane, k8s)
    assert pipeline.reconcile(gitops.path, sa, dry_run=False).sync.changed
    rel = "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"
    [csv] = yamlio.read_all(gitops.path / rel)
    csv["spec"]["install"]["spec"]["permissions"][0]["rules"].append(
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "patch"]})
    gitops.write(rel, yamlio.dump_all([csv]))
    gitops.write("bundles/plumbus/1.1.0/manifests/settings.yaml",
                 "apiVersion: v1\nkind: Secret\nmetadata: {name: plumbus-settings}\nstringData: {level: info}\n")
    (gitops.path / "olm.lock").unlink()   # the bundle changed in place: resolved again
    gitops.commit("plumbus reads a Secret of its own")

    outcome = pipeline.reconcile(gitops.path, sa, dry_run=True)

    created = {(c.ref.kind, c.ref.name) for c in outcome.sync.changes if c.action.value == "created"}
    assert ("Secret", "plumbus-settings") in created
    assert any("not checked by the API server: the objects of plumbus" in n for n in outcome.sync.notes), \
        outcome.sync.notes
