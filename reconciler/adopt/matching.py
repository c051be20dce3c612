"""`reconciler adopt REPO --operator NAME`: how the bundle the repository resolves matches what runs, before the
consent to take it over is given.

The Operator is declared as for a new install (package, channel or version,
namespace). Its bundle is resolved and converted as ``reconcile`` would, each
object is looked up by identity (``existing.survey``: missing, refused with
why, already the Operator's, or adoptable), and the objects that may be
taken over are planned exactly as the engine plans them in ``reconcile
--dry-run`` (``sync`` with ``adopting``): a server-side dry-run of the
bundle's object over the live one, as the Operator's installer when it has
one, with what the take-over of client-side fields would remove removed
(``fields.as_taken_over``).

An object **matches** when that dry-run changes nothing a user would notice:
the live object and the outcome are equal once what says who manages it is
left out of both: the reconciler's ownership labels and applied-digest
annotation, and what the previous tool kept, which a takeover drops
(kubectl's ``last-applied-configuration``, Helm's release annotations). Anything else **differs**, with the diff; a workload whose
pod template differs restarts its pods when applied, and is marked so.

Live objects that look like the operator's but are not in its bundle (in its
install namespace, labelled like the bundle's live objects, or of the same
Helm release) are listed: a takeover leaves them alone, neither adopted nor
ever pruned. Nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.cluster.ownership.takeover.existing import ADOPTABLE, MISSING, OURS, REFUSED, Found, adopting, survey
from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import Action, Change, DesiredOperator, applied_by_us, describe_diff, label_of, unified
from reconciler.kube.concurrent import concurrently
from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.errors import DeclarationError
from reconciler.model.kube import (
    ANNOTATION_ADOPT, LABEL_MANAGED_BY, LABEL_OPERATOR, MANAGED_BY, Manifest, ObjectRef, ownership_labels,
)
from reconciler.report.words import counted

MATCHES, DIFFERS = "matches", "differs"
VERDICTS = (MATCHES, DIFFERS, MISSING, REFUSED, OURS)   # of each object of a report (docs/output.md)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
OWNERSHIP_LABELS = frozenset(ownership_labels("-", "-"))
WORKLOADS = frozenset({("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet")})
# Labels tools put on every object of one application (Helm charts, kustomize's labels, kubebuilder's scaffold).
GROUPING_LABELS = ("app.kubernetes.io/part-of", "app.kubernetes.io/instance", "app.kubernetes.io/name", "app")
HELM_RELEASE, HELM_NAMESPACE = "meta.helm.sh/release-name", "meta.helm.sh/release-namespace"
# Kinds an operator is usually applied as, beyond its bundle's own: where something left behind is looked for.
RELATED_KINDS = (("v1", "ServiceAccount"), ("v1", "Service"), ("v1", "ConfigMap"), ("v1", "Secret"),
                 ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
                 ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                 ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                 ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                 ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                 ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
                 ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                 ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"))
# What the API server puts in every namespace.
NAMESPACE_DEFAULTS = frozenset({("", "ServiceAccount", "default"), ("", "ConfigMap", "kube-root-ca.crt")})


@dataclass(frozen=True)
class Entry:
    """One object of the bundle against the cluster."""

    ref: ObjectRef
    verdict: str                   # matches, differs, missing, refused, or ours (already the Operator's)
    detail: str = ""               # refused: why; otherwise what else to know
    hint: str = ""                 # refused: what to do
    diff: tuple[str, ...] = ()     # differs: the changed paths
    unified: tuple[str, ...] = ()  # differs: the change as a unified YAML diff
    restarts: bool = False         # a workload whose pod template differs: its pods restart when applied


@dataclass(frozen=True)
class Related:
    """A live object that looks like the operator's, which its bundle does not have."""

    ref: ObjectRef
    why: str


@dataclass(frozen=True)
class Report:
    operator: str
    bundle: str
    namespace: str
    declaration: str               # the file that declares it
    consent: bool                  # the declaration carries reconciler.dev/adopt: "true"
    adopted: Mapping[str, Any] | None   # status.adopted: the consent was acted on already
    waiting: bool                  # the bundle waits for approval
    entries: tuple[Entry, ...]
    related: tuple[Related, ...] = ()
    notes: tuple[str, ...] = ()

    def count(self, verdict: str) -> int:
        return sum(1 for e in self.entries if e.verdict == verdict)

    @property
    def restarts(self) -> int:
        return sum(1 for e in self.entries if e.restarts)


@dataclass
class _Plan:
    """What the engine's dry run said of one Operator's objects."""

    changes: dict[tuple[str, str, str, str], Change] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)   # install namespaces it would create


def report(repo: str | Path, kube: Kube, names: list[str]) -> list[Report]:
    """The report for each Operator of ``names`` declared in ``repo``, against ``kube``'s cluster."""
    from reconciler import pipeline
    from reconciler.cluster.ownership import Request, sync

    prepared = pipeline.prepare(repo, kube, preview=True)
    desired, instance = pipeline.desired_operators(prepared, dry_run=True)
    by_name = {op.name: op for op in desired}
    decls = {d.name: d for d in prepared.snapshot.operators}
    for name in names:
        _check_asked(name, by_name, decls, prepared)
    records = status_objects.read_all(kube)
    surveys = {name: survey(kube, by_name[name], records, instance.name) for name in names}
    asked = [_adopting(by_name[name], surveys[name]) for name in names]
    mine = {n for n, rec in records.items() if rec.instance == instance.name}
    result = sync(kube, Request(asked, dry_run=True, revision=prepared.snapshot.revision,
                                held=frozenset(mine - set(names))), instance)
    plans: dict[str, _Plan] = {name: _Plan() for name in names}
    for change in result.changes:
        plan = plans.get(change.operator)
        if plan is None:
            continue
        if change.ref.kind == "Namespace" and change.action == Action.CREATED and change.ref.key not in {
                ObjectRef.of(o).key for o in by_name[change.operator].objects}:
            plan.namespaces.append(change.ref.name)
        else:
            plan.changes[change.ref.key] = change
    out = []
    for name in names:
        op, decl = by_name[name], decls.get(name)
        rec = records.get(name)
        entries = tuple(_entry(f, plans[name].changes.get(f.ref.key)) for f in surveys[name])
        notes = tuple(f"namespace {ns} does not exist: it would be created" for ns in plans[name].namespaces)
        out.append(Report(name, str(op.bundle.get("name") or ""), str(op.bundle.get("namespace") or ""),
                          str(decl.origin) if decl is not None else "", bool(decl and decl.adopt_existing),
                          rec.status.get(status_objects.ADOPTED) if rec and rec.instance == instance.name else None,
                          op.waiting, entries, tuple(related(kube, op, surveys[name])), notes))
    return out


def _check_asked(name: str, by_name: Mapping[str, DesiredOperator], decls: Mapping[str, Any], prepared: Any) -> None:
    """Refuse a name the repository does not declare (or declares as an OLM adoption), saying what to do."""
    decl = decls.get(name)
    if decl is not None and decl.adopted_from:
        raise DeclarationError(f"Operator {name} was adopted from OLM ({decl.adopted_from}); its takeover is "
                               f"not by matching", path=str(decl.origin),
                               hint="`reconciler reconcile REPO --dry-run` shows each step of its takeover "
                                    "(docs/migration.md)")
    if name in prepared.held:
        raise DeclarationError(f"Operator {name} is resolved only to report (its input class never applies it): "
                               f"there is nothing to take over", path=str(decl.origin) if decl else None)
    if name in by_name:
        return
    declared = sorted(d.name for d in prepared.snapshot.operators)
    raise DeclarationError(f"the repository declares no Operator {name}"
                           + (f" (it declares {', '.join(declared)})" if declared else ""),
                           path=str(prepared.snapshot.root),
                           hint=f"declare it first as for a new install (its package, channel or version, and "
                                f"install namespace), e.g. operators/{name}.yaml; then compare it with what runs")


def _adopting(op: DesiredOperator, found: list[Found]) -> DesiredOperator:
    """``op`` as the consent would make it (``existing.adopting``), its refused objects left out: they are
    reported, not planned."""
    refused = {f.ref.key for f in found if f.state == REFUSED}
    return dataclasses.replace(adopting(op, found),
                               objects=tuple(o for o in op.objects if ObjectRef.of(o).key not in refused))


def _entry(found: Found, change: Change | None) -> Entry:
    if found.state == REFUSED:
        return Entry(found.ref, REFUSED, found.why, found.hint)
    if found.state == MISSING or change is None or change.action == Action.CREATED:
        return Entry(found.ref, MISSING, "the takeover creates it")
    verdict = OURS if found.state == OURS else None
    if change.action == Action.UNCHANGED:
        return Entry(found.ref, verdict or MATCHES, "already the Operator's" if verdict else "")
    if change.sides is None:   # the API server could not be asked (e.g. the installer may not read it yet)
        return Entry(found.ref, verdict or DIFFERS, f"not compared: {change.detail or 'no dry run'}",
                     diff=change.diff)
    from reconciler import yamlio

    live, proposed = (_without_bookkeeping(yamlio.load_one(side, label_of(found.ref)) or {})
                      for side in change.sides)
    diff = describe_diff(live, proposed)
    if not diff:
        return Entry(found.ref, verdict or MATCHES, _bookkeeping_detail(found.live))
    restarts = (found.ref.group, found.ref.kind) in WORKLOADS and \
        (live.get("spec") or {}).get("template") != (proposed.get("spec") or {}).get("template")
    return Entry(found.ref, verdict or DIFFERS, "already the Operator's" if verdict else "", diff=diff,
                 unified=unified(live, proposed, label_of(found.ref)), restarts=restarts)


def _without_bookkeeping(obj: Manifest) -> Manifest:
    """``obj`` without what says who manages it: the reconciler's ownership labels, kubectl's last-applied
    configuration, Helm's release annotations (the applied digest is left out of every comparison already)."""
    meta = dict(obj.get("metadata") or {})
    for key, drop in (("labels", OWNERSHIP_LABELS), ("annotations", {LAST_APPLIED, HELM_RELEASE, HELM_NAMESPACE})):
        kept = {k: v for k, v in (meta.get(key) or {}).items() if k not in drop}
        if kept:
            meta[key] = kept
        else:
            meta.pop(key, None)
    return {**obj, "metadata": meta}


def _bookkeeping_detail(live: Manifest | None) -> str:
    """What changes of a matching object all the same, when a user may notice: who it says manages it."""
    meta = (live or {}).get("metadata") or {}
    managed_by = (meta.get("labels") or {}).get(LABEL_MANAGED_BY)
    said = []
    if managed_by and managed_by != MANAGED_BY:
        said.append(f"its label {LABEL_MANAGED_BY} becomes {MANAGED_BY} (was {managed_by})")
    if {HELM_RELEASE, HELM_NAMESPACE} & set(meta.get("annotations") or {}):
        said.append("Helm's release annotations go")
    return "; ".join(said)


def related(kube: Kube, op: DesiredOperator, found: list[Found]) -> list[Related]:
    """Live objects that look like the operator's but are not in its bundle: of a kind operators are applied
    as, in its install namespace, labelled as the bundle's live objects are (``GROUPING_LABELS``), or of the
    same Helm release. Objects another object controls, the namespace's defaults and objects of the
    reconciler's Operators are not listed."""
    mine = {f.ref.key for f in found}
    lives = [f.live for f in found if f.live is not None]
    namespaces = sorted({f.ref.namespace for f in found if f.ref.namespace} | set(op.namespaces))
    labels: dict[str, set[str]] = {}
    releases: set[tuple[str, str]] = set()
    for live in lives:
        meta = live.get("metadata") or {}
        for key in GROUPING_LABELS:
            value = (meta.get("labels") or {}).get(key)
            if value:
                labels.setdefault(key, set()).add(value)
        release = (meta.get("annotations") or {}).get(HELM_RELEASE)
        if release:
            releases.add(((meta.get("annotations") or {}).get(HELM_NAMESPACE, ""), release))
    kinds = {(o["apiVersion"], o["kind"]) for o in op.objects} | set(RELATED_KINDS)
    asks: list[tuple[ResourceInfo, str, str, str]] = []   # (kind, namespace, selector, why)
    for api_version, kind in sorted(kinds):
        info = kube.resource(api_version, kind, refresh=False)
        if info is None:
            continue
        if info.namespaced:
            asks += [(info, ns, "", f"in the install namespace {ns}") for ns in namespaces]
        for key, values in sorted(labels.items()):
            asks += [(info, "", f"{key}={v}", f"labelled {key}={v}, as the bundle's live objects are")
                     for v in sorted(values)]
        if releases:
            asks.append((info, "", "app.kubernetes.io/managed-by=Helm", ""))
        if info.kind == "Secret" and releases:
            asks.append((info, "", "owner=helm", ""))

    def listed(ask: tuple[ResourceInfo, str, str, str]) -> list[Manifest]:
        info, namespace, selector, _ = ask
        try:
            return kube.list(info, namespace=namespace, label_selector=selector or None, metadata_only=True)
        except ApiError as exc:
            if exc.status in (401, 403, 404, 405):
                return []   # may not list this kind: nothing to say about it
            raise

    out: dict[tuple[str, str, str, str], Related] = {}
    for (info, _, selector, why), items in zip(asks, concurrently(listed, asks)):
        for item in items:
            ref = ObjectRef.of(item)
            if ref.key in mine or ref.key in out or _not_the_operators(ref, item):
                continue
            reason = _helm_reason(item, releases) or why   # the release says the most
            if reason:
                out[ref.key] = Related(ref, reason)
    return sorted(out.values(), key=lambda r: str(r.ref))


def _not_the_operators(ref: ObjectRef, item: Manifest) -> bool:
    """Whether a listed object is, for sure, not what an operator was applied as."""
    meta = item.get("metadata") or {}
    if (ref.group, ref.kind, ref.name) in NAMESPACE_DEFAULTS or meta.get("deletionTimestamp"):
        return True
    if any(r.get("controller") for r in meta.get("ownerReferences") or []):
        return True   # made by a controller from something else (a token, an Endpoints, a ReplicaSet)
    if (meta.get("annotations") or {}).get("kubernetes.io/service-account.name"):
        return True   # a ServiceAccount's token
    return bool((meta.get("labels") or {}).get(LABEL_OPERATOR)) and applied_by_us(item)


def _helm_reason(item: Manifest, releases: set[tuple[str, str]]) -> str:
    meta = item.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    key = (annotations.get(HELM_NAMESPACE, ""), annotations.get(HELM_RELEASE, ""))
    if key in releases:
        return f"of Helm release {key[0]}/{key[1]}, as the bundle's live objects are"
    if labels.get("owner") == "helm" and (meta.get("namespace", ""), labels.get("name", "")) in releases:
        return (f"Helm's record of release {meta.get('namespace')}/{labels.get('name')} (once the takeover is done, "
                f"delete it: `helm uninstall` would delete the objects it names)")
    return ""


def consent_lines(rep: Report) -> list[str]:
    """How to consent, or what the consent already did."""
    if rep.adopted is not None:
        count = len(rep.adopted.get("objects") or [])
        return [f"Operator {rep.operator} took over {counted(count, 'existing object')} at "
                f"{rep.adopted.get('revision') or 'an unversioned tree'}; they are in its inventory, and "
                f"{ANNOTATION_ADOPT} on its declaration has no further effect"]
    if rep.entries and rep.count(OURS) == len(rep.entries):
        return [f"Operator {rep.operator} is installed: every object of its bundle is its own already, so there is "
                f"nothing to take over (`reconciler reconcile REPO --dry-run` shows what would change)"]
    if rep.count(REFUSED):
        return [f"{counted(rep.count(REFUSED), 'object')} cannot be taken over (above, each with what to do): a reconcile "
                f"that consents ({ANNOTATION_ADOPT}: \"true\" on {rep.declaration}) refuses, with nothing "
                f"applied, until each can"]
    if rep.consent:
        return [f"{rep.declaration} consents ({ANNOTATION_ADOPT}: \"true\"): the next reconcile applies the bundle "
                f"over the objects that match or differ, creates those missing and records them all in Operator "
                f"{rep.operator}'s inventory; after that first successful apply the annotation has no further effect"]
    return [f"To take these objects over, consent in the repository: annotate the declaration {rep.declaration}",
            "    metadata:", "      annotations:", f"        {ANNOTATION_ADOPT}: \"true\"",
            "and commit it; the next reconcile applies the bundle over them and records them in the Operator's "
            "inventory (pruned with it, as the objects it creates are). After that first successful apply the "
            "annotation has no further effect."]


def exit_code(reports: list[Report]) -> int:
    """0 every object matches (or is the Operator's already), 1 some differ or are missing, 2 some are refused."""
    from reconciler.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK

    if any(r.count(REFUSED) for r in reports):
        return EXIT_ERROR
    if any(r.count(DIFFERS) or r.count(MISSING) for r in reports):
        return EXIT_CHANGES
    return EXIT_OK


__all__ = ["ADOPTABLE", "DIFFERS", "MATCHES", "MISSING", "OURS", "REFUSED", "Entry", "Related", "Report",
           "consent_lines", "exit_code", "related", "report"]
