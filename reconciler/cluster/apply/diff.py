"""Explaining a change: the paths that differ between a live object and what would be applied.

A bounded, linear walk of both objects (list items by position) so a large
CRD schema costs milliseconds; Secret values are masked with fixed strings,
never a function of the value.
"""

from __future__ import annotations

from typing import Any

from reconciler.cluster.apply.digest import ANNOTATION_DIGEST
from reconciler.model.kube import Manifest, ObjectRef
from reconciler.report.words import counted


_VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")


SECRET_MASK = "<redacted>"


SECRET_MASK_CHANGED = "<redacted, changed>"


def normalize(obj: Manifest, compare_to: Manifest | None = None) -> dict[str, Any]:
    """An object without server-managed fields and status, Secret values masked.

    A Secret value becomes a fixed mask, never a function of the value (a
    hash prefix would let anyone who reads the diff confirm a guessed
    password offline). With ``compare_to`` (the live object), a value that
    differs from it gets a different fixed mask, so the diff still says
    which keys changed.
    """
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    if ANNOTATION_DIGEST in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != ANNOTATION_DIGEST}
        if not meta["annotations"]:
            del meta["annotations"]
    out["metadata"] = meta
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
        for key in ("data", "stringData"):
            if isinstance(obj.get(key), dict):
                other = (compare_to or {}).get(key)
                other = other if isinstance(other, dict) else {}
                out[key] = {k: SECRET_MASK_CHANGED if k in other and other[k] != v else SECRET_MASK
                            for k, v in obj[key].items()}
    return out


DIFF_LINES = 40   # a diff explains a change; past this many paths the rest is counted, not listed


def describe_diff(live: Manifest, proposed: Manifest, *, limit: int = DIFF_LINES) -> tuple[str, ...]:
    """Human-readable changed paths between the live object and the dry-run result.

    One linear walk of both objects (list items compared by position), so a
    large CRD schema costs milliseconds; at most ``limit`` lines, then a
    count of the rest.
    """
    found: list[tuple[int, str, str]] = []
    _walk(normalize(live), normalize(proposed, live), "", found)
    found.sort()
    lines = [text for _, _, text in found[:limit]]
    if len(found) > limit:
        lines.append(f"... and {counted(len(found) - limit, 'more changed path')}")
    return tuple(lines)


_ADDED, _REMOVED, _CHANGED = 0, 1, 2


def _walk(old: Any, new: Any, path: str, out: list[tuple[int, str, str]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                out.append((_ADDED, where, f"{where}: added {_short(new[key])}"))
            elif key not in new:
                out.append((_REMOVED, where, f"{where}: removed"))
            elif old[key] != new[key]:
                _walk(old[key], new[key], where, out)
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            where = f"{path}[{i}]"
            if i >= len(old):
                out.append((_ADDED, where, f"{where}: added {_short(new[i])}"))
            elif i >= len(new):
                out.append((_REMOVED, where, f"{where}: removed"))
            elif old[i] != new[i]:
                _walk(old[i], new[i], where, out)
    elif old != new or type(old) is not type(new):
        out.append((_CHANGED, path, f"{path}: {_short(old)} -> {_short(new)}"))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


UNIFIED_LINES = 200   # of one object's unified diff; past this, the rest is counted


def unified(live: Manifest, proposed: Manifest, label: str, *, limit: int = UNIFIED_LINES) -> tuple[str, ...]:
    """A unified diff of the two objects as YAML (server-managed fields left out, Secret values masked), as
    `kubectl diff` shows one: whole values, so a changed line of a long multi-line value is that line."""
    import difflib

    from reconciler import yamlio

    left = yamlio.dump_readable(normalize(live)).splitlines()
    right = yamlio.dump_readable(normalize(proposed, live)).splitlines()
    lines = list(difflib.unified_diff(left, right, f"live/{label}", f"proposed/{label}", lineterm="", n=3))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more diff lines"]
    return tuple(lines)


def created(proposed: Manifest, label: str, *, limit: int = UNIFIED_LINES) -> tuple[str, ...]:
    """A new object as the unified diff `kubectl diff` shows for one: every line added (Secret values masked)."""
    from reconciler import yamlio

    body = yamlio.dump_readable(normalize(proposed)).splitlines()
    lines = ["--- /dev/null", f"+++ proposed/{label}", f"@@ -0,0 +1,{len(body)} @@"] + [f"+{ln}" for ln in body]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more diff lines"]
    return tuple(lines)


def label_of(ref: ObjectRef) -> str:
    """The file name an object's diff is labelled with (``group.Kind.namespace.name``), as `kubectl diff`."""
    return f"{ref.group or 'core'}.{ref.kind}.{ref.namespace or '-'}.{ref.name}"


def external_files(live: Manifest | None, proposed: Manifest | None) -> tuple[str, str]:
    """The two sides as `kubectl diff` hands them to $KUBECTL_EXTERNAL_DIFF: YAML, Secret values masked."""
    from reconciler import yamlio

    return (yamlio.dump_readable(normalize(live)) if live is not None else "",
            yamlio.dump_readable(normalize(proposed, live)) if proposed is not None else "")
