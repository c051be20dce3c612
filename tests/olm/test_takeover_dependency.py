"""An OLM v0 install with a dependency, adopted and taken over: both operators, with no disruption.

alloydb-omni-operator 1.3.0 needs cert-manager (``>=1.12.2``, and cert-manager's
Certificate, Issuer and ClusterIssuer APIs). Subscribing to it alone, OLM v0
resolves the dependency from the same catalog and installs cert-manager
1.12.2 in the same namespace, under a Subscription it makes itself
(``cert-manager-stable-corpus-<namespace>``, annotated ``olm.generated-by``
with the InstallPlan that installed both). ``adopt`` declares each as its own
Operator (docs/migration.md says why), the lock pins exactly the two bundles
that run, and the takeover retires OLM's bookkeeping of both: no new
ReplicaSet, the same pod templates, webhook CAs and serving certificates, no
CRD deleted, OLM's objects gone, and the next reconcile a no-op. Both have
admission webhooks, so the takeover keeps OLM's certificates here too.

A control plane of its own (the module's): cert-manager already runs on the
takeover tests' plane, and a package is installed once per cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.localcluster import ControlPlane
from tests.olm.adoption import Case, get, installed_by_olm, make_repo, reconciler
from tests.olm.support import needs_corpus, needs_olm, wait_resynced
from tests.olm.test_takeover import olm_bookkeeping, resolve_next, snapshot, upgrade_through_the_repository
from tests.support.repo import commit_all

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]

DEPENDENT = Case("alloydb-omni-operator/1.3.0", "alloydb-omni-operator.v1.3.0", "AllNamespaces-dependent")
DEPENDENCY = Case("cert-manager/1.12.2", "cert-manager.v1.12.2", "AllNamespaces", dependency_of=DEPENDENT,
                  channel="stable")
CASES = [DEPENDENT, DEPENDENCY]
# The next bundle of each, which the adopted pair moves to through the repository (alloydb-omni-operator 1.4.0
# needs cert-manager's APIs, which cert-manager 1.13.1 still serves).
NEXT = [(DEPENDENT, "alloydb-omni-operator/1.4.0", "fleet-controller-manager",
         "gcr.io/alloydb-omni/operator/fleet-operator:1.4.0"),
        (DEPENDENCY, "cert-manager/1.13.1", "cert-manager", "quay.io/jetstack/cert-manager-controller:v1.13.1")]


@pytest.fixture(scope="module")
def installed(request, olm_plane: ControlPlane, tmp_path_factory) -> Iterator[ControlPlane]:
    with installed_by_olm(request, olm_plane, tmp_path_factory.mktemp("dependency-catalog"), CASES):
        yield olm_plane


def run(*args: str, code: int = 0, kubeconfig: Path) -> str:
    done = reconciler(*args, "--kubeconfig", str(kubeconfig))
    assert done.returncode == code, f"{args}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_a_dependency_olm_installed_is_adopted_as_its_own_operator_and_taken_over(installed: ControlPlane,
                                                                                  tmp_path: Path):
    kubeconfig = installed.kubeconfig_path
    with installed.admin_client() as api:
        generated = get(api, DEPENDENCY.namespace, "subscriptions", DEPENDENCY.subscription)
        assert generated is not None and generated["metadata"]["annotations"].get("olm.generated-by"), generated
        before = snapshot(api, CASES, cr=None)
    assert len(before["templates"]) == 5 and before["caBundles"], before   # 2 + 3 Deployments; webhooks served
    repo = make_repo(tmp_path / "repo", CASES)

    out = run("adopt", str(repo), kubeconfig=kubeconfig)
    assert (f"adopted Subscription {DEPENDENCY.namespace}/{DEPENDENCY.subscription}: Operator cert-manager "
            f"(cert-manager, channel stable, AllNamespaces, Automatic approval), bundle cert-manager.v1.12.2 from "
            f"catalogs/corpus; OLM made this Subscription for a dependency of Subscription "
            f"{DEPENDENT.namespace}/{DEPENDENT.subscription}") in out, out
    assert f"adopted Subscription {DEPENDENT.namespace}/{DEPENDENT.subscription}: Operator alloydb-omni-operator" \
        in out, out
    declared = (repo / "operators" / "cert-manager.yaml").read_text()
    assert f"OLM made that Subscription for a dependency of Subscription {DEPENDENT.namespace}/" in declared
    doc = yamlio.load_one(declared, "operators/cert-manager.yaml")
    assert doc["spec"]["catalog"] == {"name": "corpus", "package": "cert-manager", "channel": "stable"}
    assert doc["spec"]["install"] == {"namespace": DEPENDENCY.namespace, "targetNamespaces": [""]}
    lock_text = (repo / "olm.lock").read_text()
    lock = yamlio.load_one(lock_text, "olm.lock")
    pinned = {(b["operator"], b["name"], b.get("required_by", "")) for b in lock["bundles"]}
    assert pinned == {("alloydb-omni-operator", DEPENDENT.csv, ""),
                      ("cert-manager", DEPENDENCY.csv, "alloydb-omni-operator")}, pinned
    commit_all(repo, "adopt")

    # A lock moved past what runs before the takeover (here by `resolve`; an upgrade OLM made since the adoption
    # reads the same) holds each Operator back alone, with nothing of it written: OLM would go on reconciling the
    # CSVs that run. Both moved: every Operator is held back, and nothing at all is written.
    ahead = tmp_path / "ahead"
    shutil.copytree(repo, ahead)
    resolve_next(ahead, {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, NEXT)   # on a workstation
    commit_all(ahead, "the next bundles, before the takeover")
    for args in (("--dry-run",), ()):
        refused = run("reconcile", str(ahead), *args, code=2, kubeconfig=kubeconfig)
        assert "2 Operators held back, so nothing was written" in refused, refused
        assert "Operator alloydb-omni-operator: " in refused, refused
        assert (f"Operator cert-manager: Subscription {DEPENDENCY.namespace}/{DEPENDENCY.subscription} installed "
                "cert-manager.v1.12.2, the lock pins cert-manager.v1.13.1") in refused, refused
    with installed.admin_client() as api:
        assert snapshot(api, CASES, cr=None) == before   # nothing written: neither was installed by this repo
        assert get(api, DEPENDENT.namespace, "subscriptions", DEPENDENT.subscription) is not None

    preview = run("reconcile", str(repo), "--dry-run", code=1, kubeconfig=kubeconfig)
    for case in CASES:
        assert (f"takeover of {case.package} from OLM v0: would delete Subscription {case.namespace}/"
                f"{case.subscription}") in preview, preview
        assert (f"takeover of {case.package} from OLM v0: would delete ClusterServiceVersion {case.namespace}/"
                f"{case.csv}, orphaning its objects") in preview, preview
    run("reconcile", str(repo), kubeconfig=kubeconfig)
    wait_resynced(installed, [c.namespace for c in CASES])   # what OLM does on its next passes must undo nothing
    with installed.admin_client() as api:
        after = snapshot(api, CASES, cr=None)
        assert after["replicaSets"] == before["replicaSets"]   # no new ReplicaSet: no pod restarted
        assert after["templates"] == before["templates"]
        assert after["caBundles"] == before["caBundles"] and after["servingSecrets"] == before["servingSecrets"]
        assert set(before["crds"]) <= set(after["crds"])
        left = olm_bookkeeping(api, CASES)
        assert left == [], "\n".join(left)
    assert (repo / "olm.lock").read_text() == lock_text   # the lock reconcile writes is the one adopted

    again = run("reconcile", str(repo), "--dry-run", kubeconfig=kubeconfig)   # exit 0: nothing to do
    assert "takeover of" not in again, again
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True,
                            check=True).stdout
    assert status == "", status

    # The next upgrade of both goes through the repository (declaration -> lock -> apply), OLM no longer acting.
    upgrade_through_the_repository(installed, repo, {**os.environ, "KUBECONFIG": str(kubeconfig)}, NEXT)
    lock = yamlio.load_one((repo / "olm.lock").read_text(), "olm.lock")
    assert {(b["operator"], b["name"], b.get("required_by", "")) for b in lock["bundles"]} == {
        ("alloydb-omni-operator", "alloydb-omni-operator.v1.4.0", ""),
        ("cert-manager", "cert-manager.v1.13.1", "alloydb-omni-operator")}, lock
