"""An upgrade that would break existing custom resources is refused before anything is applied, unless the
declaration allows it by name."""

from __future__ import annotations

import contextlib

from reconciler.kube.client import Kube
from tests.e2e.support import managed, reconcile
from tests.e2e.test_crash_campaign import approve_namespace
from tests.e2e.test_reconcile import V100 as _V100, V110 as _V110, repo  # noqa: F401 - fixture

# An install namespace of its own: namespaces are never pruned, and other tests expect to create plumbus-system.
NAMESPACE = "crdsafety-system"
V100 = {s.replace("plumbus-system", NAMESPACE) for s in _V100}
V110 = {s.replace("plumbus-system", NAMESPACE) for s in _V110}
CRD_FILE = "bundles/plumbus/1.1.0/manifests/plumbai.how.theydoit.com.crd.yaml"
CR = {"apiVersion": "how.theydoit.com/v1alpha1", "kind": "Plumbus",
      "metadata": {"name": "everyday", "namespace": "default"}, "spec": {"fleeb": "rubbed", "schleem": 3}}


def own_namespace(repo) -> None:
    decl = (repo.path / "operators/plumbus.yaml").read_text()
    if f"namespace: {NAMESPACE}" in decl:
        return
    assert "namespace: plumbus-system" in decl
    repo.write("operators/plumbus.yaml", decl.replace("namespace: plumbus-system", f"namespace: {NAMESPACE}"))
    approve_namespace(repo)


@contextlib.contextmanager
def retyped_after_install(repo, kc, k8s: Kube, capsys):
    """plumbus 1.0.0 installed with a custom resource, and 1.1.0's CRD retyping one of its fields declared."""
    own_namespace(repo)
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    info = k8s.resource("how.theydoit.com/v1alpha1", "Plumbus")
    k8s.request("POST", info.path("default"), body=CR)
    try:
        crd = (repo.path / CRD_FILE).read_text()
        assert "schleem:\n                  type: integer" in crd
        repo.write(CRD_FILE, crd.replace("schleem:\n                  type: integer",
                                         "schleem:\n                  type: string"))
        repo.set_version(">=1.0.0 <2.0.0")
        repo.write("olm.lock", "")  # the edited bundle has a new digest: resolve afresh
        yield
    finally:
        k8s.request("DELETE", info.path("default", "everyday"))


def test_an_unsafe_crd_upgrade_is_refused_until_the_declaration_allows_it(repo, kc, k8s: Kube, capsys):
    with retyped_after_install(repo, kc, k8s, capsys):
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2, run.err
        assert ("CustomResourceDefinition plumbai.how.theydoit.com: policy crd-upgrade-safety (version v1alpha1 "
                ".spec.schleem): type changes from integer to string (type-changed)") in run.out, run.out
        assert "reconciler.dev/allow-unsafe-crd-upgrade: plumbai.how.theydoit.com" in run.out
        assert managed(k8s, "plumbus") == V100  # nothing of 1.1.0 was applied

        decl = (repo.path / "operators/plumbus.yaml").read_text()
        repo.write("operators/plumbus.yaml", decl.replace(
            "  name: plumbus\n", "  name: plumbus\n  annotations:\n"
                                 "    reconciler.dev/allow-unsafe-crd-upgrade: plumbai.how.theydoit.com\n", 1))
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert managed(k8s, "plumbus") == V110


def test_unserving_a_version_that_custom_resources_are_read_through_is_refused(repo, kc, k8s: Kube, capsys):
    own_namespace(repo)
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    crd = (repo.path / CRD_FILE).read_text()
    head, sep, version = crd.partition("  versions:\n")
    assert sep and "    - name: v1alpha1\n      served: true\n      storage: true\n" in version
    v1 = version.replace("v1alpha1", "v1")
    old = version.replace("served: true\n      storage: true", "served: false\n      storage: false")
    repo.write(CRD_FILE, head + sep + old + v1)
    repo.set_version(">=1.0.0 <2.0.0")
    repo.write("olm.lock", "")
    info = k8s.resource("how.theydoit.com/v1alpha1", "Plumbus")
    k8s.request("POST", info.path("default"), body=CR)
    try:
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2, run.err
        assert ("version is no longer served, but custom resources exist and are read through it "
                "(served-version-removed)") in run.out, run.out
        assert managed(k8s, "plumbus") == V100
    finally:
        k8s.request("DELETE", info.path("default", "everyday"))
    # Without custom resources the version may stop being served.
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 0, run.err
    assert managed(k8s, "plumbus") == V110


def test_an_unsafe_crd_upgrade_can_be_accepted_by_an_approval_for_that_exact_bundle(repo, kc, k8s: Kube, capsys):
    from reconciler.cli.parser import main

    with retyped_after_install(repo, kc, k8s, capsys):
        # It needs no new permission (Android approves it), but the CRD check refuses it.
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 2 and "type changes from integer to string" in run.out, run.out
        assert "--waive crd-upgrade-safety" in run.out
        assert managed(k8s, "plumbus") == V100
        capsys.readouterr()
        assert main(["approve", str(repo.path), "plumbus", "--offline", "--waive", "crd-upgrade-safety"]) == 0
        assert "waivedPolicies: [crd-upgrade-safety]" in (repo.path / "approvals/plumbus.yaml").read_text()
        repo.commit("Accept the CRD change of this bundle")
        run = reconcile(repo, kc, capsys=capsys)
        assert run.code == 0, run.err
        assert managed(k8s, "plumbus") == V110


def test_removing_a_stored_version_is_refused_by_approve_and_reconcile_and_no_waiver_accepts_it(
        repo, kc, k8s: Kube, capsys):
    """One preflight: what the API server would refuse is refused before it, by approve and by reconcile alike."""
    from reconciler.cli.parser import main

    own_namespace(repo)
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    crd = (repo.path / CRD_FILE).read_text()
    repo.write(CRD_FILE, crd.replace("v1alpha1", "v1"))   # 1.1.0 drops v1alpha1, in which objects are stored
    repo.set_version(">=1.0.0 <2.0.0")
    repo.write("olm.lock", "")
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 2, run.err
    text = run.out + run.err
    assert "(version v1alpha1): version is removed, but objects are stored in it" in text, text
    assert managed(k8s, "plumbus") == V100
    capsys.readouterr()
    code = main(["approve", str(repo.path), "plumbus", "--kubeconfig", str(kc), "--waive", "crd-upgrade-safety"])
    err = capsys.readouterr().err
    assert code == 2 and "no approval can accept it" in err, err
    decl = (repo.path / "operators/plumbus.yaml").read_text()
    repo.write("operators/plumbus.yaml", decl.replace(
        "  name: plumbus\n", "  name: plumbus\n  annotations:\n    reconciler.dev/allow-unsafe-crd-upgrade: \"*\"\n", 1))
    run = reconcile(repo, kc, capsys=capsys)
    assert run.code == 2 and "objects are stored in it" in run.out + run.err
    assert managed(k8s, "plumbus") == V100


def test_the_preflight_reads_only_crds_that_differ_from_what_was_applied(repo, kc, k8s: Kube, capsys):
    """A CRD whose live applied-digest is the one the bundle's CRD would carry is not read whole; a changed one
    is, and its unsafe change is found."""
    from reconciler import pipeline

    own_namespace(repo)
    repo.set_version("1.0.0")
    assert reconcile(repo, kc, capsys=capsys).code == 0
    try:
        reads: list[str] = []
        real_get = k8s.get

        def get(info, namespace, name):
            if info.kind == "CustomResourceDefinition":
                reads.append(name)
            return real_get(info, namespace, name)
        k8s.get = get   # type: ignore[method-assign]
        repo.commit("installed")
        prepared = pipeline.prepare(repo.path, k8s)
        assert reads == [] and all(d.approved for d in prepared.decisions.values()), (reads, prepared.decisions)

        with retyped_after_install(repo, kc, k8s, capsys):
            reads.clear()
            repo.commit("retyped")
            decision = pipeline.prepare(repo.path, k8s).decisions["plumbus"]
            assert reads == ["plumbai.how.theydoit.com"], reads
            assert not decision.approved and decision.reason == "PolicyViolation", decision
            assert "type changes from integer to string" in decision.message
    finally:
        k8s.get = real_get   # type: ignore[method-assign]
