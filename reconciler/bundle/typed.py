"""Fields of the install strategy and of CRDs as OLM v0 reads them: through Go structs.

OLM decodes a CSV's install strategy into typed structs (an RBAC
``PolicyRule`` for each rule, an apps/v1 ``DeploymentSpec`` for each
deployment) and a bundle's CRDs into the apiextensions v1 types. Go's JSON
decoding matches keys case-insensitively and drops keys the struct does not
have, so a bundle with ``apigroups:`` in a rule, an OpenShift-era
``attributeRestrictions``, or ``containers`` one level too high in a pod
template installs under OLM. Server-side apply refuses every
such object ("field not declared in schema"). The structs listed here are
read as OLM reads them, with a note naming the file and the field path: a
key matching a field but for case is read as that field (the last one
written wins, as in Go), any other key is dropped. Their field lists are
the API server's (``tests/bundle/test_typed_fields.py`` compares them with
its OpenAPI schema); deeper levels (probes, security contexts, volumes)
are passed on as written.
"""

from __future__ import annotations

from typing import Any

# Field names of the Kubernetes API types, by the struct they belong to.
POLICY_RULE = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
DEPLOYMENT_SPEC = ("replicas", "selector", "template", "strategy", "minReadySeconds", "revisionHistoryLimit",
                   "paused", "progressDeadlineSeconds")
POD_TEMPLATE_SPEC = ("metadata", "spec")
POD_SPEC = ("activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig",
            "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork",
            "hostPID", "hostUsers", "hostname", "hostnameOverride", "imagePullSecrets", "initContainers", "nodeName",
            "nodeSelector", "os", "overhead", "preemptionPolicy", "priority", "priorityClassName", "readinessGates",
            "resourceClaims", "resources", "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates",
            "schedulingGroup", "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
            "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds", "tolerations",
            "topologySpreadConstraints", "volumes")
CONTAINER = ("args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name",
             "ports", "readinessProbe", "resizePolicy", "resources", "restartPolicy", "restartPolicyRules",
             "securityContext", "startupProbe", "stdin", "stdinOnce", "terminationMessagePath",
             "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir")


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
            notes.append(f"{where}: {path}.{key} read as {field} (OLM's typed decoding matches keys "
                         f"case-insensitively)")
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
    """A CSV deployment's spec read as an apps/v1 DeploymentSpec: its template, the template's pod spec and
    the pod's containers and init containers as the API types they are."""
    spec, notes = struct(spec, DEPLOYMENT_SPEC, "a DeploymentSpec", path, where)
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        return spec, notes
    template, found = struct(spec["template"], POD_TEMPLATE_SPEC, "a PodTemplateSpec", f"{path}.template", where)
    pod, in_pod = struct(template.get("spec"), POD_SPEC, "a PodSpec", f"{path}.template.spec", where)
    if isinstance(pod, dict):
        for field in ("containers", "initContainers"):
            if isinstance(pod.get(field), list):
                read = [struct(c, CONTAINER, "a Container", f"{path}.template.spec.{field}[{i}]", where)
                        for i, c in enumerate(pod[field])]
                if any(n for _, n in read):
                    pod = dict(pod, **{field: [c for c, _ in read]})
                    in_pod += [note for _, found_here in read for note in found_here]
    if in_pod:
        template = dict(template, spec=pod)
    if found or in_pod:
        spec = dict(spec, template=template)
    return spec, notes + found + in_pod


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
    """An OpenAPI schema read as JSONSchemaProps at every level (a CRD's ``openAPIV3Schema``).

    Large CRDs have tens of thousands of nodes: a clean node costs one set test and no allocation.
    """
    notes: list[str] = []
    out = _schema(node, [path], where, notes)
    return (node if out is _SAME else out), notes


_SAME = object()
_SCHEMA_FIELDS = frozenset(JSON_SCHEMA_PROPS)


def _schema(node: Any, parts: list[str], where: str, notes: list[str]) -> Any:
    """The node read as JSONSchemaProps, or ``_SAME`` when nothing in it changes."""
    if not isinstance(node, dict):
        return _SAME
    result = _SAME
    if not _SCHEMA_FIELDS.issuperset(node):
        node, found = struct(node, JSON_SCHEMA_PROPS, "a JSONSchemaProps", ".".join(parts), where)
        notes += found
        result = node
    changed: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            subs: dict[str, Any] | None = None
            for name, sub in value.items():
                parts.append(key)
                parts.append(name)
                read = _schema(sub, parts, where, notes)
                del parts[-2:]
                if read is not _SAME:
                    subs = subs if subs is not None else dict(value)
                    subs[name] = read
            if subs is not None:
                changed[key] = subs
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            items: list[Any] | None = None
            for i, sub in enumerate(value):
                parts.append(f"{key}[{i}]")
                read = _schema(sub, parts, where, notes)
                parts.pop()
                if read is not _SAME:
                    items = items if items is not None else list(value)
                    items[i] = read
            if items is not None:
                changed[key] = items
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            parts.append(key)
            read = _schema(value, parts, where, notes)
            parts.pop()
            if read is not _SAME:
                changed[key] = read
    if changed:
        return dict(node, **changed)
    return result
