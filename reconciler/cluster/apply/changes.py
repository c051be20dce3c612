"""The change set: what a sync was asked to do, and what it did, object by object.

Every output (the text report, ``-o json``, Events, metrics) is built from one
``ChangeSet`` (a sync returns it as a ``SyncResult``, which adds each
Operator's health: ``cluster/ownership/sync.py``); its entries say Created / Configured / Unchanged / Deleted /
Skipped, as Flux's change sets do, so no output can tell a different story.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from reconciler.model.kube import Manifest, ObjectRef

if TYPE_CHECKING:
    from reconciler.model.permissions import PermissionSet
    from reconciler.model.fieldrules import IgnoreRule, ObjectSelector


class Action(str, Enum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Change:
    operator: str
    ref: ObjectRef
    action: Action
    detail: str = ""
    diff: tuple[str, ...] = ()
    waiting: bool = False   # a dry run's preview of an Operator that waits for approval: nothing of it is applied
    unified: tuple[str, ...] = ()   # the change as a unified YAML diff, where the live object was compared
    sides: tuple[str, str] | None = field(default=None, compare=False, repr=False)   # live and proposed YAML


@dataclass(frozen=True)
class DesiredOperator:
    """One Operator's objects, already stamped with ownership labels, and what to record about it."""

    name: str
    objects: tuple[Manifest, ...]
    namespaces: tuple[str, ...]
    spec: dict[str, Any]
    bundle: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)   # resolution facts: updates, dependencies, satisfies
    conditions: tuple[dict[str, str], ...] = ()             # more conditions beside Ready (e.g. UpdateAvailable)
    installer: PermissionSet | None = None   # apply as its own installer bound to these; None: our own identity
    allow_unsafe_crds: str = ""   # the declaration's reconciler.dev/allow-unsafe-crd-upgrade: CRD names, or "*"
    metadata: dict[str, Any] = field(default_factory=dict)  # the CSV's names, version and APIs, for the status
    waiting: bool = False   # waits for approval: only a dry run plans it, to preview what approving would do
    ignore: tuple[IgnoreRule, ...] = ()           # fields left to their owners (model/fieldrules.py)
    create_only: tuple[ObjectSelector, ...] = ()  # objects created once and never overwritten
    take_over: tuple[str, ...] = ()               # more client-side managers whose fields are taken over
    # live objects (ObjectRef keys) this Operator takes over from another installer, as if each were annotated
    # reconciler.dev/adopt (cluster/ownership/takeover/olmv0.py: what OLM v0 installed for an adopted declaration)
    adopting: frozenset[tuple[str, str, str, str]] = frozenset()

    @property
    def shipped_namespaces(self) -> set[str]:
        """The namespaces the bundle ships as objects of its own (plain bundles do)."""
        return {ObjectRef.of(o).name for o in self.objects
                if o.get("kind") == "Namespace" and o.get("apiVersion") == "v1"}


@dataclass(frozen=True)
class PendingOperator:
    """An Operator whose new bundle waits for approval: what it has stays, untouched; its status says why."""

    name: str
    spec: dict[str, Any]
    bundle: dict[str, Any]                   # the bundle that waits
    permissions: list[dict[str, Any]]        # seed 001's status.pending.permissions
    condition: dict[str, str]                # InstallPendingApproval


@dataclass
class ChangeSet:
    """What a run did or would do, object by object, and what it has to say about it."""

    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # what the run wrote besides the bundles' objects, its own records (``bookkeeping.py``): the Operators' status
    # objects, their installers, the ApplySet parent, the Events it announces, OLM's bookkeeping retired
    bookkeeping: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED) for c in self.changes)

    def count(self, action: Action, operator: str | None = None) -> int:
        """How many changes did ``action`` (to ``operator``'s objects, when given)."""
        return sum(1 for c in self.changes if c.action == action and operator in (None, c.operator))

    @property
    def waiting(self) -> int:
        """Changes previewed for Operators that wait for approval (a dry run's); the rest would be applied."""
        return sum(1 for c in self.changes if c.waiting and c.action in (Action.CREATED, Action.CONFIGURED,
                                                                          Action.DELETED))
