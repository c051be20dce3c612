"""Fields of the install strategy as OLM v0 reads them: through Go structs.

OLM decodes a CSV's install strategy into typed structs (an RBAC
``PolicyRule`` for each rule, an apps/v1 ``DeploymentSpec`` for each
deployment). Go's JSON decoding matches keys case-insensitively and drops
keys the struct does not have, so a bundle with ``apigroups:`` in a rule,
an OpenShift-era ``attributeRestrictions``, or ``containers`` one level too
high in a pod template installs under OLM. Server-side apply refuses every
such object ("field not declared in schema"). The levels whose fields are
fixed and few are read here as OLM reads them, with a note naming the file
and the field path: a key matching a field but for case is read as that
field (the last one written wins, as in Go), any other key is dropped.
Deeper levels (pod specs, containers) are passed on as written.
"""

from __future__ import annotations

from typing import Any

# Field names of the Kubernetes API types, by the struct they belong to.
POLICY_RULE = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
DEPLOYMENT_SPEC = ("replicas", "selector", "template", "strategy", "minReadySeconds", "revisionHistoryLimit",
                   "paused", "progressDeadlineSeconds")
POD_TEMPLATE_SPEC = ("metadata", "spec")


def struct(value: Any, fields: tuple[str, ...], name: str, path: str, where: str) -> tuple[Any, list[str]]:
    """``value`` with its keys read as a Go struct of ``fields`` reads them, and a note per change."""
    if not isinstance(value, dict) or all(k in fields for k in value):
        return value, []
    by_fold = {f.lower(): f for f in fields}
    out: dict[str, Any] = {}
    notes = []
    for key, item in value.items():
        field = by_fold.get(str(key).lower())
        if field is None:
            notes.append(f"{where}: {path}.{key} is not a field of {name} and was dropped, as OLM's typed "
                         f"decoding drops it (server-side apply refuses unknown fields)")
            continue
        if field != key:
            notes.append(f"{where}: {path}.{key} read as {field} (Kubernetes matches keys case-insensitively)")
        out[field] = item   # of two keys for one field, the last written wins, as in Go
    return out, notes


def policy_rules(rules: Any, path: str, where: str) -> tuple[Any, list[str]]:
    """A permissions entry's rules, each read as an RBAC PolicyRule."""
    if not isinstance(rules, list):
        return rules, []
    notes: list[str] = []
    out = []
    for i, rule in enumerate(rules):
        rule, found = struct(rule, POLICY_RULE, "an RBAC PolicyRule", f"{path}[{i}]", where)
        out.append(rule)
        notes += found
    return (out if notes else rules), notes


def deployment_spec(spec: Any, path: str, where: str) -> tuple[Any, list[str]]:
    """A CSV deployment's spec read as an apps/v1 DeploymentSpec, and its template as a PodTemplateSpec."""
    spec, notes = struct(spec, DEPLOYMENT_SPEC, "a DeploymentSpec", path, where)
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        template, found = struct(spec["template"], POD_TEMPLATE_SPEC, "a PodTemplateSpec", f"{path}.template",
                                 where)
        if found:
            spec = dict(spec, template=template)
            notes += found
    return spec, notes


# apiextensions.k8s.io/v1: a CRD's spec, and an OpenAPI schema node (JSONSchemaProps).
CRD_SPEC = ("group", "names", "scope", "versions", "conversion", "preserveUnknownFields")
JSON_SCHEMA_PROPS = (
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not",
    "properties", "additionalProperties", "patternProperties", "dependencies", "additionalItems", "definitions",
    "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations")
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "dependencies")
_SCHEMA_ONE = ("items", "additionalProperties", "additionalItems", "not")
_SCHEMA_LISTS = ("allOf", "oneOf", "anyOf", "items")


def schema(node: Any, path: str, where: str) -> tuple[Any, list[str]]:
    """An OpenAPI schema read as JSONSchemaProps at every level (a CRD's ``openAPIV3Schema``)."""
    node, notes = struct(node, JSON_SCHEMA_PROPS, "a JSONSchemaProps", path, where)
    if not isinstance(node, dict):
        return node, notes
    changed: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            subs = {name: schema(sub, f"{path}.{key}.{name}", where) for name, sub in value.items()}
            if any(found for _, found in subs.values()):
                changed[key] = {name: sub for name, (sub, _) in subs.items()}
                notes += [n for _, found in subs.values() for n in found]
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            items = [schema(sub, f"{path}.{key}[{i}]", where) for i, sub in enumerate(value)]
            if any(found for _, found in items):
                changed[key] = [sub for sub, _ in items]
                notes += [n for _, found in items for n in found]
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            sub, found = schema(value, f"{path}.{key}", where)
            if found:
                changed[key] = sub
                notes += found
    return (dict(node, **changed) if changed else node), notes
