"""The field table of the Kubernetes API types, made from what the pinned Kubernetes version serves.

    .venv/bin/python -m reconciler.localcluster.apitypes [--kubeconfig FILE] [-o FILE]

writes ``apitypes.json`` beside this module (``build`` and ``write`` here; the command, which starts a
local control plane, beside it in ``localcluster``): for every kind the API server
serves, its Go type, and for every struct type reachable from one, the JSON
names of its fields and the type each field holds. ``typed.py`` reads bundle
objects through it as Go's JSON decoding reads them into those types, so
conversion needs no cluster. The source is the OpenAPI v3 schema the local
control plane serves (``localcluster``, which pins the Kubernetes version:
started for the occasion), or another API server's (``--kubeconfig``):
server-side apply checks objects against exactly that schema.
``tests/bundle/test_typed_fields.py`` checks that the committed table is what
the local control plane serves, so moving the pin without regenerating the
table fails there.

A field is written as the name of the type it holds: ``T`` a struct,
``[T`` a list of them, ``{T`` a map of them, ``?T`` one of the few types
whose JSON is either a ``T`` or a list (or a boolean) (``JSONSchemaPropsOrArray``
and its kin: ``{?T`` is a map of those), and ``""`` anything else (strings,
numbers, maps of strings, quantities, free-form JSON). Type names drop the
``io.k8s.api.`` and ``io.k8s.….pkg.apis.`` prefixes (``apps.v1.DeploymentSpec``,
``meta.v1.ObjectMeta``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("apitypes.json")

# Go types whose JSON takes more than one shape; their schema has no properties, so the source says only that
# they exist. Each reads as its struct when it is a mapping and as a list of it when it is a list.
EITHER = {
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray":
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool":
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray":
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
}


def short(name: str) -> str:
    """``io.k8s.api.apps.v1.DeploymentSpec`` -> ``apps.v1.DeploymentSpec``; ``….pkg.apis.meta.v1.X`` -> ``meta.v1.X``.
    """
    if "pkg.apis." in name:
        return name.split("pkg.apis.", 1)[1]
    return name.removeprefix("io.k8s.api.")


def build(documents: Iterable[dict[str, Any]], version: str) -> dict[str, Any]:
    """The table of the OpenAPI v3 ``documents`` (one per group version, as the API server serves them)."""
    schemas: dict[str, dict[str, Any]] = {}
    for doc in documents:
        for name, schema in ((doc.get("components") or {}).get("schemas") or {}).items():
            schemas.setdefault(name, schema)

    def is_struct(name: str | None) -> bool:
        return name is not None and "properties" in schemas.get(name, {})

    def target(prop: dict[str, Any]) -> str | None:
        if "$ref" in prop:
            return str(prop["$ref"]).rsplit("/", 1)[1]
        branches = prop.get("allOf") or []
        if len(branches) == 1 and "$ref" in branches[0]:
            return str(branches[0]["$ref"]).rsplit("/", 1)[1]
        return None

    def one(ref: str | None) -> str:
        if ref in EITHER:
            return "?" + short(EITHER[ref])
        return short(ref) if ref is not None and is_struct(ref) else ""

    def field(prop: dict[str, Any]) -> str:
        ref = target(prop)
        if ref is not None:
            return one(ref)
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            held = one(target(prop["items"]))
            return "[" + held if held else ""
        if prop.get("type") == "object" and isinstance(prop.get("additionalProperties"), dict):
            held = one(target(prop["additionalProperties"]))
            return "{" + held if held else ""
        return ""

    kinds: dict[str, str] = {}
    for name, schema in schemas.items():
        if name.startswith("io.k8s.apimachinery."):   # Status, WatchEvent, DeleteOptions...: not objects one applies
            continue
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if not str(gvk["kind"]).endswith("List") and is_struct(name):
                api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                kinds[f"{api_version} {gvk['kind']}"] = short(name)
    full = {short(n): n for n in schemas}
    types: dict[str, dict[str, str]] = {}
    pending = sorted(set(kinds.values()))
    while pending:
        name = pending.pop()
        if name in types:
            continue
        types[name] = {key: field(prop) for key, prop in schemas[full[name]]["properties"].items()}
        pending += [ref.lstrip("[{?") for ref in types[name].values() if ref and ref.lstrip("[{?") not in types]
    return {"kubernetes": version, "kinds": dict(sorted(kinds.items())),
            "types": {n: dict(sorted(f.items())) for n, f in sorted(types.items())}}


def write(table: dict[str, Any], path: Path = TABLE) -> None:
    path.write_text(json.dumps(table, indent=0, sort_keys=True, separators=(",", ":")) + "\n")


def from_server(kube: Any) -> list[dict[str, Any]]:
    """The OpenAPI v3 document of every group version a running API server serves itself (``kube.Kube``):
    those of custom resources are left out, since their schema is their CRD's, not Kubernetes'."""
    crds = kube.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").get("items") or []
    custom = {f"apis/{c['spec']['group']}/{v['name']}" for c in crds for v in c["spec"].get("versions") or []}
    paths = kube.request("GET", "/openapi/v3").get("paths") or {}
    return [kube.request("GET", f"/openapi/v3/{p}") for p in sorted(paths)
            if p.startswith(("api/", "apis/")) and p not in custom]
