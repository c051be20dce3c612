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
    ANY, BOOL, INT, INT_OR_STR, SCALAR, STR, ListOf, MapOf, Obj, Shape, check,
)

METADATA = Obj({"name": STR, "namespace": STR, "labels": MapOf(STR), "annotations": MapOf(ANY)},
               required=("name",), nonempty=("name",))
MANIFEST = Obj({"apiVersion": STR, "kind": STR, "metadata": METADATA},
               required=("apiVersion", "kind", "metadata"), nonempty=("apiVersion", "kind"))

_SCHEMA = Obj({"openAPIV3Schema": Obj()})
_CRD_VERSION = Obj({"name": STR, "served": BOOL, "storage": BOOL, "schema": _SCHEMA, "subresources": Obj(),
                    "additionalPrinterColumns": ListOf(Obj())}, required=("name",), nonempty=("name",))
CRD = Obj({
    "spec": Obj({
        "group": STR, "scope": STR, "version": STR, "validation": _SCHEMA, "conversion": Obj(),
        "names": Obj({"kind": STR, "plural": STR, "singular": STR, "listKind": STR},
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
}

_PERMISSION = Obj({"serviceAccountName": STR, "rules": ListOf(_RULE)})
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
            "type": STR, "generateName": STR, "deploymentName": STR, "containerPort": INT,
            "targetPort": INT_OR_STR, "webhookPath": STR, "conversionCRDs": ListOf(STR),
            "admissionReviewVersions": ListOf(STR), "reinvocationPolicy": STR,
        })),
        "apiservicedefinitions": Obj({"owned": ListOf(Obj({
            "group": STR, "version": STR, "deploymentName": STR, "containerPort": INT,
        }))}),
        "customresourcedefinitions": Obj({"owned": ListOf(Obj()), "required": ListOf(Obj())}),
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


def check_manifest(obj: Any, file: str, bundle: str) -> None:
    """A bundle manifest has apiVersion, kind and metadata.name, and the fields its kind needs are typed."""
    where = f"{bundle}: {describe(obj)}"
    check(obj, MANIFEST, path=file, obj=where, error=BundleError)
    group = obj["apiVersion"].rpartition("/")[0]
    shape = KINDS.get((group, obj["kind"]))
    if shape is not None:
        check(obj, shape, path=file, obj=where, error=BundleError)


def check_csv(obj: Any, file: str, bundle: str) -> None:
    check(obj, CSV, path=file, obj=f"{bundle}: {describe(obj)}", error=BundleError)


__all__ = ["CSV", "CRD", "KINDS", "MANIFEST", "OLM_YAML", "check_csv", "check_manifest", "describe"]
