"""Fields that other managers own, stale managers, and objects that are only created.

Server-side apply makes every field we send ours and, with force, takes it
from whoever had it. That is right for what a bundle says, and wrong for a
field an autoscaler, an injector or the operator itself keeps: reverted and
reported as drift at every interval. So, once an object exists:

* a field an ignore rule names by JSON pointer keeps its live value: we send
  what is there (or nothing, where nothing is), never the bundle's value, so
  nothing changes it and nothing reports it;
* a field owned by a manager an ignore rule names is left out of what we
  send, so that manager keeps it;
* a create-only object is not applied at all.

And before an object is written, fields co-owned by a client-side manager
(``kubectl-client-side-apply``, ``before-first-apply``, ...) are taken over:
their managedFields entries become part of ours, as Flux does before its
dry-run, so that a field a bundle drops is really removed and not kept alive
by a client-side apply of long ago. A dry run, which writes nothing, shows the
same outcome: what the take-over would then remove is removed from its
server-side dry-run (``as_taken_over``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from reconciler.kube.client import Kube, ResourceInfo
from reconciler.model.fieldrules import ANNOTATION_CREATE_ONLY, STALE_MANAGERS, IgnoreRule, ObjectSelector
from reconciler.model.kube import FIELD_MANAGER, Manifest, ObjectRef


def create_only(obj: Manifest, ref: ObjectRef, selectors: Iterable[ObjectSelector]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_CREATE_ONLY) == "true" or any(s.matches(ref) for s in selectors)


def respect(sent: Manifest, live: Manifest, rules: Iterable[IgnoreRule]) -> Manifest:
    """``sent`` with the fields the rules name left to their owners (a copy; ``sent`` itself when none apply)."""
    # Only rules that name a field, or whose managers own some field of ``live``, change anything: a rule of
    # managers that never wrote the object (the cainjector default, mostly) costs no copy.
    work = [(rule, owned_fields(live, rule.managers) if rule.managers else []) for rule in rules]
    work = [(rule, owned) for rule, owned in work if rule.json_pointers or owned]
    if not work:
        return sent
    out = copy.deepcopy(sent)
    for rule, owned in work:
        for tokens in rule.json_pointers:
            found, value = _get(live, tokens)
            if found:
                _set(out, tokens, copy.deepcopy(value))
            else:
                _delete(out, tokens)
        for fields in owned:
            _strip(out, fields)
    return out


def owned_fields(live: Manifest, managers: Iterable[str]) -> list[dict[str, Any]]:
    """The FieldsV1 sets of ``live``'s managedFields entries written by ``managers`` (subresources included)."""
    wanted = set(managers)
    return [m.get("fieldsV1") or {} for m in (live.get("metadata") or {}).get("managedFields") or []
            if m.get("manager") in wanted and m.get("fieldsType", "FieldsV1") == "FieldsV1"]


def _strip(obj: Any, fields: dict[str, Any], alone: bool = False) -> None:
    """Remove from ``obj`` every field the FieldsV1 set names (a leaf, or an item a key or value names).

    An item or map named with its ``.`` goes whole when nothing else of it is named beyond its key fields, or,
    with ``alone`` (the set is what its owner alone holds), whatever else is named; otherwise only the parts
    of it named go.
    """
    if isinstance(obj, dict):
        for key, child in fields.items():
            name = key[2:]
            if not key.startswith("f:") or name not in obj:
                continue
            if not child or ("." in child if alone else set(child) == {"."}):
                del obj[name]
            else:
                _strip(obj[name], child, alone)
    elif isinstance(obj, list):
        doomed = []
        for key, child in fields.items():
            if key.startswith("k:"):
                ident = json.loads(key[2:])
                keys = {f"f:{f}" for f in ident}
                for i, item in enumerate(obj):
                    if isinstance(item, dict) and all(item.get(f) == v for f, v in ident.items()):
                        if "." in child and (alone or set(child) <= {"."} | keys):
                            doomed.append(i)        # the item itself
                        else:
                            _strip(item, {k: v for k, v in child.items() if k not in keys}, alone)
            elif key.startswith("v:"):
                value = json.loads(key[2:])
                doomed += [i for i, item in enumerate(obj) if item == value]
        for i in sorted(set(doomed), reverse=True):
            del obj[i]


def _step(obj: Any, token: str) -> tuple[bool, Any]:
    if isinstance(obj, dict):
        return (token in obj, obj.get(token))
    if isinstance(obj, list) and token.isdigit() and int(token) < len(obj):
        return True, obj[int(token)]
    return False, None


def _get(obj: Any, tokens: tuple[str, ...]) -> tuple[bool, Any]:
    for token in tokens:
        found, obj = _step(obj, token)
        if not found:
            return False, None
    return True, obj


def _set(obj: Any, tokens: tuple[str, ...], value: Any) -> None:
    for token in tokens[:-1]:
        found, child = _step(obj, token)
        if not found:
            if not isinstance(obj, dict):
                return
            child = obj[token] = {}
        obj = child
    if isinstance(obj, dict):
        obj[tokens[-1]] = value
    elif isinstance(obj, list) and tokens[-1].isdigit() and int(tokens[-1]) < len(obj):
        obj[int(tokens[-1])] = value


def _delete(obj: Any, tokens: tuple[str, ...]) -> None:
    found, parent = _get(obj, tokens[:-1])
    if found and isinstance(parent, dict):
        parent.pop(tokens[-1], None)


def stale_entries(live: Manifest, extra: Iterable[str] = ()) -> list[dict[str, Any]]:
    """managedFields entries whose fields server-side apply will not take by itself: the client-side writers'
    (``STALE_MANAGERS``, updates only), and those of the ``extra`` managers, however they wrote."""
    named = set(extra)
    return [m for m in (live.get("metadata") or {}).get("managedFields") or [] if not m.get("subresource") and (
        m.get("manager") in named or (m.get("manager") in STALE_MANAGERS and m.get("operation") == "Update"))]


def take_over(writer: Kube, info: ResourceInfo, ref: ObjectRef, live: Manifest, api_version: str,
              extra: Iterable[str] = ()) -> bool:
    """Make the stale managers' fields ours (one JSON patch of managedFields); True when something was taken."""
    stale = stale_entries(live, extra)
    if not stale:
        return False
    entries = (live.get("metadata") or {}).get("managedFields") or []
    ours = next((m for m in entries if m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply"
                 and not m.get("subresource")), None)
    merged: dict[str, Any] = copy.deepcopy((ours or {}).get("fieldsV1") or {})
    for entry in stale:
        _merge(merged, entry.get("fieldsV1") or {})
    kept = [m for m in entries if m is not ours and not any(m is s for s in stale)]
    mine = {"manager": FIELD_MANAGER, "operation": "Apply", "apiVersion": (ours or {}).get("apiVersion", api_version),
            "fieldsType": "FieldsV1", "fieldsV1": merged}
    if ours and ours.get("time"):
        mine["time"] = ours["time"]
    writer.request("PATCH", info.path(ref.namespace, ref.name), content_type="application/json-patch+json",
                   body=[{"op": "test", "path": "/metadata/resourceVersion",
                          "value": (live.get("metadata") or {}).get("resourceVersion")},
                         {"op": "replace", "path": "/metadata/managedFields", "value": [*kept, mine]}],
                   obj=str(ref))
    return True


def as_taken_over(dry: Manifest, extra: Iterable[str] = ()) -> Manifest:
    """``dry``, a server-side dry-run of our apply, as a real run leaves the object (a copy, or ``dry`` itself).

    A real run first takes the stale managers' fields over (``take_over``), so
    those that what we apply no longer sets are removed by the apply; a dry
    run writes nothing, so the API server kept them, owned by the stale
    managers. They are removed here: the fields only stale managers still own
    (none other, and not us), so a dry run shows what the real run does.
    """
    stale = stale_entries(dry, extra)
    if not stale:
        return dry
    gone: dict[str, Any] = {}
    for entry in stale:
        _merge(gone, entry.get("fieldsV1") or {})
    for entry in (dry.get("metadata") or {}).get("managedFields") or []:
        if not any(entry is s for s in stale):
            gone = _minus(gone, entry.get("fieldsV1") or {})
    if not gone:
        return dry
    out = copy.deepcopy(dry)
    _strip(out, gone, alone=True)
    meta = out.get("metadata") or {}
    for key in ("labels", "annotations"):
        if meta.get(key) == {}:
            del meta[key]
    return out


def _minus(fields: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The FieldsV1 set ``fields`` less what ``other`` owns. An item or map of which ``other`` owns a part
    loses its ``.`` (it is not removed whole, only the parts nobody else owns)."""
    out: dict[str, Any] = {}
    for key, child in fields.items():
        if key not in other:
            out[key] = child
            continue
        theirs = other[key]
        if not child or not theirs:   # a leaf both own, or one the other owns whole
            continue
        rest = _minus(child, theirs)
        rest.pop(".", None)
        if rest:
            out[key] = rest
    return out


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, child in other.items():
        if key in into and isinstance(into[key], dict) and isinstance(child, dict):
            _merge(into[key], child)
        else:
            into[key] = copy.deepcopy(child)


def unmatched(desired: Iterable[Any]) -> list[str]:
    """The ignore rules written in the repository that match no object of any Operator they apply to."""
    seen: dict[tuple[str, ObjectSelector], bool] = {}
    for op in desired:
        refs = [ObjectRef.of(o) for o in op.objects]
        for rule in op.ignore:
            if rule.default:
                continue
            key = (rule.origin, rule.target)
            seen[key] = seen.get(key, False) or any(rule.matches(r) for r in refs)
    return [f"ignoreDifferences {origin} ({target.describe()}) matches no object; it has no effect"
            for (origin, target), hit in sorted(seen.items(), key=lambda kv: kv[0][0]) if not hit]
