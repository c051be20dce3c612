"""An installed CSV's requirements read as catalog-operator reads them: its projected properties, else its spec."""

import json

from reconciler.model.olmneeds import PROPERTIES_ANNOTATION, needed, needs


def csv(name: str, properties: list | None = None, **spec) -> dict:
    meta: dict = {"name": name, "namespace": "ops"}
    if properties is not None:
        meta["annotations"] = {PROPERTIES_ANNOTATION: json.dumps({"properties": properties})}
    return {"metadata": meta, "spec": spec}


CERT_MANAGER = csv("cert-manager.v1.12.2", [
    {"type": "olm.package", "value": {"packageName": "cert-manager", "version": "1.12.2"}},
    {"type": "olm.gvk", "value": {"group": "cert-manager.io", "kind": "Certificate", "version": "v1"}}],
    customresourcedefinitions={"owned": [{"name": "issuers.cert-manager.io", "version": "v1", "kind": "Issuer"}]})


def test_a_package_dependency_projected_onto_the_csv_counts():
    """catalog-operator projects a bundle's olm.package.required onto the CSV it installs (the annotation's value
    a JSON object, as OLM writes it) and resolves it again on every resolution."""
    db = csv("db.v1", [{"type": "olm.package", "value": {"packageName": "db", "version": "1.0.0"}},
                       {"type": "olm.package.required", "value": {"packageName": "cert-manager",
                                                                  "versionRange": ">=1.12.2"}}])
    assert needs(db).packages == {"cert-manager"}
    assert needed(db, CERT_MANAGER, "cert-manager") == ["package cert-manager"]
    assert needed(db, csv("other.v1"), "other") == []


def test_an_api_dependency_is_met_by_a_projected_or_an_owned_api():
    db = csv("db.v1", [{"type": "olm.gvk.required", "value": json.dumps(
        {"group": "cert-manager.io", "kind": "Certificate", "version": "v1"})},   # a string value: read the same
                       {"type": "olm.gvk.required", "value": {"group": "cert-manager.io", "kind": "Issuer",
                                                              "version": "v1"}}])
    assert needed(db, CERT_MANAGER, "cert-manager") == ["cert-manager.io/v1 Certificate", "cert-manager.io/v1 Issuer"]
    assert needed(db, CERT_MANAGER, "cert-manager") == needed(db, CERT_MANAGER, "renamed")   # by API, not name


def test_the_packages_and_apis_of_a_compound_constraint_count():
    db = csv("db.v1", [{"type": "olm.constraint", "value": {"failureMessage": "needs a certificate provider", "any": {
        "constraints": [{"package": {"packageName": "cert-manager", "versionRange": ">=1.0.0"}},
                        {"all": {"constraints": [{"gvk": {"group": "cert-manager.io", "kind": "Certificate",
                                                          "version": "v1"}}]}}]}}}])
    assert needed(db, CERT_MANAGER, "cert-manager") == ["package cert-manager", "cert-manager.io/v1 Certificate"]


def test_without_the_annotation_the_spec_s_required_crds_are_read():
    db = csv("db.v1", customresourcedefinitions={"required": [{"name": "issuers.cert-manager.io", "version": "v1",
                                                                "kind": "Issuer"}]})
    assert needed(db, CERT_MANAGER, "cert-manager") == ["issuers.cert-manager.io"]
    # with the annotation, catalog-operator reads the properties only, as here
    projected = csv("db.v2", [], customresourcedefinitions={"required": [{"name": "issuers.cert-manager.io"}]})
    assert needed(projected, CERT_MANAGER, "cert-manager") == []


def test_an_unreadable_annotation_is_read_as_none():
    broken = csv("db.v1", customresourcedefinitions={"required": [{"name": "issuers.cert-manager.io"}]})
    broken["metadata"]["annotations"] = {PROPERTIES_ANNOTATION: "{not json"}
    assert needed(broken, CERT_MANAGER, "cert-manager") == ["issuers.cert-manager.io"]
