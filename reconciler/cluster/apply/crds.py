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

__all__ = ["CRD", "custom_resource_count", "unsafe_crd_changes", "wait_established"]


def unsafe_crd_changes(kube: Kube, op: DesiredOperator, new: Manifest, live: Manifest) -> list[str]:
    """The unsafe changes replacing ``live`` with ``new`` would make, unless the declaration allows them."""
    if crdsafety.allowed(op.allow_unsafe_crds, ObjectRef.of(new).name):
        return []
    stored = (live.get("status") or {}).get("storedVersions") or []
    served = [v["name"] for v in (live.get("spec") or {}).get("versions") or [] if v.get("served")]
    still = {v["name"] for v in (new.get("spec") or {}).get("versions") or [] if v.get("served", True)}
    if set(served) <= still or not custom_resource_count(kube, live):
        served = []  # custom resources are only listed when a served version would go
    return [f"{f} [Operator {op.name}]" for f in crdsafety.check_crd_upgrade(live, new, stored, served)]


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
