"""The few calls every takeover makes on the cluster, on a kind named by its apiVersion and kind (``None`` or
nothing where the cluster does not serve it): read, list, merge-patch metadata, delete; a gone object is done."""

from __future__ import annotations

from reconciler.kube.client import ApiError, Kube
from reconciler.model.kube import Manifest


def get(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> Manifest | None:
    info = kube.resource(api_version, kind)
    return None if info is None or not name else kube.get(info, namespace, name)


def list_of(kube: Kube, api_version: str, kind: str, namespace: str, selector: str | None = None) -> list[Manifest]:
    info = kube.resource(api_version, kind)
    if info is None:
        return []
    return kube.list(info, namespace=namespace if info.namespaced else "", label_selector=selector)


def patch(kube: Kube, obj: Manifest, body: dict) -> None:
    """A JSON merge patch of ``obj`` (a takeover's are of its metadata only: no pod template changes)."""
    info = kube.resource(obj["apiVersion"], obj["kind"])
    assert info is not None
    try:
        kube.request("PATCH", info.path(namespace_of(obj), obj["metadata"]["name"]), body=body,
                     content_type="application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            raise


def delete(kube: Kube, api_version: str, kind: str, namespace: str, name: str, orphan: bool = False) -> None:
    """Delete, its dependents collected in the background (``orphan``: left, their owner reference taken off)."""
    info = kube.resource(api_version, kind)
    if info is None:
        return
    query = [("propagationPolicy", "Orphan" if orphan else "Background")]
    try:
        kube.request("DELETE", info.path(namespace, name), query=query)
    except ApiError as exc:
        if exc.status != 404:
            raise


def namespace_of(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def where(obj: Manifest) -> str:
    """``namespace/name``, or the name of a cluster-scoped object."""
    ns = namespace_of(obj)
    return f"{ns}/{obj['metadata']['name']}" if ns else obj["metadata"]["name"]
