"""CustomResourceDefinitions in the engine: waiting for Established, counting custom resources, safe replacement.

A CRD is applied before anything that uses its kinds and waited for until
served; it is replaced only when the change cannot break its custom resources
(``model/crdsafety.py``); it is deleted only when it has none, or the declaration opted in.
"""

from __future__ import annotations

import time

from reconciler.model.crdsafety import STORED_VERSION_REMOVED, crd_findings
from reconciler.cluster.apply.changes import DesiredOperator
from reconciler.cluster.apply.order import CRD
from reconciler.kube.client import Kube
from reconciler.errors import ClusterError
from reconciler.model.kube import Manifest

__all__ = ["CRD", "unsafe_crd_changes", "wait_established"]


def unsafe_crd_changes(kube: Kube, op: DesiredOperator, new: Manifest, live: Manifest) -> list[str]:
    """The unsafe changes replacing ``live`` with ``new`` would make, unless the declaration allows them."""
    out = []
    for f in crd_findings(new, live, op.allow_unsafe_crds, kube.custom_resource_count):
        line = f"{f} [Operator {op.name}]"
        if f.rule == STORED_VERSION_REMOVED:
            line += (" (no waiver can accept it: migrate the stored objects to a version the bundle keeps, then "
                     "remove the version from the CRD's status.storedVersions)")
        out.append(line)
    return out


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
