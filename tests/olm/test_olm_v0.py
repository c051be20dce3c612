"""OLM v0 installs a real community bundle on the local cluster, from a catalog the reconciler rendered.

The bundle is rendered by `reconciler catalog render` (objects inline), served
by the pinned opm on loopback and registered as a grpc CatalogSource by
address; a Subscription then goes through OLM's own path (resolution,
InstallPlan, CSV, Deployment), with kwok running the pods. With Automatic
approval the CSV succeeds on its own; with Manual approval nothing is
installed until the InstallPlan is approved. What OLM writes into the
objects it creates is asserted too: later work that takes such installs
over has to keep it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import kubernetes.client
import pytest
from kubernetes.client.rest import ApiException

from reconciler.localcluster import ControlPlane
from tests.olm.support import GROUP, WAIT, get, needs_corpus, needs_olm, olm_logs
from tests.support.wait import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

PACKAGE, CSV_NAME, CHANNEL = "ecr-secret-operator", "ecr-secret-operator.v0.6.0", "alpha"
DEPLOYMENT = "ecr-secret-operator-controller-manager"


@pytest.fixture
def api(olm_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with olm_plane.admin_client() as client:
        yield client


@pytest.fixture
def namespace(api: kubernetes.client.ApiClient) -> Iterator[str]:
    """A namespace of the test's own, deleted afterwards with all OLM made in it."""
    name = f"olm-{uuid.uuid4().hex[:8]}"
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    custom = kubernetes.client.CustomObjectsApi(api)
    # The Subscription first, so that OLM does not install again what the namespace's deletion removes.
    for plural in ("subscriptions", "installplans", "clusterserviceversions"):
        custom.delete_collection_namespaced_custom_object(GROUP, "v1alpha1", name, plural)
    core.delete_namespace(name)


def subscribe(api: kubernetes.client.ApiClient, namespace: str, address: str, approval: str) -> None:
    """A CatalogSource dialling opm at ``address``, an OperatorGroup for the namespace and a Subscription."""
    custom = kubernetes.client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "catalogsources", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": "corpus"},
        "spec": {"sourceType": "grpc", "address": address, "displayName": "one corpus bundle"}})
    custom.create_namespaced_custom_object(GROUP, "v1", namespace, "operatorgroups", {
        "apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "own"},
        "spec": {"targetNamespaces": [namespace]}})
    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "subscriptions", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription", "metadata": {"name": PACKAGE},
        "spec": {"name": PACKAGE, "channel": CHANNEL, "source": "corpus", "sourceNamespace": namespace,
                 "installPlanApproval": approval}})


def csv_succeeded(api: kubernetes.client.ApiClient, namespace: str) -> dict | None:
    csv = get(api, namespace, "clusterserviceversions", CSV_NAME)
    return csv if csv and (csv.get("status") or {}).get("phase") == "Succeeded" else None


def deployment_available(api: kubernetes.client.ApiClient, namespace: str):
    try:
        dep = kubernetes.client.AppsV1Api(api).read_namespaced_deployment(DEPLOYMENT, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    available = any(c.type == "Available" and c.status == "True" for c in dep.status.conditions or [])
    ready = (dep.status.available_replicas or 0) >= (dep.spec.replicas or 1)
    return dep if available and ready else None


def plan_complete(api: kubernetes.client.ApiClient, namespace: str, name: str, plane: ControlPlane) -> dict:
    """The InstallPlan once its phase is Complete (it may still say Installing when the CSV has succeeded)."""
    def complete() -> dict | None:
        plan = get(api, namespace, "installplans", name)
        return plan if plan and (plan.get("status") or {}).get("phase") == "Complete" else None

    return wait_until(complete, f"InstallPlan {name} Complete", timeout=WAIT, every=0.5, diagnose=olm_logs(plane))


def catalog_ready(api: kubernetes.client.ApiClient, namespace: str) -> bool:
    source = get(api, namespace, "catalogsources", "corpus") or {}
    return ((source.get("status") or {}).get("connectionState") or {}).get("lastObservedState") == "READY"


def installed(api: kubernetes.client.ApiClient, namespace: str) -> dict | None:
    """The Subscription once its status names the CSV installed and its InstallPlan (written after the CSV
    succeeds, on catalog-operator's next pass)."""
    sub = get(api, namespace, "subscriptions", PACKAGE) or {}
    status = sub.get("status") or {}
    return sub if status.get("installedCSV") and status.get("installPlanRef") else None


def assert_installed_as_olm_installs(api: kubernetes.client.ApiClient, namespace: str, plane: ControlPlane) -> None:
    """The CSV succeeds and owns a Deployment that rolled out, whose pod template carries OLM's annotations."""
    csv = wait_until(lambda: csv_succeeded(api, namespace), "the CSV's phase Succeeded", timeout=WAIT, every=0.5,
                     diagnose=olm_logs(plane))
    dep = wait_until(lambda: deployment_available(api, namespace), f"Deployment {DEPLOYMENT} available", timeout=WAIT,
                     every=0.5, diagnose=olm_logs(plane))
    owners = [(o.kind, o.name) for o in dep.metadata.owner_references or []]
    assert owners == [("ClusterServiceVersion", CSV_NAME)], owners
    labels = dep.metadata.labels
    assert (labels.get("olm.managed"), labels.get("olm.owner"), labels.get("olm.owner.kind"),
            labels.get("olm.owner.namespace")) == ("true", CSV_NAME, "ClusterServiceVersion", namespace)
    assert "olm.deployment-spec-hash" in labels   # (operators.coreos.com/<package>.<namespace> comes later)
    # The pod template's labels are the CSV's as written; its annotations gain the CSV's and OLM's own.
    (spec,) = [d for d in csv["spec"]["install"]["spec"]["deployments"] if d["name"] == DEPLOYMENT]
    assert dep.spec.template.metadata.labels == spec["spec"]["template"]["metadata"]["labels"]
    template = dep.spec.template.metadata.annotations or {}
    assert template.get("olm.targetNamespaces") == namespace
    assert template.get("olm.operatorGroup") == "own"
    # The CSV's own annotations are copied into the pod template (alm-examples among them).
    assert template.get("alm-examples") == csv["metadata"]["annotations"]["alm-examples"]
    pods = kubernetes.client.CoreV1Api(api).list_namespaced_pod(namespace).items
    assert pods and all(p.status.phase == "Running" for p in pods)   # kwok ran them


def test_an_automatic_subscription_installs_the_bundle(api, namespace, olm_plane, catalog_address):
    subscribe(api, namespace, catalog_address, "Automatic")
    wait_until(lambda: catalog_ready(api, namespace), "the CatalogSource READY", timeout=WAIT, every=0.5,
               diagnose=olm_logs(olm_plane))
    assert_installed_as_olm_installs(api, namespace, olm_plane)
    sub = wait_until(lambda: installed(api, namespace), "the Subscription's installed CSV", timeout=WAIT, every=0.5,
                     diagnose=olm_logs(olm_plane))
    assert sub["status"]["installedCSV"] == CSV_NAME
    plan = plan_complete(api, namespace, sub["status"]["installPlanRef"]["name"], olm_plane)
    assert plan["spec"]["approval"] == "Automatic" and plan["spec"]["approved"] is True
    crd = kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition("secrets.ecr.mobb.redhat.com")
    assert crd.metadata.name == "secrets.ecr.mobb.redhat.com"   # the bundle's CRD, created by OLM


def test_a_manual_subscription_waits_for_its_install_plan_to_be_approved(api, namespace, olm_plane,
                                                                          catalog_address):
    subscribe(api, namespace, catalog_address, "Manual")

    def waiting_plan() -> dict | None:
        ref = ((get(api, namespace, "subscriptions", PACKAGE) or {}).get("status") or {}).get("installPlanRef")
        plan = ref and get(api, namespace, "installplans", ref["name"])
        return plan if plan and (plan.get("status") or {}).get("phase") == "RequiresApproval" else None

    plan = wait_until(waiting_plan, "an InstallPlan that requires approval", timeout=WAIT, every=0.5,
                      diagnose=olm_logs(olm_plane))
    assert plan["spec"]["approved"] is False and plan["spec"]["clusterServiceVersionNames"] == [CSV_NAME]
    time.sleep(5)   # time OLM would need to act if it did not wait
    assert get(api, namespace, "clusterserviceversions", CSV_NAME) is None
    assert deployment_available(api, namespace) is None
    assert get(api, namespace, "installplans", plan["metadata"]["name"])["status"]["phase"] == "RequiresApproval"

    kubernetes.client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, "v1alpha1", namespace, "installplans", plan["metadata"]["name"], {"spec": {"approved": True}})
    assert_installed_as_olm_installs(api, namespace, olm_plane)
    assert plan_complete(api, namespace, plan["metadata"]["name"], olm_plane)["spec"]["approved"] is True
