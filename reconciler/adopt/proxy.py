"""The cluster proxy's variables OLM v0 injected, recorded by `adopt` into the declaration's ``spec.config.env``.

On OpenShift, olm-operator injects ``HTTP_PROXY``, ``HTTPS_PROXY`` and
``NO_PROXY`` from the cluster's ``Proxy`` (``config.openshift.io/v1``, its
status) into every container of the Deployments it installs, unless the
Subscription's ``spec.config.env`` sets one of them; it writes them again
whenever the Proxy changes. Once an install is taken over, nothing updates them
any more: left alone, they would stay at their last value, owned by OLM's field
manager, through every later upgrade, and no file of the repository would say
they exist. So `adopt` writes them into the declaration's ``spec.config.env``
as the Deployments run them (the values of the running pods, in OLM's order):
the rendered pod templates stay what runs (no restart), the values are in git,
and changing the proxy is a reviewed change of the declaration, as any other
override. (A handback gives them to OLM in the Subscription's ``spec.config``, so
OLM keeps them as they are.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.adopt.olmv0 import Install
from reconciler.kube.client import Kube

NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def injected(kube: Kube, inst: Install) -> list[dict[str, str]]:
    """The proxy variables OLM injected into ``inst``'s Deployments, as their first container runs them; none when
    the cluster has no Proxy API (OLM injects nothing then) or the Subscription's ``spec.config.env`` sets one."""
    if kube.resource("config.openshift.io/v1", "Proxy") is None:
        return []
    if {e.get("name") for e in inst.config.get("env") or []} & set(NAMES):
        return []
    info = kube.resource("apps/v1", "Deployment")
    if info is None:
        return []
    for dep in kube.list(info, namespace=inst.namespace, label_selector=f"olm.owner={inst.csv_name}"):
        for container in ((dep.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
            found = [{"name": e["name"], "value": str(e.get("value") or "")} for e in container.get("env") or []
                     if e.get("name") in NAMES and "valueFrom" not in e]
            if found:
                return found
    return []


def recorded(kube: Kube, installs: list[Any]) -> list[Any]:
    """``installs`` with each OLM v0 install's injected proxy variables added to what its ``config`` says, as if its
    Subscription's ``spec.config.env`` listed them (after the entries it has)."""
    out = []
    for inst in installs:
        found = injected(kube, inst) if isinstance(inst, Install) else []
        if found:
            sub = inst.subscription
            config = dict((sub.get("spec") or {}).get("config") or {})
            config["env"] = [*(config.get("env") or []), *found]
            inst = dataclasses.replace(inst, subscription={**sub, "spec": {**sub["spec"], "config": config}})
        out.append(inst)
    return out
