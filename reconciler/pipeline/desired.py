"""What the engine is asked to make true of each Operator: its objects stamped with their owner, and the spec,
bundle, report and conditions its status object carries (seed 001's InstallPendingApproval, operator-controller's
deprecation conditions, UpdateAvailable), for an approved bundle and for one that waits.
"""

from __future__ import annotations

from typing import Mapping

from reconciler.approve import Decision
from reconciler.approve.stage import CRD_SAFETY_WAIVER
from reconciler.bundle.installed import Installed
from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import DesiredOperator, PendingOperator
from reconciler.model.fieldrules import DEFAULT_RULES
from reconciler.model.kube import stamped
from reconciler.repo import Settings
from reconciler.resolve import Resolution, Selection


def _unsafe_crds_allowed(inst: Installed, decision: Decision | None, decl) -> str:
    """CRD names whose unsafe replacement is accepted: the declaration's annotation, or every CRD of the
    bundle when its approval record waives the check (``reconciler approve --waive crd-upgrade-safety``)."""
    if decision is not None and CRD_SAFETY_WAIVER in decision.waived:
        return "*"
    return decl.allow_unsafe_crds if decl is not None else ""


def approval_condition(decision: Decision) -> dict[str, str]:
    """Seed 001's InstallPendingApproval; its reason says why it waits, or how it was approved."""
    return status_objects.condition("InstallPendingApproval", not decision.approved, decision.reason,
                                    decision.message)


def pending_state(installs: tuple[Installed, ...], decisions: Mapping[str, Decision]) -> tuple[PendingOperator, ...]:
    out = []
    for inst in installs:
        d = decisions.get(inst.selection.owner)
        if d is None or d.approved:
            continue
        bundle = {k: getattr(inst.lock, k) for k in ("name", "package", "version", "catalog", "channel",
                                                     "source", "digest")}
        out.append(PendingOperator(inst.selection.owner, _spec(inst), bundle,
                                   d.pending.to_list(), approval_condition(d)))
    return tuple(out)


def _spec(inst: Installed) -> dict:
    sel, decl = inst.selection, inst.selection.declaration
    spec: dict = {"source": {"path": sel.origin}, "kind": sel.kind, "package": inst.lock.package}
    if decl is not None and decl.catalog:
        spec["catalog"] = {"name": decl.catalog.name, "package": decl.catalog.package,
                           "channel": decl.catalog.channel or ""}
    if decl is not None and decl.version:
        spec["version"] = str(decl.version)
    if sel.required_by:
        spec["requiredBy"] = list(sel.required_by)
    if decl is not None and decl.delete_custom_resources:
        # recorded, so it still holds once the declaration is removed: at most this many custom resources
        spec["deleteCustomResources"] = decl.delete_custom_resources
    return spec


def desired_state(installs: tuple[Installed, ...], resolution: Resolution | None = None,
                  decisions: Mapping[str, Decision] | None = None, *, part_of: str = "",
                  preview: bool = False, settings: Settings | None = None) -> list[DesiredOperator]:
    """What to apply: every approved bundle (all of them when no decisions are given); with ``preview`` (a dry
    run), the bundles that wait for approval too, marked as waiting, so the plan shows what approving does.

    Objects are labelled with their Operator and, with ``part_of``, their instance's ApplySet id.
    """
    out = []
    for inst in installs:
        decision = (decisions or {}).get(inst.selection.owner)
        waiting = decision is not None and not decision.approved
        if waiting and not preview:
            continue
        sel = inst.selection
        decl = sel.declaration
        objects = tuple(stamped(obj, sel.owner, part_of) for obj in inst.bundle.objects)
        spec = _spec(inst)
        bundle = {k: getattr(inst.lock, k) for k in ("name", "package", "version", "catalog", "channel",
                                                     "source", "digest")}
        bundle["namespace"] = inst.bundle.namespace
        report, conditions = _report(sel, resolution)
        if decision is not None:
            conditions = (*conditions, approval_condition(decision))
        out.append(DesiredOperator(sel.owner, objects, (inst.bundle.namespace,), spec, bundle, report, conditions,
                                   installer=decision.granted if decision is not None else None,
                                   allow_unsafe_crds=_unsafe_crds_allowed(inst, decision, decl),
                                   metadata=inst.bundle.metadata, waiting=waiting,
                                   ignore=(*DEFAULT_RULES, *(settings.ignore_differences if settings else ()),
                                           *(decl.ignore_differences if decl else ())),
                                   create_only=(*(settings.create_only if settings else ()),
                                                *(decl.create_only if decl else ())),
                                   take_over=settings.take_over_managers if settings else ()))
    return out


def _report(sel: Selection, resolution: Resolution | None) -> tuple[dict, tuple[dict[str, str], ...]]:
    """What resolution says about an owner, in the shapes of the design documents' Operator and Input status."""
    report: dict = {}
    if sel.dependencies:
        report["dependencies"] = [{"bundle": b, "meets": need} for need, b in sel.dependencies]
    if sel.satisfies:
        report["satisfies"] = [{"bundle": b, "meets": need} for b, need in sel.satisfies]
    if sel.kind == "Dependency":
        return report, ()
    updates = [u for u in (resolution.updates if resolution else ()) if u.operator == sel.owner]
    report["updates"] = [{"catalog": u.catalog, "package": u.package, "channel": u.channel,
                          "options": list(u.options)} for u in updates]
    if updates:
        message = "updates need a change to the declaration: " + "; ".join(
            f"channel {u.channel}: {', '.join(u.options)}" for u in updates)
        cond = status_objects.condition("UpdateAvailable", True, "CrossChannelOrRangeUpdateFound", message)
    else:
        cond = status_objects.condition("UpdateAvailable", False, "NoUpdates",
                                        "no newer bundle outside the declaration's channel and version range")
    return report, (cond, *_deprecation_conditions(sel, resolution))


def _deprecation_conditions(sel: Selection, resolution: Resolution | None) -> tuple[dict[str, str], ...]:
    """operator-controller's deprecation conditions: one per scope, and Deprecated for any of them."""
    found = {d.scope: d for d in (resolution.deprecations if resolution else ()) if d.operator == sel.owner}
    out = []
    for scope, type_ in (("package", "PackageDeprecated"), ("channel", "ChannelDeprecated"),
                         ("bundle", "BundleDeprecated")):
        dep = found.get(scope)
        out.append(status_objects.condition(type_, dep is not None, "Deprecated" if dep else "NotDeprecated",
                                            f"{scope} {dep.name}: {dep.message}" if dep else
                                            f"the catalog does not deprecate this {scope}"))
    any_dep = [c["message"] for c in out if c["status"] == "True"]
    out.insert(0, status_objects.condition("Deprecated", bool(any_dep), "Deprecated" if any_dep else "NotDeprecated",
                                           "; ".join(any_dep) or "nothing chosen for this Operator is deprecated"))
    return tuple(out)

