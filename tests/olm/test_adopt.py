"""`reconciler adopt` reads what a real OLM v0 installed and writes it into a repository.

Corpus bundles are installed by OLM v0 on a plane of its own, in different
modes: AllNamespaces (Automatic), OwnNamespace with Manual approval (its
InstallPlan approved by hand), SingleNamespace watching another namespace, one
with ``spec.config`` overrides (carried into the declaration's ``spec.config``), and a CSV whose
Subscription was deleted (listed, never dropped). OLM is served a catalog of
the bundles with their objects inline; the repository holds its own rendering
of the same bundles (each pointing at its copy under bundles/), which adopt
must match by name and content.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.localcluster import ControlPlane
from tests.olm.adoption import (
    GROUP, Case, custom, get, installed_by_olm, make_repo as make_repo_of, reconciler,
)
from tests.olm.support import CORPUS, WAIT, needs_corpus, needs_olm, olm_logs
from tests.support.repo import commit_all, git
from tests.support.wait import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

CASES = [
    Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces"),
    Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "OwnNamespace", approval="Manual"),
    Case("ack-s3-controller/1.10.0", "ack-s3-controller.v1.10.0", "SingleNamespace"),
]
# Every field of spec.config, so that the comparison below checks the merge against what OLM v0 itself makes.
CONFIGURED = Case("ruptura-operator/0.9.1", "ruptura-operator.v0.9.1", "Config", config={
    "env": [{"name": "LOG_LEVEL", "value": "debug"}],
    "envFrom": [{"configMapRef": {"name": "ruptura-settings", "optional": True}}],
    "volumes": [{"name": "cache", "emptyDir": {}}], "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
    "resources": {"limits": {"memory": "96Mi"}, "requests": {"cpu": "15m"}},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
    "annotations": {"example.com/team": "ops"}})
ORPHAN = Case("apicurito/1.0.3", "apicurito.v1.0.3", "Orphan", orphan=True)
# OLM installs it, but it ships a custom resource of its own CRD, which the reconciler refuses to install.
REFUSED = Case("ecr-secret-operator/0.6.0", "ecr-secret-operator.v0.6.0", "Refused")
ALL = CASES + [CONFIGURED, ORPHAN, REFUSED]




@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("adopt-catalog"), ALL):
        yield olm_plane


def make_repo(path: Path) -> Path:
    return make_repo_of(path, ALL)


def test_adopt_writes_what_olm_runs(installed: ControlPlane, tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    kubeconfig = str(installed.kubeconfig_path)

    preview = reconciler("adopt", str(repo), "--dry-run", "--kubeconfig", kubeconfig)
    assert preview.returncode == 1, preview.stdout + preview.stderr    # two installs cannot be adopted
    assert "would write operators/move2kube-operator.yaml" in preview.stdout
    assert git(repo, "status", "--porcelain") == ""                      # the dry run wrote nothing

    done = reconciler("adopt", str(repo), "--kubeconfig", kubeconfig)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    for case in CASES + [CONFIGURED]:
        assert f"adopted Subscription {case.namespace}/{case.package}: Operator {case.package}" in out, out
    # Never dropped: each install it leaves is listed with its reason.
    assert f"not adopted ClusterServiceVersion {ORPHAN.namespace}/{ORPHAN.csv}: no Subscription installed it" in out
    assert (f"not adopted Subscription {REFUSED.namespace}/{REFUSED.package}: the reconciler cannot install bundle "
            f"{REFUSED.csv} as OLM did") in out
    configured = yamlio.read_all(repo / "operators" / f"{CONFIGURED.package}.yaml")[0]
    assert configured["spec"]["config"] == CONFIGURED.config   # the Subscription's overrides, declared

    decls = {c.package: yamlio.read_all(repo / "operators" / f"{c.package}.yaml")[0] for c in CASES}
    every, own, single = (decls[c.package] for c in CASES)
    assert every["apiVersion"] == "operators.coreos.com/v1"
    assert every["spec"] == {"catalog": {"name": "corpus", "package": "move2kube-operator"},
                             "install": {"namespace": CASES[0].namespace, "targetNamespaces": [""]}}
    # Manual approval holds every upgrade: the v2alpha1 shape says so.
    assert own["apiVersion"] == "operators.coreos.com/v2alpha1"
    assert own["spec"]["updates"]["catalogSource"] == {"package": "odoo-operator", "ref": {"name": "corpus"},
                                                       "approval": "Manual"}
    assert single["spec"]["install"] == {"namespace": CASES[2].namespace, "targetNamespaces": [CASES[2].watched]}
    assert "version" not in every["spec"]   # it follows the channel, as the Subscription did

    lock = {e["operator"]: e for e in yamlio.read_all(repo / "olm.lock")[0]["bundles"]}
    for case in CASES:
        entry = lock[case.package]
        assert (entry["name"], entry["catalog"], entry["source"]) == (case.csv, "corpus", f"file://bundles/{case.bundle}")
        assert entry["digest"].startswith("sha256:")
        record = yamlio.read_all(repo / "approvals" / f"{case.package}.yaml")[0]
        (approved,) = record["spec"]["bundles"]
        assert (approved["name"], approved["digest"]) == (case.csv, entry["digest"])
        assert approved["adopted"]["clusterServiceVersion"] == case.csv
        assert approved["adopted"]["namespace"] == case.namespace
        assert approved["permissions"]   # what applying it needs
        csv = yamlio.read_all(next((CORPUS / "operators" / case.bundle / "manifests").glob("*clusterserviceversion*")))[0]
        held = csv["spec"]["install"]["spec"]
        assert [p["rules"] for p in approved["adopted"]["clusterPermissions"]] == \
            [p["rules"] for p in held.get("clusterPermissions") or []]   # the evidence: what the CSV held

    # The repository now resolves to exactly what runs, and the approvals cover it: nothing waits.
    commit_all(repo, "adopt")
    resolved = reconciler("resolve", str(repo), "--kubeconfig", kubeconfig)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    assert git(repo, "status", "--porcelain") == ""                       # olm.lock as adopt wrote it

    again = reconciler("adopt", str(repo), "--kubeconfig", kubeconfig)
    assert again.returncode == 1 and "wrote " not in again.stdout, again.stdout   # a second run changes nothing
    assert git(repo, "status", "--porcelain") == ""


def test_a_conflicting_declaration_stops_the_adoption_and_nothing_is_written(installed: ControlPlane,
                                                                              tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    (repo / "mine.yaml").write_text(
        "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {name: move2kube-operator}\n"
        "spec:\n  catalog: {name: corpus, package: move2kube-operator, channel: alpha}\n"
        "  install: {namespace: elsewhere}\n")
    commit_all(repo, "a declaration of its own")
    done = reconciler("adopt", str(repo), "--kubeconfig", str(installed.kubeconfig_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "mine.yaml" in done.stderr and "already declares package move2kube-operator differently" in done.stderr
    assert "install namespace" in done.stderr and "adopt never overwrites a declaration" in done.stderr
    assert git(repo, "status", "--porcelain") == ""


def test_an_unreadable_catalog_source_is_listed_with_its_reason(installed: ControlPlane, tmp_path: Path):
    case = CASES[2]
    with installed.admin_client() as api:
        source = get(api, case.namespace, "catalogsources", "corpus")
        custom(api).patch_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "catalogsources", "corpus",
                                                   {"spec": {"address": "127.0.0.1:1"}})
        try:
            wait_until(lambda: ((get(api, case.namespace, "catalogsources", "corpus")
                                 or {}).get("status") or {}).get("connectionState", {}).get("lastObservedState")
                       not in (None, "READY"), "the CatalogSource unreachable", timeout=WAIT, every=0.5,
                       diagnose=olm_logs(installed))
            repo = make_repo(tmp_path / "repo")
            done = reconciler("adopt", str(repo), "--kubeconfig", str(installed.kubeconfig_path))
        finally:
            custom(api).patch_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "catalogsources",
                                                       "corpus", {"spec": {"address": source["spec"]["address"]}})
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"not adopted Subscription {case.namespace}/{case.package}: its CatalogSource "
            f"{case.namespace}/corpus cannot be read") in done.stdout
    assert not (repo / "operators" / f"{case.package}.yaml").exists()
    assert (repo / "operators" / f"{CASES[0].package}.yaml").exists()   # the others are adopted still


def test_a_cluster_without_olm_is_an_error(control_plane: ControlPlane, tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    done = reconciler("adopt", str(repo), "--kubeconfig", str(control_plane.kubeconfig_path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the cluster runs no OLM: it serves neither OLM v0's Subscription" in done.stderr
    assert git(repo, "status", "--porcelain") == ""


# What OLM v0 adds to a pod template that the bundle does not say (kept by a takeover: docs/migration.md).
OLM_TEMPLATE_ANNOTATIONS = {"olm.operatorGroup", "olm.operatorNamespace", "olm.targetNamespaces"}
OLM_ENV = {"OPERATOR_CONDITION_NAME"}


def missing_from(ours, live, path: str = "") -> list[str]:
    """Where ``ours`` says something ``live`` does not (``live`` may say more: defaults, OLM's additions).
    Lists of named items (containers, env, ports, volumes) are matched by name."""
    if isinstance(ours, dict) and isinstance(live, dict):
        return [p for k, v in ours.items() for p in (missing_from(v, live[k], f"{path}.{k}") if k in live
                                                      else [f"{path}.{k}"])]
    if isinstance(ours, list) and isinstance(live, list):
        if all(isinstance(o, dict) and "name" in o for o in ours + live):
            by_name = {o["name"]: o for o in live}
            return [p for o in ours for p in (missing_from(o, by_name[o["name"]], f"{path}[{o['name']}]")
                                              if o["name"] in by_name else [f"{path}[{o['name']}]"])]
        if len(ours) != len(live):
            return [path]
        return [p for i, (o, v) in enumerate(zip(ours, live)) for p in missing_from(o, v, f"{path}[{i}]")]
    return [] if ours == live else [f"{path}: {ours!r} != {live!r}"]


def granted(objects: list[dict], namespace: str, account: str):
    """The permissions RBAC among ``objects`` gives ServiceAccount ``namespace/account``."""
    from reconciler.model.permissions import CLUSTER, PermissionSet, Rule

    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
             if o["kind"] in ("Role", "ClusterRole")}
    rules = []
    for b in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account and s.get("namespace") == namespace
                   for s in b.get("subjects") or []):
            continue
        scope = b["metadata"].get("namespace") or CLUSTER
        ref = b["roleRef"]
        role = roles.get((ref["kind"], "" if ref["kind"] == "ClusterRole" else scope, ref["name"]))
        rules += [Rule.from_rbac(r, scope) for r in (role or {}).get("rules") or []]
    return PermissionSet.of(rules)


def test_what_olm_creates_is_what_the_reconciler_creates_but_for_olm_s_own_additions(installed: ControlPlane,
                                                                                       tmp_path: Path):
    """For the same bundles: Deployments' pod templates, the operator's RBAC and Services, as OLM v0 made them
    and as the reconciler renders them (the differences are documented in docs/migration.md)."""
    from reconciler.bundle import render
    from reconciler.kube.client import Kube
    from reconciler.model.declarations import InstallSettings
    from reconciler.model.deployconfig import DeploymentConfig

    repo = make_repo(tmp_path / "repo")
    kinds = (("apps/v1", "Deployment"), ("v1", "Service"), ("rbac.authorization.k8s.io/v1", "Role"),
             ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
             ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"))
    with installed.admin_client() as api:
        kube = Kube(api)
        live = [o for v, k in kinds for o in kube.list(kube.resource(v, k))]
        for case in CASES + [CONFIGURED]:
            ours = list(render(f"file://bundles/{case.bundle}", repo,
                               InstallSettings(case.namespace, tuple(case.targets or ("",)),
                                               config=DeploymentConfig.of(case.config)), "operators").objects)
            csv = get(api, case.namespace, "clusterserviceversions", case.csv)
            for dep in (o for o in ours if o["kind"] == "Deployment"):
                (olm,) = [o for o in live if o["kind"] == "Deployment" and o["metadata"]["namespace"] == case.namespace
                          and o["metadata"]["name"] == dep["metadata"]["name"]]
                mine, theirs = dep["spec"]["template"], olm["spec"]["template"]
                assert missing_from(dep["metadata"].get("annotations") or {},
                                    olm["metadata"].get("annotations") or {}) == [], case.bundle
                assert missing_from(mine, theirs) == [], (case.bundle, missing_from(mine, theirs))
                extra = set(theirs["metadata"].get("annotations") or {}) - set(mine["metadata"].get("annotations") or {})
                assert extra <= set(csv["metadata"].get("annotations") or {}) | OLM_TEMPLATE_ANNOTATIONS, extra
                for container in theirs["spec"]["containers"]:
                    (own,) = [c for c in mine["spec"]["containers"] if c["name"] == container["name"]]
                    added = {e["name"] for e in container.get("env") or []} - {e["name"] for e in own.get("env") or []}
                    assert added <= OLM_ENV, (case.bundle, added)
                account = dep["spec"]["template"]["spec"].get("serviceAccountName") or "default"
                mine_rbac, olm_rbac = granted(ours, case.namespace, account), granted(live, case.namespace, account)
                narrower = [a for a in olm_rbac.atoms() if not mine_rbac.allows(a)]
                assert narrower == [], (case.bundle, account, narrower)   # a takeover never narrows RBAC
                beyond = [a for a in mine_rbac.atoms() if not olm_rbac.allows(a)]
                assert beyond == [], (case.bundle, account, beyond)   # nor widens it
            for svc in (o for o in ours if o["kind"] == "Service"):
                (olm,) = [o for o in live if o["kind"] == "Service" and o["metadata"]["namespace"] == case.namespace
                          and o["metadata"]["name"] == svc["metadata"]["name"]]
                assert missing_from(svc["spec"], olm["spec"]) == [], (case.bundle, svc["metadata"]["name"])
