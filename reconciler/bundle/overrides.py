"""An Operator's ``spec.config``: overrides of every Deployment a registry+v1 bundle installs.

The field is OLM v0's Subscription ``spec.config`` (operator-controller's
``deploymentConfig`` has the same fields), and it merges as OLM v0 merges it,
so that an operator adopted from OLM v0 runs with exactly the pod template
OLM v0 gave it:

- ``env``: into every container (init containers are left alone); an entry
  whose name the container already has replaces it in place, the others
  follow in the order given;
- ``envFrom``: appended to every container, unless an equal source (same
  prefix and the same ConfigMap or Secret reference) is there already;
- ``volumes``: into the pod; one of the same name replaces it in place;
- ``volumeMounts``: into every container; one of the same name replaces it;
- ``tolerations``: appended unless an equal toleration is there already;
- ``resources``: replace every container's resources (``{}`` clears them);
- ``nodeSelector``: replaces the pod's (``{}`` removes it);
- ``affinity``: each of ``nodeAffinity``, ``podAffinity`` and
  ``podAntiAffinity`` given replaces the pod's; ``{}`` removes it, and
  ``affinity: {}`` removes the pod's affinity;
- ``annotations``: added to the Deployment's and the pod template's
  annotations, never replacing one they have.

The overrides are applied last, after the serving certificates are mounted, as
OLM applies them to the Deployment it has generated.
"""

from __future__ import annotations

import copy
from typing import Any

from reconciler.model.deployconfig import AFFINITY_PARTS, DeploymentConfig
from reconciler.model.kube import Manifest

def apply(deployment: Manifest, config: DeploymentConfig) -> Manifest:
    """``deployment`` with ``config`` merged into it as OLM v0 merges a Subscription's ``spec.config``."""
    cfg = config.value
    if not cfg:
        return deployment
    out = copy.deepcopy(deployment)
    template = out.setdefault("spec", {}).setdefault("template", {})
    pod = template.setdefault("spec", {})
    for container in pod.get("containers") or []:
        if cfg.get("env"):
            container["env"] = merge_env(container.get("env") or [], cfg["env"])
        if cfg.get("envFrom"):
            container["envFrom"] = merge_env_from(container.get("envFrom") or [], cfg["envFrom"])
        if cfg.get("volumeMounts"):
            container["volumeMounts"] = merge_by_name(container.get("volumeMounts") or [], cfg["volumeMounts"])
        if "resources" in cfg:
            container["resources"] = copy.deepcopy(cfg["resources"])
    if cfg.get("volumes"):
        pod["volumes"] = merge_by_name(pod.get("volumes") or [], cfg["volumes"])
    if cfg.get("tolerations"):
        pod["tolerations"] = merge_tolerations(pod.get("tolerations") or [], cfg["tolerations"])
    if cfg.get("nodeSelector"):
        pod["nodeSelector"] = dict(cfg["nodeSelector"])
    elif "nodeSelector" in cfg:
        pod.pop("nodeSelector", None)
    if "affinity" in cfg:
        affinity = merge_affinity(pod.get("affinity"), cfg["affinity"])
        if affinity is None:
            pod.pop("affinity", None)
        else:
            pod["affinity"] = affinity
    if cfg.get("annotations"):
        meta = out.setdefault("metadata", {})
        meta["annotations"] = {**cfg["annotations"], **(meta.get("annotations") or {})}
        tmeta = template.setdefault("metadata", {})
        tmeta["annotations"] = {**cfg["annotations"], **(tmeta.get("annotations") or {})}
    return out


def merge_env(current: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The container's variables in their order, each replaced by a new one of its name; then the new others.
    A name given twice in ``new``: the last entry wins, placed where the first was."""
    latest = {e["name"]: e for e in new}
    have = {e.get("name") for e in current}
    merged = [copy.deepcopy(latest.get(e.get("name"), e)) for e in current]
    placed: set[str] = set()
    for e in new:
        if e["name"] not in have and e["name"] not in placed:
            merged.append(copy.deepcopy(latest[e["name"]]))
            placed.add(e["name"])
    return merged


def merge_env_from(current: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``current`` and every new source not equal to one of ``current``."""
    return [*current, *(copy.deepcopy(s) for s in new if not any(_same_source(s, c) for c in current))]


def _same_source(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a.get("prefix") or "") == (b.get("prefix") or "") and all(
        (a.get(ref) or None) == (b.get(ref) or None) for ref in ("configMapRef", "secretRef"))


def merge_by_name(current: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Volumes or volume mounts: one of a name already there is replaced in place, the others appended."""
    merged = [copy.deepcopy(x) for x in current]
    for item in new:
        at = next((i for i, x in enumerate(current) if x.get("name") == item["name"]), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = copy.deepcopy(item)
    return merged


def merge_tolerations(current: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``current`` and every new toleration not equal to one of ``current``."""
    return [*current, *(copy.deepcopy(t) for t in new if t not in current)]


def merge_affinity(current: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's affinity with each part ``new`` gives replaced (``{}`` removes that part); None when empty.

    As in OLM v0, an empty ``podAntiAffinity`` over an affinity that has other parts removes the whole affinity.
    """
    if not current or not new:
        return copy.deepcopy(new) or None
    merged = copy.deepcopy(current)
    for part in AFFINITY_PARTS:
        if part not in new:
            continue
        if new[part]:
            merged[part] = copy.deepcopy(new[part])
        elif part == "podAntiAffinity":
            return None
        else:
            merged.pop(part, None)
    return merged or None


__all__ = ["apply", "merge_affinity", "merge_by_name", "merge_env",
           "merge_env_from", "merge_tolerations"]
