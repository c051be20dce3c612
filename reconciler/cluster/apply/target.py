"""Where and how one run writes: the state the applier holds and its planner and writer read.

A ``Target`` is the client, the run's mode (a dry run writes nothing), the
identity each Operator's objects are written as (its installer, else the
client's own) and the change set the run fills; ``Claims`` is what proves an
existing object is an Operator's own, ``PlanOptions`` how a plan treats what
the run has not made yet. The applier (``applier.py``) is a
``Target`` with the engine's verbs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.cluster.apply.changes import ChangeSet
from reconciler.kube.client import Kube

_Key = tuple[str, str, str, str]


@dataclass(frozen=True)
class Claims:
    """What proves an existing object is an Operator's own: the inventories of one instance (``owned``:
    Operator -> object keys), renamed declarations (``moves``: new name -> old name) and the instance's name."""

    owned: Mapping[str, set[_Key]] = field(default_factory=dict)
    moves: Mapping[str, str] = field(default_factory=dict)
    instance: str = "default"


@dataclass(frozen=True)
class PlanOptions:
    """How a plan treats what the run has not made yet: ``missing`` namespaces a dry run did not create (their
    objects cannot be dry-run), ``fresh`` (Operator, namespace) pairs of a first install in a namespace this run
    created (validated as they are created instead), and ``rebinding`` installers a real run would first bind
    to newly approved permissions (a dry run cannot check what only those allow)."""

    missing: frozenset[str] = frozenset()
    fresh: frozenset[tuple[str, str]] = frozenset()
    rebinding: frozenset[str] = frozenset()


class Target:
    """``kube`` writes, each Operator as ``writers[name]`` when it has one; ``changes`` records what was done."""

    def __init__(self, kube: Kube, *, dry_run: bool, changes: ChangeSet | None = None,
                 writers: Mapping[str, Kube] | None = None) -> None:
        self.kube = kube
        self.dry_run = dry_run
        self.changes = changes if changes is not None else ChangeSet()
        self.writers: dict[str, Kube] = dict(writers or {})

    def installer(self, operator: str) -> Kube | None:
        """The installer ``operator``'s objects are written as; None: the client's own identity."""
        return self.writers.get(operator)
