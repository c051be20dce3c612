"""Comparing the two sides of a change: what it does, Operator by Operator, computed offline.

Two sides, each a repository already read, resolved and converted by
``reconciler.pipeline`` (the base revision, and the working tree resolved with
the base's lock as what is installed, since that is what the cluster has when
the change merges). ``review()`` compares them with pure functions, one per
question a reviewer asks: which bundle, by which upgrade edge; which
dependencies come and go; which objects are created, changed, deleted; which
permissions are gained and lost; what happens to CRDs; what the catalog
deprecates; whether approval will be needed; which APIs the cluster's next
minor no longer serves. ``render.py`` writes the result as text, JSON or
markdown.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from reconciler import yamlio
from reconciler.approve import PermissionSet, required_permissions
from reconciler.model.catalog import SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE, Catalog
from reconciler.model.kube import Manifest, ObjectRef
from reconciler.model.semver_range import VersionRange
from reconciler.review.apis import ApiFinding, check_versions, minor, next_minor

__all__ = ["ApiFinding", "BundleInfo", "ObjectChange", "OperatorChange", "Review", "Side", "crd_changes",
           "catalog_deprecations", "object_changes", "rbac_delta", "review", "secret_lookup", "upgrade_edge",
           "SECRET_MASK"]

SECRET_MASK = "<redacted>"
MAX_DIFF_LINES = 400   # per object: a huge object is cut with a note, never silently


@dataclass(frozen=True)
class BundleInfo:
    name: str
    version: str
    package: str
    catalog: str
    channel: str
    source: str
    digest: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "package": self.package, "catalog": self.catalog,
                "channel": self.channel, "source": self.source, "digest": self.digest}


@dataclass(frozen=True)
class Owner:
    """One Operator, Input or dependency on one side: its bundle, dependencies and rendered objects."""

    name: str
    kind: str
    bundle: BundleInfo
    dependencies: tuple[tuple[str, str], ...]    # (what is needed, bundle that meets it)
    objects: tuple[Manifest, ...]
    input_class: str = ""


@dataclass(frozen=True)
class Side:
    """One side of a review."""

    label: str                                   # "base 1a2b3c4", "working tree"
    owners: Mapping[str, Owner]
    catalogs: Mapping[str, Catalog] = field(default_factory=dict)
    semver_catalogs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Approval:
    approved: bool
    reason: str
    message: str
    pending: PermissionSet = PermissionSet()


@dataclass(frozen=True)
class ObjectChange:
    ref: ObjectRef
    action: str                   # created, changed, deleted
    diff: tuple[str, ...] = ()    # unified diff of the YAML (Secret data masked)


@dataclass(frozen=True)
class OperatorChange:
    operator: str
    kind: str
    change: str                   # added, removed, upgraded, downgraded, changed, approval (only it changes)
    before: BundleInfo | None
    after: BundleInfo | None
    edge: str                     # how the upgrade is reached
    dependencies_added: tuple[tuple[str, str], ...] = ()
    dependencies_dropped: tuple[tuple[str, str], ...] = ()
    objects: tuple[ObjectChange, ...] = ()
    rbac_gained: PermissionSet = PermissionSet()
    rbac_lost: PermissionSet = PermissionSet()
    crds: tuple[str, ...] = ()
    deprecations: tuple[str, ...] = ()
    approval: Approval | None = None
    approval_before: Approval | None = None   # the base's decision, when the change is the approval's


@dataclass(frozen=True)
class Review:
    before: str
    after: str
    kube_version: str | None       # the cluster's minor checked for API removals
    next_version: str | None       # and the next one
    operators: tuple[OperatorChange, ...]
    apis: tuple[ApiFinding, ...]   # over every Operator of the after side, changed or not
    dependencies_changed: bool
    graph: tuple[tuple[str, str, str], ...] = ()   # after side: (owner, bundle, dependency bundle or "")

    @property
    def changed(self) -> bool:
        return bool(self.operators)


def review(before: Side, after: Side, *, approvals: Mapping[str, Approval] | None = None,
           kube_version: str | None = None, approvals_before: Mapping[str, Approval] | None = None) -> Review:
    """The change from ``before`` to ``after``. ``approvals`` are the working tree's decisions; given the
    base's (``approvals_before``), an Operator whose bundle is the same but whose decision is not (a commit that
    approves it, or one that withdraws an approval) is a change too: the approval is what a reviewer reads."""
    changes = []
    for name in sorted(set(before.owners) | set(after.owners)):
        change = operator_change(before.owners.get(name), after.owners.get(name), after,
                                 (approvals or {}).get(name))
        if change is None and approvals_before is not None:
            change = approval_change(before.owners.get(name), after.owners.get(name),
                                     approvals_before.get(name), (approvals or {}).get(name))
        if change is not None:
            changes.append(change)
    apis: list[ApiFinding] = []
    for name, owner in sorted(after.owners.items()):
        apis += check_versions(name, owner.objects, kube_version)
    deps_before = {(n, d) for n, o in before.owners.items() for d in o.dependencies}
    deps_after = {(n, d) for n, o in after.owners.items() for d in o.dependencies}
    graph = tuple(sorted((n, o.bundle.name, b) for n, o in after.owners.items()
                         for _, b in (o.dependencies or (("", ""),))))
    label = next_label = None
    if kube_version:
        m = minor(kube_version)
        label, next_label = f"{m.major}.{m.minor}", next_minor(kube_version)
    return Review(before.label, after.label, label, next_label, tuple(changes), tuple(apis),
                  deps_before != deps_after, graph)


def operator_change(old: Owner | None, new: Owner | None, after: Side,
                    approval: Approval | None) -> OperatorChange | None:
    """What changes for one owner; None when its bundle and rendered objects are the same."""
    assert old is not None or new is not None
    objects = object_changes(old.objects if old else (), new.objects if new else ())
    same_bundle = old is not None and new is not None and old.bundle == new.bundle
    if same_bundle and not objects and old.dependencies == new.dependencies:
        return None
    if old is None:
        change = "added"
    elif new is None:
        change = "removed"
    elif old.bundle.name == new.bundle.name:
        change = "changed"
    else:
        change = "upgraded" if _newer(new.bundle.version, old.bundle.version) else "downgraded"
    edge = ""
    if old is not None and new is not None and old.bundle.name != new.bundle.name:
        edge = upgrade_edge(after.catalogs.get(new.bundle.catalog), new.bundle.package, old.bundle.name,
                            new.bundle.name, semver_mode=new.bundle.catalog in after.semver_catalogs,
                            forced=new.input_class == "force")
    elif old is None:
        edge = "new install"
    elif new is None:
        edge = "uninstall"
    gained, lost = rbac_delta(old.objects if old else (), new.objects if new else ())
    crds = []
    old_crds = _crds(old.objects if old else ())
    new_crds = _crds(new.objects if new else ())
    for crd_name in sorted(set(old_crds) | set(new_crds)):
        crds += crd_changes(old_crds.get(crd_name), new_crds.get(crd_name))
    deps_old = set(old.dependencies if old else ())
    deps_new = set(new.dependencies if new else ())
    deprecations: list[str] = []
    if new is not None:
        deprecations = catalog_deprecations(after.catalogs.get(new.bundle.catalog), new.bundle.package,
                                            new.bundle.channel, new.bundle.name)
    return OperatorChange(
        operator=(new or old).name, kind=(new or old).kind, change=change,
        before=old.bundle if old else None, after=new.bundle if new else None, edge=edge,
        dependencies_added=tuple(sorted(deps_new - deps_old)), dependencies_dropped=tuple(sorted(deps_old - deps_new)),
        objects=tuple(objects), rbac_gained=gained, rbac_lost=lost, crds=tuple(crds),
        deprecations=tuple(deprecations), approval=approval if new is not None else None)


def approval_change(old: Owner | None, new: Owner | None, before: Approval | None,
                    after: Approval | None) -> OperatorChange | None:
    """The change of an Operator whose bundle stays: its approval decided otherwise (None when it is not)."""
    if old is None or new is None or after is None or before is None or before.approved == after.approved:
        return None
    return OperatorChange(operator=new.name, kind=new.kind, change="approval", before=old.bundle, after=new.bundle,
                          edge="", approval=after, approval_before=before)


def _newer(a: str, b: str) -> bool:
    from reconciler.model.semver_range import parse_version

    try:
        return parse_version(a) > parse_version(b)
    except Exception:  # noqa: BLE001 - an unversioned bundle (plain+v0) is neither newer nor older
        return True


# Objects ---------------------------------------------------------------------------------------------

def mask_secrets(obj: Manifest, other: Manifest | None = None, side: str = "") -> Manifest:
    """A copy with every Secret value replaced by a fixed mask; a value that differs from ``other``'s
    is marked as changed (``<redacted> (before)`` / ``<redacted> (after)``), never shown."""
    if obj.get("kind") != "Secret" or str(obj.get("apiVersion", "")) != "v1":
        return obj
    out = copy.deepcopy(obj)
    for key in ("data", "stringData"):
        values = out.get(key)
        if not isinstance(values, dict):
            continue
        theirs = (other or {}).get(key) if other else None
        theirs = theirs if isinstance(theirs, dict) else {}
        for k in list(values):
            differs = other is not None and k in theirs and theirs[k] != values[k]
            values[k] = f"{SECRET_MASK} ({side})" if differs and side else SECRET_MASK
    return out


def secret_lookup(objects: Iterable[Manifest]):  # noqa: ANN201 - a bundle.certs.Lookup
    """A certificate lookup over rendered Secrets: a render that reuses another's webhook certificates does
    not show an unchanged webhook as a changed caBundle."""
    found = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
            found[(meta.get("namespace", ""), meta.get("name", ""))] = obj
    return lambda namespace, name: found.get((namespace, name))


def object_changes(old: Iterable[Manifest], new: Iterable[Manifest],
                   max_lines: int = MAX_DIFF_LINES) -> list[ObjectChange]:
    """Created, changed and deleted objects, by identity (group, kind, namespace, name)."""
    before = {ObjectRef.of(o).key: o for o in old}
    after = {ObjectRef.of(o).key: o for o in new}
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is not None and b is not None and a == b:
            continue
        ref = ObjectRef.of(b if b is not None else a)
        action = "created" if a is None else "deleted" if b is None else "changed"
        left = yamlio.dump_readable(mask_secrets(a, b, "before")) if a is not None else ""
        right = yamlio.dump_readable(mask_secrets(b, a, "after")) if b is not None else ""
        lines = list(difflib.unified_diff(left.splitlines(), right.splitlines(), "before", "after", lineterm="",
                                          n=3))
        if len(lines) > max_lines:
            lines = lines[:max_lines] + [f"... {len(lines) - max_lines} more diff lines not shown"]
        out.append(ObjectChange(ref, action, tuple(lines)))
    return out


# Permissions -----------------------------------------------------------------------------------------

def rbac_delta(old: Iterable[Manifest], new: Iterable[Manifest]) -> tuple[PermissionSet, PermissionSet]:
    """(gained, lost): the rules the bundle's RBAC grants after and not before, and the reverse."""
    before = required_permissions(list(old)).grants
    after = required_permissions(list(new)).grants
    return before.missing(after), after.missing(before)


# CRDs ------------------------------------------------------------------------------------------------

def _crds(objects: Iterable[Manifest]) -> dict[str, Manifest]:
    return {str((o.get("metadata") or {}).get("name", "")): o for o in objects
            if o.get("kind") == "CustomResourceDefinition"
            and str(o.get("apiVersion", "")).startswith("apiextensions.k8s.io/")}


def _versions(crd: Manifest) -> dict[str, dict[str, Any]]:
    return {str(v.get("name")): v for v in ((crd.get("spec") or {}).get("versions") or []) if isinstance(v, dict)}


_SCHEMA_WORDS = (("dictionary_item_added", "added"), ("dictionary_item_removed", "removed"),
                 ("values_changed", "changed"), ("type_changes", "changed"), ("iterable_item_added", "changed"),
                 ("iterable_item_removed", "changed"))
_SCHEMA_SHOWN = 8


def schema_changes(old: Any, new: Any) -> str:
    """What changes between two versions of an OpenAPI schema, as field paths a reviewer reads: "fields added:
    spec.replicas; constraints changed: spec.mode (enum); descriptions changed: 3".

    The structural comparison is deepdiff's; the paths are translated from the schema's nesting
    (``properties`` / ``items``) back to the object's fields.
    """
    from deepdiff import DeepDiff

    found: dict[str, list[str]] = {"fields added": [], "fields removed": [], "constraints changed": []}
    descriptions = 0
    tree = DeepDiff(old or {}, new or {}, view="tree", ignore_order=True)
    for kind, word in _SCHEMA_WORDS:
        for item in tree.get(kind, ()):
            path = [str(p) for p in item.path(output_format="list")]
            field, rest = _field_of(path)
            if rest[-1:] == ["description"]:
                descriptions += 1
            elif word in ("added", "removed") and not rest:
                found[f"fields {word}"].append(field or "(the object)")
            else:
                found["constraints changed"].append(f"{field or '(the object)'} ({'.'.join(rest) or 'type'})")
    parts = []
    for label, paths in found.items():
        if paths:
            shown = sorted(set(paths))
            more = f" and {len(shown) - _SCHEMA_SHOWN} more" if len(shown) > _SCHEMA_SHOWN else ""
            parts.append(f"{label}: {', '.join(shown[:_SCHEMA_SHOWN])}{more}")
    if descriptions:
        parts.append(f"descriptions changed: {descriptions}")
    return "; ".join(parts) or "reordered only"


def _field_of(path: list[str]) -> tuple[str, list[str]]:
    """(the object field a schema path is about, what of its schema): properties.spec.properties.x.enum ->
    ("spec.x", ["enum"]); ...items... becomes []."""
    if path[:1] == ["openAPIV3Schema"]:
        path = path[1:]
    fields: list[str] = []
    i = 0
    while i < len(path):
        if path[i] == "properties" and i + 1 < len(path):
            fields.append(path[i + 1])
            i += 2
        elif path[i] == "items":
            fields[-1:] = [f"{fields[-1]}[]"] if fields else ["[]"]
            i += 1
        elif path[i] == "additionalProperties":
            fields.append("*")
            i += 1
        else:
            return ".".join(fields), path[i:]
    return ".".join(fields), []


def crd_changes(old: Manifest | None, new: Manifest | None) -> list[str]:
    """What an upgrade does to one CRD, each line a verdict a reviewer can act on.

    Versions added and removed, storage moves and served flags, and the
    upgrade-safety verdict the reconciler itself applies before replacing a
    CRD (``model/crdsafety.py``: removed fields, type changes, new required
    fields, narrowed enums, tightened bounds, ...), each marked UNSAFE. Offline
    the stored versions are taken to be the old storage version and no custom
    resource is assumed to exist; the cluster check at apply time knows both.
    """
    if old is None and new is None:
        return []
    name = str(((new or old).get("metadata") or {}).get("name", ""))
    if old is None:
        return [f"CRD {name}: new, versions {', '.join(sorted(_versions(new))) or 'none'}"]
    if new is None:
        return [f"CRD {name}: no longer in the bundle; kept in the cluster while custom resources exist"]
    out = []
    ov, nv = _versions(old), _versions(new)
    oscope, nscope = (old.get("spec") or {}).get("scope"), (new.get("spec") or {}).get("scope")
    if oscope != nscope:
        out.append(f"CRD {name}: UNSAFE: scope changes from {oscope} to {nscope}; the API server refuses this")
    for v in sorted(set(ov) - set(nv)):
        stored = ov[v].get("storage")
        out.append(f"CRD {name}: UNSAFE: version {v} removed{' (it was the storage version)' if stored else ''}; "
                   f"objects stored or clients using {v} break")
    for v in sorted(set(nv) - set(ov)):
        out.append(f"CRD {name}: version {v} added")
    for v in sorted(set(ov) & set(nv)):
        if ov[v].get("served", True) and not nv[v].get("served", True):
            out.append(f"CRD {name}: version {v} no longer served; clients using it break")
        if ov[v].get("schema") != nv[v].get("schema"):
            out.append(f"CRD {name}: the schema of version {v} changes: "
                       f"{schema_changes(ov[v].get('schema'), nv[v].get('schema'))}")
    old_storage = next((v for v, d in ov.items() if d.get("storage")), None)
    new_storage = next((v for v, d in nv.items() if d.get("storage")), None)
    if old_storage and new_storage and old_storage != new_storage:
        out.append(f"CRD {name}: storage version moves from {old_storage} to {new_storage}")
    from reconciler.model.crdsafety import check_crd_upgrade

    said = {line.split("UNSAFE: ", 1)[-1] for line in out}
    for finding in check_crd_upgrade(old, new, [old_storage] if old_storage else [], []):
        if finding.rule in ("scope", "stored-version-removed") and any("UNSAFE" in line for line in out):
            continue  # already said above in a reviewer's words
        text = f"CRD {name}: UNSAFE: {str(finding).removeprefix(name).lstrip()}"
        if text.split("UNSAFE: ", 1)[1] not in said:
            out.append(text)
    return out


# Catalog ---------------------------------------------------------------------------------------------

def upgrade_edge(catalog: Catalog | None, package: str, old: str, new: str, *, semver_mode: bool = False,
                 forced: bool = False) -> str:
    """How ``new`` is reached from ``old`` in the catalog: replaces, skips, skipRange or semver; else forced,
    or "no upgrade edge"."""
    if catalog is not None:
        old_bundle, new_bundle = catalog.bundle(package, old), catalog.bundle(package, new)
        for channel in catalog.channels_of(package):
            entry = channel.entry(new)
            if entry is None:
                continue
            if entry.replaces == old:
                return f"replaces {old} (channel {channel.name})"
            if old in entry.skips:
                return f"skips {old} (channel {channel.name})"
            if entry.skip_range and old_bundle is not None:
                try:
                    if VersionRange.parse(entry.skip_range, dialect="blang").contains(old_bundle.version):
                        return f"skipRange {entry.skip_range!r} (channel {channel.name})"
                except Exception:  # noqa: BLE001 - an invalid range is a catalog finding, not an edge
                    pass
        if semver_mode and old_bundle is not None and new_bundle is not None:
            v, w = old_bundle.version, new_bundle.version
            if w > v and w.major == v.major and (v.major > 0 or w.minor == v.minor):
                return "semver (same major)"
    return "forced (no upgrade edge; input class force)" if forced else "no upgrade edge"


def catalog_deprecations(catalog: Catalog | None, package: str, channel: str, bundle: str) -> list[str]:
    """The catalog's olm.deprecations entries that the chosen package, channel or bundle hits."""
    if catalog is None or not package:
        return []
    out = []
    for schema, name, what in ((SCHEMA_PACKAGE, "", f"package {package}"), (SCHEMA_CHANNEL, channel,
                               f"channel {channel}"), (SCHEMA_BUNDLE, bundle, f"bundle {bundle}")):
        if schema == SCHEMA_CHANNEL and not channel:
            continue
        message = catalog.deprecation(package, schema, name)
        if message:
            out.append(f"{what} is deprecated: {message}")
    return out
