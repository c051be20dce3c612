"""Taking over an operator that runs without OLM (applied by hand, Helm or kustomize), by matching its bundle.

The consent is declared where it is reviewed: the annotation
``reconciler.dev/adopt: "true"`` on the Operator's declaration. Until the
Operator's first successful apply, each reconcile looks up every object of
its bundle by identity (kind, namespace, name) and sorts it (``survey``):

* missing: the apply creates it;
* already the Operator's: in its inventory and applied by the reconciler;
* adoptable: it exists and is nobody's the reconciler respects; the engine
  applies over it as if it were annotated ``reconciler.dev/adopt``, through
  the one seam ``DesiredOperator.adopting`` (the OLM v0 takeover's too);
* refused, with why and what to do: an object the reconciler never adopts,
  another Operator's (of this instance or another), one that OLM v0 or v1,
  Flux or Argo CD manages, one another object controls, one being deleted.
  Any refusal stops the run before anything is written (exit 2).

After the sync has applied the Operator, ``status.adopted`` of its status
object records what was taken over and at which revision, under a field
manager of its own so that later status writes keep it. From then on the
objects are in the inventory like any the reconciler created, and the
annotation has no further effect: a later bundle's object found running
is refused like any other foreign object, and each run says the annotation
may go. The same survey, with the engine's server-side dry-run, is the
report ``reconciler adopt REPO --operator NAME`` prints (``matching.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import DesiredOperator, applied_by_us, never_adopted
from reconciler.kube.concurrent import concurrently
from reconciler.kube.client import Kube
from reconciler.errors import PolicyError
from reconciler.model.kube import ANNOTATION_ADOPT, Manifest, ObjectRef
from reconciler.model.managers import LET_GO, managed_by
from reconciler.report.words import counted

MISSING, OURS, ADOPTABLE, REFUSED = "missing", "ours", "adoptable", "refused"
CONSENT = f'{ANNOTATION_ADOPT}: "true"'
# The field managers of the tools that apply operators by hand or by chart, beside the client-side writers the
# engine always takes over: kubectl's server-side apply, create and replace, and Helm's. What they set that the
# bundle does not is theirs no more once the Operator takes the object over, so the apply removes it.
PREVIOUS_APPLIERS = ("kubectl", "kubectl-create", "kubectl-replace", "helm")


@dataclass(frozen=True)
class Found:
    """One object of a bundle as the cluster has it."""

    ref: ObjectRef
    live: Manifest | None      # None: it does not exist (or its kind is not served yet)
    state: str                 # MISSING, OURS, ADOPTABLE or REFUSED
    why: str = ""              # REFUSED: why it cannot be adopted
    hint: str = ""             # REFUSED: what to do


@dataclass(frozen=True)
class Adoption:
    """What an Operator's consent takes over in this run."""

    operator: str
    taken: tuple[ObjectRef, ...]   # live objects applied over and recorded in its inventory
    created: int                   # objects of its bundle that do not exist yet
    before: int = 0                # objects its own already: taken over or created by a run interrupted since


def holders(records: Mapping[str, status_objects.Recorded]) -> dict[tuple[str, str, str, str],
                                                                     list[tuple[str, str]]]:
    """Object key -> the (Operator, instance) pairs whose recorded inventory lists it, of every instance."""
    out: dict[tuple[str, str, str, str], list[tuple[str, str]]] = {}
    for name, rec in sorted(records.items()):
        for ref in rec.inventory:
            out.setdefault(ref.key, []).append((name, rec.instance))
    return out


def refusal(ref: ObjectRef, live: Manifest, operator: str, instance: str,
            held_by: Iterable[tuple[str, str]] = ()) -> tuple[str, str] | None:
    """Why ``live`` cannot be adopted by ``operator`` of ``instance``, and what to do (None: it can be).

    ``held_by``: the Operators whose inventories list it. Whoever else manages
    an object would fight the reconciler for it, or take it away: OLM v0 and
    v1 by their labels and owner references, Flux, Argo CD and ACM by the marks
    they put on what they apply (``model/managers.py``), any controller by its owner reference.
    """
    reserved = never_adopted(ref, live)
    if reserved:
        return reserved, "a bundle that ships this object cannot be installed here"
    others = [(o, i) for o, i in held_by if (o, i) != (operator, instance)]
    if others:
        name, where = others[0]
        whose = f"Operator {name}" + (f" of reconciler instance {where!r}" if where != instance else "")
        return (f"belongs to {whose} (its inventory lists it)",
                "two Operators cannot own one object: install the package once")
    meta = live.get("metadata") or {}
    labels = meta.get("labels") or {}
    if meta.get("deletionTimestamp"):
        return "is being deleted", "reconcile once it is gone: the apply then creates it"
    refs = meta.get("ownerReferences") or []
    csv = next((r for r in refs if r.get("kind") == "ClusterServiceVersion"), None)
    if csv is not None or labels.get("olm.owner") or labels.get("olm.managed") == "true":
        name = csv.get("name") if csv else labels.get("olm.owner") or "?"
        where = labels.get("olm.owner.namespace") or ref.namespace
        return (f"is OLM v0's (ClusterServiceVersion {where + '/' if where else ''}{name} installed it)",
                "take the install over from OLM v0 with `reconciler adopt REPO` instead (docs/migration.md)")
    if labels.get("olm.operatorframework.io/owner-kind"):
        return (f"is OLM v1's ({labels['olm.operatorframework.io/owner-kind']} "
                f"{labels.get('olm.operatorframework.io/owner-name', '?')} installed it)",
                "OLM v1 installs are not adopted: leave it to OLM v1")
    managed = managed_by(live)
    if managed is not None:
        tool, mark = managed
        return f"is applied by {tool} ({mark})", f"stop {tool} managing it: {LET_GO[tool]}; then adopt it"
    controller = next((r for r in refs if r.get("controller")), None)
    if controller is not None:
        return (f"is controlled by {controller.get('kind')} {controller.get('name')} (its controller owner "
                f"reference): that controller would undo what the reconciler applies",
                "leave it to its controller; an Operator whose bundle ships it cannot be adopted while it is")
    return None


def survey(kube: Kube, op: DesiredOperator, records: Mapping[str, status_objects.Recorded],
           instance: str) -> list[Found]:
    """Every object of ``op``'s bundle as the cluster has it, read by identity (one GET each, concurrently);
    ``records``: the status objects of every instance, whose inventories say whose an object is."""
    held = holders(records)

    def look(obj: Manifest) -> Found:
        ref = ObjectRef.of(obj)
        info = kube.resource(obj["apiVersion"], obj["kind"])
        live = kube.get(info, ref.namespace if info.namespaced else "", ref.name) if info is not None else None
        if live is None:
            return Found(ref, None, MISSING)
        mine = (op.name, instance) in held.get(ref.key, [])
        if mine and applied_by_us(live):
            return Found(ref, live, OURS)
        refused = refusal(ref, live, op.name, instance, held.get(ref.key, []))
        if refused is not None:
            return Found(ref, live, REFUSED, *refused)
        return Found(ref, live, ADOPTABLE)

    return concurrently(look, list(op.objects))


def adopting(op: DesiredOperator, found: list[Found]) -> DesiredOperator:
    """``op`` taking over the adoptable objects of ``found``, and the fields the tools that applied them set
    (``PREVIOUS_APPLIERS``); refused objects are left for the caller to refuse or report."""
    return dataclasses.replace(op, adopting=op.adopting | {f.ref.key for f in found if f.state == ADOPTABLE},
                               take_over=tuple(dict.fromkeys((*op.take_over, *PREVIOUS_APPLIERS))))


def consented(kube: Kube, desired: list[DesiredOperator], consenting: frozenset[str], instance: str, *,
              dry_run: bool) -> tuple[list[DesiredOperator], list[Adoption], list[str]]:
    """``desired`` with each consenting Operator that has not been applied yet allowed to take over the live
    objects of its bundle (``adopting``); what each takes over; and the notes of those whose consent is spent.

    Raises, before anything is written, when an object the consent covers cannot be adopted, naming each.
    """
    records = status_objects.read_all(kube)
    out, adoptions, notes, refused = [], [], [], []
    for op in desired:
        if op.name not in consenting or (op.waiting and not dry_run):
            out.append(op)
            continue
        rec = records.get(op.name)
        done = rec.status.get(status_objects.ADOPTED) if rec is not None and rec.instance == instance else None
        if done is not None:
            notes.append(spent(op.name, done))
            out.append(op)
            continue
        found = survey(kube, op, records, instance)
        refused += [(op, f) for f in found if f.state == REFUSED]
        taken = tuple(f.ref for f in found if f.state == ADOPTABLE)
        out.append(adopting(op, found))
        adoptions.append(Adoption(op.name, taken, sum(1 for f in found if f.state == MISSING),
                                  sum(1 for f in found if f.state == OURS)))
    if refused:
        lines = "\n  ".join(f"{f.ref} [{op.name}]: {f.why}; {f.hint}" for op, f in refused)
        first = refused[0][0]
        raise PolicyError(f"{counted(len(refused), 'object')} that {CONSENT} on the declaration would take over cannot be "
                          f"adopted; nothing was applied:\n  {lines}",
                          path=str((first.spec.get("source") or {}).get("path") or "") or None,
                          hint=f"see every object of the bundle against the cluster: `reconciler adopt REPO "
                               f"--operator {first.name}`")
    return out, adoptions, notes


def spent(operator: str, adopted: Mapping) -> str:
    """The note of a consent acted on before: it has no further effect."""
    count = len(adopted.get("objects") or [])
    return (f"{ANNOTATION_ADOPT} on Operator {operator}'s declaration has no further effect: its first apply took "
            f"over {counted(count, 'existing object')} at {adopted.get('revision') or 'an unversioned tree'}, in its "
            f"inventory since; remove the annotation")


def record(kube: Kube, adoptions: list[Adoption], *, revision: str | None, dry_run: bool) -> list[str]:
    """After a sync that applied them: ``status.adopted`` of each Operator that took objects over (not in a dry
    run), and a note each saying so."""
    notes = []
    info = status_objects.resource(kube) if adoptions and not dry_run else None
    for a in adoptions:
        what = f"{counted(len(a.taken), 'existing object')} of its bundle ({CONSENT} on its declaration)"
        if a.before:
            what += f", {a.before} more its own already (an earlier run was interrupted)"
        if dry_run:
            notes.append(f"Operator {a.operator} would take over {what}"
                         + (f" and create {a.created}" if a.created else "")
                         + "; once applied they are in its inventory, and the annotation has no further effect")
            continue
        assert info is not None
        status_objects.record_adoption(kube, info, a.operator, {
            "revision": revision or "", "objects": [r.to_dict() for r in sorted(a.taken, key=str)]})
        notes.append(f"Operator {a.operator} took over {what}" + (f", and created {a.created}" if a.created else "")
                     + "; they are in its inventory now, and the annotation has no further effect (remove it when "
                       "you like)")
    return notes
