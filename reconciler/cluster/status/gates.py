"""The upgrade gate an operator sets itself: ``Upgradeable`` of its OperatorCondition, read as OLM v0 reads it.

An operator built with operator-lib reports whether it may be upgraded now in
the OperatorCondition (``operators.coreos.com/v2``) named like its CSV, in its
install namespace (``OPERATOR_CONDITION_NAME`` in its environment names it);
an administrator may override it (``spec.overrides``). OLM v0 holds an upgrade
of the CSV while it says ``Upgradeable=False``, and on OpenShift so does the
cluster's. The object stays where OLM made it when an install is taken over,
and the operator keeps writing it, so the reconciler reports the same judgement
as a condition of the Operator's status: the override first, then the
operator's own condition (outdated when written for an earlier generation of
the object, as OLM judges it). A cluster without the kind, or an Operator
without such an object, gets no condition.
"""

from __future__ import annotations

from typing import Any

from reconciler.cluster.status.objects import condition
from reconciler.kube.client import Kube

API_VERSION, KIND = "operators.coreos.com/v2", "OperatorCondition"


def upgradeable(kube: Kube, namespace: str, csv: str) -> dict[str, str] | None:
    """The ``Upgradeable`` condition of an Operator whose CSV is ``csv`` in ``namespace``; None without an
    OperatorCondition."""
    info = kube.resource(API_VERSION, KIND, refresh=False)
    if info is None or not namespace or not csv:
        return None
    found = kube.get(info, namespace, csv)
    return None if found is None else judged(found)


def judged(obj: dict[str, Any]) -> dict[str, str] | None:
    """The condition OLM would act on for an OperatorCondition object (None when it says nothing)."""
    where = f"OperatorCondition {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    override = _find(spec.get("overrides"), "Upgradeable")
    if override is not None:
        ok = override.get("status") == "True"
        return condition("Upgradeable", ok, "Overridden",
                         f"{where} overrides Upgradeable to {override.get('status')}: {override.get('message', '')}"
                         .rstrip(": "))
    own = _find(status.get("conditions"), "Upgradeable") or _find(spec.get("conditions"), "Upgradeable")
    if own is None:
        return None
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    if own.get("observedGeneration") is not None and int(own["observedGeneration"]) != generation:
        return condition("Upgradeable", False, "Outdated",
                         f"{where} says Upgradeable={own.get('status')} for generation {own['observedGeneration']}, "
                         f"not {generation}: OLM holds upgrades until the operator writes it again")
    ok = own.get("status") != "False"
    return condition("Upgradeable", ok, str(own.get("reason") or ("Upgradeable" if ok else "NotUpgradeable")),
                     f"{where}: {own.get('message') or ('the operator may be upgraded' if ok else 'not upgradeable')}")


def _find(conditions: Any, type_: str) -> dict | None:
    return next((c for c in conditions or [] if isinstance(c, dict) and c.get("type") == type_), None)
