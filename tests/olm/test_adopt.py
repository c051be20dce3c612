"""`reconciler adopt` reads what a real OLM v0 installed and writes it into a repository.

Corpus bundles are installed by OLM v0 on a plane of its own, in different
modes: AllNamespaces (Automatic), OwnNamespace with Manual approval (its
InstallPlan approved by hand), SingleNamespace watching another namespace, one
with ``spec.config`` overrides (refused, with the reason), and a CSV whose
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
    GROUP, Case, custom, get, git, installed_by_olm, make_repo as make_repo_of, reconciler, wait_for,
)
from tests.olm.support import CORPUS, needs_corpus, needs_olm

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

CASES = [
    Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces"),
    Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "OwnNamespace", approval="Manual"),
    Case("ack-s3-controller/1.10.0", "ack-s3-controller.v1.10.0", "SingleNamespace"),
]
CONFIGURED = Case("ruptura-operator/0.9.1", "ruptura-operator.v0.9.1", "Config",
                  config={"env": [{"name": "LOG_LEVEL", "value": "debug"}]})
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
    for case in CASES:
        assert f"adopted Subscription {case.namespace}/{case.package}: Operator {case.package}" in out, out
    # Never dropped: each install it leaves is listed with its reason.
    assert f"not adopted Subscription {CONFIGURED.namespace}/{CONFIGURED.package}: spec.config overrides" in out
    assert f"not adopted ClusterServiceVersion {ORPHAN.namespace}/{ORPHAN.csv}: no Subscription installed it" in out
    assert (f"not adopted Subscription {REFUSED.namespace}/{REFUSED.package}: the reconciler cannot install bundle "
            f"{REFUSED.csv} as OLM did") in out
    assert not (repo / "operators" / f"{CONFIGURED.package}.yaml").exists()

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
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "adopt")
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
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a declaration of its own")
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
            wait_for("the CatalogSource unreachable", lambda: ((get(api, case.namespace, "catalogsources", "corpus")
                     or {}).get("status") or {}).get("connectionState", {}).get("lastObservedState")
                     not in (None, "READY"), installed)
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
    assert "the cluster runs no OLM v0: it does not serve Subscription" in done.stderr
    assert git(repo, "status", "--porcelain") == ""
