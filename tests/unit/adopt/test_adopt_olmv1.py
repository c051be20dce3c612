"""What `reconciler adopt` makes of OLM v1's ClusterExtensions, without a cluster: each mapped, or left with its
reason; and the declaration it writes for one."""

from __future__ import annotations

import pytest

from reconciler import yamlio
from reconciler.adopt.adoption import _declaration_text, declaration
from reconciler.adopt.olmv1 import ClusterView, survey
from reconciler.model.declarations import Origin, parse_operator

OWNER = {"olm.operatorframework.io/owner-kind": "ClusterExtension", "olm.operatorframework.io/owner-name": "ext"}


def extension(name="ext", catalog=None, config=None, installed=True, progressing="Succeeded", **meta) -> dict:
    spec = {"namespace": "ops", "source": {"sourceType": "Catalog",
                                           "catalog": {"packageName": "op", **(catalog or {})}}}
    if config is not None:
        spec["config"] = config
    status = {"conditions": [{"type": "Installed", "status": "True" if installed else "False",
                              "reason": "Succeeded" if installed else "Failed"},
                             {"type": "Progressing", "status": "True", "reason": progressing}]}
    if installed:
        status["install"] = {"bundle": {"name": "op.v1.2.0", "version": "1.2.0"}}
    return {"metadata": {"name": name, **meta}, "spec": spec, "status": status}


def deployment(labels=OWNER, image="quay.io/org/op:v1.2.0") -> dict:
    return {"metadata": {"name": "op", "namespace": "ops", "labels": dict(labels)},
            "spec": {"template": {"spec": {"containers": [{"name": "m", "image": image}]}}}}


CATALOGS = ({"metadata": {"name": "community", "labels": {"tier": "community"}},
             "spec": {"source": {"type": "Image", "image": {"ref": "quay.io/org/catalog:v1"}}}},
            {"metadata": {"name": "other", "labels": {"tier": "other"}},
             "spec": {"source": {"type": "Image", "image": {"ref": "quay.io/org/other:v1"}}}})


def test_an_installed_extension_maps_with_its_bundle_images_and_catalogs():
    found = survey(ClusterView((extension(catalog={"selector": {"matchLabels": {"tier": "community"}}}),),
                               CATALOGS, (deployment(), deployment(labels={}, image="x"))))
    assert found.unmapped == ()
    (ext,) = found.installs
    assert (ext.where, ext.package, ext.namespace, ext.target_namespaces) == \
        ("ClusterExtension ext", "op", "ops", ("",))
    assert (ext.bundle_name, ext.version, ext.images) == ("op.v1.2.0", "1.2.0", {"quay.io/org/op:v1.2.0"})
    assert ext.catalog_images == ("quay.io/org/catalog:v1",)
    assert "`reconciler catalog import . --image quay.io/org/catalog:v1 --name NAME --package op`" in \
        ext.catalog_hint("")
    assert ext.adopted_from == "olm-v1/ext"


@pytest.mark.parametrize("ext, reason", [
    (extension(installed=False), "nothing is installed for it (the ClusterExtension's condition Installed: Failed)"),
    (extension(progressing="Retrying"), "operator-controller is still working on the ClusterExtension (Progressing: Retrying)"),
    (extension(catalog={"channels": ["a", "b"]}), "it follows several channels (a, b); a declaration follows one"),
    (extension(config={"configType": "Inline", "inline": {"watchNamespace": "x", "other": 1}}),
     "its spec.config sets more than the namespace to watch (other)"),
    (extension(deletionTimestamp="2026-01-01T00:00:00Z"), "the ClusterExtension is being deleted"),
    (dict(extension(), status={**extension()["status"], "activeRevisions": [{"name": "ext-1"}]}),
     "operator-controller installed it as ClusterObjectSet revisions"),
])
def test_an_extension_that_cannot_be_adopted_is_listed_with_its_reason(ext, reason):
    found = survey(ClusterView((ext,)))
    assert found.installs == ()
    (left,) = found.unmapped
    assert left.what == "ClusterExtension ext" and left.reason.startswith(reason), left.reason
    assert left.hint


def test_the_declaration_means_what_the_extension_meant():
    ext, = survey(ClusterView((extension(catalog={"channels": ["stable"], "version": ">=1.0.0 <2.0.0",
                                                    "upgradeConstraintPolicy": "SelfCertified"},
                                           config={"configType": "Inline", "inline": {"watchNamespace": "ops"}}),),
                              (), (deployment(),))).installs
    doc = declaration(ext, "op", "community")
    assert doc["metadata"]["annotations"] == {"reconciler.dev/adopted-from": "olm-v1/ext"}
    assert doc["spec"] == {"catalog": {"name": "community", "package": "op", "channel": "stable"},
                           "version": ">=1.0.0 <2.0.0", "install": {"namespace": "ops", "targetNamespaces": ["ops"]}}
    text = _declaration_text(ext, doc)
    assert "# Adopted from OLM v1: ClusterExtension ext (OwnNamespace), running op.v1.2.0." in text
    assert "SelfCertified" in text
    decl = parse_operator(yamlio.load_one(text, "op.yaml"), Origin("op.yaml"))
    assert (decl.adopted_from, decl.package, str(decl.version)) == ("olm-v1/ext", "op", ">=1.0.0 <2.0.0")


def test_an_approval_adopted_from_a_cluster_extension_keeps_its_evidence():
    from reconciler.model.approvals import parse_record, render_record

    text = ("apiVersion: reconciler.dev/v1alpha1\nkind: Approval\nmetadata: {name: op}\nspec:\n  bundles:\n"
            "  - name: op.v1.2.0\n    digest: sha256:" + "a" * 64 + "\n    permissions: []\n"
            "    adopted: {from: OLM v1, clusterExtension: ext, namespace: ops, serviceAccount: installer, "
            "bundle: op.v1.2.0}\n")
    record = parse_record(yamlio.load_all(text, "approvals/op.yaml")[0], "approvals/op.yaml")
    assert record.bundles[0].adopted["clusterExtension"] == "ext"
    assert parse_record(yamlio.load_all(render_record(record), "x")[0], "x").bundles == record.bundles
    with pytest.raises(Exception, match="clusterServiceVersion \\(OLM v0\\) or the clusterExtension"):
        parse_record(yamlio.load_all(text.replace("clusterExtension: ext, ", ""), "a")[0], "a")


def test_evidence_names_the_extension_and_its_service_account():
    ext = extension()
    ext["spec"]["serviceAccount"] = {"name": "installer"}
    (found,) = survey(ClusterView((ext,), (), (deployment(),))).installs
    assert found.evidence == {"from": "OLM v1", "clusterExtension": "ext", "namespace": "ops",
                              "serviceAccount": "installer", "bundle": "op.v1.2.0"}


def test_a_bundle_that_serves_webhooks_is_recognised_for_refusal():
    from reconciler.adopt.adoption import _webhook

    assert _webhook({"kind": "ValidatingWebhookConfiguration"}) and _webhook({"kind": "MutatingWebhookConfiguration"})
    assert _webhook({"kind": "CustomResourceDefinition", "spec": {"conversion": {"strategy": "Webhook"}}})
    assert not _webhook({"kind": "CustomResourceDefinition", "spec": {"conversion": {"strategy": "None"}}})
    assert not _webhook({"kind": "Deployment"})
