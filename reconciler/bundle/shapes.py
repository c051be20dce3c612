"""The shapes of the bundle fields the converters read, checked once as a bundle is read.

``content.py`` checks every manifest against ``MANIFEST`` and the shape of its
kind (a CRD, a Deployment, RBAC, Services, webhook configurations,
APIServices) as it parses it; ``registry_v1.find_csv`` checks the
ClusterServiceVersion against ``CSV``. After that the converters read plain
dicts without guarding each access, and a bundle of the wrong shape is a
``BundleError`` naming the file, the object and the field, never a crash.
Only fields the converters read are described; the API server judges the rest.
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import BundleError
from reconciler.model.shape import (
    ANY, BOOL, INT, INT_OR_STR, SCALAR, STR, ListOf, MapOf, Mismatch, Obj, Scalar, Shape, check, kind_of,
)

METADATA = Obj({"name": STR, "namespace": STR, "labels": MapOf(STR), "annotations": MapOf(ANY)},
               required=("name",), nonempty=("name",))
MANIFEST = Obj({"apiVersion": STR, "kind": STR, "metadata": METADATA},
               required=("apiVersion", "kind", "metadata"), nonempty=("apiVersion", "kind"))

class _OpenAPISchema(Shape):
    """A structural schema, recursively: the parts the CRD conversion and the upgrade-safety check walk."""

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Mismatch(where, f"must be a mapping, not {kind_of(value)}")
        for key, shape in _SCHEMA_FIELDS.items():
            if value.get(key) is not None:
                shape.check(value[key], f"{where}.{key}")
        extra = value.get("additionalProperties")
        if extra is not None and not isinstance(extra, bool):
            self.check(extra, f"{where}.additionalProperties")
        items = value.get("items")
        if isinstance(items, list):
            ListOf(self).check(items, f"{where}.items")
        elif items is not None:
            self.check(items, f"{where}.items")

    @property
    def want(self) -> str:
        return "a schema"


_OPENAPI = _OpenAPISchema()
_SCHEMA_FIELDS: dict[str, Shape] = {
    "type": STR, "format": STR, "required": ListOf(STR), "enum": ListOf(ANY), "properties": MapOf(_OPENAPI),
    "allOf": ListOf(_OPENAPI), "anyOf": ListOf(_OPENAPI), "oneOf": ListOf(_OPENAPI), "not": _OPENAPI,
    "x-kubernetes-preserve-unknown-fields": BOOL,
}
_SCHEMA = Obj({"openAPIV3Schema": _OPENAPI})
_CRD_VERSION = Obj({"name": STR, "served": BOOL, "storage": BOOL, "schema": _SCHEMA, "subresources": Obj(),
                    "additionalPrinterColumns": ListOf(Obj())}, required=("name",), nonempty=("name",))
CRD = Obj({
    "spec": Obj({
        "group": STR, "scope": STR, "version": STR, "validation": _SCHEMA, "conversion": Obj(),
        "names": Obj({"kind": STR, "plural": STR, "singular": STR, "listKind": STR, "shortNames": ListOf(STR),
                      "categories": ListOf(STR)},
                     required=("kind", "plural"), nonempty=("kind", "plural")),
        "versions": ListOf(_CRD_VERSION),
    }, required=("group", "names"), nonempty=("group",)),
}, required=("spec",))

_POD_SPEC = Obj({"serviceAccountName": STR, "volumes": ListOf(Obj({"name": STR})),
                 "containers": ListOf(Obj({"volumeMounts": ListOf(Obj({"name": STR, "mountPath": STR}))}))})
_TEMPLATE = Obj({"metadata": Obj({"labels": MapOf(STR), "annotations": MapOf(ANY)}), "spec": _POD_SPEC})
DEPLOYMENT_SPEC = Obj({"selector": Obj({"matchLabels": MapOf(STR)}), "template": _TEMPLATE})
_RULE = Obj({"apiGroups": ListOf(STR), "resources": ListOf(STR), "verbs": ListOf(STR),
             "nonResourceURLs": ListOf(STR), "resourceNames": ListOf(STR)})
_SUBJECT = Obj({"kind": STR, "name": STR, "namespace": STR})
_SERVICE_REF = Obj({"name": STR, "namespace": STR, "path": STR, "port": INT})
_WEBHOOK = Obj({"name": STR, "clientConfig": Obj({"service": _SERVICE_REF})})


class _Base64(Scalar):
    """A Secret's ``data`` value: standard base64, as the API server decodes it (line breaks ignored).

    The message names the key and never the value: a value that is not base64 is most often a secret
    written in clear where ``stringData`` was meant.
    """

    def check(self, value: Any, where: str) -> None:
        import base64
        import binascii

        super().check(value, where)
        try:
            base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            raise Mismatch(where, "is not base64 (the value is not shown); encode it, or put the text under "
                                  "stringData, which the API server encodes") from None


_SECRET = Obj({"data": MapOf(_Base64((str,), "a base64 string"))})

KINDS: dict[tuple[str, str], Shape] = {
    ("apiextensions.k8s.io", "CustomResourceDefinition"): CRD,
    ("apps", "Deployment"): Obj({"spec": DEPLOYMENT_SPEC}),
    ("", "Service"): Obj({"spec": Obj({"selector": MapOf(STR),
                                       "ports": ListOf(Obj({"port": INT, "targetPort": INT_OR_STR}))})}),
    ("rbac.authorization.k8s.io", "Role"): Obj({"rules": ListOf(_RULE)}),
    ("rbac.authorization.k8s.io", "ClusterRole"): Obj({"rules": ListOf(_RULE)}),
    ("rbac.authorization.k8s.io", "RoleBinding"): Obj({"subjects": ListOf(_SUBJECT),
                                                       "roleRef": Obj({"kind": STR, "name": STR})}),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): Obj({"subjects": ListOf(_SUBJECT),
                                                              "roleRef": Obj({"kind": STR, "name": STR})}),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): Obj({"webhooks": ListOf(_WEBHOOK)}),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): Obj({"webhooks": ListOf(_WEBHOOK)}),
    ("apiregistration.k8s.io", "APIService"): Obj({"spec": Obj({"group": STR, "version": STR,
                                                                "service": _SERVICE_REF})}),
    ("", "Secret"): _SECRET,
}

_PERMISSION = Obj({"serviceAccountName": STR, "rules": ListOf(_RULE)})  # without a name, OLM binds "default"
_SELECTOR = Obj({"matchLabels": MapOf(STR), "matchExpressions": ListOf(Obj({
    "key": STR, "operator": STR, "values": ListOf(STR)}))})
_WEBHOOK_RULE = Obj({"operations": ListOf(STR), "apiGroups": ListOf(STR), "apiVersions": ListOf(STR),
                     "resources": ListOf(STR), "scope": STR})
# The descriptions of owned and required APIs: read for the status object and rendered into catalogs.
_API_DESCRIPTION = Obj({"name": STR, "version": STR, "kind": STR, "group": STR, "displayName": STR,
                        "description": STR, "specDescriptors": ListOf(Obj({"path": STR})),
                        "statusDescriptors": ListOf(Obj({"path": STR, "x-descriptors": ListOf(STR)}))})
_DESCRIPTION_FIELDS = dict(_API_DESCRIPTION.fields)


class _Port(Scalar):
    def check(self, value: Any, where: str) -> None:
        super().check(value, where)
        if not 1 <= value <= 65535:
            raise Mismatch(where, f"must be a port number (1-65535), not {value}")


_PORT = _Port((int,), "an integer")
CSV = Obj({
    "metadata": Obj({"annotations": Obj({"operatorframework.io/suggested-namespace": STR})}),
    "spec": Obj({
        "version": SCALAR,
        "installModes": ListOf(Obj({"type": STR, "supported": BOOL}, required=("type",))),
        "install": Obj({"strategy": STR, "spec": Obj({
            "deployments": ListOf(Obj({"name": STR, "spec": DEPLOYMENT_SPEC, "label": MapOf(STR)})),
            "permissions": ListOf(_PERMISSION),
            "clusterPermissions": ListOf(_PERMISSION),
        })}),
        "webhookdefinitions": ListOf(Obj({
            "type": STR, "generateName": STR, "deploymentName": STR, "containerPort": _PORT,
            "targetPort": INT_OR_STR, "webhookPath": STR, "conversionCRDs": ListOf(STR),
            "admissionReviewVersions": ListOf(STR), "reinvocationPolicy": STR,
            "rules": ListOf(_WEBHOOK_RULE), "failurePolicy": STR, "sideEffects": STR, "matchPolicy": STR,
            "timeoutSeconds": INT, "objectSelector": _SELECTOR, "namespaceSelector": _SELECTOR,
        }, required=("type", "generateName"), nonempty=("generateName",))),
        "apiservicedefinitions": Obj({"owned": ListOf(Obj({**_DESCRIPTION_FIELDS, "deploymentName": STR,
                                                           "containerPort": _PORT})),
            "required": ListOf(_API_DESCRIPTION)}),
        "customresourcedefinitions": Obj({"owned": ListOf(_API_DESCRIPTION), "required": ListOf(_API_DESCRIPTION)}),
        # Read into catalogs (render), the upgrade graph and the status object.
        "minKubeVersion": STR, "replaces": STR, "skips": ListOf(STR),
        "relatedImages": ListOf(Obj({"name": STR, "image": STR})),
        "displayName": STR, "description": STR, "maturity": STR, "keywords": ListOf(STR),
        "maintainers": ListOf(Obj({"name": STR, "email": STR})), "provider": Obj({"name": STR, "url": STR}),
        "links": ListOf(Obj({"name": STR, "url": STR})),
        "icon": ListOf(Obj({"base64data": STR, "mediatype": STR})),
        "nativeAPIs": ListOf(Obj({"group": STR, "version": STR, "kind": STR})),
        "labels": MapOf(STR), "selector": _SELECTOR,
    }),
})

OLM_YAML = Obj({"name": SCALAR, "package": STR, "labels": MapOf(STR), "icon": STR,
                "installModes": ListOf(Obj({"type": STR, "supported": BOOL}, required=("type",)))})


def describe(obj: Any) -> str:
    """``Kind name`` of a manifest for messages, whatever its shape."""
    if not isinstance(obj, dict):
        return "a document"
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "object"
    return f"{kind} {name}" if isinstance(name, str) and name else kind


def path_segment_problem(name: str) -> str | None:
    """Why ``name`` cannot name an object: the API server's URLs carry it as one path segment (as
    Kubernetes' own path-segment rule: not '.' or '..', no '/' or '%')."""
    if name in (".", ".."):
        return f"may not be {name!r}"
    bad = next((c for c in "/%" if c in name), None)
    return f"may not contain {bad!r}" if bad else None


NAME_HINT = "an object name is a path segment of the API server's URLs; use lowercase letters, digits, '-' and '.'"


def check_manifest(obj: Any, file: str, bundle: str) -> None:
    """A bundle manifest has apiVersion, kind and metadata.name, and the fields its kind needs are typed."""
    where = f"{bundle}: {describe(obj)}"
    check(obj, MANIFEST, path=file, obj=where, error=BundleError)
    for field in ("name", "namespace"):
        value = obj["metadata"].get(field)
        if isinstance(value, str) and (problem := path_segment_problem(value)):
            raise BundleError(f"metadata.{field} {value!r} {problem}", path=file, obj=where, hint=NAME_HINT)
    group = obj["apiVersion"].rpartition("/")[0]
    shape = KINDS.get((group, obj["kind"]))
    if shape is not None:
        check(obj, shape, path=file, obj=where, error=BundleError)


def check_csv(obj: Any, file: str, bundle: str) -> None:
    check(obj, CSV, path=file, obj=f"{bundle}: {describe(obj)}", error=BundleError)
    from reconciler.errors import InputError
    from reconciler.model.semver_range import parse_version

    for key in ("version", "minKubeVersion"):
        value = obj["spec"].get(key) if isinstance(obj.get("spec"), dict) else None
        if isinstance(value, str) and value.strip():
            try:
                parse_version(value)
            except InputError as exc:
                raise BundleError(f"spec.{key}: {exc.message}", path=file, obj=f"{bundle}: {describe(obj)}",
                                  hint=exc.hint) from None


__all__ = ["CSV", "CRD", "KINDS", "MANIFEST", "OLM_YAML", "check_csv", "check_manifest", "describe"]
