"""The takeovers one sync makes around the engine's plan and write.

Three kinds, all ownership policy: OLM installs the repository adopted
(``olmv0.py``: its bookkeeping retired before and after the write;
``olmv1.py``: the ClusterExtension deleted before it, orphaning what it
installed, its release and marks removed after) and live objects an
Operator's declaration consents to take over (``existing.py``: the consent
acted on at its first apply, then spent); and, the other way, Operators the
repository hands back to OLM v0 (``handback.py``: held, OLM asked to take
them back before the write, the reconciler letting go after). ``before`` gives the engine what
each Operator may apply over and does what must precede the plan; ``after``
finishes once the sync applied the Operators. Both write through the sync's
own recording client, so every write they make is in the sync's change set
(``ChangeSet.bookkeeping``) like the run's other records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.cluster.apply import ChangeSet, DesiredOperator
from reconciler.cluster.ownership.takeover import catalogsources, existing, handback, olmv0, olmv1
from reconciler.kube.client import Kube
from reconciler.model.kube import Manifest


class Takeovers:
    """The takeovers of one sync on ``kube`` (the sync's recording client), as instance ``instance``:
    ``adopted`` Operators (name -> the install adopted, ``olm-v0/<namespace>/<subscription>`` or OLM v1's) and the
    ``consenting`` ones (``reconciler.dev/adopt`` on the declaration; those held excepted); the ones handed
    ``back`` to OLM v0 (held by the sync)."""

    def __init__(self, kube: Kube, adopted: Mapping[str, str], consenting: frozenset[str], *, instance: str,
                 revision: str | None, dry_run: bool, back: Mapping[str, handback.HandBack] | None = None) -> None:
        self.kube, self.adopted, self.consenting = kube, dict(adopted), consenting
        self.back = dict(back or {})
        self.instance, self.revision, self.dry_run = instance, revision, dry_run
        self.found: list[olmv0.Takeover] = []
        self.refused: list[olmv0.Refusal] = []   # adopted Operators held back this run, each alone
        self.found_v1: list[olmv1.Takeover] = []
        self.adoptions: list[existing.Adoption] = []
        self.spent: list[str] = []   # the consents acted on before
        self.sources: set[tuple[str, str]] = set()   # the CatalogSources the adopted Subscriptions named

    def before(self, desired: list[DesiredOperator], notes: list[str]) -> list[DesiredOperator]:
        """``desired`` with each Operator allowed to apply over what it takes over, and without those whose takeover
        is refused (``refused``: the sync holds them back and goes on with the others); OLM's Subscriptions and
        InstallPlans retired first, and what was done added to ``notes``. Raises, with nothing written, when a
        consent covers what cannot be adopted."""
        if self.adopted:
            from_v0 = {name: source for name, source in self.adopted.items() if source.startswith("olm-v0/")}
            self.found, self.refused = olmv0.find(self.kube, desired, from_v0)
            held = {r.operator for r in self.refused}
            desired = [op for op in desired if op.name not in held]
            self.found_v1 = olmv1.find(self.kube, desired, self.adopted)
            desired = olmv1.adopting(olmv0.adopting(desired, self.found), self.found_v1)
        if self.consenting:
            desired, self.adoptions, self.spent = existing.consented(self.kube, desired, self.consenting,
                                                                     self.instance, dry_run=self.dry_run)
        self.sources = catalogsources.sources(self.kube, self.found)   # before the Subscriptions go
        notes += olmv0.before(self.kube, self.found, dry_run=self.dry_run)
        notes += olmv1.before(self.kube, self.found_v1, dry_run=self.dry_run)
        if self.back:
            lines, refused = handback.before(self.kube, self.back, instance=self.instance, dry_run=self.dry_run)
            notes += lines
            self.refused += refused
        return desired

    def after(self, desired: list[DesiredOperator], result: ChangeSet,
              write: Callable[[str, Manifest], object]) -> None:
        """After the sync applied ``desired``: OLM's CSVs and what else it kept retired, the adoptions recorded;
        what was done added to the notes of ``result``. ``write`` applies an Operator's object again as its own
        writer (what OLM's reaction to a deleted CSV undid)."""
        if self.found:
            result.notes += olmv0.after(self.kube, self.found, desired, dry_run=self.dry_run, write=write)
            result.notes += catalogsources.unused(self.kube, self.sources, self.found, dry_run=self.dry_run)
        if self.found_v1:
            result.notes += olmv1.after(self.kube, self.found_v1, dry_run=self.dry_run)
        result.notes += self.spent + existing.record(self.kube, self.adoptions, revision=self.revision,
                                                     dry_run=self.dry_run)
        if self.back:
            handback.after(self.kube, self.back, result, instance=self.instance, dry_run=self.dry_run)
