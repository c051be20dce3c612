"""Deciding "unchanged" without a request: the applied-digest annotation and our managed fields.

Each object we apply carries a digest of the configuration sent. When the
live object carries the digest we would send, and every field of that
configuration is still in our field manager's set (the API server moves a
field to whoever changes it), nothing we own changed: a no-op costs only its
kind's LIST. Anything this cannot decide falls back to a server-side dry-run.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from reconciler.model.kube import ANNOTATION_DIGEST, FIELD_MANAGER, Manifest, digest_of, with_digest

__all__ = ["ANNOTATION_DIGEST", "digest_of", "is_current", "with_digest"]


def is_current(sent: Manifest, live: Manifest) -> bool:
    """Whether applying ``sent`` (made by ``with_digest``) would change nothing we own in ``live``.

    Two checks, no request. The live digest annotation equals the one we
    would send: the configuration we last applied is the one we want now.
    And every field of that configuration is still in our field manager's
    set in managedFields: when anyone else changes or removes a field we
    own, the API server moves it out of our set (to theirs), so a field
    still in our set holds the value we applied. Anything the walk cannot
    decide answers False, and the caller falls back to a dry-run.
    """
    meta = live.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    want = (sent.get("metadata") or {}).get("annotations", {}).get(ANNOTATION_DIGEST)
    if not want or (meta.get("annotations") or {}).get(ANNOTATION_DIGEST) != want:
        return False
    entries = [m for m in meta.get("managedFields") or []
               if m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply" and not m.get("subresource")]
    if len(entries) != 1 or entries[0].get("apiVersion") != sent.get("apiVersion") \
            or entries[0].get("fieldsType") != "FieldsV1":
        return False
    fields = entries[0].get("fieldsV1") or {}
    # status is dropped from an apply to the main resource of a kind with a status subresource
    body = {k: v for k, v in sent.items() if k not in ("apiVersion", "kind") and (k != "status" or "f:status" in fields)}
    body["metadata"] = {k: v for k, v in sent["metadata"].items() if k not in ("name", "namespace")}
    if sent.get("kind") == "Secret" and sent.get("apiVersion") == "v1" and "stringData" in body:
        # stringData is write-only: the server folds it into data, where another writer's change lands.
        data = live.get("data") or {}
        if any(data.get(k) != base64.b64encode(str(v).encode()).decode() for k, v in body["stringData"].items()):
            return False
    return _owned(fields, body, live)


def _owned(fields: dict[str, Any], want: Any, live: Any) -> bool:
    """Every field of ``want`` is in the managed-fields set ``fields`` (FieldsV1), matched against ``live``.

    An atomic value (a leaf in the set, whatever its shape) is owned as a
    whole: the server moves the whole leaf to whoever changes any part of it,
    so its presence is enough, and server defaults inside it do not count as
    drift. A null in an applied configuration sets nothing (``creationTimestamp: null``
    in generated manifests), so it is owned by no one and not looked for.
    """
    if isinstance(want, dict):
        if not want:
            return True
        if not fields:  # an atomic map, owned as a whole: a change anywhere in it would have moved it
            return True
        live = live if isinstance(live, dict) else {}  # live values matter only where a whole value is owned
        return all(v is None or (f"f:{k}" in fields and _owned(fields[f"f:{k}"], v, live.get(k)))
                   for k, v in want.items())
    if isinstance(want, list):
        if not want:
            return True
        if not fields:  # an atomic list, likewise
            return True
        live = live if isinstance(live, list) else []
        members = [(k[:2], json.loads(k[2:]), child) for k, child in fields.items() if k[:2] in ("k:", "v:")]
        for item in want:
            if isinstance(item, dict):
                found = [(key, child) for kind, key, child in members if kind == "k:" and isinstance(key, dict)
                         and any(f in item for f in key) and all(item.get(f, v) == v for f, v in key.items())]
                if len(found) != 1:
                    return False
                key, child = found[0]
                twins = [x for x in live if isinstance(x, dict) and all(x.get(f) == v for f, v in key.items())]
                if not _owned(child, item, twins[0] if len(twins) == 1 else None):
                    return False
            elif not any(kind == "v:" and key == item for kind, key, _ in members):
                return False
        return True
    return True  # a scalar we own holds the value we applied
