"""An OpenShift-shaped OLM v0 cluster, adopted in part and taken over, with OLM still running for the rest.

The shape, on a plane of its own whose OLM resyncs every ``INTERVAL``
seconds and whose global catalog namespace is OpenShift's
(``openshift-marketplace``, holding the CatalogSource ``redhat-operators``):

* ``openshift-operators`` under OpenShift's AllNamespaces OperatorGroup
  ``global-operators``, holding argocd-operator (AllNamespaces only, with a
  conversion webhook on its ArgoCD CRD, which OLM serves with a certificate
  of its own), ack-cloudtrail-controller (all four install modes) and
  move2kube-operator, whose Subscription is applied as Argo CD applies one
  (its field manager and tracking annotation): adopt refuses it with the way
  out, and it stays with OLM;
* ``team-a``, an OwnNamespace group mixing odoo-operator, adopted, and
  ruptura-operator, left with OLM (adopt is given ``--package``);
* OLM's own packageserver CSV in OLM's namespace, as OLM's installation
  ships it (the pinned module's quickstart, ``olmv0.packageserver``): adopt
  lists it as OLM's own and still exits 0;
* in ``openshift-operators`` too, an operator serving an aggregated API
  through an APIService: the corpus has no such bundle, so it is built from
  the one real CSV at hand that serves one, the packageserver's, renamed
  (package ``package-server``, API group ``PACKAGES``) so it does not claim
  OLM's own APIService. Both aggregated APIs are answered where their
  Services point (``tests.olm.served``: kwok runs no container), so OLM sees
  them available, as on a cluster, and the run is watched every 0.1 s for
  any moment either APIService is absent or unavailable;
* in ``openshift-operators`` still, alloydb-omni-operator, kept with OLM, and
  cert-manager, which OLM installed as its dependency under a Subscription
  it made itself: adopting cert-manager alone is refused with the reason
  (catalog-operator would install it again for alloydb-omni-operator).

The repository adopts the chosen packages (exit 0), commits, and the
reconcile takes them over; then both OLM controllers resync fully, and what
must hold: no new ReplicaSet and the same pod templates, no CRD and no custom
resource deleted, the conversion webhook in place with OLM's caBundle, OLM
recreated nothing for the adopted packages (no Subscription, CSV, InstallPlan
or Operator object), the APIServices never absent nor unavailable and with the
same caBundle and Service, each adopted CSV's OperatorCondition kept without an
owner, the installs left with OLM still Succeeded under OLM with the
InstallPlan they share with an adopted one (catalog-operator plans a
namespace's Subscriptions together), and the next ``reconcile --exit-code``
exits 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import kubernetes.client
import pytest

from reconciler.localcluster import ControlPlane, ensure_binaries, olmv0
from reconciler.localcluster.olmv0 import ensure_olm
from tests.olm.adoption import GROUP, Case, custom, make_repo, settle, shell
from tests.olm.served import Served, Unserved, apiservice_bundle
from tests.olm.support import (INTERVAL, get, needs_corpus, needs_olm, olm_logs, uncaptured, wait_resynced,
                               write_catalog_of)
from tests.olm.test_takeover import snapshot
from tests.support.wait import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

MARKETPLACE, CATALOG = olmv0.OPENSHIFT_CATALOGS, "redhat-operators"
GLOBAL, TEAM = olmv0.OPENSHIFT_OPERATORS, "team-a"


ARGOCD = Case("argocd-operator/0.10.0", "argocd-operator.v0.10.0", "AllNamespaces", namespace=GLOBAL)
CLOUDTRAIL = Case("ack-cloudtrail-controller/1.6.0", "ack-cloudtrail-controller.v1.6.0", "AllNamespaces",
                  namespace=GLOBAL)
ARGO_MANAGED = Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces",
                    namespace=GLOBAL)
ODOO = Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "OwnNamespace", namespace=TEAM)
KEPT = Case("ruptura-operator/0.9.1", "ruptura-operator.v0.9.1", "OwnNamespace", namespace=TEAM)
PACKAGES = "packages.shape.example"   # the API group of the bundle built from OLM's packageserver CSV
SERVING = Case("package-server/0.18.3", "package-server.v0.18.3", "AllNamespaces", namespace=GLOBAL)
DEPENDENT = Case("alloydb-omni-operator/1.3.0", "alloydb-omni-operator.v1.3.0", "AllNamespaces",
                 namespace=GLOBAL)
DEPENDENCY = Case("cert-manager/1.12.2", "cert-manager.v1.12.2", "AllNamespaces", dependency_of=DEPENDENT)
# as OLM names the Subscription it makes for a dependency: package, channel, catalog and its namespace
DEPENDENCY.subscription = f"{DEPENDENCY.package}-stable-{CATALOG}-{MARKETPLACE}"
CASES = [ARGOCD, CLOUDTRAIL, ARGO_MANAGED, ODOO, KEPT, SERVING, DEPENDENT, DEPENDENCY]
ADOPTED = [ARGOCD, CLOUDTRAIL, ODOO, SERVING]
# The aggregated APIs of the shape: OLM's own packageserver's and the adopted operator's
APISERVICES = {"v1.packages.operators.coreos.com": [("packagemanifests", "PackageManifest", True)],
               f"v1.{PACKAGES}": [("packagemanifests", "PackageManifest", True)]}
WITH_OLM = [ARGO_MANAGED, KEPT, DEPENDENT, DEPENDENCY]
TRACKING = f"platform:{GROUP}/Subscription:{GLOBAL}/{ARGO_MANAGED.package}"
# Custom resources that must survive, each in its CRD's storage version (no conversion: kwok runs no webhook server)
CRS = [("argoproj.io", "v1beta1", "argocds", "ArgoCD", TEAM, {}),
       ("odoo-community.org", "v1alpha1", "odoos", "Odoo", TEAM, {}),
       ("cloudtrail.services.k8s.aws", "v1alpha1", "trails", "Trail", TEAM, {"name": "audit"})]


@pytest.fixture(scope="module")
def plane(request, tmp_path_factory) -> Iterator[ControlPlane]:
    """A plane whose OLM resyncs every ``INTERVAL`` seconds and reads global catalogs from openshift-marketplace."""
    with uncaptured(request):
        binaries, olm = ensure_binaries(log=print), ensure_olm(log=print)
    plane = ControlPlane(tmp_path_factory.mktemp("openshift-plane"), binaries, olm_interval=INTERVAL,
                         openshift=True)
    try:
        plane.start(timeout=240)
        plane.start_olm(olm)
        yield plane
    finally:
        plane.stop()


def platform(api, olm: olmv0.OlmBinaries) -> None:
    """OLM's packageserver, as OLM's installation makes it: its ServiceAccount and RBAC, then its CSV."""
    from kubernetes import utils

    for doc in olmv0.packageserver(olm):
        if doc["kind"] == "ClusterServiceVersion":
            custom(api).create_namespaced_custom_object(GROUP, "v1alpha1", olmv0.NAMESPACE,
                                                        "clusterserviceversions", doc)
        else:
            utils.create_from_dict(api, doc)


def subscription(case: Case) -> dict:
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription",
            "metadata": {"name": case.subscription, "namespace": case.namespace},
            "spec": {"name": case.package, "source": CATALOG, "sourceNamespace": MARKETPLACE,
                     "installPlanApproval": "Automatic"}}


@pytest.fixture(scope="module")
def installed(request, plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    """Every case installed by OLM v0 from redhat-operators (one catalog of their bundles, served by opm), beside
    OLM's own packageserver; both aggregated APIs served (``Served``) until the module's tests are done."""
    from bench.peers import opm

    with uncaptured(request):
        opm.opm_binary(log=print)
        olm = ensure_olm(log=print)
    directory = tmp_path_factory.mktemp("openshift-catalog")
    SERVING.source = apiservice_bundle(olm, directory / "bundles", SERVING.package, PACKAGES)
    # rendered by opm, as a catalog image's would be: the repository's own catalog is the reconciler's rendering
    write_catalog_of([c.path for c in CASES], directory / "catalog")
    with opm.serve(directory / "catalog", directory / "serve") as address, plane.admin_client() as api, \
            ExitStack() as serving:
        platform(api, olm)
        core, objects = kubernetes.client.CoreV1Api(api), custom(api)
        objects.create_namespaced_custom_object(GROUP, "v1alpha1", MARKETPLACE, "catalogsources", {
            "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": CATALOG},
            "spec": {"sourceType": "grpc", "address": address, "displayName": "Red Hat Operators"}})
        # openshift-operators and its global-operators are the plane's (``ControlPlane(openshift=True)``)
        core.create_namespace({"metadata": {"name": TEAM}})
        objects.create_namespaced_custom_object(GROUP, "v1", TEAM, "operatorgroups", {
            "apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": TEAM},
            "spec": {"targetNamespaces": [TEAM]}})
        # alloydb-omni-operator (and so cert-manager) first, the rest once it runs, as a cluster's installs come
        # one after another: all at once, catalog-operator plans openshift-operators in one InstallPlan that,
        # with every bundle's objects inline, is more than the API server stores (2 MiB)
        for case in [DEPENDENT, *[c for c in CASES if c not in (DEPENDENT, DEPENDENCY)]]:
            body = subscription(case)
            if case is ARGO_MANAGED:   # as Argo CD applies it: its field manager and its tracking annotation
                body["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id": TRACKING}
                objects.create_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "subscriptions", body,
                                                        field_manager="argocd-controller")
            else:
                objects.create_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "subscriptions", body)
            if case is DEPENDENT:
                settle(api, DEPENDENT, plane)
                settle(api, DEPENDENCY, plane)
        for name, resources in APISERVICES.items():
            served = serving.enter_context(Served(api, name, resources))
            wait_until(served.ready, f"APIService {name}, its Service and serving certificate",
                       timeout=240, every=0.5, diagnose=olm_logs(plane))
        wait_until(lambda: (get(api, olmv0.NAMESPACE, "clusterserviceversions", "packageserver") or {}).get(
            "status", {}).get("phase") == "Succeeded", "OLM's packageserver Succeeded", timeout=240, every=0.5,
            diagnose=olm_logs(plane))
        for case in CASES:
            if case not in (DEPENDENT, DEPENDENCY):
                settle(api, case, plane)
        yield plane


def apiservices(api) -> dict:
    """Each APIService of the shape: its caBundle and Service."""
    out = {}
    for name in APISERVICES:
        spec = kubernetes.client.ApiregistrationV1Api(api).read_api_service(name).spec
        out[name] = (spec.ca_bundle, spec.service.to_dict())
    return out


def conversions(api) -> dict:
    """Each CRD with a conversion webhook: its strategy, caBundle and Service."""
    out = {}
    for crd in kubernetes.client.ApiextensionsV1Api(api).list_custom_resource_definition().items:
        conversion = api.sanitize_for_serialization(crd.spec.conversion) or {}
        if conversion.get("strategy") == "Webhook":
            config = (conversion.get("webhook") or {}).get("clientConfig") or {}
            out[crd.metadata.name] = (config.get("caBundle"), config.get("service"))
    return out


def custom_resources(api) -> list[str]:
    return sorted(f"{plural}/{o['metadata']['name']}" for group, version, plural, _, ns, _ in CRS
                  for o in custom(api).list_namespaced_custom_object(group, version, ns, plural)["items"])


def recreated(api, kept_plans: set[str] = frozenset()) -> list[str]:
    """What OLM has for an adopted package: a Subscription, CSV or InstallPlan of it in any namespace (its copies
    included), or its Operator object; but ``kept_plans`` (uids), which also installed an install left with OLM."""
    found = []
    packages, csvs = {c.package for c in ADOPTED}, {c.csv for c in ADOPTED}
    objects = custom(api)
    for sub in objects.list_cluster_custom_object(GROUP, "v1alpha1", "subscriptions")["items"]:
        if sub["spec"].get("name") in packages:
            found.append(f"Subscription {sub['metadata']['namespace']}/{sub['metadata']['name']}")
    for csv in objects.list_cluster_custom_object(GROUP, "v1alpha1", "clusterserviceversions")["items"]:
        if csv["metadata"]["name"] in csvs or any(csv["metadata"]["name"].startswith(f"{p}.") for p in packages):
            found.append(f"ClusterServiceVersion {csv['metadata']['namespace']}/{csv['metadata']['name']}")
    for plan in objects.list_cluster_custom_object(GROUP, "v1alpha1", "installplans")["items"]:
        names = set((plan.get("spec") or {}).get("clusterServiceVersionNames") or [])
        if names & csvs and plan["metadata"]["uid"] not in kept_plans:
            found.append(f"InstallPlan {plan['metadata']['namespace']}/{plan['metadata']['name']} ({sorted(names)})")
    for operator in objects.list_cluster_custom_object(GROUP, "v1", "operators")["items"]:
        if operator["metadata"]["name"] in {f"{c.package}.{c.namespace}" for c in ADOPTED}:
            found.append(f"Operator {operator['metadata']['name']}")
    return found


def with_olm(api) -> list[str]:
    """What is not as OLM keeps an install it runs, for the installs left with OLM."""
    wrong = []
    for case in WITH_OLM:
        sub = get(api, case.namespace, "subscriptions", case.subscription) or {}
        status = sub.get("status") or {}
        plan = (status.get("installPlanRef") or {}).get("name")
        if status.get("installedCSV") != case.csv or not plan \
                or get(api, case.namespace, "installplans", plan) is None \
                or any(c.get("type") == "InstallPlanMissing" and c.get("status") == "True"
                       for c in status.get("conditions") or []):
            wrong.append(f"Subscription {case.namespace}/{case.subscription}: {sub.get('status')}")
        csv = get(api, case.namespace, "clusterserviceversions", case.csv) or {}
        if (csv.get("status") or {}).get("phase") != "Succeeded":
            wrong.append(f"CSV {case.namespace}/{case.csv}: {(csv.get('status') or {}).get('phase')} "
                         f"{(csv.get('status') or {}).get('message')}")
        for dep in kubernetes.client.AppsV1Api(api).list_namespaced_deployment(
                case.namespace, label_selector=f"olm.owner={case.csv}").items:
            if not any(r.kind == "ClusterServiceVersion" and r.name == case.csv
                       for r in dep.metadata.owner_references or []):
                wrong.append(f"Deployment {case.namespace}/{dep.metadata.name} is not owned by {case.csv}")
    return wrong


def test_an_openshift_shaped_cluster_is_adopted_in_part_and_olm_undoes_nothing(installed: ControlPlane,
                                                                               tmp_path: Path):
    with installed.admin_client() as api:
        for group, version, plural, kind, ns, spec in CRS:
            custom(api).create_namespaced_custom_object(group, version, ns, plural, {
                "apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "kept"}, "spec": spec})
        before = snapshot(api, CASES, cr=None)
        before_conversions, before_crs = conversions(api), custom_resources(api)
        # catalog-operator plans a namespace's Subscriptions together: a plan that installed one left with OLM too
        kept_plans = {p["metadata"]["uid"] for p in custom(api).list_cluster_custom_object(
            GROUP, "v1alpha1", "installplans")["items"]
            if {c.csv for c in WITH_OLM} & set(p["spec"].get("clusterServiceVersionNames") or [])}
        assert with_olm(api) == []
    assert set(before_conversions) == {"argocds.argoproj.io"} and all(ca for ca, _ in before_conversions.values()), \
        before_conversions   # OLM serves the conversion webhook, with a CA of its own
    assert len(before_crs) == len(CRS), before_crs
    with installed.admin_client() as api:
        before_apiservices = apiservices(api)
    make_repo(tmp_path / "platform-repo", CASES, catalog=CATALOG)
    run = shell(installed.kubeconfig_path, tmp_path)

    # Everything asked for: the Subscription Argo CD applies is refused with the way out, the rest adoptable.
    preview = run("reconciler adopt platform-repo --dry-run", code=1)
    assert (f"Subscription {GLOBAL}/{ARGO_MANAGED.subscription}" in preview and "is applied by Argo CD (Application "
            "platform)" in preview and "remove it from its Argo CD Application without deleting it" in preview), \
        preview
    for case in ADOPTED + [KEPT]:
        assert f"would write operators/{case.package}.yaml" in preview, preview
    assert f"left to OLM ClusterServiceVersion {olmv0.NAMESPACE}/packageserver: OLM's own component" in preview, \
        preview
    assert not (tmp_path / "platform-repo" / "operators").exists()
    # A dependency alone, its dependent left with OLM: refused, with the reason and the way out
    alone = run(f"reconciler adopt platform-repo --dry-run --package {DEPENDENCY.package}", code=1)
    assert (f"not adopted Subscription {GLOBAL}/{DEPENDENCY.subscription}: ClusterServiceVersion "
            f"{GLOBAL}/{DEPENDENT.csv} (needs" in alone and f"stays with OLM and needs what {DEPENDENCY.csv} provides"
            in alone and "adopt them together (name both with --package" in alone), alone

    chosen = " ".join(f"--package {c.package}" for c in ADOPTED)
    adopted = run(f"reconciler adopt platform-repo {chosen}")   # exit 0: the rest is asked for by no one, or OLM's
    assert f"Summary: {len(ADOPTED)} adopted, 0 left with a reason, 1 OLM's own, {len(WITH_OLM)} not asked for" \
        in adopted, adopted
    for case in WITH_OLM:   # the Argo CD one too, though it would have been refused: it was not asked for
        assert f"left to OLM Subscription {case.namespace}/{case.subscription}: not asked for" in adopted, adopted
    for case in ADOPTED:
        assert f"adopted Subscription {case.namespace}/{case.subscription}: Operator {case.package}" in adopted, \
            adopted
    assert not (tmp_path / "platform-repo" / "operators" / f"{KEPT.package}.yaml").exists()
    assert not (tmp_path / "platform-repo" / "operators" / f"{ARGO_MANAGED.package}.yaml").exists()
    run("git -C platform-repo add -A && git -C platform-repo commit -qm 'Adopt part of what OLM v0 runs'")

    dry = run("reconciler reconcile platform-repo --dry-run", code=1)
    for case in ADOPTED:
        assert f"takeover of {case.package} from OLM v0: would delete Subscription {case.namespace}/" \
            f"{case.subscription}" in dry, dry
    with installed.admin_client() as api:
        assert snapshot(api, CASES, cr=None) == before   # nothing done yet

    with Unserved(installed, list(APISERVICES)) as unserved:
        run("reconciler reconcile platform-repo")
        wait_resynced(installed, [GLOBAL, TEAM])
    assert unserved.seen == [], unserved.seen[:20]   # not for a moment: the takeover's order of steps
    with installed.admin_client() as api:
        after = snapshot(api, CASES, cr=None)
        assert after["replicaSets"] == before["replicaSets"], (before["replicaSets"], after["replicaSets"])
        assert after["templates"] == before["templates"]
        assert after["caBundles"] == before["caBundles"] and after["servingSecrets"] == before["servingSecrets"]
        assert set(before["crds"]) <= set(after["crds"]), set(before["crds"]) - set(after["crds"])
        assert custom_resources(api) == before_crs
        assert conversions(api) == before_conversions   # the webhook in place, with the CA the pods serve
        assert apiservices(api) == before_apiservices
        assert (get(api, olmv0.NAMESPACE, "clusterserviceversions", "packageserver") or {}).get(
            "status", {}).get("phase") == "Succeeded"   # OLM's own, untouched
        assert recreated(api, kept_plans) == [], recreated(api, kept_plans)
        assert with_olm(api) == [], with_olm(api)
        for case in ADOPTED:   # the operator's own OperatorCondition stays, owned by nothing
            condition = get(api, case.namespace, "operatorconditions", case.csv, version="v2")
            assert condition is not None and not condition["metadata"].get("ownerReferences"), (case.csv, condition)
    again = run("reconciler reconcile platform-repo --exit-code")
    assert "takeover of" not in again, again
