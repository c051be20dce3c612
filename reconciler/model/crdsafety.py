"""Is replacing a CustomResourceDefinition safe for the custom resources that exist?

An upgrade that replaces a CRD can strand or break the objects users made
of it: a version still recorded in ``status.storedVersions`` that the new
CRD no longer lists makes the stored objects unreadable; removing a served
version that objects are read through breaks their clients; changing the
scope, a field's type, removing a field, requiring a new field, narrowing an
enum or tightening a bound makes existing objects invalid against the new
schema. ``check_crd_upgrade`` is a pure function of the live CRD and the new
one that lists each such change as a ``Finding`` naming the CRD, the version
and the JSON path (the rules follow operator-controller's CRD upgrade safety
checks). The planner refuses a CRD with findings unless the declaration
allows it (``reconciler.dev/allow-unsafe-crd-upgrade``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from reconciler.model.declarations import ANNOTATION_ALLOW_UNSAFE_CRDS as ANNOTATION_ALLOW
from reconciler.model.kube import Manifest, ObjectRef

# bound keyword -> True when a larger value is looser (maximum), False when smaller is looser (minimum)
_UPPER = ("maximum", "maxLength", "maxItems", "maxProperties")
_LOWER = ("minimum", "minLength", "minItems", "minProperties")


@dataclass(frozen=True)
class Finding:
    crd: str
    version: str      # "" for a change of the whole CRD (scope)
    path: str         # a JSON path into the version's schema, "" for the version itself
    rule: str
    message: str

    def __str__(self) -> str:
        where = self.crd + (f" version {self.version}" if self.version else "") + (f" {self.path}" if self.path else "")
        return f"{where}: {self.message} ({self.rule})"


def check_crd_upgrade(old_crd: dict[str, Any], new_crd: dict[str, Any], stored_versions: Iterable[str],
                      served_versions_with_objects: Iterable[str]) -> list[Finding]:
    """Every unsafe change from ``old_crd`` (live) to ``new_crd``; empty when the replacement is safe."""
    name = str((new_crd.get("metadata") or {}).get("name") or (old_crd.get("metadata") or {}).get("name") or "")
    old_spec, new_spec = old_crd.get("spec") or {}, new_crd.get("spec") or {}
    found: list[Finding] = []
    old_scope, new_scope = old_spec.get("scope") or "Namespaced", new_spec.get("scope") or "Namespaced"
    if old_scope != new_scope:
        found.append(Finding(name, "", "spec.scope", "scope", f"scope changes from {old_scope} to {new_scope}"))
    old_versions, new_versions = _versions(old_spec), _versions(new_spec)
    for v in sorted(set(stored_versions)):
        if v not in new_versions:
            found.append(Finding(name, v, "", "stored-version-removed",
                                 "version is removed, but objects are stored in it (status.storedVersions)"))
    for v in sorted(set(served_versions_with_objects)):
        if v not in new_versions or not new_versions[v].get("served", True):
            found.append(Finding(name, v, "", "served-version-removed",
                                 "version is no longer served, but custom resources exist and are read through it"))
    for v in sorted(set(old_versions) & set(new_versions)):
        old_schema = _schema(old_versions[v])
        new_schema = _schema(new_versions[v])
        if old_schema is None or new_schema is None or old_schema == new_schema:   # equal: nothing to walk
            continue
        found.extend(Finding(name, v, path, rule, message)
                     for path, rule, message in _compare(old_schema, new_schema, ""))
    return found


def _versions(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for v in spec.get("versions") or []:
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            out[v["name"]] = v
    if not out and isinstance(spec.get("version"), str):  # apiextensions v1beta1's single version
        out[spec["version"]] = {"name": spec["version"], "served": True,
                                "schema": (spec.get("validation") or {})}
    return out


def _schema(version: dict[str, Any]) -> dict[str, Any] | None:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return schema if isinstance(schema, dict) else None


def _compare(old: dict[str, Any], new: dict[str, Any], path: str) -> Iterator[tuple[str, str, str]]:
    here = path or "."
    if old.get("type") and new.get("type") and old["type"] != new["type"]:
        yield here, "type-changed", f"type changes from {old['type']} to {new['type']}"
        return  # what is below a changed type is not comparable
    old_enum, new_enum = old.get("enum"), new.get("enum")
    if isinstance(new_enum, list):
        if not isinstance(old_enum, list):
            yield here, "enum-added", f"an enum ({_short(new_enum)}) now restricts a field that had none"
        else:
            dropped = [e for e in old_enum if e not in new_enum]
            if dropped:
                yield here, "enum-narrowed", f"enum no longer allows {_short(dropped)}"
    for key in _UPPER + _LOWER:
        before, after = old.get(key), new.get(key)
        if not _number(after):
            continue
        if not _number(before):
            yield here, "bound-added", f"{key} {after} now bounds a field that had no {key}"
        elif (after < before) if key in _UPPER else (after > before):
            yield here, "bound-tightened", f"{key} tightens from {before} to {after}"
    for key, bound in (("exclusiveMaximum", "maximum"), ("exclusiveMinimum", "minimum")):
        if new.get(key) is True and old.get(key) is not True and _number(new.get(bound)) \
                and new.get(bound) == old.get(bound):
            yield here, "bound-tightened", f"{bound} {new.get(bound)} becomes exclusive"
    old_required = set(old.get("required") or [])
    for field in sorted(set(new.get("required") or []) - old_required):
        yield f"{path}.{field}", "required-added", "field is newly required"
    old_props, new_props = old.get("properties"), new.get("properties")
    if isinstance(old_props, dict):
        new_props = new_props if isinstance(new_props, dict) else {}
        for field in sorted(old_props):
            if field not in new_props:
                yield f"{path}.{field}", "field-removed", "field is removed"
            elif isinstance(old_props[field], dict) and isinstance(new_props[field], dict):
                yield from _compare(old_props[field], new_props[field], f"{path}.{field}")
    if isinstance(old.get("items"), dict) and isinstance(new.get("items"), dict):
        yield from _compare(old["items"], new["items"], f"{path}[*]")
    if isinstance(old.get("additionalProperties"), dict) and isinstance(new.get("additionalProperties"), dict):
        yield from _compare(old["additionalProperties"], new["additionalProperties"], f"{path}.*")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(values: list[Any]) -> str:
    text = ", ".join(repr(v) for v in values[:5])
    return text + (f" and {len(values) - 5} more" if len(values) > 5 else "")


def allowed(annotation: str | None, crd: str) -> bool:
    """Whether a declaration's ``reconciler.dev/allow-unsafe-crd-upgrade`` value names ``crd`` (or says "*")."""
    names = {n.strip() for n in (annotation or "").split(",") if n.strip()}
    return "*" in names or crd in names


__all__ = ["ANNOTATION_ALLOW", "STORED_VERSION_REMOVED", "Finding", "allowed", "check_crd_upgrade", "crd_findings",
           "served_kind"]


STORED_VERSION_REMOVED = "stored-version-removed"


def crd_findings(new: Manifest, live: Manifest, accepted: str, count: Callable[[Manifest], int]) -> list[Finding]:
    """The unsafe changes replacing ``live`` with ``new`` would make: the one preflight that `approve` (when it
    reads a cluster) and the planner both run, and that `diff` runs offline. ``accepted`` (the declaration's
    annotation, or "*" for an approval's waiver) accepts them, but for a stored version removed, which the API
    server itself refuses: that one is always reported. ``count`` tells how many custom resources of a CRD
    exist (``Kube.custom_resource_count``); it is asked only when a served version would go."""
    stored = (live.get("status") or {}).get("storedVersions") or []
    served = [v["name"] for v in (live.get("spec") or {}).get("versions") or [] if v.get("served")]
    still = {v["name"] for v in (new.get("spec") or {}).get("versions") or [] if v.get("served", True)}
    if set(served) <= still or not count(live):
        served = []  # custom resources are only listed when a served version would go
    found = check_crd_upgrade(live, new, stored, served)
    if allowed(accepted, ObjectRef.of(new).name):
        found = [f for f in found if f.rule == STORED_VERSION_REMOVED]
    return found


def served_kind(crd: Manifest) -> tuple[str, str] | None:
    """The API version and kind a CRD's custom resources are read through (its first served version), if any."""
    spec = crd.get("spec") or {}
    served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    return (f"{spec['group']}/{served[0]}", spec["names"]["kind"]) if served else None
