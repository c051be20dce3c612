"""Adopting OLM v0 installs, done as deploy/'s ServiceAccount with exactly deploy/'s RBAC.

Real OLM v0 runs on a control plane of its own (tests/olm's: its CRDs and controllers would stay on the
suite's plane), on which an administrator applied deploy/base and OLM installed three corpus operators in
three modes. `reconciler adopt` and the takeover `reconcile` then run with a TokenRequest token of
``reconciler-system/reconciler`` only. That plane's audit log of the ServiceAccount is kept for the suite's
RBAC check (test_capabilities), which reads it with the suite plane's own.

Then, as OpenShift's ``openshift-operators`` holds them, three installs in one namespace under one
OperatorGroup, planned by catalog-operator in one InstallPlan (their Subscriptions were all there before
their CatalogSource), one of them serving an APIService (``tests.olm.served``): two are adopted
(``--package``) and taken over, the third stays with OLM, so the takeover keeps the InstallPlan they
share and takes OLM's labels off an APIService, under deploy/'s rules for both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest

from reconciler.kube.client import Kube
from reconciler.localcluster import ControlPlane
from reconciler.localcluster.plane import DEPLOYED_USER
from tests.olm.adoption import GROUP, Case, custom, get, installed_by_olm, make_repo, settle
from tests.olm.conftest import olm_plane  # noqa: F401  (a fixture)
from tests.olm.served import Served, Unserved, apiservice_bundle
from tests.olm.support import needs_corpus, needs_olm, olm_logs, uncaptured, wait_resynced, write_catalog_of
from tests.support.wait import wait_until
from tests.olm.test_takeover import CASES, olm_bookkeeping, snapshot
from tests.rollout.harness import DEPLOY, deploy_objects
from tests.support.repo import commit_all

from .conftest import keep_audit, passed
from .rbac_usage import deploy_rbac

pytestmark = [pytest.mark.incluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]


@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:  # noqa: F811
    """deploy/base and the component deploy/olm-takeover applied by an administrator, then the takeover
    tests' installs made by OLM v0."""
    with olm_plane.admin_client() as api:
        k8s = Kube(api)
        for doc in deploy_objects("base") + deploy_rbac(DEPLOY, "olm-takeover"):   # base's RBAC again: the same
            k8s.apply(k8s.require_resource(doc), doc, field_manager="deploy-test", dry_run=False)
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("incluster-catalog"), CASES):
        yield olm_plane


def as_deployed_runner(kubeconfig: Path):
    """``run(*args, code=0)``: the CLI with ``kubeconfig`` (deploy/'s ServiceAccount), asserting its exit code;
    its stdout."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(*args: str, code: int = 0) -> str:
        done = subprocess.run([sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == code, f"{args}\n{done.stdout}{done.stderr}"
        return done.stdout
    return run


def test_adopting_and_taking_over_olm_v0_installs(installed: ControlPlane, tmp_path: Path):
    start = installed.audit_log.stat().st_size if installed.audit_log.exists() else 0
    as_deployed = installed.service_account_kubeconfig("reconciler-system", "reconciler")
    repo = make_repo(tmp_path / "platform-repo", CASES)
    run = as_deployed_runner(as_deployed)

    with installed.admin_client() as api:
        before = snapshot(api)
    try:
        preview = run("adopt", str(repo), "--dry-run")
        assert all(f"would write operators/{c.package}.yaml" in preview for c in CASES), preview
        run("adopt", str(repo))
        commit_all(repo, "Adopt what OLM v0 runs")

        dry = run("reconcile", str(repo), "--dry-run", code=1)
        for case in CASES:
            assert f"takeover of {case.package} from OLM v0: would delete Subscription" in dry, dry
        run("reconcile", str(repo))
        wait_resynced(installed, [c.namespace for c in CASES])   # what OLM does on its next passes undoes nothing
        with installed.admin_client() as api:
            after = snapshot(api)
            assert after["replicaSets"] == before["replicaSets"]   # no pod restarted
            assert after["templates"] == before["templates"]
            assert set(before["crds"]) <= set(after["crds"])
            left = olm_bookkeeping(api)
            assert left == [], "\n".join(left)
        again = run("reconcile", str(repo), "--dry-run")   # the next run is a no-op
        assert "takeover of" not in again, again
    finally:
        keep_audit(installed.audit_log, start, DEPLOYED_USER)
    passed("adoption")


SHARED = "incluster-shared"
API_GROUP = "packages.incluster.example"


ADOPTED = [Case("ack-cloudtrail-controller/1.6.0", "ack-cloudtrail-controller.v1.6.0", "OwnNamespace",
                namespace=SHARED),
           Case("package-server/0.18.3", "package-server.v0.18.3", "OwnNamespace", namespace=SHARED)]
KEPT = Case("ecr-secret-operator/0.6.0", "ecr-secret-operator.v0.6.0", "OwnNamespace", namespace=SHARED)
APISERVICE = f"v1.{API_GROUP}"


def _shared_plans(api) -> list[dict]:
    return [p for p in custom(api).list_namespaced_custom_object(GROUP, "v1alpha1", SHARED, "installplans")["items"]
            if KEPT.csv in p["spec"].get("clusterServiceVersionNames", [])]


@pytest.fixture(scope="module")
def shared(request, installed: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    """The three installs of ``SHARED``, in one InstallPlan, the APIService served while the module runs."""
    from bench.peers import opm
    from reconciler.localcluster.olmv0 import ensure_olm

    with uncaptured(request):
        olm = ensure_olm(log=print)
    directory = tmp_path_factory.mktemp("incluster-shared")
    ADOPTED[1].source = apiservice_bundle(olm, directory / "bundles", ADOPTED[1].package, API_GROUP)
    cases = [*ADOPTED, KEPT]
    write_catalog_of([c.path for c in cases], directory / "catalog")
    with opm.serve(directory / "catalog", directory / "serve") as address, installed.admin_client() as api, \
            Served(api, APISERVICE, [("packagemanifests", "PackageManifest", True)]) as served:
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": SHARED}})
        objects = custom(api)
        objects.create_namespaced_custom_object(GROUP, "v1", SHARED, "operatorgroups", {
            "apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "group"},
            "spec": {"targetNamespaces": [SHARED]}})
        for case in cases:   # before their CatalogSource: catalog-operator resolves all three at once
            objects.create_namespaced_custom_object(GROUP, "v1alpha1", SHARED, "subscriptions", {
                "apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription", "metadata": {"name": case.subscription},
                "spec": {"name": case.package, "source": "corpus", "sourceNamespace": SHARED,
                         "installPlanApproval": "Automatic"}})
        objects.create_namespaced_custom_object(GROUP, "v1alpha1", SHARED, "catalogsources", {
            "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": "corpus"},
            "spec": {"sourceType": "grpc", "address": address}})
        wait_until(served.ready, f"APIService {APISERVICE}, its Service and serving certificate", timeout=240,
                   every=0.5, diagnose=olm_logs(installed))
        for case in cases:
            settle(api, case, installed)
        yield installed


def test_a_shared_namespace_is_taken_over_in_part(shared: ControlPlane, tmp_path: Path):
    start = shared.audit_log.stat().st_size if shared.audit_log.exists() else 0
    as_deployed = shared.service_account_kubeconfig("reconciler-system", "reconciler")
    with shared.admin_client() as api:
        (plan,) = _shared_plans(api)
        assert {c.csv for c in [*ADOPTED, KEPT]} <= set(plan["spec"]["clusterServiceVersionNames"]), plan
        before = snapshot(api, [*ADOPTED, KEPT], cr=None)
    repo = make_repo(tmp_path / "shared-repo", ADOPTED)
    (repo / "reconciler.yaml").write_text("instance: shared\n")   # the first test's repository is default's
    run = as_deployed_runner(as_deployed)

    try:
        chosen = [arg for c in ADOPTED for arg in ("--package", c.package)]
        adopted = run("adopt", str(repo), *chosen)
        assert f"left to OLM Subscription {SHARED}/{KEPT.subscription}: not asked for" in adopted, adopted
        commit_all(repo, "Adopt part of what OLM v0 runs in one namespace")
        with Unserved(shared, [APISERVICE]) as unserved:
            taken = run("reconcile", str(repo))
            wait_resynced(shared, [SHARED])   # OLM, running for the install left to it, undoes nothing
        assert unserved.seen == [], unserved.seen[:10]
        assert f"keep InstallPlan {SHARED}/{plan['metadata']['name']}" in taken, taken
        with shared.admin_client() as api:
            after = snapshot(api, [*ADOPTED, KEPT], cr=None)
            assert after["replicaSets"] == before["replicaSets"] and after["templates"] == before["templates"]
            (kept,) = _shared_plans(api)   # the plan OLM keeps for the install left to it, owned by that one only
            assert [r["name"] for r in kept["metadata"].get("ownerReferences") or []
                    if r["kind"] == "Subscription"] == [KEPT.subscription], kept["metadata"]
            for case in ADOPTED:   # OLM made nothing of the adopted installs again
                assert get(api, SHARED, "subscriptions", case.subscription) is None, case.package
                assert get(api, SHARED, "clusterserviceversions", case.csv) is None, case.package
            csv = get(api, SHARED, "clusterserviceversions", KEPT.csv) or {}
            assert (csv.get("status") or {}).get("phase") == "Succeeded", csv.get("status")
            labels = kubernetes.client.ApiregistrationV1Api(api).read_api_service(APISERVICE).metadata.labels or {}
            assert not [k for k in labels if k.startswith("olm.") or k.startswith("operators.coreos.com/")], labels
        again = run("reconcile", str(repo), "--dry-run")
        assert "takeover of" not in again, again
    finally:
        keep_audit(shared.audit_log, start, DEPLOYED_USER)
    passed("shared namespace takeover")
