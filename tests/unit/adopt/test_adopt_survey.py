"""What `reconciler adopt` makes of OLM v0's objects, without a cluster: each install mapped, or left with its reason."""

from __future__ import annotations

import pytest

from reconciler.adopt import declaration
from reconciler.adopt.olmv0 import MODES, ClusterView, install_mode, survey
from reconciler.model.approvals import parse_record, render_record
from reconciler import yamlio
from reconciler.model.declarations import Origin, parse_operator

NS = "ops"


def csv(name="op.v1.0.0", phase="Succeeded", modes=("OwnNamespace", "AllNamespaces"), ns=NS, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"version": "1.0.0", "installModes": [{"type": m, "supported": True} for m in modes], **spec},
            "status": {"phase": phase}}


def sub(name="op", installed="op.v1.0.0", ns=NS, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"name": name, "channel": "stable", "source": "cat", "sourceNamespace": ns, **spec},
            "status": {"installedCSV": installed, "state": "AtLatestKnown"}}


def group(targets=(NS,), ns=NS, **spec) -> dict:
    return {"metadata": {"name": "og", "namespace": ns},
            "spec": {"targetNamespaces": list(targets), **spec} if targets is not None else spec}


SOURCE = {"metadata": {"name": "cat", "namespace": NS}, "spec": {"image": "quay.io/org/index:v1"},
          "status": {"connectionState": {"lastObservedState": "READY"}}}


def plan(name="install-1", csvs=("op.v1.0.0",), phase="Complete", ns=NS) -> dict:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterServiceVersionNames": list(csvs)},
            "status": {"phase": phase}}


def view(subs=(), csvs=(), groups=(), sources=(SOURCE,), plans=()) -> ClusterView:
    return ClusterView({"Subscription": tuple(subs), "ClusterServiceVersion": tuple(csvs),
                        "OperatorGroup": tuple(groups), "CatalogSource": tuple(sources), "InstallPlan": tuple(plans)})


def reasons(v: ClusterView) -> dict[str, str]:
    return {u.what: u.reason for u in survey(v).unmapped}


def test_a_succeeded_install_maps_with_its_mode():
    found = survey(view([sub()], [csv()], [group()]))
    (inst,) = found.installs
    assert found.unmapped == ()
    assert (inst.package, inst.channel, inst.target_namespaces, inst.manual) == ("op", "stable", (NS,), False)
    assert install_mode(NS, inst.target_namespaces) == "OwnNamespace"
    assert install_mode(NS, survey(view([sub()], [csv()], [group(targets=None)])).installs[0].target_namespaces) \
        == "AllNamespaces"


@pytest.mark.parametrize("case, expected", [
    (dict(subs=[sub(installed="")], csvs=[], groups=[group()]), "nothing is installed for it yet"),
    (dict(subs=[sub()], csvs=[csv(phase="Failed")], groups=[group()]), "is Failed"),
    (dict(subs=[sub()], csvs=[csv(), csv(name="op.v1.1.0", phase="Installing", replaces="op.v1.0.0")],
          groups=[group()]), "is being replaced by op.v1.1.0"),
    (dict(subs=[sub(config={"selector": {"matchLabels": {"a": "b"}}})], csvs=[csv()], groups=[group()]),
     "its spec.config has a selector, which OLM v0 does not apply"),
    (dict(subs=[sub(config={"env": [{"value": "1"}]})], csvs=[csv()], groups=[group()]),
     "its spec.config cannot be declared: spec.config.env[0].name: is required"),
    (dict(subs=[sub(config={"resources": {"limits": {"cpu": "1"}}, "priorityClassName": "x"})], csvs=[csv()],
          groups=[group()]), "its spec.config cannot be declared: unknown field spec.config.priorityClassName"),
    (dict(subs=[sub()], csvs=[csv()], groups=[]), "has 0 OperatorGroups"),
    (dict(subs=[sub()], csvs=[csv()], groups=[group(targets=None, selector={"matchLabels": {"a": "b"}})]),
     "chooses its namespaces by a label selector and OLM has not resolved them yet"),
    (dict(subs=[sub()], csvs=[csv(modes=("AllNamespaces",))], groups=[group()]),
     "asks for OwnNamespace, which op.v1.0.0 does not support"),
    (dict(subs=[sub()], csvs=[csv()], groups=[group()], sources=[]), "its CatalogSource ops/cat does not exist"),
    (dict(subs=[sub()], csvs=[csv()], groups=[group()],
          sources=[{**SOURCE, "status": {"connectionState": {"lastObservedState": "TRANSIENT_FAILURE"}}}]),
     "cannot be read (connection TRANSIENT_FAILURE)"),
    (dict(subs=[sub()], csvs=[csv()], groups=[group()], plans=[plan(phase="Installing")]),
     "OLM is still executing InstallPlan ops/install-1 (phase Installing), which installed op.v1.0.0"),
])
def test_an_install_that_cannot_be_adopted_is_listed_with_its_reason(case, expected):
    found = reasons(view(**case))
    assert expected in found["Subscription ops/op"], found
    assert survey(view(**case)).installs == ()


def test_a_csv_without_a_subscription_is_listed_and_copies_are_not():
    copy = csv(ns="other")
    copy["metadata"]["labels"] = {"olm.copiedFrom": NS}
    assert reasons(view([], [csv(), copy], [group()])) == {
        "ClusterServiceVersion ops/op.v1.0.0": "no Subscription installed it (applied by hand, or its Subscription "
                                               "was deleted): what was asked for (package, channel, approval) is "
                                               "unknown"}


def test_installs_of_one_group_are_each_adopted_when_they_support_the_groups_mode():
    """OpenShift's global-operators: an AllNamespaces-only CSV beside one that supports all four modes. The group's
    one mode is what each must support, as OLM requires; what else a CSV supports does not matter."""
    v = view([sub(), sub(name="two", installed="two.v1"), sub(name="three", installed="three.v1")],
             [csv(modes=MODES), csv(name="two.v1", modes=("AllNamespaces",)), csv(name="three.v1", modes=("OwnNamespace",))],
             [group(targets=None)])
    found = survey(v)
    assert sorted(i.csv_name for i in found.installs) == ["op.v1.0.0", "two.v1"]
    assert {i.target_namespaces for i in found.installs} == {("",)}
    assert reasons(v) == {"Subscription ops/three": "OperatorGroup ops/og asks for AllNamespaces, which three.v1 does "
                                                     "not support (OwnNamespace)"}


def test_olms_own_packageserver_is_olms_and_no_failure():
    server = csv(name="packageserver", ns="olm")
    server["metadata"]["labels"] = {"olm.version": "v0.46.0"}
    labelled = csv(name="platform.v1", ns="openshift-operator-lifecycle-manager")
    labelled["metadata"]["labels"] = {"olm.clusteroperator.name": "operator-lifecycle-manager-packageserver"}
    found = survey(view([sub()], [csv(), server, labelled], [group()]))
    assert found.unmapped == ()
    assert [(u.code, u.what) for u in found.platform] == [
        ("Platform", "ClusterServiceVersion olm/packageserver"),
        ("Platform", "ClusterServiceVersion openshift-operator-lifecycle-manager/platform.v1")]


def test_a_label_selector_group_is_read_through_the_namespaces_olm_resolved():
    selected = group(targets=None, selector={"matchLabels": {"team": "a"}})
    selected["status"] = {"namespaces": ["b", "a"]}
    (inst,) = survey(view([sub()], [csv(modes=("MultiNamespace",))], [selected])).installs
    assert inst.target_namespaces == ("a", "b")
    assert any("label selector" in n for n in inst.group_notes)
    assert "# its OperatorGroup ops/og chose its namespaces by a label selector" in inst.header()


def test_the_groups_service_account_and_upgrade_strategy_are_named():
    g = group(serviceAccountName="scoped", upgradeStrategy="TechPreviewUnsafeFailForward")
    (inst,) = survey(view([sub()], [csv()], [g])).installs
    assert [n.split(" (")[0] for n in inst.group_notes] == [
        "OLM installed it as ServiceAccount ops/scoped", "its OperatorGroup's upgradeStrategy TechPreviewUnsafeFailForward"]


@pytest.mark.parametrize("marks, tool", [
    ({"annotations": {"argocd.argoproj.io/tracking-id": "platform:operators.coreos.com/Subscription:ops/op"}},
     "Argo CD (Application platform)"),
    ({"managedFields": [{"manager": "argocd-controller", "operation": "Apply"}],
      "labels": {"app.kubernetes.io/instance": "operators"}}, "Argo CD (Application operators)"),
    # Argo CD's client-side apply leaves its field manager and no tracking annotation (label tracking off)
    ({"managedFields": [{"manager": "argocd-controller", "operation": "Update"}]},
     "Argo CD (its field manager argocd-controller)"),
    ({"labels": {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
     "Flux (Kustomization flux-system/apps)"),
    ({"annotations": {"apps.open-cluster-management.io/hosting-subscription": "policies/operators"}},
     "ACM (Subscription policies/operators)"),
])
def test_a_subscription_another_tool_applies_is_left_naming_the_tool(marks, tool):
    s = sub()
    s["metadata"].update(marks)
    (u,) = survey(view([s], [csv()], [group()])).unmapped
    assert (u.code, u.namespace, u.package) == ("ManagedByAnotherTool", NS, "op")
    assert u.reason.startswith(f"is applied by {tool}: the takeover deletes the Subscription")


def test_an_install_an_olm_kept_one_needs_is_named_with_what_needs_it():
    from reconciler.adopt.olmv0 import needed_by_olm

    provider = csv(name="cm.v1", customresourcedefinitions={"owned": [{"name": "certificates.cert-manager.io"}]})
    dependent = csv(name="db.v1", customresourcedefinitions={"required": [{"name": "certificates.cert-manager.io"}]})
    v = view([sub(name="cm", installed="cm.v1"), sub(name="db", installed="db.v1")], [provider, dependent], [group()])
    installs = {i.package: i for i in survey(v).installs}
    (u,) = needed_by_olm([installs["cm"]], v)
    assert (u.code, u.what) == ("NeededByOLM", "Subscription ops/cm")
    assert "ClusterServiceVersion ops/db.v1 (needs certificates.cert-manager.io) stays with OLM" in u.reason
    assert needed_by_olm([installs["cm"], installs["db"]], v) == []   # adopted together


def test_an_install_an_olm_kept_one_needs_by_package_is_named_too():
    """catalog-operator reads an installed CSV's dependencies from the properties it projected onto it
    (olm.package.required among them), not from the CSV's spec alone."""
    import json

    from reconciler.adopt.olmv0 import needed_by_olm

    dependent = csv(name="db.v1")
    dependent["metadata"]["annotations"] = {"operatorframework.io/properties": json.dumps({"properties": [
        {"type": "olm.package.required", "value": {"packageName": "cm", "versionRange": ">=1.0.0"}}]})}
    v = view([sub(name="cm", installed="cm.v1"), sub(name="db", installed="db.v1")],
             [csv(name="cm.v1"), dependent], [group()])
    cm = next(i for i in survey(v).installs if i.package == "cm")
    (u,) = needed_by_olm([cm], v)
    assert "ClusterServiceVersion ops/db.v1 (needs package cm) stays with OLM" in u.reason, u.reason


@pytest.mark.parametrize("approval, api_version", [("Automatic", "operators.coreos.com/v1"),
                                                   ("Manual", "operators.coreos.com/v2alpha1")])
def test_the_declaration_means_what_the_subscription_meant(approval, api_version):
    (inst,) = survey(view([sub(installPlanApproval=approval)], [csv()], [group()])).installs
    doc = declaration(inst, "op", "community")
    assert doc["apiVersion"] == api_version
    decl = parse_operator(doc, Origin("operators/op.yaml"))   # a declaration the repository reads as it is
    assert (decl.package, decl.catalog.channel, decl.catalog.name) == ("op", "stable", "community")
    assert (decl.install.namespace, decl.install.target_namespaces) == (NS, (NS,))
    assert decl.manual_approval is (approval == "Manual") and decl.version is None
    assert decl.adopted_from == "olm-v0/ops/op"


def test_an_adopted_approval_keeps_its_evidence_through_a_round_trip():
    text = ("apiVersion: reconciler.dev/v1alpha1\nkind: Approval\nmetadata: {name: op}\nspec:\n  bundles:\n"
            "  - name: op.v1.0.0\n    digest: sha256:" + "a" * 64 + "\n    permissions: []\n"
            "    adopted: {from: OLM v0, clusterServiceVersion: op.v1.0.0, namespace: ops, permissions: []}\n")
    record = parse_record(yamlio.load_all(text, "approvals/op.yaml")[0], "approvals/op.yaml")
    assert record.bundles[0].adopted["clusterServiceVersion"] == "op.v1.0.0"
    again = parse_record(yamlio.load_all(render_record(record), "x")[0], "x")
    assert again.bundles == record.bundles and hash(again.bundles[0]) == hash(record.bundles[0])
    bad = text.replace("clusterServiceVersion: op.v1.0.0, ", "")
    with pytest.raises(Exception, match="adopted must name the clusterServiceVersion"):
        parse_record(yamlio.load_all(bad, "approvals/op.yaml")[0], "approvals/op.yaml")


def test_a_package_installed_in_two_namespaces_is_left_to_olm():
    other = "team-b"
    found = reasons(view([sub(), sub(ns=other)], [csv(), csv(ns=other)], [group(), group(targets=(other,), ns=other)],
                         [SOURCE, {**SOURCE, "metadata": {"name": "cat", "namespace": other}}]))
    assert set(found) == {"Subscription ops/op", "Subscription team-b/op"}
    assert all("package op is installed in 2 namespaces (ops, team-b)" in r for r in found.values()), found


def test_approving_an_adopted_bundle_again_keeps_its_evidence(tmp_path):
    from reconciler.approve.records import add_approval
    from reconciler.model.approvals import ApprovedBundle
    from reconciler.model.permissions import PermissionSet

    text = ("apiVersion: reconciler.dev/v1alpha1\nkind: Approval\nmetadata: {name: op}\nspec:\n  bundles:\n"
            "  - name: op.v1.0.0\n    digest: sha256:" + "a" * 64 + "\n    permissions: []\n"
            "    adopted: {from: OLM v0, clusterServiceVersion: op.v1.0.0, namespace: ops, permissions: []}\n")
    record = parse_record(yamlio.load_all(text, "approvals/op.yaml")[0], "approvals/op.yaml")
    path = add_approval(tmp_path, record, "op", ApprovedBundle("op.v1.0.0", "sha256:" + "a" * 64, PermissionSet()))
    again = parse_record(yamlio.load_all(path.read_text(), "approvals/op.yaml")[0], "approvals/op.yaml")
    assert [b.adopted["clusterServiceVersion"] for b in again.bundles] == ["op.v1.0.0"]
    other = add_approval(tmp_path, again, "op", ApprovedBundle("op.v1.1.0", "sha256:" + "b" * 64, PermissionSet()))
    latest = parse_record(yamlio.load_all(other.read_text(), "approvals/op.yaml")[0], "approvals/op.yaml")
    assert [bool(b.adopted) for b in latest.bundles] == [True, False]


def test_spec_config_becomes_the_declarations_spec_config():
    config = {"env": [{"name": "LOG_LEVEL", "value": "debug"}], "resources": {"limits": {"cpu": "500m"}},
              "nodeSelector": {"disk": "ssd"}, "tolerations": [], "volumes": None}
    (inst,) = survey(view([sub(config=config)], [csv()], [group()])).installs
    doc = declaration(inst, "op", "cat")
    assert doc["spec"]["config"] == {"env": [{"name": "LOG_LEVEL", "value": "debug"}],
                                     "resources": {"limits": {"cpu": "500m"}}, "nodeSelector": {"disk": "ssd"}}
    decl = parse_operator(doc, Origin("operators/op.yaml"))   # what adopt writes is a valid declaration
    assert decl.install.config.value == doc["spec"]["config"]
    (manual,) = survey(view([sub(config=config, installPlanApproval="Manual")], [csv()], [group()])).installs
    assert parse_operator(declaration(manual, "op", "cat"), Origin("o.yaml")).install.config == decl.install.config
    (plain,) = survey(view([sub()], [csv()], [group()])).installs
    assert "config" not in declaration(plain, "op", "cat")["spec"]


def test_a_subscription_olm_made_for_a_dependency_is_adopted_as_its_own_operator_saying_what_needed_it():
    """OLM v0 resolves a dependency into a Subscription of its own, annotated with the InstallPlan that installed
    both: it is an install like any other, and its declaration says what needed it."""
    from reconciler.adopt.adoption import _declaration_text

    dependency = sub(name="dep-stable-cat-ops", installed="dep.v2.0.0")
    dependency["spec"]["name"] = "dep"
    dependency["metadata"]["annotations"] = {"olm.generated-by": "install-1"}
    found = survey(view([sub(), dependency], [csv(), csv(name="dep.v2.0.0")], [group()],
                        plans=[plan(csvs=("op.v1.0.0", "dep.v2.0.0"))]))
    assert found.unmapped == ()
    by_package = {i.package: i for i in found.installs}
    assert (by_package["dep"].generated_by, by_package["dep"].dependency_of) == ("install-1", ("op",))
    assert (by_package["op"].generated_by, by_package["op"].dependency_of) == ("", ())
    text = _declaration_text(by_package["dep"], declaration(by_package["dep"], "dep", "cat"))
    assert "# OLM made that Subscription for a dependency of Subscription ops/op (InstallPlan install-1)." in text
    assert parse_operator(yamlio.load_one(text, "dep.yaml"), Origin("dep.yaml")).package == "dep"
    # the plan gone (OLM keeps a few): still adopted, what needed it unknown
    gone = survey(view([sub(), dependency], [csv(), csv(name="dep.v2.0.0")], [group()]))
    assert {i.package: i.dependency_of for i in gone.installs} == {"op": (), "dep": ()}


def test_an_automatic_subscription_beside_a_manual_one_is_adopted_manual_naming_what_held_it():
    """OLM v0 plans a namespace's Subscriptions in one InstallPlan, Manual when any of them is: the Automatic one's
    upgrades waited for approval too, and the adopted declaration keeps them waiting."""
    found = survey(view([sub(), sub("other", "other.v1.0.0", installPlanApproval="Manual")],
                        [csv(), csv("other.v1.0.0")], [group()]))
    by_name = {i.subscription["metadata"]["name"]: i for i in found.installs}
    assert (by_name["op"].manual, by_name["op"].held_by) == (True, "other")
    assert (by_name["other"].manual, by_name["other"].held_by) == (True, "")
    doc = declaration(by_name["op"], "op", "cat")
    assert parse_operator(doc, Origin("operators/op.yaml")).manual_approval
    alone = survey(view([sub(), sub("other", "other.v1.0.0", ns="elsewhere", installPlanApproval="Manual")],
                        [csv(), csv("other.v1.0.0", ns="elsewhere")], [group(), group(("elsewhere",), ns="elsewhere")]))
    assert [(i.subscription["metadata"]["name"], i.manual) for i in alone.installs] == [("op", False)]
