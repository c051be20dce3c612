"""`reconciler adopt` reads a ClusterExtension the real OLM v1 installed, and `reconcile` takes it over, with no pod
restarted and nothing deleted.

operator-controller installs ack-s3-controller from a catalog on loopback, under a ClusterExtension named apart
from its package and holding a version range and a (deprecated, ignored) installer ServiceAccount the user made
with its RBAC; a custom resource of its CRD is created. docs/migration.md's OLM v1 block is then run as printed:
adopt, commit, reconcile, the reconcile preceded by one killed with SIGKILL once the ClusterExtension is being
deleted, at a random point whose seed is printed (the documented one finishes the takeover). What must hold: the
same ReplicaSet and pod template, the CRD and the custom resource still there, nothing owned by or labelled for
the ClusterExtension, the ClusterExtension and its Helm release gone, the user's ServiceAccount and RBAC left,
operator-controller no longer acting, and the next reconcile a no-op.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest

from reconciler import yamlio
from reconciler.model.kube import LABEL_OPERATOR
from tests.docblocks import indented_block
from tests.olm.adoption import Case, killed, make_repo, shell
from tests.olmv1.support import (BUNDLE, BUNDLE_NAME, CRD, DEPLOYMENT, GROUP, PACKAGE, Setup, install_extension, marks,
                                 publish, serve_catalog)

pytestmark = marks

EXTENSION, NAMESPACE, INSTALLER = "s3-controller", "ack-system", "s3-installer"
RANGE = ">=1.10.0 <2.0.0"
CR = ("s3.services.k8s.aws", "v1alpha1", "buckets", "Bucket")
FIRST_LINE = "reconciler adopt olmv1-repo --dry-run"
OWNER_KIND, OWNER_NAME = f"{GROUP}/owner-kind", f"{GROUP}/owner-name"


@pytest.fixture(scope="module")
def installed(olmv1_setup: Setup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    setup = olmv1_setup
    _, catalog_ref = publish(setup, BUNDLE, tmp_path_factory.mktemp("olmv1-adopt-images"))
    with setup.plane.admin_client() as api:
        serve_catalog(setup, api, "corpus", catalog_ref)
        core, rbac = kubernetes.client.CoreV1Api(api), kubernetes.client.RbacAuthorizationV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": INSTALLER}})
        rbac.create_cluster_role_binding({
            "metadata": {"name": INSTALLER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": INSTALLER, "namespace": NAMESPACE}]})
        extension, _ = install_extension(setup, api, EXTENSION, {
            "namespace": NAMESPACE, "serviceAccount": {"name": INSTALLER},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": PACKAGE, "version": RANGE}}})
        assert extension["status"]["install"]["bundle"]["name"] == BUNDLE_NAME
        group, version, plural, kind = CR
        kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, NAMESPACE, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "kept"}, "spec": {"name": "kept"}})
    yield setup



def snapshot(api) -> dict:
    """What must not change: the ReplicaSets, the pod template, the CRD (by uid), the custom resources."""
    apps = kubernetes.client.AppsV1Api(api)
    group, version, plural, _ = CR
    return {
        "replicaSets": sorted((rs.metadata.name, rs.metadata.uid)
                              for rs in apps.list_namespaced_replica_set(NAMESPACE).items),
        "template": api.sanitize_for_serialization(
            apps.read_namespaced_deployment(DEPLOYMENT, NAMESPACE).spec.template),
        "crd": kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD).metadata.uid,
        "customResources": [o["metadata"]["name"] for o in kubernetes.client.CustomObjectsApi(api)
                            .list_namespaced_custom_object(group, version, NAMESPACE, plural)["items"]],
    }


def olm_v1_left(api) -> list[str]:
    """The ClusterExtension, its release, and every object still owned by it or marked as its (OLM v1's labels,
    the Helm release's label and annotations)."""
    left = []
    custom = kubernetes.client.CustomObjectsApi(api)
    left += [f"ClusterExtension {e['metadata']['name']}" for e in
             custom.list_cluster_custom_object(GROUP, "v1", "clusterextensions")["items"]]
    core, rbac = kubernetes.client.CoreV1Api(api), kubernetes.client.RbacAuthorizationV1Api(api)
    left += [f"Secret {s.metadata.namespace}/{s.metadata.name}"
             for s in core.list_secret_for_all_namespaces(label_selector="owner=operator-controller").items]
    listed = [("Deployment", kubernetes.client.AppsV1Api(api).list_namespaced_deployment(NAMESPACE).items),
              ("ServiceAccount", core.list_namespaced_service_account(NAMESPACE).items),
              ("Service", core.list_namespaced_service(NAMESPACE).items),
              ("ConfigMap", core.list_namespaced_config_map(NAMESPACE).items),
              ("Role", rbac.list_namespaced_role(NAMESPACE).items),
              ("RoleBinding", rbac.list_namespaced_role_binding(NAMESPACE).items),
              ("ClusterRole", rbac.list_cluster_role().items),
              ("ClusterRoleBinding", rbac.list_cluster_role_binding().items),
              ("CustomResourceDefinition",
               kubernetes.client.ApiextensionsV1Api(api).list_custom_resource_definition().items)]
    for kind, items in listed:
        for o in items:
            labels, annotations = o.metadata.labels or {}, o.metadata.annotations or {}
            if OWNER_KIND in labels or OWNER_NAME in labels or labels.get("app.kubernetes.io/managed-by") == "Helm" \
                    or any(k.startswith("meta.helm.sh/") for k in annotations) \
                    or any(r.kind == "ClusterExtension" for r in o.metadata.owner_references or []):
                left.append(f"{kind} {o.metadata.name} (labels {sorted(labels)}, owners "
                            f"{[(r.kind, r.name) for r in o.metadata.owner_references or []]})")
    return left


def test_reconcile_takes_an_adopted_cluster_extension_over_without_disruption(installed: Setup, tmp_path: Path):
    """docs/migration.md's OLM v1 block, run as printed, with what must hold checked after each line."""
    block = indented_block("docs/migration.md", FIRST_LINE)
    assert len(block) == 7, block
    with installed.plane.admin_client() as api:
        before = snapshot(api)
        assert before["customResources"] == ["kept"] and len(before["replicaSets"]) == 1
        assert olm_v1_left(api), "operator-controller marks what it installs"
    repo = make_repo(tmp_path / "olmv1-repo", [Case(f"{PACKAGE}/{BUNDLE.name}", BUNDLE_NAME, "AllNamespaces")])
    run = shell(installed.plane.kubeconfig_path, tmp_path)

    # a repository without the catalog: the ClusterExtension is listed with how to add it, and nothing is written
    (tmp_path / "bare").mkdir()
    left = run("reconciler adopt bare", code=1)
    assert (f"not adopted ClusterExtension {EXTENSION}: no catalog of the repository has bundle {BUNDLE_NAME} of "
            f"package {PACKAGE} (the repository has no catalogs)") in left, left
    assert (f"reconciler catalog import . --image {installed.registry}/olmv1/catalog:1 --name NAME --package "
            f"{PACKAGE}") in left, left
    assert list((tmp_path / "bare").iterdir()) == []

    preview = run(block[0])
    assert f"adopted ClusterExtension {EXTENSION}: Operator {PACKAGE} ({PACKAGE}, channel any, version {RANGE}, " \
           f"AllNamespaces), bundle {BUNDLE_NAME} from catalogs/corpus" in preview, preview
    assert f"would write operators/{PACKAGE}.yaml" in preview, preview
    assert not (repo / "operators").exists()
    run(block[1])
    declared = yamlio.load_one((repo / "operators" / f"{PACKAGE}.yaml").read_text(), "operators")
    assert declared["metadata"]["annotations"] == {"reconciler.dev/adopted-from": f"olm-v1/{EXTENSION}"}
    assert declared["spec"] == {"catalog": {"name": "corpus", "package": PACKAGE}, "version": RANGE,
                                "install": {"namespace": NAMESPACE, "targetNamespaces": [""]}}, declared
    assert f"name: {BUNDLE_NAME}" in (repo / "olm.lock").read_text()
    approval = (repo / "approvals" / f"{PACKAGE}.yaml").read_text()
    assert f"clusterExtension: {EXTENSION}" in approval and f"serviceAccount: {INSTALLER}" in approval, approval
    run(block[2])
    run(block[3])

    preview = run(block[4], code=1)   # changes found: the takeover's
    for step in (f"would delete ClusterExtension {EXTENSION}, orphaning what it installed",
                 f"would delete OLM v1's Helm release Secret olmv1-system/sh.helm.release.v1.{EXTENSION}.v1",
                 "would delete OLM v1's ClusterRole ",   # named with a hash of its own: the bundle's replaces it
                 "would remove OLM v1's labels from"):
        assert f"takeover of {PACKAGE} from OLM v1: {step}" in preview, preview
    with installed.plane.admin_client() as api:
        assert snapshot(api) == before
        assert f"ClusterExtension {EXTENSION}" in olm_v1_left(api)   # nothing done yet

    # A reconcile killed (SIGKILL) just after it deleted the ClusterExtension, at a random point of the sync
    # or what follows: the documented reconcile then finishes the takeover.
    seed = int(os.environ.get("RECONCILER_KILL_SEED") or random.randrange(1 << 30))
    print(f"RECONCILER_KILL_SEED={seed}")
    with installed.plane.admin_client() as api:
        custom = kubernetes.client.CustomObjectsApi(api)

        def deleting() -> bool:
            live = custom.list_cluster_custom_object(GROUP, "v1", "clusterextensions")["items"]
            return not live or bool(live[0]["metadata"].get("deletionTimestamp"))
        code = killed(["reconcile", str(repo), "--kubeconfig", str(installed.plane.kubeconfig_path)],
                      random.Random(seed).uniform(0, 1.5), deleting)
        print(f"exit code of the killed reconcile (None: killed): {code}")
        assert deleting(), f"seed {seed}: exit {code}"
        assert snapshot(api)["replicaSets"] == before["replicaSets"], seed
    run(block[5])
    # time for operator-controller and the garbage collector to act, if they were going to: operator-controller
    # puts its labels back on what it still manages, the collector deletes what is still owned by what is gone
    time.sleep(10)
    with installed.plane.admin_client() as api:
        after = snapshot(api)
        assert after["replicaSets"] == before["replicaSets"]   # no new ReplicaSet: no pod restarted
        assert after["template"] == before["template"]
        assert after["crd"] == before["crd"] and after["customResources"] == ["kept"]
        left = olm_v1_left(api)
        assert left == [], "\n".join(left)
        # the installer the user made for the ClusterExtension is the user's: left as it was
        kubernetes.client.CoreV1Api(api).read_namespaced_service_account(INSTALLER, NAMESPACE)
        kubernetes.client.RbacAuthorizationV1Api(api).read_cluster_role_binding(INSTALLER)
        deployment = kubernetes.client.AppsV1Api(api).read_namespaced_deployment(DEPLOYMENT, NAMESPACE)
        assert deployment.metadata.labels.get(LABEL_OPERATOR) == PACKAGE

    again = run(block[6])   # the next reconcile is a no-op
    assert "takeover of" not in again, again
