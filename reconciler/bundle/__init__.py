"""Bundles: fetch by reference, read once, convert to plain Kubernetes manifests.

``render`` is the single code path from a bundle reference to objects; the
reconciler and ``reconciler bundle render`` both call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.bundle import registry_v1
from reconciler.bundle.content import ANNOTATION_PACKAGE, BundleContent, read_content
from reconciler.bundle.source import FetchedBundle, fetch
from reconciler.errors import UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import Manifest

__all__ = ["RenderedBundle", "fetch", "read_content", "render", "render_content"]


@dataclass(frozen=True)
class RenderedBundle:
    """A bundle converted for one install: what it is, where it goes, and its objects."""

    reference: str
    digest: str
    mediatype: str
    package: str
    name: str
    version: str
    namespace: str
    target_namespaces: tuple[str, ...]
    objects: tuple[Manifest, ...]


def render(reference: str, repo_root: Path, install: InstallSettings, default_namespace: str) -> RenderedBundle:
    return render_content(read_content(fetch(reference, repo_root)), install, default_namespace)


def render_content(content: BundleContent, install: InstallSettings, default_namespace: str) -> RenderedBundle:
    if content.mediatype != "registry+v1":
        raise UnsupportedBundleError(f"bundle mediatype {content.mediatype!r} is not supported yet "
                                     f"(supported: registry+v1)", obj=content.name)
    csv = registry_v1.find_csv(content)
    namespace = (install.namespace or csv.annotations.get(registry_v1.SUGGESTED_NAMESPACE)
                 or default_namespace)
    plan = registry_v1.plan_install(csv, namespace, install.target_namespaces)
    objects = registry_v1.convert(content, plan)
    fetched: FetchedBundle = content.fetched
    return RenderedBundle(
        reference=fetched.reference, digest=fetched.digest, mediatype=content.mediatype,
        package=content.annotations.get(ANNOTATION_PACKAGE, ""), name=csv.name, version=csv.version,
        namespace=namespace, target_namespaces=plan.target_namespaces, objects=tuple(objects))
