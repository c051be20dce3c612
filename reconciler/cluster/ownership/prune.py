"""Pruning: deleting what left the desired state, conservatively.

Only objects that are provably ours (inventory, our field manager) and
still carry the owner's label are deleted; an object annotated
``reconciler.dev/prune: disabled`` is released (our labels removed); a CRD
with custom resources is kept unless the declaration opted in.
"""

from __future__ import annotations


from reconciler.report import progress
from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.apply import (
    ANNOTATION_DIGEST, Action, Applier, CRD, Change, DesiredOperator, applied_by_us, order_key,
)
from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.errors import ClusterError
from reconciler.model.declarations import ANNOTATION_DELETE_CUSTOM_RESOURCES
from reconciler.model.kube import (
    ANNOTATION_PRUNE, FIELD_MANAGER, LABEL_MANAGED_BY, LABEL_OPERATOR, LABEL_PART_OF, MANAGED_BY, Manifest,
    ObjectRef,
)
from reconciler.report.words import agree, counted


def prune(applier: Applier, desired: list[DesiredOperator],
          recorded: dict[str, status_objects.Recorded]) -> dict[str, set[ObjectRef]]:
    """Delete, through ``applier``, recorded objects that left the desired state; return those that must stay
    recorded.

    An object another desired Operator now claims (a renamed declaration took it over) is not pruned. What the
    reconciler's own identity may not do to an Operator's object (release it) is done as the Operator's
    installer (``applier.installer``: an Operator no longer desired keeps its installer until it is pruned).
    """
    dry_run = applier.dry_run
    wanted = {op.name: {ObjectRef.of(o).key for o in op.objects} for op in desired}
    claimed = set().union(*wanted.values()) if wanted else set()
    specs = {op.name: op.spec for op in desired}
    remaining: dict[str, set[ObjectRef]] = {}
    for name, rec in sorted(recorded.items()):
        keep = wanted.get(name, set())
        stale = [r for r in rec.inventory if r.key not in keep and r.key not in claimed]
        delete_crs = opted_in(specs.get(name, rec.spec).get("deleteCustomResources"))
        order = sorted(stale, key=order_key, reverse=True)
        if delete_crs:  # CRDs first, while the operator still runs to finalize their custom resources
            order = sorted(order, key=lambda r: (r.group, r.kind) != CRD)
        for ref in order:
            action, detail = _prune_one(applier, name, ref, delete_crs, applier.installer(name))
            if action is None:
                continue
            if action == Action.SKIPPED and detail.startswith("kept:"):
                remaining.setdefault(name, set()).add(ref)
            applier.record(Change(name, ref, action, detail=detail))
            if not dry_run:
                progress.item(f"{action.value:<10} {ref}")
    return remaining


def opted_in(recorded: object) -> int:
    """How many custom resources the Operator's opt-in lets a CRD deletion take with it. An opt-in recorded
    as a bare true (before the count was asked for) states no count: none."""
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0 else 0


def _prune_one(applier: Applier, operator: str, ref: ObjectRef, delete_crs: int = 0,
               writer: Kube | None = None) -> tuple[Action | None, str]:
    kube, dry_run = applier.kube, applier.dry_run
    info = kube.resource(ref.api_version, ref.kind)
    live = kube.get(info, ref.namespace, ref.name) if info else None
    if info is None or live is None:
        return None, ""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_OPERATOR) != operator:
        return Action.SKIPPED, f"no longer labelled {LABEL_OPERATOR}={operator}; left in place"
    if not applied_by_us(live):
        return Action.SKIPPED, (f"not applied by field manager {FIELD_MANAGER!r} (replaced by someone else); "
                                f"left in place")
    if (meta.get("annotations") or {}).get(ANNOTATION_PRUNE) == "disabled":
        released = "" if dry_run else _release(kube, info, ref, live, writer)
        return Action.SKIPPED, f"annotated {ANNOTATION_PRUNE}=disabled; left in place{released}"
    detail = ""
    if (ref.group, ref.kind) == CRD:
        count = kube.custom_resource_count(live)
        if count and count > delete_crs:
            more = f", more than the {delete_crs} the opt-in on the declaration allows" if delete_crs else ""
            return Action.SKIPPED, (f"kept: {counted(count, 'custom resource')} of it still {agree(count, 'exists', 'exist')}{more}; delete them and "
                                    f"the next reconcile removes the CRD, or opt in to deleting them with the "
                                    f"annotation {ANNOTATION_DELETE_CUSTOM_RESOURCES}: \"{count}\" on the "
                                    f"declaration")
        if count:
            detail = f"with its {counted(count, 'custom resource')} ({ANNOTATION_DELETE_CUSTOM_RESOURCES})"
    applier.delete(info, ref)
    if (ref.group, ref.kind) == CRD and not dry_run:
        # The API server finalizes a CRD asynchronously; a reinstall must not meet it half-deleted.
        _wait_gone(kube, info, ref)
    return Action.DELETED, detail


RELEASE_MANAGER = f"{FIELD_MANAGER}-release"


def _release(kube: Kube, info: ResourceInfo, ref: ObjectRef, live: Manifest, writer: Kube | None) -> str:
    """Strip our ownership labels and digest from an object left behind, so nothing re-adopts it silently.

    Returns a note for the change list. Written as the Operator's installer when the reconciler's own
    identity may not (in-cluster it may only read and delete bundle objects).
    """
    labels = (live.get("metadata") or {}).get("labels") or {}
    patch_labels: dict[str, None] = {LABEL_OPERATOR: None, LABEL_PART_OF: None}
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY:
        patch_labels[LABEL_MANAGED_BY] = None
    body = {"metadata": {"labels": patch_labels, "annotations": {ANNOTATION_DIGEST: None}}}
    for client in (kube, writer):
        if client is None:
            continue
        try:
            client.request("PATCH", info.path(ref.namespace, ref.name), body=body,
                           content_type="application/merge-patch+json", query=[("fieldManager", RELEASE_MANAGER)],
                           obj=str(ref))
            return " without the reconciler's labels"
        except ApiError as exc:
            if exc.status == 404:
                return ""
            if exc.status not in (401, 403):
                raise
    return f" (its {LABEL_OPERATOR} label could not be removed: not allowed to patch it)"


def _wait_gone(kube: Kube, info: ResourceInfo, ref: ObjectRef, timeout: float = 60.0) -> None:
    if not kube.wait_gone(info, ref.namespace, ref.name, timeout):
        raise ClusterError(f"{ref} was deleted but is still terminating after {timeout:.0f}s",
                           hint="check its finalizers with kubectl get -o yaml")
