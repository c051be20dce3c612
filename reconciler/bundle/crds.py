"""CustomResourceDefinitions: apiextensions v1beta1 -> v1, keeping behaviour and schemas where v1 allows.

Kubernetes stopped serving apiextensions v1beta1 in 1.22, yet real bundles
still ship it. The conversion follows the API server's own defaulting and
conversion of v1beta1, then repairs what v1 refuses and v1beta1 allowed:

* top-level ``validation``, ``subresources`` and ``additionalPrinterColumns``
  move into every version (``JSONPath`` becomes ``jsonPath``);
* ``preserveUnknownFields`` (true by default in v1beta1) becomes
  ``x-kubernetes-preserve-unknown-fields: true`` on the schema root, so no
  field a v1beta1 CRD kept is pruned;
* v1 needs a structural schema: a node with ``properties`` and no ``type``
  gets ``type: object``, one with ``items`` gets ``type: array``, a node with
  no type at all keeps unknown content; ``uniqueItems: true`` (forbidden) is
  dropped; types and structure inside ``anyOf``/``allOf``/``oneOf``/``not``
  (forbidden there) are removed; ``metadata`` may only constrain ``name`` and
  ``generateName``, so other restrictions on it are dropped; an array
  without ``items`` gets items that keep unknown content;
* a version without any schema gets one that keeps unknown fields;
* the conversion webhook settings move to ``conversion.webhook``.

``normalise`` is what the bundle layer applies: ``to_v1`` plus the repairs
and refusals the API server makes necessary for v1 CRDs as well.

Anything else is passed through; the API server has the last word (the
corpus run dry-runs every converted CRD).
"""

from __future__ import annotations

import copy
from typing import Any

from reconciler.bundle import typed
from reconciler.model.kube import Manifest

V1 = "apiextensions.k8s.io/v1"
V1BETA1 = "apiextensions.k8s.io/v1beta1"
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_STRUCTURE_KEYS = ("type", "properties", "items", "additionalProperties", "nullable", "default", _PRESERVE,
                   "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-type",
                   "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "description", "title")


def to_v1(crd: Manifest) -> Manifest:
    """A v1 CRD equivalent to ``crd`` (a v1 CRD is returned as a copy without ``status``)."""
    out = copy.deepcopy(crd)
    out.pop("status", None)
    if out.get("apiVersion") == V1:
        return out
    out["apiVersion"] = V1
    spec: dict[str, Any] = out.setdefault("spec", {})
    if not spec.get("scope"):
        spec["scope"] = "Namespaced"   # v1beta1's default; v1 has none
    versions = spec.get("versions") or []
    if not versions and spec.get("version"):
        versions = [{"name": spec["version"], "served": True, "storage": True}]
    top_schema = (spec.pop("validation", None) or {}).get("openAPIV3Schema")
    top_sub = spec.pop("subresources", None)
    top_cols = spec.pop("additionalPrinterColumns", None)
    preserve = spec.pop("preserveUnknownFields", True)
    spec.pop("version", None)
    new_versions = []
    for v in versions:
        v = dict(v)
        schema = (v.pop("schema", None) or {}).get("openAPIV3Schema") or copy.deepcopy(top_schema)
        schema = structural(schema) if schema else {"type": "object"}
        if preserve is not False or not schema.get("properties"):
            schema[_PRESERVE] = True
        schema.setdefault("type", "object")
        v["schema"] = {"openAPIV3Schema": schema}
        sub = v.get("subresources") or copy.deepcopy(top_sub)
        if sub:
            v["subresources"] = sub
        cols = v.get("additionalPrinterColumns") or copy.deepcopy(top_cols)
        if cols:
            v["additionalPrinterColumns"] = [_column(c) for c in cols]
        v.setdefault("served", True)
        v.setdefault("storage", False)
        new_versions.append(v)
    spec["versions"] = new_versions
    conversion = spec.get("conversion")
    if isinstance(conversion, dict):
        strategy = conversion.get("strategy") or "None"
        if strategy == "Webhook":
            webhook: dict[str, Any] = {
                "conversionReviewVersions": conversion.get("conversionReviewVersions") or ["v1beta1"]}
            if conversion.get("webhookClientConfig"):
                webhook["clientConfig"] = conversion["webhookClientConfig"]
            spec["conversion"] = {"strategy": "Webhook", "webhook": webhook}
        else:
            spec["conversion"] = {"strategy": "None"}
    return out


def normalise(crd: Manifest, file: str, bundle: str) -> tuple[Manifest, tuple[str, ...]]:
    """The v1 CRD to apply, with a note for each repair; refuses what the API server and OLM refuse.

    The v1 CRD is read as OLM decodes it into the apiextensions v1 types
    (``typed``: ``JSONPath`` in an ``additionalPrinterColumns`` entry is
    ``jsonPath``, a key no type has is dropped). Refuses, before anything is applied, a CRD the API server would refuse:
    one in a protected group (``k8s.io``, ``kubernetes.io`` and their
    subdomains) without the ``api-approved.kubernetes.io`` annotation, and a
    v1 CRD without ``scope``.
    """
    from reconciler.errors import UnsupportedBundleError

    v1 = crd.get("apiVersion") == V1
    out = to_v1(crd)
    spec = out.get("spec") or {}
    name = str((out.get("metadata") or {}).get("name"))
    if v1 and not spec.get("scope"):
        raise UnsupportedBundleError(f"CustomResourceDefinition {name} has no spec.scope, which "
                                     f"apiextensions.k8s.io/v1 requires", path=file, obj=bundle,
                                     hint="set spec.scope to Namespaced or Cluster in the bundle")
    group = str(spec.get("group") or "")
    if _protected(group) and not ((out.get("metadata") or {}).get("annotations") or {}).get(API_APPROVED):
        raise UnsupportedBundleError(
            f"CustomResourceDefinition {name} is in the protected group {group} but has no {API_APPROVED} "
            f"annotation, so the API server refuses it", path=file, obj=bundle,
            hint=f"groups under k8s.io and kubernetes.io need {API_APPROVED} (a URL of the approved API "
                 f"review, or 'unapproved, <reason>')")
    read, notes = typed.read_object(out, f"{file}: CustomResourceDefinition {name}")
    return read, tuple(notes)


API_APPROVED = "api-approved.kubernetes.io"


def _protected(group: str) -> bool:
    return any(group == g or group.endswith("." + g) for g in ("k8s.io", "kubernetes.io"))


def _column(col: dict[str, Any]) -> dict[str, Any]:
    col = dict(col)
    if "JSONPath" in col:
        col["jsonPath"] = col.pop("JSONPath")
    return col


def structural(schema: Any, *, root: bool = True, in_junctor: bool = False) -> Any:
    """A copy of an OpenAPI schema repaired towards what v1 calls structural."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: structural(sub, root=False, in_junctor=in_junctor) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = structural(value, root=False, in_junctor=in_junctor or key == "not")
        elif key in _JUNCTORS and isinstance(value, list):
            out[key] = [structural(sub, root=False, in_junctor=True) for sub in value]
        elif key == "uniqueItems" and value is True:
            continue
        else:
            out[key] = value
    if in_junctor:
        for key in ("type", "additionalProperties", "nullable", "default", _PRESERVE, "description", "title",
                    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"):
            out.pop(key, None)
        return out
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        branch_types = {sub.get("type") for key in _JUNCTORS for sub in schema.get(key) or []
                        if isinstance(sub, dict)}
        if branch_types and branch_types <= {"integer", "string"} and len(branch_types) == 2:
            out["x-kubernetes-int-or-string"] = True
        elif "properties" in out or "additionalProperties" in out:
            out["type"] = "object"
        elif "items" in out:
            out["type"] = "array"
        elif not root:
            out[_PRESERVE] = True
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {_PRESERVE: True}
    if "properties" in out and isinstance(out.get("additionalProperties"), (dict, bool)):
        if out["additionalProperties"] is not False:
            out.pop("additionalProperties")
    props = out.get("properties")
    if root and isinstance(props, dict) and isinstance(props.get("metadata"), dict):
        meta = props["metadata"]
        keep = {k: v for k, v in (meta.get("properties") or {}).items() if k in ("name", "generateName")}
        props["metadata"] = {"type": "object", **({"properties": keep} if keep else {})}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out
