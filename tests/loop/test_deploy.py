"""The manifests under deploy/: server-side dry-run on the real control plane, and the RBAC actually suffices."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.cluster.kube import Kube
from reconciler.cluster.status import STATUS_CRD
from reconciler.loop import LeaderElector, LocalSource, Loop

from .conftest import uninstall, wait_until
from .test_watch_local import applied_at, clean, events  # noqa: F401  (clean is a fixture)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VARIANTS = ("base", "remote", "sidecar")


def objects(variant: str) -> list[dict]:
    out = []
    kustomization = yamlio.read_all(DEPLOY / variant / "kustomization.yaml")[0]
    for res in kustomization["resources"]:
        path = DEPLOY / variant / res
        if path.is_dir():
            out += objects(path.relative_to(DEPLOY).as_posix())
        else:
            out += [d for d in yamlio.read_all(path) if d]
    return out


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
