"""The takeovers one apply makes around the engine's sync, as the pipeline asks for them.

Two kinds, both ownership policy: OLM installs the repository adopted
(``takeover.py`` for OLM v0: its bookkeeping retired before and after the
sync; ``takeover_olmv1.py`` for OLM v1: the ClusterExtension deleted before
it, orphaning what it installed, its release and marks removed after) and
live objects an Operator's declaration consents to take over
(``existing.py``: the consent acted on at its first apply, then spent).
``before`` gives the engine what each Operator may apply over and does what
must precede the sync; ``after`` finishes, and adds to the sync's change set
what the run says and every write of both (``ChangeSet.bookkeeping``: OLM's
objects retired, the takeovers' status written).
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.cluster.ownership.takeover import existing, olmv0 as takeover, olmv1 as takeover_olmv1
from reconciler.cluster.apply.bookkeeping import journal
from reconciler.cluster.apply.changes import ChangeSet, DesiredOperator
from reconciler.kube.client import Kube
from reconciler.model.declarations import OperatorDecl


class Takeovers:
    """The takeovers of one apply: ``declarations`` of the repository (those ``held`` excepted, for a consent),
    on ``kube``, as instance ``instance``."""

    def __init__(self, kube: Kube, declarations: Iterable[OperatorDecl], *, held: frozenset[str], instance: str,
                 revision: str | None, dry_run: bool) -> None:
        self.changes = ChangeSet()
        self.kube = kube.recording(journal(self.changes, kube))
        self.instance, self.revision, self.dry_run = instance, revision, dry_run
        declarations = tuple(declarations)
        self.adopted = {d.name: d.adopted_from for d in declarations if d.adopted_from}
        self.consenting = frozenset(d.name for d in declarations if d.adopt_existing) - held
        self.found: list[takeover.Takeover] = []
        self.found_v1: list[takeover_olmv1.Takeover] = []
        self.adoptions: list[existing.Adoption] = []
        self.steps: list[str] = []   # the OLM takeovers' notes
        self.spent: list[str] = []   # the consents acted on before

    def before(self, desired: list[DesiredOperator]) -> list[DesiredOperator]:
        """``desired`` with each Operator allowed to apply over what it takes over; OLM's Subscriptions and
        InstallPlans retired first. Raises, with nothing written, when a consent covers what cannot be adopted."""
        if self.adopted:
            from_v0 = {name: source for name, source in self.adopted.items() if source.startswith("olm-v0/")}
            self.found = takeover.find(self.kube, desired, from_v0)
            self.found_v1 = takeover_olmv1.find(self.kube, desired, self.adopted)
            desired = takeover_olmv1.adopting(takeover.adopting(desired, self.found), self.found_v1)
            self.steps += takeover.before(self.kube, self.found, dry_run=self.dry_run)
            self.steps += takeover_olmv1.before(self.kube, self.found_v1, dry_run=self.dry_run)
        if self.consenting:
            desired, self.adoptions, self.spent = existing.consented(self.kube, desired, self.consenting,
                                                                     self.instance, dry_run=self.dry_run)
        return desired

    def after(self, desired: list[DesiredOperator], result: ChangeSet) -> None:
        """After the sync: OLM's CSVs and what else it kept retired, the adoptions recorded; the notes and writes
        of both added to ``result``."""
        if self.found:
            self.steps += takeover.after(self.kube, self.found, desired, dry_run=self.dry_run)
        if self.found_v1:
            self.steps += takeover_olmv1.after(self.kube, self.found_v1, dry_run=self.dry_run)
        result.notes.extend(self.steps + self.spent + existing.record(self.kube, self.adoptions,
                                                                      revision=self.revision, dry_run=self.dry_run))
        result.bookkeeping.extend(self.changes.bookkeeping)
