"""Which live objects a consent to adopt what runs may take over, and why the others are refused (pure)."""

from __future__ import annotations

import pytest

from reconciler.cluster.ownership.takeover.existing import refusal
from reconciler.adopt.matching import _without_bookkeeping
from reconciler.model.kube import ObjectRef

SA = ObjectRef("", "ServiceAccount", "plumbus-system", "plumbus-controller", "v1")


def _live(labels=None, annotations=None, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": SA.name, "namespace": SA.namespace, "labels": labels or {},
                         "annotations": annotations or {}, **meta}}


def test_an_object_applied_by_hand_or_by_helm_may_be_adopted():
    assert refusal(SA, _live(), "plumbus", "default") is None
    helm = {"meta.helm.sh/release-name": "plumbus", "meta.helm.sh/release-namespace": "plumbus-system"}
    assert refusal(SA, _live({"app.kubernetes.io/managed-by": "Helm"}, helm), "plumbus", "default") is None
    # in this Operator's own inventory (a takeover interrupted before its apply succeeded)
    assert refusal(SA, _live(), "plumbus", "default", [("plumbus", "default")]) is None


@pytest.mark.parametrize("ref, live, held, why, hint", [
    (ObjectRef("rbac.authorization.k8s.io", "ClusterRole", "", "system:controller:x", "v1"),
     {"metadata": {"name": "system:controller:x"}}, [], "is Kubernetes' own RBAC", "cannot be installed here"),
    (SA, _live(), [("gadget", "default")], "belongs to Operator gadget (its inventory", "install the package once"),
    (SA, _live(), [("plumbus", "team-a")], "belongs to Operator plumbus of reconciler instance 'team-a'",
     "install the package once"),
    (SA, _live(deletionTimestamp="2026-01-01T00:00:00Z"), [], "is being deleted", "once it is gone"),
    (SA, _live({"olm.owner": "plumbus.v1.1.0", "olm.owner.namespace": "operators"}), [],
     "is OLM v0's (ClusterServiceVersion operators/plumbus.v1.1.0 installed it)", "`reconciler adopt REPO`"),
    (SA, _live(ownerReferences=[{"kind": "ClusterServiceVersion", "name": "plumbus.v1.1.0"}]), [],
     "is OLM v0's (ClusterServiceVersion plumbus-system/plumbus.v1.1.0", "docs/migration.md"),
    (SA, _live({"olm.operatorframework.io/owner-kind": "ClusterExtension",
                "olm.operatorframework.io/owner-name": "plumbus"}), [],
     "is OLM v1's (ClusterExtension plumbus installed it)", "leave it to OLM v1"),
    (SA, _live({"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}),
     [], "is applied by Flux (Kustomization flux-system/apps)", "stop Flux managing it"),
    (SA, _live(annotations={"argocd.argoproj.io/tracking-id": "plumbus:/ServiceAccount:plumbus-system/x"}), [],
     "is applied by Argo CD (Application plumbus)", "stop Argo CD managing it"),
    (SA, _live(ownerReferences=[{"kind": "Widget", "name": "w", "controller": True}]), [],
     "is controlled by Widget w", "leave it to its controller"),
])
def test_what_another_manages_is_refused_saying_why_and_what_to_do(ref, live, held, why, hint):
    refused = refusal(ref, live, "plumbus", "default", held)
    assert refused is not None and why in refused[0] and hint in refused[1], refused


def test_the_comparison_leaves_out_who_manages_an_object():
    live = _live({"team": "payments"}, {"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    proposed = _live({"team": "payments", "reconciler.dev/operator": "plumbus",
                      "app.kubernetes.io/managed-by": "reconciler",
                      "applyset.kubernetes.io/part-of": "applyset-x-v1"})
    assert _without_bookkeeping(live) == _without_bookkeeping(proposed)
    assert _without_bookkeeping(live)["metadata"]["labels"] == {"team": "payments"}
    assert "annotations" not in _without_bookkeeping(live)["metadata"]


def _report(*verdicts: str, consent: bool = False, adopted: dict | None = None):
    from reconciler.adopt.matching import Entry, Report

    return Report("plumbus", "plumbus.v1.1.0", "plumbus-system", "operators/plumbus.yaml", consent, adopted, False,
                  tuple(Entry(SA, v) for v in verdicts))


def test_the_report_says_how_to_consent_or_what_stands_in_the_way():
    from reconciler.adopt.matching import consent_lines, exit_code

    assert exit_code([_report("matches", "matches")]) == 0
    assert exit_code([_report("matches", "missing")]) == 1 and exit_code([_report("differs")]) == 1
    assert exit_code([_report("matches"), _report("refused", "differs")]) == 2
    assert 'reconciler.dev/adopt: "true"' in "\n".join(consent_lines(_report("matches", "differs")))
    assert "1 object cannot be taken over" in consent_lines(_report("refused", "matches"))[0]
    assert "operators/plumbus.yaml consents" in consent_lines(_report("matches", consent=True))[0]
    assert "nothing to take over" in consent_lines(_report("ours", "ours", consent=True))[0]
    spent = consent_lines(_report("ours", consent=True, adopted={"revision": "abc", "objects": [{}, {}]}))[0]
    assert "took over 2 existing objects at abc" in spent and "no further effect" in spent
