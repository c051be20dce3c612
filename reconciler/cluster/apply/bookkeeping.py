"""The run's own records as entries of its change set: every write besides a bundle's objects.

A run writes more than the bundles it applies: each Operator's status
object (and its status subresource), the installer ServiceAccounts and RBAC
it writes as, the namespaces they need, the ApplySet parent, the Events that
announce a transition, and in a takeover OLM's bookkeeping it retires. Those
writes are made through one client, ``Applier.bookkeeping``: the applier's
own, recording (``Kube.recording``), so that each write the API server
accepted is entered in ``ChangeSet.bookkeeping`` as it happens, with what the
server answered (201: created, 200: configured, a DELETE: deleted). A dry
run writes none of them, so it records none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.cluster.apply.changes import Action, Change, ChangeSet
from reconciler.kube.client import Kube
from reconciler.model.kube import API_GROUP, LABEL_INSTALLER, LABEL_OPERATOR, ObjectRef


def journal(changes: ChangeSet, kube: Kube) -> Callable[[str, str, int, Any], None]:
    """The function (for ``kube.recording``) that enters each accepted write into ``changes.bookkeeping``."""

    def record(method: str, path: str, status: int, answer: Any) -> None:
        change = entry(method, path, status, answer, kube.kind_of)
        if change is not None:
            changes.bookkeeping.append(change)

    return record


def entry(method: str, path: str, status: int, answer: Any,
          kind_of: Callable[[str, str], str | None]) -> Change | None:
    """One accepted write as a change set entry: the object the API server answered with, or, where it
    answered with a Status (a DELETE of some kinds), the object the path names (``kind_of``: the kind of an
    API version's resource name, from discovery)."""
    obj = answer if isinstance(answer, dict) and answer.get("kind") not in (None, "Status") else None
    subresource = ""
    parts = path.strip("/").split("/")
    if parts[-1] in ("status", "scale") and len(parts) >= 5:
        subresource = parts[-1]
    ref = ObjectRef.of(obj) if obj is not None else _ref_of(parts[:-1] if subresource else parts, kind_of)
    if ref is None:
        return None
    action = Action.DELETED if method == "DELETE" else Action.CREATED if status == 201 else Action.CONFIGURED
    return Change(_operator_of(obj, ref), ref, action, detail=f"its {subresource}" if subresource else "")


def _ref_of(parts: list[str], kind_of: Callable[[str, str], str | None]) -> ObjectRef | None:
    """The object an API path names (/api/v1/namespaces/N/R/NAME, /apis/G/V/R/NAME, ...)."""
    if len(parts) < 4:
        return None
    group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if len(rest) != 2:
        return None
    api_version = f"{group}/{version}" if group else version
    return ObjectRef(group, kind_of(api_version, rest[0]) or rest[0], namespace, rest[1], version)


def _operator_of(obj: dict | None, ref: ObjectRef) -> str:
    """The Operator a record is about: a status object's own name, else the label every object of an
    Operator carries (its installer's included); "" for what the instance shares (the ApplySet parent)."""
    if ref.group == API_GROUP and ref.kind == "Operator":
        return ref.name
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_OPERATOR) or labels.get(LABEL_INSTALLER) or ""
