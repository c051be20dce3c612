"""CustomResourceDefinitions in the engine: waiting for Established, counting custom resources, safe replacement.

A CRD is applied before anything that uses its kinds and waited for until
served; it is replaced only when the change cannot break its custom resources
(``crdsafety``); it is deleted only when it has none, or the declaration opted in.
"""

from __future__ import annotations

import time

from reconciler.cluster import crdsafety
from reconciler.cluster.apply.changes import DesiredOperator
from reconciler.cluster.apply.order import CRD
from reconciler.cluster.kube import Kube
from reconciler.errors import ClusterError
from reconciler.model.kube import Manifest, ObjectRef

__all__ = ["CRD", "crd_findings", "custom_resource_count", "unsafe_crd_changes", "wait_established"]


def crd_findings(kube: Kube, new: Manifest, live: Manifest, allowed: str = "") -> list[crdsafety.Finding]:
    """The unsafe changes replacing ``live`` with ``new`` would make: the one preflight that `approve` (when it
    reads a cluster) and the planner both run, and that `diff` runs offline. ``allowed`` (the declaration's
    annotation, or "*" for an approval's waiver) accepts them, but for a stored version removed, which the API
    server itself refuses: that one is always reported."""
    stored = (live.get("status") or {}).get("storedVersions") or []
    served = [v["name"] for v in (live.get("spec") or {}).get("versions") or [] if v.get("served")]
    still = {v["name"] for v in (new.get("spec") or {}).get("versions") or [] if v.get("served", True)}
    if set(served) <= still or not custom_resource_count(kube, live):
        served = []  # custom resources are only listed when a served version would go
    found = crdsafety.check_crd_upgrade(live, new, stored, served)
    if crdsafety.allowed(allowed, ObjectRef.of(new).name):
        found = [f for f in found if f.rule == STORED_VERSION_REMOVED]
    return found


STORED_VERSION_REMOVED = "stored-version-removed"


def unsafe_crd_changes(kube: Kube, op: DesiredOperator, new: Manifest, live: Manifest) -> list[str]:
    """The unsafe changes replacing ``live`` with ``new`` would make, unless the declaration allows them."""
    out = []
    for f in crd_findings(kube, new, live, op.allow_unsafe_crds):
        line = f"{f} [Operator {op.name}]"
        if f.rule == STORED_VERSION_REMOVED:
            line += (" (no waiver can accept it: migrate the stored objects to a version the bundle keeps, then "
                     "remove the version from the CRD's status.storedVersions)")
        out.append(line)
    return out


def custom_resource_count(kube: Kube, crd: Manifest) -> int:
    """How many custom resources of the CRD exist: one metadata LIST of one item, plus the count the API
    server reports for the rest (``remainingItemCount``), so exact without listing them all."""
    spec = crd.get("spec") or {}
    served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    if not served:
        return 0
    info = kube.resource(f"{spec['group']}/{served[0]}", spec["names"]["kind"])
    if info is None:
        return 0
    from reconciler.cluster.kube import _METADATA_LIST

    page = kube.request("GET", info.path(""), query=[("limit", "1")], accept=f"{_METADATA_LIST},application/json")
    items = len(page.get("items") or [])
    rest = (page.get("metadata") or {}).get("remainingItemCount")
    if items and rest is None and (page.get("metadata") or {}).get("continue"):
        return len(kube.list(info, metadata_only=True))   # the server did not count: list them all
    return items + int(rest or 0)


def wait_established(kube: Kube, name: str, timeout: float = 60.0) -> None:
    info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert info is not None
    deadline = time.monotonic() + timeout
    while True:
        crd = kube.get(info, "", name) or {}
        conds = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established", {}).get("status") == "True":
            return
        if conds.get("NamesAccepted", {}).get("status") == "False":
            raise ClusterError(f"CustomResourceDefinition {name} was not accepted: "
                               f"{conds['NamesAccepted'].get('message')}")
        if time.monotonic() > deadline:
            raise ClusterError(f"CustomResourceDefinition {name} was not Established within {timeout:.0f}s")
        time.sleep(0.1)
