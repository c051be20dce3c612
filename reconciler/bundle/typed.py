"""Bundle objects read as the installer reads them: through the Kubernetes API types, not as free-form maps.

OLM decodes what a CSV embeds into Go structs: the install strategy into
its own types holding an apps/v1 ``DeploymentSpec`` per deployment and an
RBAC ``PolicyRule`` per rule, webhook and APIService definitions into types
holding ``RuleWithOperations`` and ``LabelSelector``, CRDs into the
apiextensions v1 types, and the optional objects it knows (Secret,
ConfigMap, Service, ServiceAccount and the RBAC kinds) into theirs. Go's JSON
decoding matches a key to a field case-insensitively and drops a key no
field has, at every level of the struct, so a bundle with ``apigroups:`` in
a rule, a key beside ``matchLabels`` in a selector, or ``secretName`` at the
level of a volume installs under OLM. Other optional kinds are created as
written, and the API server drops their unknown fields (its decoding is
case-sensitive). Server-side apply refuses all of these ("field not
declared in schema"), so they are read here as OLM's path reads them, with
a note naming the file and the field path.

Which fields exist is not listed by hand: ``apitypes.json`` is the field
table of every kind the pinned Kubernetes version serves, made from its
OpenAPI schema (``apitypes.py``; ``tests/bundle/test_typed_fields.py``
checks it against the local control plane). The few OLM structs around
those types are listed in ``OLM_TYPES`` as OLM's API declares them.
A plain+v0 bundle is applied as ``kubectl apply`` would apply it, which
refuses unknown fields: ``problems`` lists them instead of repairing them.

Large CRDs have tens of thousands of schema nodes: a clean node costs one
set test and no allocation, and nothing is copied unless something changes.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from reconciler.model.kube import Manifest

# OLM's own structs (github.com/operator-framework/api, operators/v1alpha1), in the table's notation.
OLM_TYPES: dict[str, dict[str, str]] = {
    "olm.NamedInstallStrategy": {"strategy": "", "spec": "olm.StrategyDetailsDeployment"},
    "olm.StrategyDetailsDeployment": {"deployments": "[olm.StrategyDeploymentSpec",
                                      "permissions": "[olm.StrategyDeploymentPermissions",
                                      "clusterPermissions": "[olm.StrategyDeploymentPermissions"},
    "olm.StrategyDeploymentSpec": {"name": "", "spec": "apps.v1.DeploymentSpec", "label": ""},
    "olm.StrategyDeploymentPermissions": {"serviceAccountName": "", "rules": "[rbac.v1.PolicyRule"},
    "olm.WebhookDescription": {
        "generateName": "", "type": "", "deploymentName": "", "containerPort": "", "targetPort": "",
        "rules": "[admissionregistration.v1.RuleWithOperations", "failurePolicy": "", "matchPolicy": "",
        "objectSelector": "meta.v1.LabelSelector", "sideEffects": "", "timeoutSeconds": "",
        "admissionReviewVersions": "", "reinvocationPolicy": "", "webhookPath": "", "conversionCRDs": ""},
    "olm.APIServiceDefinitions": {"owned": "[olm.APIServiceDescription", "required": "[olm.APIServiceDescription"},
    "olm.APIServiceDescription": {
        "name": "", "group": "", "version": "", "kind": "", "deploymentName": "", "containerPort": "",
        "displayName": "", "description": "", "resources": "", "statusDescriptors": "", "specDescriptors": "",
        "actionDescriptors": ""},
}
# Optional objects OLM v0 decodes into their Go types before creating them; others it creates as written.
OLM_DECODED = frozenset({("", "Secret"), ("", "ConfigMap"), ("", "Service"), ("", "ServiceAccount"),
                         ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"),
                         ("rbac.authorization.k8s.io", "ClusterRole"),
                         ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                         ("apiextensions.k8s.io", "CustomResourceDefinition")})

FOLD, DROP, REFUSE = "fold", "drop", "refuse"   # Go's decoding; the API server's on create; kubectl apply's
_CASE = " (OLM's typed decoding matches keys case-insensitively)"
_DROPPED = {FOLD: "OLM's typed decoding drops it", DROP: "the API server drops it when OLM creates the object"}


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    from reconciler.bundle.apitypes import TABLE

    doc = json.loads(TABLE.read_text())
    return doc["kinds"], {**doc["types"], **OLM_TYPES}


_SHAPES: dict[str, tuple[frozenset[str], dict[str, str], dict[str, str]]] = {}


def _shape(name: str) -> tuple[frozenset[str], dict[str, str], dict[str, str]]:
    """A struct's field names, its lower-cased names, and the fields that hold structs (with what they hold)."""
    found = _SHAPES.get(name)
    if found is None:
        fields = _table()[1][name]
        found = _SHAPES[name] = (frozenset(fields), {f.lower(): f for f in fields},
                                 {f: ref for f, ref in fields.items() if ref})
    return found


def kind_type(api_version: Any, kind: Any) -> str | None:
    """The struct an object of this apiVersion and kind is, when the pinned Kubernetes serves the kind."""
    return _table()[0].get(f"{api_version} {kind}")


def describe(name: str) -> str:
    """``apps.v1.DeploymentSpec`` -> ``apps/v1 DeploymentSpec``; ``olm.X`` -> ``OLM's X``."""
    parts = name.split(".")
    if parts[0] == "olm":
        return f"OLM's {parts[-1]}"
    return f"{'.'.join(parts[:-2])}/{parts[-2]} {parts[-1]}"


def read(value: Any, ref: str, path: str, where: str, mode: str = FOLD) -> tuple[Any, list[str]]:
    """``value`` read as the type ``ref`` (table notation), and a note per key renamed or dropped.

    ``mode`` FOLD reads as Go's JSON decoding does (OLM), DROP as the API
    server's create does; the value is returned unchanged, and shared, when
    nothing in it needs reading.
    """
    notes: list[str] = []
    out = _Walk(where, mode, notes).value(value, ref, [path])
    return (value if out is _SAME else out), notes


def read_object(obj: Manifest, where: str, mode: str = FOLD) -> tuple[Manifest, list[str]]:
    """An object read as its kind's type; an object of a kind the table lacks (a custom resource) as is."""
    name = kind_type(obj.get("apiVersion"), obj.get("kind"))
    if name is None:
        return obj, []
    out, notes = read(obj, name, "", where, mode)
    return out, notes


def problems(obj: Manifest, where: str) -> list[str]:
    """Each field of ``obj`` its kind's type lacks (as ``kubectl apply``'s strict validation finds them)."""
    name = kind_type(obj.get("apiVersion"), obj.get("kind"))
    if name is None:
        return []
    notes: list[str] = []
    _Walk(where, REFUSE, notes).value(obj, name, [""])
    return notes


_SAME = object()


class _Walk:
    """One reading: ``parts`` is the path walked so far (keys, and list positions as ints), formatted only for a
    note; a nested struct is read by a direct call, since CRD schemas make this the hot path of conversion."""

    def __init__(self, where: str, mode: str, notes: list[str]) -> None:
        self.where, self.mode, self.notes = where, mode, notes

    def value(self, value: Any, ref: str, parts: list[Any]) -> Any:
        """The value read as ``ref``, or ``_SAME`` when nothing in it changes."""
        lead = ref[0]
        if lead == "[":
            return self.items(value, ref[1:], parts) if isinstance(value, list) else _SAME
        if lead == "{":
            if not isinstance(value, dict):
                return _SAME
            inner = ref[1:]
            plain = inner[0] not in "[{?"
            changed: dict[Any, Any] | None = None
            for key, item in value.items():
                parts.append(key)
                read = self.struct(item, inner, parts) if plain else self.value(item, inner, parts)
                parts.pop()
                if read is not _SAME:
                    changed = changed if changed is not None else {}
                    changed[key] = read
            return dict(value, **changed) if changed else _SAME
        if lead == "?":
            if isinstance(value, list):
                return self.items(value, ref[1:], parts)
            return self.struct(value, ref[1:], parts)
        return self.struct(value, ref, parts)

    def items(self, values: list[Any], ref: str, parts: list[Any]) -> Any:
        out: list[Any] | None = None
        for i, item in enumerate(values):
            parts.append(i)
            read = self.value(item, ref, parts)
            parts.pop()
            if read is not _SAME:
                out = out if out is not None else list(values)
                out[i] = read
        return out if out is not None else _SAME

    def struct(self, node: Any, name: str, parts: list[Any]) -> Any:
        if not isinstance(node, dict):
            return _SAME
        names, folded, holders = _shape(name)
        result = _SAME
        if not names.issuperset(node):
            node = self.keys(node, name, names, folded, parts)
            result = node
        changed: dict[str, Any] | None = None
        for field, item in node.items():   # a node has a few keys; its type may hold many structs
            ref = holders.get(field)
            if ref is None:
                continue
            parts.append(field)
            read = self.struct(item, ref, parts) if ref[0] not in "[{?" else self.value(item, ref, parts)
            parts.pop()
            if read is not _SAME:
                changed = changed if changed is not None else {}
                changed[field] = read
        if changed:
            return dict(node, **changed)
        return result

    def keys(self, node: dict[Any, Any], name: str, names: frozenset[str], folded: dict[str, str],
             parts: list[str]) -> dict[str, Any]:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts if p != "").lstrip(".")
        out: dict[str, Any] = {}
        for key, item in node.items():
            at = f"{path}.{key}" if path else str(key)
            if key in names:
                out[key] = item
                continue
            field = folded.get(str(key).lower()) if self.mode == FOLD else None
            if field is not None:
                self.notes.append(f"{self.where}: {at} read as {field}{_CASE}")
                out[field] = item   # of two keys for one field, the last written wins, as in Go
            elif self.mode == REFUSE:
                self.notes.append(f"{self.where}: {at} is not a field of {describe(name)}")
            else:   # a field of OLM's own types is never applied: dropping it is all OLM does
                why = "" if name.startswith("olm.") else " (server-side apply refuses unknown fields)"
                self.notes.append(f"{self.where}: {at} is not a field of {describe(name)} and was dropped, as "
                                  f"{_DROPPED[self.mode]}{why}")
        return out
