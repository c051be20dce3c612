"""An operator applied without OLM, taken over by matching its bundle: the report of `adopt --operator`, the
consent on the declaration, the takeover, and what follows it.

The operator is the example's plumbus, its bundle rendered by `reconciler bundle render` and applied by the
pinned kubectl, client-side as a hand or a Helm-like tool leaves it (and in one case created under Helm's field
manager, with Helm's marks and release record). What must hold: the report is right for every object (matches,
differs with the diff, missing, refused with why) and writes nothing; a refused object stops the consenting
reconcile with nothing applied; the takeover makes no new ReplicaSet when the pod template matched, keeps every
object's uid, puts each in the inventory and drops the fields the old tool set that the bundle does not; the
next reconcile is a no-op and the consent has no further effect; removing the declaration prunes them all as
the reconciler's, and the objects that only looked like the operator's stay.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.kube.client import Kube
from reconciler.model.kube import ObjectRef
from tests.docblocks import fenced_block, indented_block, run_walkthrough
from tests.support.repo import GitOpsRepo

from .support import cli, get, managed, reconcile
from tests.support.wait import wait_until
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

NS = "plumbus-system"
OPERATOR = ("reconciler.dev/v1alpha1", "Operator")
CONSENT = 'metadata:\n  name: plumbus\n  annotations:\n    reconciler.dev/adopt: "true"\n'
FIRST_LINE = "reconciler bundle render platform-repo/bundles/plumbus/1.1.0 -n plumbus-system > plumbus.yaml"
CONSENT_LINE = 'git -C platform-repo commit -qam "Adopt plumbus as it runs"'


def kubectl_path() -> Path:
    try:
        from bench.peers.kubectl import kubectl_binary
        return kubectl_binary(lambda _: None)
    except Exception as exc:  # noqa: BLE001 - no Go toolchain or module cache: no kubectl to apply with
        not_tested("kubectl", f"kubectl is not available: {exc}")


def kubectl(kc: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([str(kubectl_path()), "--kubeconfig", str(kc), *args], input=stdin, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"kubectl {' '.join(args)}\n{done.stdout}{done.stderr}"
    return done.stdout


def rendered(repo: GitOpsRepo, capsys) -> list[dict]:
    """The bundle's objects as `reconciler bundle render` prints them for the install namespace."""
    run = cli("bundle", "render", str(repo.path / "bundles/plumbus/1.1.0"), "-n", NS, capsys=capsys)
    assert run.code == 0, run.err
    return [d for d in yamlio.load_all(run.out, "render") if d]


def live(k8s: Kube, obj: dict) -> dict | None:
    ref = ObjectRef.of(obj)
    return get(k8s, obj["apiVersion"], obj["kind"], ref.name, ref.namespace)


def versions(k8s: Kube, objs: list[dict]) -> dict[str, str | None]:
    """Each object's resourceVersion (None: absent): what says whether anything was written."""
    return {str(ObjectRef.of(o)): (live(k8s, o) or {}).get("metadata", {}).get("resourceVersion") for o in objs}


def replica_sets(k8s: Kube) -> list[str]:
    return sorted(rs["metadata"]["name"] for rs in k8s.list(k8s.resource("apps/v1", "ReplicaSet"), namespace=NS))


def rolled_out(k8s: Kube) -> list[str]:
    """The ReplicaSets once the deployment controller has acted on the Deployment as it is (bounded wait)."""
    def observed() -> list[str]:
        d = get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", NS)
        return replica_sets(k8s) if d and (d.get("status") or {}).get("observedGeneration") == \
            d["metadata"]["generation"] else []

    return wait_until(observed, "the Deployment rolled out", timeout=60, every=0.2)


def consent(repo: GitOpsRepo) -> None:
    text = (repo.path / "operators/plumbus.yaml").read_text()
    repo.write("operators/plumbus.yaml", text.replace("metadata:\n  name: plumbus\n", CONSENT))
    repo.commit("Adopt plumbus as it runs")


def inventory(k8s: Kube) -> set[str]:
    refs = get(k8s, *OPERATOR, "plumbus")["status"]["inventory"]
    return {str(ObjectRef(r["group"], r["kind"], r.get("namespace", ""), r["name"], r["version"])) for r in refs}


def ensure_namespace(k8s: Kube) -> None:
    k8s.apply(k8s.resource("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
              field_manager="user", dry_run=False)


@pytest.fixture
def repo(tmp_path: Path, kc: Path, k8s: Kube, capsys) -> Iterator[GitOpsRepo]:
    """The example repository, plumbus approved, as `platform-repo`; afterwards plumbus is uninstalled and what
    the test applied beside it is deleted."""
    r = GitOpsRepo(tmp_path / "platform-repo")
    extra: list[dict] = []
    r.extra = extra   # objects a test creates beside the bundle's, deleted afterwards
    yield r
    r.withdraw_all()
    r.commit("remove everything")
    assert reconcile(r, kc, capsys=capsys).code == 0
    for obj in [*extra, *rendered(r, capsys)]:
        info = k8s.resource(obj["apiVersion"], obj["kind"])
        ref = ObjectRef.of(obj)
        k8s.delete(info, ref.namespace if info.namespaced else "", ref.name)
    assert managed(k8s, "plumbus") == set()
    assert get(k8s, *OPERATOR, "plumbus") is None


def test_the_report_the_consent_and_the_takeover_of_what_kubectl_applied(repo, kc, k8s, capsys, tmp_path):
    objs = rendered(repo, capsys)
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    sa, deployment = by_kind["ServiceAccount"][0], by_kind["Deployment"][0]
    owned_by_olm, absent = by_kind["ClusterRole"][0], by_kind["ClusterRoleBinding"][-1]
    applied = [o for o in objs if o is not absent]
    # the old tool set a label the bundle does not have
    sa["metadata"]["labels"] = {"team": "payments"}
    ensure_namespace(k8s)
    (tmp_path / "by-hand.yaml").write_text(yamlio.dump_all(applied))
    kubectl(kc, "apply", "-f", str(tmp_path / "by-hand.yaml"))
    kubectl(kc, "label", "clusterrole", owned_by_olm["metadata"]["name"], "olm.owner=plumbus.v1.1.0",
            f"olm.owner.namespace={NS}")
    # what looks like the operator's but is not in its bundle
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plumbus-settings", "namespace": NS},
                "data": {"mode": "fast"}}
    reader = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "plumbus-metrics-reader", "labels": {"app.kubernetes.io/name": "plumbus"}},
              "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    repo.extra += [settings, reader]
    kubectl(kc, "apply", "-f", "-", stdin=yamlio.dump_all([settings, reader]))
    before = versions(k8s, objs + repo.extra)

    report = cli("adopt", str(repo.path), "--operator", "plumbus", "--kubeconfig", str(kc), capsys=capsys)
    assert report.code == 2, report.out + report.err   # a refused object
    out = report.out
    assert "= CustomResourceDefinition.apiextensions.k8s.io plumbai.how.theydoit.com  matches" in out, out
    assert f"= Deployment.apps {NS}/plumbus-controller-manager  matches" in out
    assert f"~ ServiceAccount {NS}/plumbus-controller  differs" in out
    assert "-    team: payments" in out   # the old tool's label goes with the takeover
    assert f"+ ClusterRoleBinding.rbac.authorization.k8s.io {absent['metadata']['name']}  missing" in out
    assert (f"! ClusterRole.rbac.authorization.k8s.io {owned_by_olm['metadata']['name']}  refused: is OLM v0's "
            f"(ClusterServiceVersion {NS}/plumbus.v1.1.0 installed it)") in out
    assert "to adopt it: take the install over from OLM v0 with `reconciler adopt REPO`" in out
    assert f"ConfigMap {NS}/plumbus-settings: in the install namespace {NS}" in out
    assert ("ClusterRole.rbac.authorization.k8s.io plumbus-metrics-reader: labelled app.kubernetes.io/name=plumbus"
            in out)
    assert "Summary: 4 matches, 1 differs, 1 missing, 1 refused; 2 other objects left alone" in out
    assert "POD TEMPLATE DIFFERS" not in out
    assert versions(k8s, objs + repo.extra) == before   # nothing written

    consent(repo)
    refused = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert refused.code == 2, refused.out + refused.err
    assert "operators/plumbus.yaml: 1 object that reconciler.dev/adopt: \"true\" on the declaration would take " \
           "over cannot be adopted; nothing was applied" in refused.err
    assert f"{owned_by_olm['metadata']['name']} [plumbus]: is OLM v0's" in refused.err
    assert versions(k8s, objs + repo.extra) == before
    assert get(k8s, *OPERATOR, "plumbus") is None

    kubectl(kc, "label", "clusterrole", owned_by_olm["metadata"]["name"], "olm.owner-", "olm.owner.namespace-")
    report = cli("adopt", str(repo.path), "--operator", "plumbus", "--kubeconfig", str(kc), capsys=capsys)
    assert report.code == 1, report.out + report.err
    assert "Summary: 5 matches, 1 differs, 1 missing, 0 refused" in report.out
    assert "operators/plumbus.yaml consents" in report.out
    as_json = cli("adopt", str(repo.path), "--operator", "plumbus", "-o", "json", "--kubeconfig", str(kc),
                  capsys=capsys)
    assert as_json.code == 1
    (doc,) = yamlio.load_one(as_json.out, "report")["operators"]
    assert doc["summary"] == {"matches": 5, "differs": 1, "missing": 1, "refused": 0, "ours": 0, "restartsPods": 0,
                              "related": 2}
    account = next(o for o in doc["objects"] if o["kind"] == "ServiceAccount")
    assert account["verdict"] == "differs" and account["diff"] == ["metadata.labels: removed"], account
    assert doc["consent"] is True and doc["adopted"] is None
    sets = rolled_out(k8s)
    assert len(sets) == 1
    uids = {str(ObjectRef.of(o)): live(k8s, o)["metadata"]["uid"] for o in applied}
    template = live(k8s, deployment)["spec"]["template"]
    others = versions(k8s, repo.extra)

    run = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert ("Operator plumbus took over 6 existing objects of its bundle (reconciler.dev/adopt: \"true\" on its "
            "declaration), and created 1; they are in its inventory now") in run.out
    assert rolled_out(k8s) == sets                        # the pod template matched: no new ReplicaSet
    assert live(k8s, deployment)["spec"]["template"] == template
    assert {str(ObjectRef.of(o)): live(k8s, o)["metadata"]["uid"] for o in applied} == uids   # taken over in place
    assert inventory(k8s) == {str(ObjectRef.of(o)) for o in objs}
    account = live(k8s, sa)["metadata"]
    assert "team" not in account["labels"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (account.get("annotations") or {})
    assert {m["manager"] for m in account["managedFields"]} == {"reconciler"}
    adopted = get(k8s, *OPERATOR, "plumbus")["status"]["adopted"]
    assert len(adopted["objects"]) == 6 and adopted["revision"] == str(repo.git.head.target)
    assert versions(k8s, repo.extra) == others            # left alone

    again = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert again.code == 0, again.out + again.err
    assert "Summary: 0 created, 0 configured, 7 unchanged" in again.out
    assert "reconciler.dev/adopt on Operator plumbus's declaration has no further effect" in again.out

    # spent: an object deleted and created again by someone else is foreign, the annotation notwithstanding
    kubectl(kc, "delete", "serviceaccount", "-n", NS, "plumbus-controller")
    kubectl(kc, "create", "serviceaccount", "-n", NS, "plumbus-controller")
    foreign = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert foreign.code == 2 and f"ServiceAccount {NS}/plumbus-controller already exists" in foreign.err, foreign.err
    kubectl(kc, "delete", "serviceaccount", "-n", NS, "plumbus-controller")
    assert reconcile(repo, kc, "--no-wait", capsys=capsys).code == 0

    repo.remove("operators/plumbus.yaml")
    repo.write("reconciler.yaml", "allowEmpty: true\n")
    repo.commit("remove plumbus")
    pruned = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert pruned.code == 0, pruned.err
    assert pruned.out.count("deleted  [plumbus]") == 7, pruned.out
    assert all(v is None for v in versions(k8s, objs).values())
    assert versions(k8s, repo.extra) == others


HELM = {"meta.helm.sh/release-name": "plumbus", "meta.helm.sh/release-namespace": NS}


def test_a_helm_release_whose_pod_template_differs_restarts_and_loses_helms_marks(repo, kc, k8s, capsys, tmp_path):
    objs = rendered(repo, capsys)
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    for o in objs:   # what a chart leaves on its objects
        meta = o["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "app.kubernetes.io/managed-by": "Helm"}
        meta["annotations"] = {**(meta.get("annotations") or {}), **HELM}
    # the chart's template lacks what the bundle's conversion writes into the pod template
    del deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"]
    record = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
              "metadata": {"name": "sh.helm.release.v1.plumbus.v1", "namespace": NS,
                           "labels": {"owner": "helm", "name": "plumbus", "status": "deployed", "version": "1"}},
              "data": {"release": "H4sI"}}
    repo.extra.append(record)
    ensure_namespace(k8s)
    (tmp_path / "chart.yaml").write_text(yamlio.dump_all([*objs, record]))
    kubectl(kc, "create", "--field-manager=helm", "-f", str(tmp_path / "chart.yaml"))

    report = cli("adopt", str(repo.path), "--operator", "plumbus", "--kubeconfig", str(kc), capsys=capsys)
    assert report.code == 1, report.out + report.err
    assert (f"~ Deployment.apps {NS}/plumbus-controller-manager  differs  POD TEMPLATE DIFFERS: applying it rolls "
            f"its pods") in report.out, report.out
    assert "+        olm.targetNamespaces: ''" in report.out
    # but for the pod template, what only says who manages them changes: Helm's marks go with the takeover
    assert (f"= ServiceAccount {NS}/plumbus-controller  matches: its label app.kubernetes.io/managed-by becomes "
            f"reconciler (was Helm); Helm's release annotations go") in report.out
    assert "Summary: 6 matches, 1 differs, 0 missing, 0 refused (1 would restart pods)" in report.out
    assert f"Secret {NS}/sh.helm.release.v1.plumbus.v1: Helm's record of release {NS}/plumbus" in report.out
    assert "(1 would restart pods)" in report.out
    sets = rolled_out(k8s)

    consent(repo)
    run = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert len(rolled_out(k8s)) == len(sets) + 1            # as the report said: the pods restart
    for o in objs:
        meta = live(k8s, o)["metadata"]
        assert not set(HELM) & set(meta.get("annotations") or {}), meta
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "reconciler"
        assert "helm" not in {m["manager"] for m in meta["managedFields"]}
    assert live(k8s, record) is not None                     # Helm's record is the user's to delete


def test_the_walkthrough_of_docs_migration_as_printed(repo, kc, k8s, capsys, tmp_path):
    """docs/migration.md's two blocks and the declaration between them, run as printed against the cluster."""
    info = k8s.resource("v1", "Namespace")
    if k8s.get(info, "", NS) is not None:   # left by another test: the walk-through creates it
        k8s.delete(info, "", NS)
        assert k8s.wait_gone(info, "", NS, 120), f"namespace {NS} is still being deleted"
    env = {"KUBECONFIG": str(kc),
           "PATH": os.pathsep.join((str(kubectl_path().parent), str(Path(sys.executable).parent), os.environ["PATH"]))}
    home = tmp_path / "home"
    home.mkdir()
    first = indented_block("docs/migration.md", FIRST_LINE)
    assert len(first) == 4, first
    run_walkthrough(first, home, cwd=tmp_path, env=env)
    sets = rolled_out(k8s)
    declaration = fenced_block("docs/migration.md", "# Install plumbus from the community catalog and follow its "
                                                    "stable channel")
    text = "\n".join(declaration) + "\n"
    assert text.replace(CONSENT, "metadata:\n  name: plumbus\n") == \
        (repo.path / "operators/plumbus.yaml").read_text()   # the example's declaration, and the consent
    repo.write("operators/plumbus.yaml", text)
    second = indented_block("docs/migration.md", CONSENT_LINE)
    assert len(second) == 4, second
    steps = run_walkthrough(second, home, cwd=tmp_path, env=env)
    assert "took over 7 existing objects" in steps[2][1], steps[2][1]
    assert rolled_out(k8s) == sets
    assert inventory(k8s) == {str(ObjectRef.of(o)) for o in rendered(repo, capsys)}


def test_bad_requests_are_refused_saying_what_to_do(repo, kc, k8s, capsys, monkeypatch, tmp_path):
    unknown = cli("adopt", str(repo.path), "--operator", "fleeb", "--kubeconfig", str(kc), capsys=capsys)
    assert unknown.code == 2
    assert "the repository declares no Operator fleeb (it declares plumbus)" in unknown.err
    assert "declare it first as for a new install" in unknown.err
    text = (repo.path / "operators/plumbus.yaml").read_text()
    repo.write("operators/plumbus.yaml", text.replace("metadata:\n  name: plumbus\n", CONSENT.replace('"true"', "yes")))
    bad = cli("adopt", str(repo.path), "--operator", "plumbus", "--kubeconfig", str(kc), capsys=capsys)
    assert bad.code == 2 and "operators/plumbus.yaml: Operator plumbus: metadata.annotations.reconciler.dev/adopt " \
                              "must be \"true\"" in bad.err, bad.err
    usage = cli("adopt", str(repo.path), "--operator", "plumbus", "--package", "plumbus", "--kubeconfig", str(kc),
                capsys=capsys)
    assert usage.code == 64 and "-n/--namespace, --package and --freeze choose OLM installs to adopt" in usage.err
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    nowhere = cli("adopt", str(repo.path), "--operator", "plumbus", capsys=capsys)
    assert nowhere.code == 3 and "no cluster is configured: adopt reads what runs in one" in nowhere.err


def test_a_consenting_reconcile_killed_anywhere_converges(repo, kc, k8s, capsys, tmp_path):
    """SIGKILL once the intent is recorded and at random points after, then a run to the end: what a takeover
    that was never interrupted gives (a failure names its seed; RECONCILER_KILL_SEED replays it)."""
    import random

    from tests.olm.test_takeover_kill import killed

    seed = int(os.environ.get("RECONCILER_KILL_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    objs = rendered(repo, capsys)
    ensure_namespace(k8s)
    (tmp_path / "by-hand.yaml").write_text(yamlio.dump_all(objs))
    kubectl(kc, "apply", "-f", str(tmp_path / "by-hand.yaml"))
    sets = rolled_out(k8s)
    uids = {str(ObjectRef.of(o)): live(k8s, o)["metadata"]["uid"] for o in objs}
    consent(repo)
    argv = ["reconcile", str(repo.path), "--kubeconfig", str(kc)]
    intent = killed(argv, rng.uniform(0, 0.3), lambda: get(k8s, *OPERATOR, "plumbus") is not None)
    later = [killed(argv, delay) for delay in sorted(rng.uniform(0.3, 3.0) for _ in range(3))]
    assert intent is None, (seed, intent, later)   # cut short after its intent was recorded
    assert rolled_out(k8s) == sets, seed
    final = reconcile(repo, kc, capsys=capsys)
    assert final.code == 0, f"seed {seed}\n{final.out}{final.err}"
    assert rolled_out(k8s) == sets, seed
    assert {str(ObjectRef.of(o)): live(k8s, o)["metadata"]["uid"] for o in objs} == uids, seed   # none replaced
    assert inventory(k8s) == set(uids), seed
    for o in objs:   # every object the reconciler's: nothing left owned by no one
        assert "reconciler" in {m["manager"] for m in live(k8s, o)["metadata"]["managedFields"]}, (seed, o)
    assert get(k8s, *OPERATOR, "plumbus")["status"].get("adopted") is not None, seed
    noop = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert noop.code == 0 and "Summary: 0 created, 0 configured, 7 unchanged" in noop.out, (seed, noop.out)
