"""The reconciler's own in-cluster objects: ``Operator`` in the ``reconciler.dev`` group.

One cluster-scoped ``Operator`` object per declaration reports status where
users look (``kubectl get operators.reconciler.dev``) and holds the inventory:
the sorted list of objects the reconciler created for it. The inventory is
the proof of ownership: an object is adopted, applied over or pruned only
when its Operator's inventory lists it and our field manager applied it;
labels alone prove nothing. Each status object belongs to one reconciler
instance (``reconciler.dev/instance``, see ``ownership/applyset.py``); an instance
reads only its own.

The group is our own so it cannot collide with OLM's ``operators.coreos.com``
CRDs on a cluster that runs both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.model.kube import (
    ANNOTATION_CLUSTER, ANNOTATION_REPOSITORY, API_GROUP, API_VERSION, FIELD_MANAGER, LABEL_INSTANCE, LABEL_PART_OF,
    Manifest, ObjectRef, instance_of, ownership_labels,
)

if TYPE_CHECKING:
    from reconciler.cluster.health.wait import OperatorHealth
    from reconciler.cluster.status.events import EventRecorder

KIND = "Operator"
PLURAL = "operators"

STATUS_CRD: Manifest = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{API_GROUP}", "labels": {"app.kubernetes.io/managed-by": "reconciler"}},
    "spec": {
        "group": API_GROUP,
        "scope": "Cluster",
        "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": "operator"},
        "versions": [{
            "name": "v1alpha1",
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Package", "type": "string", "jsonPath": ".status.bundle.package"},
                {"name": "Version", "type": "string", "jsonPath": ".status.bundle.version"},
                {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                {"name": "Status", "type": "string",
                 "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                {"name": "Message", "type": "string", "priority": 1,
                 "jsonPath": ".status.conditions[?(@.type==\"Ready\")].message"},
                {"name": "Revision", "type": "string", "jsonPath": ".status.revision", "priority": 1},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "description": "Status of one Operator declared in the GitOps repository.",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }},
        }],
    },
}


@dataclass(frozen=True)
class Recorded:
    """What the cluster remembers of one Operator: its inventory and last applied bundle."""

    name: str
    inventory: tuple[ObjectRef, ...]
    spec: dict[str, Any]
    status: dict[str, Any]
    generation: int = 0
    instance: str = "default"   # the reconciler instance it belongs to
    labelled: bool = True       # False for a status object written before instances (no instance label yet)
    part_of: str = ""           # its applyset.kubernetes.io/part-of label
    repository: str = ""        # the repository that declared it ("" when written before repositories were recorded)
    cluster: str = ""           # the fleet's cluster it was declared for ("" outside a fleet)


def resource(kube: Kube) -> ResourceInfo | None:
    return kube.resource(API_VERSION, KIND)


def read_all(kube: Kube, instance: str | None = None) -> dict[str, Recorded]:
    """The status objects of one reconciler instance (every instance's when ``instance`` is None).

    Objects without an instance label (written before instances existed) are the ``default`` instance's.
    """
    info = resource(kube)
    if info is None:
        return {}
    records = (record_of(item) for item in kube.list(info))
    return {r.name: r for r in records if instance is None or r.instance == instance}


def record_of(item: Mapping[str, Any]) -> Recorded:
    """One status object as read (a list's item, or a watch event's object)."""
    status = item.get("status") or {}
    meta = item["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    inv = tuple(sorted(ObjectRef.from_dict(d) for d in status.get("inventory") or []))
    return Recorded(meta["name"], inv, item.get("spec") or {}, status, int(meta.get("generation") or 0),
                    instance_of(labels), LABEL_INSTANCE in labels, labels.get(LABEL_PART_OF, ""),
                    annotations.get(ANNOTATION_REPOSITORY, ""), annotations.get(ANNOTATION_CLUSTER, ""))


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_: str, ok: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastTransitionTime": now()}


def health_conditions(health: OperatorHealth, applied: str) -> list[dict[str, str]]:
    """Ready, Progressing and Degraded from the health of an Operator's components.

    Ready is True only when every component is healthy. While components are
    still rolling out, Progressing is True; when one has failed, or they were
    waited for and did not become healthy in time, Degraded is True and the
    message names the component, its reason and how long it was waited for.
    """
    from reconciler.cluster.health.judge import Status

    if health.healthy:
        return [condition("Ready", True, "Healthy", f"{applied}; {health.message}"),
                condition("Progressing", False, "Complete", "every component is rolled out"),
                condition("Degraded", False, "Healthy", "no component reports a problem")]
    failed = health.status == Status.FAILED
    if failed or health.timed_out:
        reason = "ComponentFailed" if failed else "HealthTimeout"
        message = f"{health.message} (not healthy after {health.elapsed:.0f}s)"
        return [condition("Ready", False, reason, message),
                condition("Progressing", not failed, "Failed" if failed else "StillProgressing", message),
                condition("Degraded", True, reason, message)]
    return [condition("Ready", False, "Progressing", health.message),
            condition("Progressing", True, "RollingOut", health.message),
            condition("Degraded", False, "Progressing", "no component has failed")]


@dataclass(frozen=True)
class Stamp:
    """What every status object one instance writes carries: its instance, the ApplySet it is part of, the
    repository that declared it and the fleet's cluster it was declared for (``ownership/applyset.py``)."""

    instance: str = "default"
    part_of: str = ""
    repository: str = ""
    cluster: str = ""


class StatusWriter:
    """Writes the status objects of one instance (``stamp``) with ``kube``, their kind being ``info``; each
    condition's transition is announced by ``events``."""

    def __init__(self, kube: Kube, info: ResourceInfo, stamp: Stamp, events: EventRecorder) -> None:
        self.kube, self.info, self.stamp, self.events = kube, info, stamp, events

    def write(self, name: str, spec: dict[str, Any], status: dict[str, Any], previous: Recorded | None = None) -> None:
        """Apply the object's spec, then its status subresource; no write when both are unchanged.

        Conditions keep their transition time while their status stays the same,
        carry the generation they describe (``observedGeneration``), and each
        transition is announced by an Event.
        """
        old_conditions = {c.get("type"): c for c in (previous.status if previous else {}).get("conditions", [])}
        for cond in status.get("conditions", []):
            old = old_conditions.get(cond["type"])
            if old is not None and old.get("status") == cond["status"]:
                cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
        generation = previous.generation if previous is not None and previous.spec == spec else 0
        if generation:
            _observe(status, generation)
        if previous is not None and previous.spec == spec and _own(previous.status) == status \
                and not self._relabels(previous):
            return
        if not generation or self._relabels(previous):  # new object, spec or labels; else the spec is not sent again
            self._apply_spec(name, spec, status, previous)
        try:
            written = _apply_status(self.kube, self.info, name, status, FIELD_MANAGER)
        except ApiError as exc:
            if exc.status != 404 or not generation:
                raise
            self._apply_spec(name, spec, status, previous)  # deleted since it was read: created again
            written = _apply_status(self.kube, self.info, name, status, FIELD_MANAGER)
        for cond in status.get("conditions", []):
            old = old_conditions.get(cond["type"])
            if old is None:
                changed = cond["type"] == "Ready" or (cond["type"] in ("Degraded", "ComponentsDiverge")
                                                      and cond["status"] == "True")
            else:
                changed = old.get("status") != cond["status"] or (
                    cond["type"] in ("Ready", "Degraded") and old.get("reason") != cond.get("reason"))
            if changed:
                self.events.announce(self.kube, name, cond, (written or {}).get("metadata"))

    def delete(self, name: str) -> None:
        self.kube.delete(self.info, "", name)

    def _relabels(self, previous: Recorded | None) -> bool:
        """Whether the labels and annotations this instance stamps differ from what ``previous`` carries."""
        stamp = self.stamp
        return previous is None or previous.instance != stamp.instance or not previous.labelled \
            or previous.part_of != stamp.part_of or bool(stamp.repository and previous.repository != stamp.repository) \
            or previous.cluster != stamp.cluster

    def _apply_spec(self, name: str, spec: dict[str, Any], status: dict[str, Any], previous: Recorded | None) -> None:
        stamp = self.stamp
        meta: dict[str, Any] = {"name": name,
                                "labels": {**ownership_labels(name, stamp.part_of), LABEL_INSTANCE: stamp.instance}}
        annotations = {ANNOTATION_REPOSITORY: stamp.repository or (previous.repository if previous else "")}
        if stamp.cluster:
            annotations[ANNOTATION_CLUSTER] = stamp.cluster
        if any(annotations.values()):
            meta["annotations"] = {k: v for k, v in annotations.items() if v}
        body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}
        applied = self.kube.apply(self.info, body, field_manager=FIELD_MANAGER, dry_run=False)
        _observe(status, int((applied.get("metadata") or {}).get("generation") or 0))


REJECTION_MANAGER = f"{FIELD_MANAGER}-source"
REJECTED = "rejected"   # status.rejected: the newest revision the loop refused, while an older one stays applied


ADOPTION_MANAGER = f"{FIELD_MANAGER}-adopt"
ADOPTED = "adopted"   # status.adopted: the live objects the Operator took over at its first apply, and when


def _own(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` without the fields written under field managers of their own (rejections, adoption)."""
    return {k: v for k, v in status.items() if k not in (REJECTED, ADOPTED)}


def record_rejection(kube: Kube, info: ResourceInfo, name: str, rejection: dict[str, str] | None) -> None:
    """Write (or, given None, remove) ``status.rejected`` of Operator ``name``.

    The loop refuses a revision (unsigned, untrusted, invalid) and keeps the
    last good one applied; this says so where ``kubectl get`` and ``reconciler
    status`` look. It is applied under a field manager of its own, so the
    status writes of each apply, which never set it, leave it alone; applying
    an empty status under that manager removes it.
    """
    _apply_status(kube, info, name, {REJECTED: rejection} if rejection else {}, REJECTION_MANAGER)


def record_adoption(kube: Kube, info: ResourceInfo, name: str, adoption: dict[str, Any]) -> None:
    """Write ``status.adopted`` of Operator ``name``: the objects its first successful apply took over from
    whoever applied them before (the consent on its declaration, ``cluster/ownership/takeover/existing.py``), at which revision.

    Under a field manager of its own, as rejections are, so the status writes
    of every later apply leave it: it is what says the consent was acted on,
    and has no further effect.
    """
    _apply_status(kube, info, name, {ADOPTED: adoption}, ADOPTION_MANAGER)


def _apply_status(kube: Kube, info: ResourceInfo, name: str, status: dict[str, Any], manager: str
                  ) -> dict[str, Any] | None:
    """Server-side apply of ``status`` under ``manager``; the object as the API server answered."""
    return kube.request("PATCH", info.path("", name) + "/status", query=[("fieldManager", manager), ("force", "true")],
                        body={"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "status": status},
                        content_type="application/apply-patch+yaml", obj=f"{KIND} {name}")


def _observe(status: dict[str, Any], generation: int) -> None:
    if not generation:
        return
    status["observedGeneration"] = generation
    for cond in status.get("conditions", []):
        cond["observedGeneration"] = generation


