"""Why a workload's rollout cannot progress: the cause, read from its pods, instead of the symptom.

A Deployment whose new pod fits no node reports only ``pending termination: 1 old replica`` (its old pod
still serves); the cause is on the pod: ``PodScheduled=False`` with the scheduler's message. The same holds
for a container that crashes (``CrashLoopBackOff``, an exit code), an image that cannot be pulled
(``ErrImagePull``, ``ImagePullBackOff``), a container the kubelet cannot create, and one whose readiness
probe does not pass (running, not ready; the kubelet's ``Unhealthy`` Event says what the probe got). These
are what ``kubectl get pods`` shows in its STATUS column and ``kubectl describe`` in its events.

Pure functions over pod (and Event) dicts; ``wait.py`` reads them, bounded: one LIST of the workload's pods
by its label selector, only for a workload still unhealthy when the wait ends, and one LIST of Events for
the pod whose readiness probe fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Manifest = Mapping[str, Any]

# A container waiting for one of these will not start without a change (kubelet's own reasons).
STUCK_WAITING = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError")
# Reasons a cause gives (docs/health.md), besides the kubelet's waiting reasons above and the pod's own.
UNSCHEDULABLE, CONTAINER_FAILED, READINESS = "Unschedulable", "ContainerFailed", "ReadinessProbeFailed"
POD_FAILED, CONTAINERS_NOT_READY = "PodFailed", "ContainersNotReady"
# Every reason a cause gives but the pod's own (a failed pod's status.reason, PodScheduled's reason).
REASONS = frozenset({*STUCK_WAITING, UNSCHEDULABLE, CONTAINER_FAILED, "OOMKilled", READINESS, POD_FAILED,
                     CONTAINERS_NOT_READY})
# The most telling first: what will not fix itself, then what waits on the cluster, then what is merely slow.
_RANK = {**{r: 0 for r in STUCK_WAITING}, CONTAINER_FAILED: 0, "OOMKilled": 0, POD_FAILED: 0, UNSCHEDULABLE: 1,
         READINESS: 2, CONTAINERS_NOT_READY: 3}


@dataclass(frozen=True)
class Cause:
    """Why one pod does not run ready: a reason for scripts, a sentence naming the pod (and container)."""

    reason: str
    message: str
    pod: str
    probe_container: str = ""   # the container whose readiness probe fails, when that is the cause

    def with_event(self, events: Iterable[Manifest]) -> Cause:
        """The cause with the last ``Unhealthy`` Event of its pod (what the probe got), when there is one."""
        said = [e for e in events if e.get("reason") == "Unhealthy" and "eadiness" in str(e.get("message") or "")]
        if not said:
            return self
        last = max(said, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        text = " ".join(str(last.get("message") or "").split())[:300]
        return Cause(self.reason, f"{self.message}: {text}", self.pod, self.probe_container)


def label_selector(selector: Manifest | None) -> str:
    """A workload's ``spec.selector`` as a label selector query ("" when it has none: nothing is listed)."""
    if not isinstance(selector, Mapping):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def pod_cause(pod: Manifest) -> Cause | None:
    """Why ``pod`` does not run ready, or None when it does (or is going away, or only just starting)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name = str(meta.get("name") or "")
    if meta.get("deletionTimestamp") or status.get("phase") == "Succeeded":
        return None
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}
    if status.get("phase") == "Failed":
        why = status.get("message") or status.get("reason") or "it failed"
        return Cause(str(status.get("reason") or POD_FAILED), f"pod {name} failed: {why}", name)
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        why = " ".join(str(scheduled.get("message") or "no node fits it").split())
        return Cause(str(scheduled.get("reason") or UNSCHEDULABLE),
                     f"pod {name} cannot be scheduled ({scheduled.get('reason') or UNSCHEDULABLE}): {why}", name)
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        container = cs.get("name", "")
        if waiting.get("reason") in STUCK_WAITING:
            why = " ".join(str(waiting.get("message") or "").split())
            last = ((cs.get("lastState") or {}).get("terminated") or {})
            if last.get("exitCode") not in (None, 0):
                why = (why + "; " if why else "") + f"last exit code {last['exitCode']}" + (
                    f" ({last['reason']})" if last.get("reason") else "")
            return Cause(waiting["reason"], f"pod {name}: container {container} is {waiting['reason']}"
                         + (f": {why}" if why else ""), name)
        if terminated and terminated.get("exitCode") not in (None, 0):
            reason = "OOMKilled" if terminated.get("reason") == "OOMKilled" else CONTAINER_FAILED
            why = f"exit code {terminated['exitCode']}" + (f" ({terminated['reason']})" if terminated.get("reason")
                                                           else "")
            if terminated.get("message"):
                why += f": {' '.join(str(terminated['message']).split())}"
            return Cause(reason, f"pod {name}: container {container} terminated with {why}", name)
    probes = {c.get("name"): c.get("readinessProbe") for c in spec.get("containers") or []}
    for cs in status.get("containerStatuses") or []:
        if "running" in (cs.get("state") or {}) and not cs.get("ready"):
            container = cs.get("name", "")
            if probes.get(container):
                return Cause(READINESS, f"pod {name}: container {container} runs but its readiness probe does "
                                        f"not pass", name, container)
            return Cause(CONTAINERS_NOT_READY, f"pod {name}: container {container} runs but is not ready", name)
    return None


def worst(pods: Iterable[Manifest]) -> Cause | None:
    """The most telling cause among ``pods`` (a crash or a pull error before an unschedulable pod, before a
    readiness probe), or None when every pod runs ready."""
    found = [c for c in (pod_cause(p) for p in pods) if c is not None]
    return min(found, key=lambda c: (_RANK.get(c.reason, 1), c.pod)) if found else None
