"""After `reconciler adopt` is committed, `reconcile` takes OLM v0's installs over without disruption.

Real OLM v0 installs corpus bundles in three modes (one with Manual
approval, one with a custom resource of its CRD created beforehand, one
whose Subscription's ``spec.config`` overrides env, resources and
nodeSelector, which the declaration's ``spec.config`` carries over, and
cert-manager, whose admission webhooks OLM serves with a certificate of its
own, which the takeover keeps with their ``caBundle``); the
repository adopts them, commits, and reconciles. What must hold: no new
ReplicaSet and the same pod templates (no pod restarted), every CRD and
custom resource still there, OLM's bookkeeping gone (Subscription,
InstallPlans, CSV, OperatorCondition, OperatorGroup) with nothing owned by a
CSV any more, OLM not acting again, and the next reconcile a no-op.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest

from reconciler import yamlio
from reconciler.localcluster import ControlPlane
from reconciler.model.kube import LABEL_OPERATOR
from tests.docblocks import indented_block
from tests.olm.adoption import GROUP, Case, custom, get, installed_by_olm, make_repo, shell
from tests.olm.support import needs_corpus, needs_olm, wait_resynced
from tests.support.repo import commit_all

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

CONFIG = {"env": [{"name": "LOG_LEVEL", "value": "debug"}],
          "resources": {"limits": {"memory": "96Mi"}, "requests": {"cpu": "15m", "memory": "32Mi"}},
          "nodeSelector": {"kubernetes.io/os": "linux"}}
CASES = [
    Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces"),
    Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "OwnNamespace", approval="Manual"),
    Case("ack-s3-controller/1.10.0", "ack-s3-controller.v1.10.0", "SingleNamespace"),
    Case("ruptura-operator/0.9.1", "ruptura-operator.v0.9.1", "OwnNamespace-config", config=CONFIG),
    Case("cert-manager/1.10.0", "cert-manager.v1.10.0", "AllNamespaces-webhook"),
]
WEBHOOKS = CASES[4]
CR = ("odoo-community.org", "v1alpha1", "odoos", "Odoo")
FIRST_LINE = "reconciler adopt platform-repo --dry-run"


@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("takeover-catalog"), CASES):
        yield olm_plane


def snapshot(api, cases: list[Case] = CASES, cr: tuple[str, str, str, str] | None = CR) -> dict:
    """What must not change in the cases' namespaces: ReplicaSets, pod templates, CRDs, custom resources (those of
    ``cr``, in the second case's namespace), webhooks' CAs and serving certificates."""
    apps = kubernetes.client.AppsV1Api(api)
    namespaces = {c.namespace for c in cases}
    replica_sets = sorted((rs.metadata.namespace, rs.metadata.name) for ns in namespaces
                          for rs in apps.list_namespaced_replica_set(ns).items)
    templates = {(d.metadata.namespace, d.metadata.name): api.sanitize_for_serialization(d.spec.template)
                 for ns in namespaces for d in apps.list_namespaced_deployment(ns).items}
    crds = sorted(c.metadata.name for c in kubernetes.client.ApiextensionsV1Api(api).list_custom_resource_definition().items)
    crs = []
    if cr is not None:
        group, version, plural, _ = cr
        crs = [o["metadata"]["name"] for o in custom(api).list_namespaced_custom_object(
            group, version, cases[1].namespace, plural)["items"]]
    admission = kubernetes.client.AdmissionregistrationV1Api(api)
    # by webhook: OLM names each configuration generateName plus a suffix of its own, the bundle generateName
    ca_bundles = sorted((kind, w.name, w.client_config.ca_bundle)
                        for kind, items in (("validating", admission.list_validating_webhook_configuration().items),
                                            ("mutating", admission.list_mutating_webhook_configuration().items))
                        for c in items for w in c.webhooks or [])
    secrets = {(ns, s.metadata.name): {k: v for k, v in s.data.items() if k in ("tls.crt", "tls.key")}
               for ns in namespaces for s in kubernetes.client.CoreV1Api(api).list_namespaced_secret(ns).items
               if s.metadata.name.endswith("-cert")}
    return {"replicaSets": replica_sets, "templates": templates, "crds": crds, "customResources": crs,
            "caBundles": ca_bundles, "servingSecrets": secrets}


def olm_bookkeeping(api, cases: list[Case] = CASES) -> list[str]:
    """Every OLM object left for the adopted installs, and every object still owned by a CSV."""
    left = []
    for case in cases:
        for plural, version in (("subscriptions", "v1alpha1"), ("installplans", "v1alpha1"),
                                ("clusterserviceversions", "v1alpha1"), ("operatorgroups", "v1")):
            items = custom(api).list_namespaced_custom_object(GROUP, version, case.namespace, plural)["items"]
            left += [f"{plural} {case.namespace}/{o['metadata']['name']}" for o in items]
        # the CSV's OperatorCondition stays, the operator's own: owned by nothing, counted as no package's
        for o in custom(api).list_namespaced_custom_object(GROUP, "v2", case.namespace, "operatorconditions")["items"]:
            if o["metadata"].get("ownerReferences") or any(k.startswith("operators.coreos.com/")
                                                           for k in o["metadata"].get("labels") or {}):
                left.append(f"operatorconditions {case.namespace}/{o['metadata']['name']}: {o['metadata']}")
        # Nothing OLM made is left owned by no one: every object of these kinds in the namespaces is the
        # reconciler's (but the namespace's default ServiceAccount).
        for ns in {case.namespace, case.watched}:
            for kind, items in (("Deployment", kubernetes.client.AppsV1Api(api).list_namespaced_deployment(ns)),
                                ("ServiceAccount", kubernetes.client.CoreV1Api(api).list_namespaced_service_account(ns)),
                                ("Service", kubernetes.client.CoreV1Api(api).list_namespaced_service(ns)),
                                ("Role", kubernetes.client.RbacAuthorizationV1Api(api).list_namespaced_role(ns)),
                                ("RoleBinding", kubernetes.client.RbacAuthorizationV1Api(api)
                                 .list_namespaced_role_binding(ns))):
                for o in items.items:
                    labels = o.metadata.labels or {}
                    if kind == "ServiceAccount" and o.metadata.name == "default":
                        continue
                    if any(r.kind == "OperatorCondition" for r in o.metadata.owner_references or []):
                        continue   # the access OLM's OperatorCondition controller gives the operator to it
                    ours = LABEL_OPERATOR in labels or "reconciler.dev/installer-for" in labels   # or its installer
                    if not ours or any(k.startswith("olm.owner") for k in labels) \
                            or any(r.kind == "ClusterServiceVersion" for r in o.metadata.owner_references or []):
                        left.append(f"{kind} {ns}/{o.metadata.name} (labels {sorted(labels)})")
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    csvs = {c.csv for c in cases}
    for kind, items in (("ClusterRole", rbac.list_cluster_role().items),
                        ("ClusterRoleBinding", rbac.list_cluster_role_binding().items)):
        left += [f"{kind} {o.metadata.name} labelled olm.owner: {o.metadata.labels} "
                 f"{[(m.manager, m.operation, m.time) for m in o.metadata.managed_fields or []]}" for o in items
                 if (o.metadata.labels or {}).get("olm.owner") in csvs]
    return left


def test_reconcile_takes_the_adopted_installs_over_without_disruption(installed: ControlPlane, tmp_path: Path):
    """docs/migration.md's block, run as printed, with what must hold checked after each line."""
    block = indented_block("docs/migration.md", FIRST_LINE)
    assert len(block) == 7, block
    with installed.admin_client() as api:
        group, version, plural, kind = CR
        custom(api).create_namespaced_custom_object(group, version, CASES[1].namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "kept"}, "spec": {}})
        before = snapshot(api)
    assert before["customResources"] == ["kept"]
    make_repo(tmp_path / "platform-repo", CASES)
    run = shell(installed.kubeconfig_path, tmp_path)
    env = run.env

    preview_adopt = run(block[0])
    assert all(f"would write operators/{c.package}.yaml" in preview_adopt for c in CASES), preview_adopt
    assert not (tmp_path / "platform-repo" / "operators").exists()
    run(block[1])
    configured = CASES[3]
    written = (tmp_path / "platform-repo" / "operators" / f"{configured.package}.yaml").read_text()
    assert yamlio.load_one(written, "operators")["spec"]["config"] == CONFIG, written
    # what OLM made of the overrides, which the takeover must keep as it is
    pod = before["templates"][(configured.namespace, configured.package)]["spec"]
    (container,) = pod["containers"]
    assert {"name": "LOG_LEVEL", "value": "debug"} in container["env"]
    assert container["resources"] == CONFIG["resources"] and pod["nodeSelector"] == CONFIG["nodeSelector"]
    run(block[2])
    run(block[3])

    preview = run(block[4], code=1)   # changes found: the takeover's
    for case in CASES:
        assert (f"takeover of {case.package} from OLM v0: would delete Subscription {case.namespace}/"
                f"{case.package}") in preview, preview
        assert (f"takeover of {case.package} from OLM v0: would delete ClusterServiceVersion {case.namespace}/"
                f"{case.csv}, orphaning its objects") in preview
    with installed.admin_client() as api:
        assert snapshot(api) == before
        assert get(api, CASES[0].namespace, "subscriptions", CASES[0].package) is not None   # nothing done yet

    run(block[5])
    wait_resynced(installed, [c.namespace for c in CASES])   # what OLM does on its next passes must undo nothing
    with installed.admin_client() as api:
        after = snapshot(api)
        assert after["replicaSets"] == before["replicaSets"]   # no new ReplicaSet: no pod restarted
        assert after["templates"] == before["templates"]
        assert after["caBundles"] == before["caBundles"] and after["servingSecrets"] == before["servingSecrets"]
        assert set(before["crds"]) <= set(after["crds"])
        assert after["customResources"] == ["kept"]
        left = olm_bookkeeping(api)
        assert left == [], "\n".join(left)

    again = run(block[6])   # the next reconcile is a no-op
    assert "takeover of" not in again, again
    upgrade_through_the_repository(installed, tmp_path / "platform-repo", env)


# The next bundle of an adopted package, and what its Deployment runs that the adopted one did not.
NEXT = [(CASES[0], "move2kube-operator/0.3.15", "move2kube-operator-controller-manager",
        "quay.io/konveyor/move2kube-operator:v0.3.15"),
        (WEBHOOKS, "cert-manager/1.10.1", "cert-manager-webhook",
         "--tls-cert-file=/apiserver.local.config/certificates/apiserver.crt")]


def upgrade_through_the_repository(installed: ControlPlane, repo: Path, env: dict, bundles: list = NEXT) -> None:
    """The next ``bundles`` (``NEXT``'s shape) are added to the repository's catalog: `resolve` moves the lock,
    `reconcile` applies them, and OLM, no longer asked, does nothing."""
    resolve_next(repo, env, bundles)
    commit_all(repo, "the next bundles")
    done = subprocess.run([sys.executable, "-m", "reconciler", "reconcile", str(repo)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}"
    wait_resynced(installed, sorted({case.namespace for case, *_ in bundles}))   # OLM, no longer asked, acts not
    with installed.admin_client() as api:
        for case, _, deployment, wanted in bundles:
            dep = kubernetes.client.AppsV1Api(api).read_namespaced_deployment(deployment, case.namespace)
            ran = {c.image for c in dep.spec.template.spec.containers} | \
                {a for c in dep.spec.template.spec.containers for a in c.args or []}
            assert wanted in ran, ran
            for plural in ("subscriptions", "installplans", "clusterserviceversions"):
                assert custom(api).list_namespaced_custom_object(GROUP, "v1alpha1", case.namespace,
                                                                 plural)["items"] == []


def resolve_next(repo: Path, env: dict, bundles: list = NEXT) -> None:
    """The next ``bundles`` in the repository's catalog (their directories under bundles/, each the next entry of
    its channel), and the lock moved to them by `resolve`."""
    import json
    import shutil

    from tests.olm.support import CORPUS, write_catalog_of

    catalog = repo / "catalogs" / "corpus" / "catalog.json"
    blobs = {}
    for case, bundle, _, _ in bundles:
        shutil.copytree(CORPUS / "operators" / bundle, repo / "bundles" / bundle)
        (blobs[case.package],) = write_catalog_of([CORPUS / "operators" / bundle], repo / "next",
                                                  image=lambda d: f"file://bundles/{d.parent.name}/{d.name}",
                                                  by_opm=False)
        shutil.rmtree(repo / "next")
    docs = [json.loads(line) for line in catalog.read_text().splitlines()]
    for doc in docs:
        if doc["schema"] == "olm.channel" and doc["package"] in blobs:
            case = next(c for c, *_ in bundles if c.package == doc["package"])
            doc["entries"].append({"name": blobs[case.package]["name"], "replaces": case.csv})
    catalog.write_text("\n".join(json.dumps(d) for d in docs + list(blobs.values())) + "\n")

    done = subprocess.run([sys.executable, "-m", "reconciler", "resolve", str(repo)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}"
    lock = (repo / "olm.lock").read_text()
    for case, *_ in bundles:
        assert f"name: {blobs[case.package]['name']}" in lock and f"name: {case.csv}" not in lock, lock
