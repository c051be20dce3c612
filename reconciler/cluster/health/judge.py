"""Judge whether one live Kubernetes object is healthy, per kind, as kstatus does.

The semantics follow sigs.k8s.io/cli-utils' kstatus, which Flux and
kubectl-style tools use, so a user gets the same answer from the reconciler
as from those: an object is ``Current`` when its controller has caught up with
its latest spec and reports it done, ``InProgress`` while that is still under
way, ``Failed`` when its controller says it cannot get there (a Deployment past
its progress deadline, a failed Job, a CRD whose names clash).

Pure functions over object dicts: the caller fetches the objects (and, for a
Service that must serve a webhook or an APIService, its EndpointSlices).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from reconciler.model.kube import Manifest, split_api_version
from reconciler.report.words import counted


class Status(str, Enum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    NOT_FOUND = "NotFound"


@dataclass(frozen=True)
class Health:
    """The verdict on one object: a status, a one-line reason and message, the conditions that explain it."""

    status: Status
    message: str
    reason: str = ""

    @property
    def healthy(self) -> bool:
        return self.status == Status.CURRENT


def _current(message: str = "resource is current") -> Health:
    return Health(Status.CURRENT, message, "Current")


def _progress(reason: str, message: str) -> Health:
    return Health(Status.IN_PROGRESS, message, reason)


def _failed(reason: str, message: str) -> Health:
    return Health(Status.FAILED, message, reason)


NOT_FOUND = Health(Status.NOT_FOUND, "resource does not exist", "NotFound")

# The reasons these rules give (docs/health.md lists them); where a rule passes on the object's own condition
# reason (Stalled, Reconciling, Ready=False, a failed Job, a failed or unschedulable Pod), that reason instead.
REASONS = frozenset({
    "Current", "NotFound", "Terminating", "LatestGenerationNotObserved", "Stalled", "Reconciling", "NotReady",
    "ProgressDeadlineExceeded", "UpdatedReplicas", "OldReplicasPending", "AvailableReplicas", "ReadyReplicas",
    "NotAvailable", "ReplicaFailure", "FullyLabeledReplicas", "Replicas", "PartitionRollout", "RollingUpdate",
    "NoDesiredNumber", "CurrentNumberScheduled", "UpdatedNumberScheduled", "NumberAvailable", "NumberReady",
    "NamesNotAccepted", "NotEstablished", "JobFailed", "JobInProgress", "PodFailed", "Unschedulable", "PodNotReady",
    "NotBound", "ClaimLost", "NoLoadBalancerIngress", "NoReadyEndpoints",
    "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerError", "InvalidImageName",
})


def conditions(obj: Manifest) -> dict[str, dict[str, Any]]:
    """The object's status conditions by type."""
    out = {}
    for cond in ((obj.get("status") or {}).get("conditions") or []):
        if isinstance(cond, dict) and cond.get("type"):
            out[str(cond["type"])] = cond
    return out


def _is(conds: dict[str, dict[str, Any]], type_: str, status: str = "True") -> bool:
    return str(conds.get(type_, {}).get("status")) == status


def _explain(cond: dict[str, Any]) -> str:
    """``Type=Status: Reason: message`` for one condition, the way a user reads it in kubectl."""
    text = f"{cond.get('type')}={cond.get('status')}"
    if cond.get("reason"):
        text += f": {cond['reason']}"
    if cond.get("message"):
        text += f": {cond['message']}"
    return text


def judge(obj: Manifest | None, endpoint_slices: Iterable[Manifest] | None = None) -> Health:
    """The health of ``obj`` (None: it does not exist).

    ``endpoint_slices`` is given only for a Service that must answer calls (it
    backs a webhook or an APIService): it is healthy once an endpoint is ready.
    """
    if obj is None:
        return NOT_FOUND
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return _progress("Terminating", "resource is being deleted")
    status = obj.get("status") or {}
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return _progress("LatestGenerationNotObserved",
                         f"the controller has not observed the latest spec yet "
                         f"(observedGeneration {observed} < generation {generation})")
    group, _ = split_api_version(obj.get("apiVersion", ""))
    rule = _RULES.get((group, obj.get("kind", "")))
    if rule is not None:
        return rule(obj)
    if obj.get("kind") == "Service" and group == "":
        return _service(obj, endpoint_slices)
    return _generic(obj)


def _generic(obj: Manifest) -> Health:
    """Any other kind: the standard Stalled/Reconciling pair and a Ready condition, else current once it exists."""
    conds = conditions(obj)
    if _is(conds, "Stalled"):
        return _failed(conds["Stalled"].get("reason") or "Stalled", _explain(conds["Stalled"]))
    if _is(conds, "Reconciling"):
        return _progress(conds["Reconciling"].get("reason") or "Reconciling", _explain(conds["Reconciling"]))
    if _is(conds, "Ready", "False"):
        return _progress(conds["Ready"].get("reason") or "NotReady", _explain(conds["Ready"]))
    return _current()


def _replicas(obj: Manifest) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _deployment(obj: Manifest) -> Health:
    status, conds = obj.get("status") or {}, conditions(obj)
    progressing = conds.get("Progressing", {})
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return _failed("ProgressDeadlineExceeded", _explain(progressing))
    want = _replicas(obj)
    updated, total = status.get("updatedReplicas", 0), status.get("replicas", 0)
    ready, available = status.get("readyReplicas", 0), status.get("availableReplicas", 0)
    if updated < want:
        return _progress("UpdatedReplicas", f"updated replicas: {updated}/{want}")
    if total > updated:
        return _progress("OldReplicasPending", f"pending termination: {counted(total - updated, 'old replica')}")
    if available < want:
        why = f"; {_explain(conds['Available'])}" if "Available" in conds else ""
        return _progress("AvailableReplicas", f"available replicas: {available}/{want}{why}")
    if ready < want:
        return _progress("ReadyReplicas", f"ready replicas: {ready}/{want}")
    if "Available" in conds and not _is(conds, "Available"):
        return _progress("NotAvailable", _explain(conds["Available"]))
    return _current(f"Deployment is available: {available}/{counted(want, 'replica')}")


def _replica_set(obj: Manifest) -> Health:
    status, conds = obj.get("status") or {}, conditions(obj)
    if _is(conds, "ReplicaFailure"):
        return _failed("ReplicaFailure", _explain(conds["ReplicaFailure"]))
    want = _replicas(obj)
    for field, label, reason in (("fullyLabeledReplicas", "labelled", "FullyLabeledReplicas"),
                                 ("availableReplicas", "available", "AvailableReplicas"),
                                 ("readyReplicas", "ready", "ReadyReplicas")):
        if status.get(field, 0) < want:
            return _progress(reason, f"{label} replicas: {status.get(field, 0)}/{want}")
    return _current(f"ReplicaSet is available: {counted(want, 'replica')}")


def _stateful_set(obj: Manifest) -> Health:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    want = _replicas(obj)
    if (spec.get("updateStrategy") or {}).get("type") == "OnDelete":
        return _current("StatefulSet uses the OnDelete update strategy")
    ready, current = status.get("readyReplicas", 0), status.get("currentReplicas", 0)
    if status.get("replicas", 0) < want:
        return _progress("Replicas", f"replicas: {status.get('replicas', 0)}/{want}")
    if ready < want:
        return _progress("ReadyReplicas", f"ready replicas: {ready}/{want}")
    partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition") or 0
    if partition:
        updated = status.get("updatedReplicas", 0)
        if updated < want - partition:
            return _progress("PartitionRollout", f"updated replicas: {updated}/{want - partition} (partitioned)")
        return _current(f"StatefulSet partitioned rollout complete: {counted(updated, 'replica')} updated")
    if status.get("updateRevision") and status.get("currentRevision") != status.get("updateRevision"):
        return _progress("RollingUpdate", f"rolling update in progress: {current}/{counted(want, 'replica')} at "
                                          f"revision {status['updateRevision']}")
    return _current(f"StatefulSet is ready: {ready}/{counted(want, 'replica')}")


def _daemon_set(obj: Manifest) -> Health:
    status = obj.get("status") or {}
    if "desiredNumberScheduled" not in status:
        return _progress("NoDesiredNumber", "the DaemonSet controller has not reported yet")
    want = status["desiredNumberScheduled"]
    for field, label, reason in (("currentNumberScheduled", "scheduled", "CurrentNumberScheduled"),
                                 ("updatedNumberScheduled", "updated", "UpdatedNumberScheduled"),
                                 ("numberAvailable", "available", "NumberAvailable"),
                                 ("numberReady", "ready", "NumberReady")):
        if status.get(field, 0) < want:
            return _progress(reason, f"{label} pods: {status.get(field, 0)}/{want}")
    return _current(f"DaemonSet is rolled out: {counted(want, 'pod')}")


def _crd(obj: Manifest) -> Health:
    conds = conditions(obj)
    if _is(conds, "NamesAccepted", "False"):
        return _failed("NamesNotAccepted", _explain(conds["NamesAccepted"]))
    if not _is(conds, "Established"):
        why = _explain(conds["Established"]) if "Established" in conds else "Established not reported yet"
        return _progress("NotEstablished", why)
    if "NamesAccepted" in conds and not _is(conds, "NamesAccepted"):
        return _progress("NamesNotAccepted", _explain(conds["NamesAccepted"]))
    return _current("CustomResourceDefinition is established")


def _api_service(obj: Manifest) -> Health:
    conds = conditions(obj)
    if _is(conds, "Available"):
        return _current("APIService is available")
    why = _explain(conds["Available"]) if "Available" in conds else "Available not reported yet"
    return _progress("NotAvailable", why)


def _job(obj: Manifest) -> Health:
    conds, status = conditions(obj), obj.get("status") or {}
    if _is(conds, "Failed"):
        return _failed(conds["Failed"].get("reason") or "JobFailed", _explain(conds["Failed"]))
    if _is(conds, "Complete"):
        return _current(f"Job completed: {counted(status.get('succeeded', 0), 'pod')} succeeded")
    if _is(conds, "Suspended"):
        return _current("Job is suspended")
    return _progress("JobInProgress", f"Job in progress: {status.get('active', 0)} active, "
                                      f"{status.get('succeeded', 0)} succeeded, {status.get('failed', 0)} failed")


def _pod(obj: Manifest) -> Health:
    status, conds = obj.get("status") or {}, conditions(obj)
    phase = status.get("phase")
    if phase == "Succeeded":
        return _current("Pod has completed")
    if phase == "Failed":
        return _failed(status.get("reason") or "PodFailed", status.get("message") or "Pod has failed")
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerError",
                                     "InvalidImageName"):
            why = waiting.get("message") or waiting["reason"]
            return _failed(waiting["reason"], f"container {cs.get('name')}: {why}")
    if _is(conds, "PodScheduled", "False"):
        return _progress(conds["PodScheduled"].get("reason") or "Unschedulable", _explain(conds["PodScheduled"]))
    if phase == "Running" and _is(conds, "Ready"):
        return _current("Pod is running and ready")
    return _progress("PodNotReady", f"Pod is {phase or 'Pending'}"
                     + (f"; {_explain(conds['Ready'])}" if "Ready" in conds else ""))


def _pvc(obj: Manifest) -> Health:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Bound":
        return _current("PersistentVolumeClaim is bound")
    if phase == "Lost":
        return _failed("ClaimLost", "PersistentVolumeClaim lost its volume")
    return _progress("NotBound", f"PersistentVolumeClaim is {phase or 'Pending'}")


def _namespace(obj: Manifest) -> Health:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Terminating":
        return _progress("Terminating", "Namespace is terminating")
    return _current("Namespace is active")


def _service(obj: Manifest, endpoint_slices: Iterable[Manifest] | None) -> Health:
    spec = obj.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return _current("Service of type ExternalName")
    if spec.get("type") == "LoadBalancer" and not ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress"):
        if endpoint_slices is None:
            return _progress("NoLoadBalancerIngress", "waiting for the load balancer's address")
    if endpoint_slices is None:
        return _current("Service exists")
    ready = sum(1 for es in endpoint_slices for ep in es.get("endpoints") or []
                if (ep.get("conditions") or {}).get("ready", True) is not False)
    if ready:
        return _current(f"Service has {counted(ready, 'ready endpoint')}")
    return _progress("NoReadyEndpoints", "Service has no ready endpoints: no pod selected by it is ready")


_RULES: dict[tuple[str, str], Callable[[Manifest], Health]] = {
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replica_set,
    ("apps", "StatefulSet"): _stateful_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("apiregistration.k8s.io", "APIService"): _api_service,
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "Namespace"): _namespace,
}


def operand(obj: Manifest, conditions_path: str = "conditions") -> Health:
    """The health of a custom resource an Operator manages (an operand).

    Its conditions are read at ``status.<conditions_path>`` (the CSV's
    conditions status descriptor says where). A ``Ready`` condition, else an
    ``Available`` one, decides, provided it describes the current generation
    (its ``observedGeneration``, else the status'). Without either, the
    generic rules apply: Stalled fails it, Reconciling keeps it in progress,
    otherwise it counts as ready once it exists.
    """
    status = obj.get("status") or {}
    conds: dict[str, dict[str, Any]] = {}
    value: Any = status
    for part in conditions_path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    for cond in value if isinstance(value, list) else []:
        if isinstance(cond, dict) and cond.get("type"):
            conds[str(cond["type"])] = cond
    generation = (obj.get("metadata") or {}).get("generation")
    for type_ in ("Ready", "Available"):
        cond = conds.get(type_)
        if cond is None:
            continue
        observed = cond.get("observedGeneration", status.get("observedGeneration"))
        if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
            return _progress("LatestGenerationNotObserved", f"{type_} describes generation {observed}, "
                                                            f"not {generation}")
        if str(cond.get("status")) == "True":
            return _current(_explain(cond))
        return _progress(cond.get("reason") or f"Not{type_}", _explain(cond))
    return judge(obj)


def worst(verdicts: Iterable[Health]) -> Status:
    """The overall status of several objects: any failure, else anything still in progress, else current."""
    statuses = {v.status for v in verdicts}
    for status in (Status.FAILED, Status.NOT_FOUND, Status.IN_PROGRESS):
        if status in statuses:
            return status
    return Status.CURRENT


def webhook_services(objects: Iterable[Manifest]) -> set[tuple[str, str]]:
    """(namespace, name) of the Services that admission webhooks and APIServices among ``objects`` call."""
    out = set()
    for obj in objects:
        group, _ = split_api_version(obj.get("apiVersion", ""))
        kind = obj.get("kind")
        if group == "admissionregistration.k8s.io" and kind in ("ValidatingWebhookConfiguration",
                                                                 "MutatingWebhookConfiguration"):
            for hook in obj.get("webhooks") or []:
                svc = (hook.get("clientConfig") or {}).get("service") or {}
                if svc.get("name"):
                    out.add((svc.get("namespace", ""), svc["name"]))
        elif group == "apiregistration.k8s.io" and kind == "APIService":
            svc = (obj.get("spec") or {}).get("service") or {}
            if svc.get("name"):
                out.add((svc.get("namespace", ""), svc["name"]))
        elif group == "apiextensions.k8s.io" and kind == "CustomResourceDefinition":
            conv = (obj.get("spec") or {}).get("conversion") or {}
            svc = ((conv.get("webhook") or {}).get("clientConfig") or {}).get("service") or {}
            if svc.get("name"):
                out.add((svc.get("namespace", ""), svc["name"]))
    return out
