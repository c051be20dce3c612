"""Operator declarations: both apiVersions, strict parsing, errors that say where and what."""

from __future__ import annotations

import pytest

from reconciler import yamlio
from reconciler.errors import DeclarationError
from reconciler.model.declarations import (
    CatalogSelector, Constraint, DirectBundle, InstallSettings, Origin, parse_operator,
)
from tests.unit.helpers import DESIGN_DOC_V2ALPHA1

ORIGIN = Origin("operators/plumbus.yaml")

# The Operator API example of the design document, verbatim in shape: it sets
# spec.version twice, and a YAML reader keeps the last one.
DESIGN_DOC_V1 = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: plumbus
spec:
  inputClass: subscription

  # optional
  catalog:
    name: community
    namespace: my-ns
    package: plumbus
    channel: stable

  # optional, lock to a specific version
  version: "2.0.0"

  # version may also be a semver range, like ">2.0.0 <3.0.0"
  version: ">2.0.0 <3.0.0"

  # optional
  # additional arbitrary constraints can be added
  constraints:
  - type: olm.rego
    value: "semver.Compare(minOCPVersion, 4.8.0) == 1"

status:
  conditions:
  - kind: UpdateAvailable
    status: True
    lastTransitionTime: 2019-09-16T22:26:29Z
"""

DIRECT_BUNDLE = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: plumbus
spec:
  bundle:
    name: etcd-operator.v0.9.3
    spec:
      class: olm.bundle
      refs:
      - docker://quay.io/etcd/bundle@sha256:{digest}
"""
DIGEST = "0123456789abcdef" * 4


def parse(text: str, origin: Origin = ORIGIN):
    return parse_operator(yamlio.load_one(text, origin.path), origin)


def v1(spec: dict, name: str = "plumbus") -> dict:
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": name},
            "spec": spec}


CATALOG = {"name": "community", "package": "plumbus", "channel": "stable"}


def error(doc: dict, origin: Origin = ORIGIN) -> DeclarationError:
    with pytest.raises(DeclarationError) as err:
        parse_operator(doc, origin)
    return err.value


def test_design_doc_v1_example_rego_constraint_is_refused_with_the_cel_alternative():
    with pytest.raises(DeclarationError) as err:
        parse(DESIGN_DOC_V1)
    assert err.value.message == "spec.constraints[0]: olm.rego constraints are not supported"
    assert "olm.constraint" in err.value.hint and "cel" in err.value.hint


def test_design_doc_v1_example_last_version_wins():
    cel = ("  - type: olm.constraint\n    value:\n      cel:\n"
           "        rule: 'properties.exists(p, p.type == \"olm.maxOpenShiftVersion\")'\n")
    decl = parse(DESIGN_DOC_V1.replace('  - type: olm.rego\n    value: "semver.Compare(minOCPVersion, 4.8.0) == 1"\n',
                                       cel))
    assert decl.name == "plumbus"
    assert decl.origin == ORIGIN
    assert decl.input_class == "subscription"
    assert decl.catalog == CatalogSelector(name="community", package="plumbus", channel="stable",
                                           namespace="my-ns")
    assert decl.package == "plumbus"
    assert str(decl.version) == ">2.0.0 <3.0.0"
    assert decl.version.contains("2.5.0")
    assert not decl.version.contains("2.0.0")
    assert decl.constraints == (Constraint("olm.constraint", None),)
    assert decl.constraints[0].value["cel"]["rule"].startswith("properties.exists(")
    assert decl.bundle is None
    assert decl.entrypoint is None
    assert decl.install == InstallSettings()


def test_v1_minimal_defaults():
    decl = parse_operator(v1({"catalog": {"name": "community", "package": "plumbus"}}), ORIGIN)
    assert decl.input_class == "subscription"
    assert decl.catalog == CatalogSelector("community", "plumbus", None, None)
    assert decl.version is None and decl.constraints == ()


def test_v1_numeric_version_is_a_range():
    decl = parse_operator(v1({"catalog": CATALOG, "version": 2}), ORIGIN)
    assert decl.version.contains("2.3.4") and not decl.version.contains("3.0.0")


def test_v1_unquoted_decimal_version_is_refused():
    # YAML reads `version: 1.10` as the float 1.1, which would silently pin the
    # wrong minor version; the declaration must ask for quotes instead.
    doc = yamlio.load_one("apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {name: p}\n"
                          "spec:\n  catalog: {name: c, package: p}\n  version: 1.10\n", "operators/p.yaml")
    err = error(doc, Origin("operators/p.yaml"))
    assert err.path == "operators/p.yaml" and err.obj == "Operator p"
    assert "spec.version" in err.message
    assert "quote" in (err.hint or "") + err.message


def test_v2alpha1_design_doc_example():
    decl = parse(DESIGN_DOC_V2ALPHA1)
    assert decl.catalog == CatalogSelector(name="community", package="plumbus", channel="stable",
                                           namespace="my-ns")
    assert decl.entrypoint == "plumbus.v2.0.0"
    assert decl.version is None
    assert decl.input_class == "subscription"


def test_v2alpha1_type_defaults_to_catalog_source_and_approval_manual_accepted():
    doc = yamlio.load_one(DESIGN_DOC_V2ALPHA1, "x")
    del doc["spec"]["updates"]["type"]
    doc["spec"]["updates"]["catalogSource"]["approval"] = "Manual"
    decl = parse_operator(doc, ORIGIN)
    assert decl.catalog.name == "community"


def test_v2alpha1_other_update_type_refused():
    doc = yamlio.load_one(DESIGN_DOC_V2ALPHA1, "x")
    doc["spec"]["updates"]["type"] = "Git"
    err = error(doc)
    assert "spec.updates.type 'Git' is not supported" in err.message
    assert err.hint == "use CatalogSource"


def test_v2alpha1_bad_approval():
    doc = yamlio.load_one(DESIGN_DOC_V2ALPHA1, "x")
    doc["spec"]["updates"]["catalogSource"]["approval"] = "Sometimes"
    err = error(doc)
    assert err.path == "operators/plumbus.yaml" and err.obj == "Operator plumbus"
    assert err.message == "spec.updates.catalogSource.approval must be Automatic or Manual, not 'Sometimes'"


def test_v2alpha1_missing_ref():
    doc = yamlio.load_one(DESIGN_DOC_V2ALPHA1, "x")
    del doc["spec"]["updates"]["catalogSource"]["ref"]
    assert error(doc).message == "spec.updates.catalogSource.ref is required"


def test_v2alpha1_rejects_v1_fields():
    doc = yamlio.load_one(DESIGN_DOC_V2ALPHA1, "x")
    doc["spec"]["catalog"] = CATALOG
    err = error(doc)
    assert err.message == "unknown field spec.catalog"


def test_direct_bundle():
    decl = parse(DIRECT_BUNDLE.format(digest=DIGEST))
    assert decl.catalog is None and decl.package is None
    assert decl.bundle == DirectBundle("etcd-operator.v0.9.3", (f"docker://quay.io/etcd/bundle@sha256:{DIGEST}",),
                                       "olm.bundle")


@pytest.mark.parametrize("digest", ["", "abc123...", DIGEST[:-1], DIGEST.upper()])
def test_a_placeholder_digest_is_refused_where_it_is_written(digest):
    """Seed 004 writes docker://quay.io/etcd/bundle@sha256, seed 001 sha256:def456...: they stand for digests."""
    err = error(yamlio.load_one(DIRECT_BUNDLE.format(digest=digest).replace("sha256:\n", "sha256\n"), "x"))
    assert err.message.startswith("spec.bundle.spec.refs[0] 'docker://quay.io/etcd/bundle@sha256")
    assert "is not an image digest (sha256: and 64 hex digits)" in err.message
    assert err.hint.startswith("write the image's digest in full")


def test_direct_bundle_needs_refs():
    err = error(v1({"bundle": {"name": "b", "spec": {"refs": []}}}))
    assert err.message == "spec.bundle.spec.refs must be a non-empty list of references"
    err = error(v1({"bundle": {"name": "b", "spec": {}}}))
    assert err.message == "spec.bundle.spec.refs is required"


def test_install_settings():
    decl = parse_operator(v1({"catalog": CATALOG,
                              "install": {"namespace": "plumbus-system", "targetNamespaces": ["a", "b"]}}),
                          ORIGIN)
    assert decl.install == InstallSettings("plumbus-system", ("a", "b"))
    decl = parse_operator(v1({"catalog": CATALOG, "install": {"targetNamespaces": [""]}}), ORIGIN)
    assert decl.install == InstallSettings(None, ("",))


def test_document_index_in_origin():
    err = error({"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {}},
                Origin("operators/all.yaml", 2))
    assert err.render() == "operators/all.yaml (document 3): Operator has no metadata.name"


@pytest.mark.parametrize("meta", [None, {}, {"name": ""}, {"name": 7}, "plumbus"])
def test_missing_name(meta):
    doc = {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "spec": {"catalog": CATALOG}}
    if meta is not None:
        doc["metadata"] = meta
    err = error(doc)
    assert err.path == "operators/plumbus.yaml"
    assert err.message == "Operator has no metadata.name"


@pytest.mark.parametrize("name", ["Plumbus", "plumbus_1", "-plumbus", "plumbus.io", "p" * 64])
def test_invalid_name(name):
    err = error(v1({"catalog": CATALOG}, name=name))
    assert err.obj == f"Operator {name}"
    assert "metadata.name must be a DNS-1123 label" in err.message


def test_unknown_spec_field_is_named():
    err = error(v1({"catalog": CATALOG, "verison": "1.0.0"}))
    assert err.path == "operators/plumbus.yaml" and err.obj == "Operator plumbus"
    assert err.message == "unknown field spec.verison"
    assert "version" in err.hint and "catalog" in err.hint


def test_unknown_nested_field_is_named_with_count():
    err = error(v1({"catalog": {**CATALOG, "chanel": "x", "zzz": 1}}))
    assert err.message == "unknown field spec.catalog.chanel (and 1 more)"
    assert err.hint == "known fields of spec.catalog: channel, name, namespace, package"


def test_catalog_and_bundle_together():
    err = error(v1({"catalog": CATALOG, "bundle": {"name": "b", "spec": {"refs": ["file://bundles/x"]}}}))
    assert err.message == "spec.catalog and spec.bundle are mutually exclusive"
    assert err.obj == "Operator plumbus"


def test_neither_catalog_nor_bundle():
    err = error(v1({"inputClass": "subscription"}))
    assert err.message == "spec must name a catalog package (spec.catalog) or a bundle (spec.bundle)"
    err = error({"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": "x"}})
    assert "spec.catalog" in err.message


def test_catalog_needs_package():
    err = error(v1({"catalog": {"name": "community"}}))
    assert err.message == "spec.catalog.package is required"


def test_wrong_type_is_named():
    err = error(v1({"catalog": "community"}))
    assert err.message == "spec.catalog must be a mapping, not a string"
    err = error(v1({"catalog": {**CATALOG, "channel": ["stable"]}}))
    assert err.message == "spec.catalog.channel must be a string, not a list"


def test_spec_not_a_mapping():
    err = error({"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": "x"},
                 "spec": ["catalog"]})
    assert err.message == "spec must be a mapping, not a list"


def test_bad_version_range():
    err = error(v1({"catalog": CATALOG, "version": ">>1.0"}))
    assert err.path == "operators/plumbus.yaml" and err.obj == "Operator plumbus"
    assert err.message.startswith("spec.version: ")
    assert ">>1.0" in err.message
    assert err.hint  # the range parser's examples are passed on


def test_bad_constraints():
    err = error(v1({"catalog": CATALOG, "constraints": [{"value": 1}]}))
    assert err.message == "spec.constraints[0] must be a mapping with a string 'type'"


@pytest.mark.parametrize("ns", ["Plumbus", "plumbus_system", "a" * 64, "-x"])
def test_bad_install_namespace(ns):
    err = error(v1({"catalog": CATALOG, "install": {"namespace": ns}}))
    assert err.message == f"spec.install.namespace {ns!r} is not a valid namespace name"
    assert err.obj == "Operator plumbus"


def test_bad_target_namespace():
    err = error(v1({"catalog": CATALOG, "install": {"targetNamespaces": ["ok", "Not_OK"]}}))
    assert err.message == "spec.install.targetNamespaces entry 'Not_OK' is not a valid namespace name"
    assert '[""]' in err.hint


def test_unknown_install_field():
    err = error(v1({"catalog": CATALOG, "install": {"namespaces": ["x"]}}))
    assert err.message == "unknown field spec.install.namespaces"


def _annotated(annotations: dict) -> dict:
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
            "metadata": {"name": "plumbus", "annotations": annotations},
            "spec": {"catalog": {"name": "community", "package": "plumbus"}}}


def test_the_consent_to_adopt_what_runs_is_an_annotation_of_the_declaration():
    assert parse_operator(_annotated({"reconciler.dev/adopt": "true"}), ORIGIN).adopt_existing
    assert not parse_operator(_annotated({"reconciler.dev/adopt": "false"}), ORIGIN).adopt_existing
    assert not parse_operator(_annotated({}), ORIGIN).adopt_existing


@pytest.mark.parametrize("annotations, message", [
    ({"reconciler.dev/adopt": "yes"}, "must be \"true\""),
    ({"reconciler.dev/adopt": "true", "reconciler.dev/adopted-from": "olm-v0/ns/plumbus"}, "are both set"),
    ({"reconciler.dev/adopt": "true", "reconciler.dev/adopted-from": "olm-v1/plumbus"}, "are both set"),
    ({"reconciler.dev/adopted-from": "olm-v1/ns/plumbus"}, "must be olm-v0/<namespace>/<subscription> or olm-v1/"),
    ({"reconciler.dev/adopted-from": "olm-v2/plumbus"}, "must be olm-v0/<namespace>/<subscription> or olm-v1/"),
])
def test_a_bad_consent_to_adopt_is_refused_naming_the_file(annotations, message):
    with pytest.raises(DeclarationError) as err:
        parse_operator(_annotated(annotations), ORIGIN)
    assert message in err.value.message and err.value.path == "operators/plumbus.yaml"
    assert err.value.obj == "Operator plumbus"
