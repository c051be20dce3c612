"""The way back: an Operator adopted from OLM v0 and taken over is handed back to the real OLM v0, and OLM keeps it.

Real OLM v0 installs corpus bundles (AllNamespaces; OwnNamespace with Manual
approval and a custom resource that must survive; one with a Subscription
``spec.config``; SingleNamespace; cert-manager, whose webhooks keep a handback from being
disruption-free) on a plane of its own, whose controllers resync every
``INTERVAL`` seconds and whose cluster has an OpenShift proxy, so OLM injects
its variables. The repository adopts them and the reconcile takes them over;
then docs/migration.md's "The way back" runs as printed (and the same for the
other installs). What must hold after the handback, and again after a full
resync of both OLM controllers: no new ReplicaSet and the same pod templates,
every CRD and custom resource still there, OLM's Subscription pinned (Manual,
startingCSV) with its CSV Succeeded and owning the Deployments, nothing
labelled or recorded as the reconciler's; and removing the declarations prunes
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes.client
import pytest

from reconciler import yamlio
from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.localcluster.olmv0 import ensure_olm
from reconciler.model.kube import LABEL_OPERATOR
from tests.docblocks import indented_block
from tests.olm.adoption import GROUP, Case, custom, get, installed_by_olm, make_repo, shell
from tests.olm.support import INTERVAL, needs_corpus, needs_olm, olm_logs, uncaptured, wait_resynced
from tests.support.repo import git
from tests.support.wait import wait_until
from tests.olm.test_takeover import CONFIG, snapshot

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

PROXY = {"httpProxy": "http://proxy.example.com:3128", "httpsProxy": "http://proxy.example.com:3129",
         "noProxy": ".cluster.local,.svc,10.0.0.0/16"}
CASES = [
    Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces"),
    Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "OwnNamespace", approval="Manual"),
    Case("ruptura-operator/0.9.1", "ruptura-operator.v0.9.1", "OwnNamespace-config", config=CONFIG),
    Case("ack-s3-controller/1.10.0", "ack-s3-controller.v1.10.0", "SingleNamespace"),
    Case("cert-manager/1.10.0", "cert-manager.v1.10.0", "AllNamespaces-webhook"),
]
BACK, WEBHOOKS = CASES[:4], CASES[4]
CR = ("odoo-community.org", "v1alpha1", "odoos", "Odoo")
FIRST_LINE = "reconciler handback platform-repo --operator odoo-operator --dry-run"

# OpenShift's cluster-wide proxy, as much of config.openshift.io as olm-operator reads to inject its variables.
PROXY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "proxies.config.openshift.io"},
    "spec": {"group": "config.openshift.io", "scope": "Cluster",
             "names": {"kind": "Proxy", "listKind": "ProxyList", "plural": "proxies", "singular": "proxy"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def plane(request, tmp_path_factory) -> Iterator[ControlPlane]:
    """A plane whose OLM resyncs every ``INTERVAL`` seconds, with a cluster proxy set before OLM starts."""
    with uncaptured(request):
        binaries, olm = ensure_binaries(log=print), ensure_olm(log=print)
    plane = ControlPlane(tmp_path_factory.mktemp("handback-plane"), binaries, olm_interval=INTERVAL)
    try:
        plane.start(timeout=240)
        with plane.admin_client() as api:
            ext = kubernetes.client.ApiextensionsV1Api(api)
            ext.create_custom_resource_definition(PROXY_CRD)
            wait_until(lambda: any(
                c.type == "Established" and c.status == "True"
                for c in ext.read_custom_resource_definition(PROXY_CRD["metadata"]["name"]).status.conditions or []),
                "the Proxy CRD established", timeout=240, diagnose=olm_logs(plane))
            objects = kubernetes.client.CustomObjectsApi(api)
            objects.create_cluster_custom_object("config.openshift.io", "v1", "proxies", {
                "apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
                "spec": {"httpProxy": PROXY["httpProxy"]}})
            objects.patch_cluster_custom_object_status("config.openshift.io", "v1", "proxies", "cluster",
                                                       {"status": PROXY})
        plane.start_olm(olm)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def installed(request, plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    with installed_by_olm(request, plane, tmp_path_factory.mktemp("handback-catalog"), CASES):
        yield plane


def ours(api) -> list[str]:
    """Every object still labelled as one of the reconciler's Operators', in the cases' namespaces and cluster-wide."""
    found = []
    for case in BACK:
        selector = f"{LABEL_OPERATOR}={case.package}"
        apps, core = kubernetes.client.AppsV1Api(api), kubernetes.client.CoreV1Api(api)
        rbac, ext = kubernetes.client.RbacAuthorizationV1Api(api), kubernetes.client.ApiextensionsV1Api(api)
        for kind, items in (("Deployment", apps.list_deployment_for_all_namespaces(label_selector=selector).items),
                            ("ServiceAccount", core.list_service_account_for_all_namespaces(label_selector=selector).items),
                            ("Service", core.list_service_for_all_namespaces(label_selector=selector).items),
                            ("ClusterRole", rbac.list_cluster_role(label_selector=selector).items),
                            ("ClusterRoleBinding", rbac.list_cluster_role_binding(label_selector=selector).items),
                            ("Role", rbac.list_role_for_all_namespaces(label_selector=selector).items),
                            ("RoleBinding", rbac.list_role_binding_for_all_namespaces(label_selector=selector).items),
                            ("CustomResourceDefinition", ext.list_custom_resource_definition(label_selector=selector).items)):
            found += [f"{kind} {o.metadata.namespace or ''}/{o.metadata.name}" for o in items]
    return found


def granted_to_operators(api, selector: str) -> dict:
    """What the RBAC objects ``selector`` picks grant each case's operator ServiceAccount."""
    from reconciler.cluster.ownership.takeover.handback import granted

    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    objects = []
    for kind, items in (("Role", rbac.list_role_for_all_namespaces(label_selector=selector).items),
                        ("RoleBinding", rbac.list_role_binding_for_all_namespaces(label_selector=selector).items),
                        ("ClusterRole", rbac.list_cluster_role(label_selector=selector).items),
                        ("ClusterRoleBinding", rbac.list_cluster_role_binding(label_selector=selector).items)):
        objects += [{**api.sanitize_for_serialization(o), "kind": kind} for o in items]
    accounts = {(s["namespace"], s["name"]) for o in objects for s in o.get("subjects") or []
                if s.get("kind") == "ServiceAccount"}
    return {a: granted(objects, *a) for a in accounts}


def olm_runs(api, case: Case) -> list[str]:
    """What is not as OLM keeps an install it owns, for ``case``."""
    wrong = []
    sub = get(api, case.namespace, "subscriptions", case.package) or {}
    spec, status = sub.get("spec") or {}, sub.get("status") or {}
    if (spec.get("startingCSV"), spec.get("installPlanApproval"), status.get("installedCSV")) != \
            (case.csv, "Manual", case.csv):
        wrong.append(f"Subscription {case.namespace}/{case.package}: {spec}, installed {status.get('installedCSV')}")
    csv = get(api, case.namespace, "clusterserviceversions", case.csv) or {}
    if (csv.get("status") or {}).get("phase") != "Succeeded":
        wrong.append(f"CSV {case.csv}: {(csv.get('status') or {}).get('phase')} {(csv.get('status') or {}).get('message')}")
    for dep in kubernetes.client.AppsV1Api(api).list_namespaced_deployment(case.namespace).items:
        if not any(r.kind == "ClusterServiceVersion" and r.name == case.csv for r in dep.metadata.owner_references or []):
            wrong.append(f"Deployment {case.namespace}/{dep.metadata.name} is not owned by {case.csv}")
    return wrong


@pytest.fixture(scope="module")
def taken_over(installed: ControlPlane, tmp_path_factory) -> dict:
    """Every case adopted from OLM and taken over by the reconcile, with a custom resource that must survive: the
    repository, a shell in its directory, and what ran under OLM before."""
    where = tmp_path_factory.mktemp("handback")
    repo = where / "platform-repo"
    with installed.admin_client() as api:
        group, version, plural, kind = CR
        custom(api).create_namespaced_custom_object(group, version, CASES[1].namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "kept"}, "spec": {}})
        before = snapshot(api, CASES)
        proxied = before["templates"][(CASES[0].namespace, "move2kube-operator-controller-manager")]
    env = {e["name"]: e.get("value") for c in proxied["spec"]["containers"] for e in c.get("env") or []}
    assert env["HTTP_PROXY"] == PROXY["httpProxy"] and env["NO_PROXY"] == PROXY["noProxy"]   # OLM injected them
    make_repo(repo, CASES)
    run = shell(installed.kubeconfig_path, where)
    run("reconciler adopt platform-repo")
    # the proxy variables OLM injected are written into spec.config.env, as the pods run them
    injected = [{"name": "HTTP_PROXY", "value": PROXY["httpProxy"]}, {"name": "HTTPS_PROXY", "value": PROXY["httpsProxy"]},
                {"name": "NO_PROXY", "value": PROXY["noProxy"]}]
    written = yamlio.load_one((repo / "operators" / "move2kube-operator.yaml").read_text(), "move2kube")
    assert written["spec"]["config"] == {"env": injected}, written
    configured = yamlio.load_one((repo / "operators" / "ruptura-operator.yaml").read_text(), "ruptura")
    assert configured["spec"]["config"] == {**CONFIG, "env": CONFIG["env"] + injected}, configured
    run("git -C platform-repo add -A && git -C platform-repo commit -qm adopt")
    run("reconciler reconcile platform-repo")
    with installed.admin_client() as api:
        taken = snapshot(api, CASES)
        assert taken["replicaSets"] == before["replicaSets"] and taken["templates"] == before["templates"]
        assert get(api, CASES[0].namespace, "clusterserviceversions", CASES[0].csv) is None   # taken over
        reconcilers = {c.package: granted_to_operators(api, f"{LABEL_OPERATOR}={c.package}") for c in BACK}
    return {"repo": repo, "run": run, "before": before, "reconcilers": reconcilers}


def test_adopted_installs_are_handed_back_to_olm_and_stay_as_they_ran(installed: ControlPlane, taken_over: dict):
    repo, run, before, reconcilers = (taken_over[k] for k in ("repo", "run", "before", "reconcilers"))

    # cert-manager serves webhooks: refused, with why, and nothing written
    refused = run("reconciler handback platform-repo --operator cert-manager", code=2)
    assert "serves webhooks or APIServices" in refused, refused
    assert "handback" not in (repo / "operators" / "cert-manager.yaml").read_text()

    others = " ".join(f"--operator {c.package}" for c in BACK if c.package != "odoo-operator")
    run(f"reconciler handback platform-repo {others}")
    block = indented_block("docs/migration.md", FIRST_LINE)
    assert len(block) == 9, block
    preview = run(block[0])
    assert "would create Subscription" in preview and "startingCSV odoo-operator.v0.0.2" in preview, preview
    assert "reconciler.dev/handback" not in (repo / "operators" / "odoo-operator.yaml").read_text()
    run(block[1])
    declaration = yamlio.load_one((repo / "operators" / "odoo-operator.yaml").read_text(), "odoo")
    annotations = declaration["metadata"]["annotations"]
    assert annotations == {"reconciler.dev/handback": f"olm-v0/{CASES[1].namespace}/corpus"}, annotations
    run(block[2])
    dry = run(block[3], code=1)
    for case in BACK:
        assert f"handback of {case.package} to OLM v0: would create Subscription {case.namespace}/{case.package}" \
            in dry, dry
    with installed.admin_client() as api:
        assert get(api, CASES[1].namespace, "subscriptions", "odoo-operator") is None   # nothing done yet
    applied = run(block[4])
    with installed.admin_client() as api:
        for case in BACK:
            assert olm_runs(api, case) == [], f"{olm_runs(api, case)}\n{applied}"
            olms = granted_to_operators(api, f"olm.owner={case.csv}")
            for account, permissions in reconcilers[case.package].items():   # never narrower
                assert olms[account].covers(permissions), (case.package, account,
                                                           olms[account].missing(permissions).describe())
        assert ours(api) == [], ours(api)
    since = time.time()
    again = run(block[5])
    assert "is OLM v0's again" in again, again

    wait_resynced(installed, [c.namespace for c in BACK], since)
    with installed.admin_client() as api:
        after = snapshot(api, CASES)
        assert after["replicaSets"] == before["replicaSets"], (before["replicaSets"], after["replicaSets"])
        assert after["templates"] == before["templates"]
        assert set(before["crds"]) <= set(after["crds"]) and after["customResources"] == ["kept"]
        for case in BACK:
            assert olm_runs(api, case) == [], olm_runs(api, case)
        assert ours(api) == []

    run(block[6])
    run(block[7])
    for case in BACK:
        if case.package != "odoo-operator":
            git(repo, "rm", "-q", f"operators/{case.package}.yaml")
    git(repo, "commit", "-qm", "the others are OLM's too")
    done = run(block[8])
    assert "Summary: 0 created, 0 configured" in done and " 0 deleted" in done, done
    with installed.admin_client() as api:
        final = snapshot(api, CASES)
        assert final["replicaSets"] == before["replicaSets"] and final["templates"] == before["templates"]
        assert final["crds"] == after["crds"] and final["customResources"] == ["kept"]
        for case in BACK:
            assert olm_runs(api, case) == []


CLUSTER_VERSION_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterversions.config.openshift.io"},
    "spec": {"group": "config.openshift.io", "scope": "Cluster",
             "names": {"kind": "ClusterVersion", "listKind": "ClusterVersionList", "plural": "clusterversions",
                       "singular": "clusterversion"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_the_operator_s_own_upgradeable_false_is_in_its_status(installed: ControlPlane, taken_over: dict):
    """cert-manager stays the reconciler's (its webhooks keep it from a handback). Its operator writes the
    OperatorCondition named like its CSV, as OLM's library does: Upgradeable=False becomes a condition of the
    Operator's status and a line of `reconciler status`; and the cluster's ClusterVersion names the release the
    OpenShift gates are judged at."""
    from reconciler.bundle.openshift import cluster_version
    from reconciler.kube.client import Kube

    run = taken_over["run"]
    case = WEBHOOKS
    with installed.admin_client() as api:
        objects = custom(api)
        existing = get(api, case.namespace, "operatorconditions", case.csv, version="v2")
        if existing is None:
            existing = objects.create_namespaced_custom_object(GROUP, "v2", case.namespace, "operatorconditions", {
                "apiVersion": f"{GROUP}/v2", "kind": "OperatorCondition",
                "metadata": {"name": case.csv, "namespace": case.namespace},
                "spec": {"deployments": ["cert-manager"], "serviceAccounts": ["cert-manager"]}})
        generation = existing["metadata"].get("generation", 1)
        objects.patch_namespaced_custom_object_status(GROUP, "v2", case.namespace, "operatorconditions", case.csv, {
            "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "MigrationInProgress",
                                       "message": "the webhook's storage is being migrated",
                                       "lastTransitionTime": "2025-01-01T00:00:00Z",
                                       "observedGeneration": generation}]}})
        kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(CLUSTER_VERSION_CRD)
    run("reconciler reconcile platform-repo")
    with installed.admin_client() as api:
        status = custom(api).get_cluster_custom_object("reconciler.dev", "v1alpha1", "operators", case.package)
        conditions = {c["type"]: c for c in status["status"]["conditions"]}
        assert (conditions["Upgradeable"]["status"], conditions["Upgradeable"]["reason"]) == \
            ("False", "MigrationInProgress"), conditions
        shown = run("reconciler status platform-repo")
        assert (f"  {case.package}: Upgradeable=False (MigrationInProgress): OperatorCondition {case.namespace}/"
                f"{case.csv}: the webhook's storage is being migrated") in shown, shown
        objects = custom(api)
        wait_until(lambda: Kube(api).resource("config.openshift.io/v1", "ClusterVersion"), "the ClusterVersion CRD served",
                   timeout=240, diagnose=olm_logs(installed))
        objects.create_cluster_custom_object("config.openshift.io", "v1", "clusterversions", {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
            "spec": {"channel": "stable-4.16"}})
        objects.patch_cluster_custom_object_status("config.openshift.io", "v1", "clusterversions", "version",
                                                   {"status": {"desired": {"version": "4.16.3"}}})
        assert cluster_version(Kube(api), "4.12") == ("4.16.3", "the cluster's ClusterVersion")
