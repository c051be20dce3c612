"""From a bundle reference to objects: ``render`` is the single code path from a bundle reference to objects; the
reconciler and ``reconciler bundle render`` both call it.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.bundle import k8s_v1, openshift, plain_v0, registry_v1, shapes
from reconciler.bundle.certs import CertificateProvider
from reconciler.bundle.content import ANNOTATION_PACKAGE, BundleContent, read_content
from reconciler.bundle.rendered import RenderedBundle
from reconciler.bundle.source import FetchedBundle, fetch
from reconciler.model.resources import resource_lookup
from reconciler.errors import BundleError, UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import Manifest

__all__ = ["RenderedBundle", "fetch", "read_content", "render", "render_content"]


def render(reference: str, repo_root: Path, install: InstallSettings, default_namespace: str,
           certificates: CertificateProvider | None = None, digest: str | None = None) -> RenderedBundle:
    """The bundle at ``reference`` converted for ``install``; ``digest`` (a locked pin) is what an image tag is
    pulled by. A rendering of the same content, settings and certificates is reused (``rendered.py``)."""
    from reconciler.bundle import rendered

    fetched = fetch(reference, repo_root, digest)
    return rendered.cached((fetched.reference, fetched.digest, repr(install), default_namespace), certificates,
                           lambda certs: render_content(read_content(fetched), install, default_namespace, certs))


def render_content(content: BundleContent, install: InstallSettings, default_namespace: str,
                   certificates: CertificateProvider | None = None) -> RenderedBundle:
    if content.mediatype == plain_v0.MEDIATYPE:
        if install.config:
            raise UnsupportedBundleError(
                "spec.config overrides the Deployments OLM would generate from a registry+v1 bundle's "
                "ClusterServiceVersion; a plain+v0 bundle is applied as its manifests are written, and spec.config "
                "has no meaning for it", obj=content.name,
                hint="remove spec.config from the Operator and write the change into the bundle's Deployment "
                     "manifests")
        return _render_plain(content, install, default_namespace)
    mediatype = content.mediatype
    inferred = None
    if mediatype == k8s_v1.MEDIATYPE:
        content, inferred = k8s_v1.synthesize(content)
    if content.mediatype != "registry+v1":
        raise UnsupportedBundleError(f"bundle mediatype {content.mediatype!r} is not supported "
                                     f"(supported: registry+v1, k8s+v1, plain+v0)", obj=content.name)
    csv = registry_v1.find_csv(content)
    mapped = dict(install.namespace_map)
    namespace = (install.namespace or csv.annotations.get(registry_v1.SUGGESTED_NAMESPACE)
                 or default_namespace)
    namespace = mapped.get(namespace, namespace)
    targets = install.target_namespaces
    plan = registry_v1.plan_install(csv, namespace, None if targets is None else
                                    tuple(mapped.get(t, t) for t in targets))
    objects = map_namespaces(registry_v1.convert(content, plan, certificates, install.config), mapped)
    placed_in = mapped.get(plan.namespace, plan.namespace)
    written = tuple(((group, kind, placed_in, name), ns) for (group, kind, name), ns in registry_v1.relocated(content)
                    if ns != placed_in)
    fetched: FetchedBundle = content.fetched
    for obj in objects:   # names the CSV gives generated objects (Deployments, ServiceAccounts, RBAC)
        name = str((obj.get("metadata") or {}).get("name") or "")
        if problem := shapes.path_segment_problem(name):
            raise BundleError(f"it makes {obj.get('kind')} {name!r}, and an object name {problem}", path=csv.file,
                              obj=f"{fetched.reference}: ClusterServiceVersion {csv.name}", hint=shapes.NAME_HINT)
    warnings = [*content.warnings, *registry_v1.notes(content)]
    if not objects:
        # OLM installs such a CSV and reports it Succeeded; nothing is wrong, but nothing runs either
        warnings.append(f"{csv.file}: ClusterServiceVersion {csv.name} has no deployments and the bundle "
                        f"{fetched.reference} yields no other object: it installs nothing")
    metadata = registry_v1.status_metadata(csv, objects)
    metadata.update(openshift.recorded(csv.annotations, content.properties))   # OpenShift's upgrade gate, when declared
    if inferred is not None:   # what its RBAC needs from other Operators; the synthesized CSV lists none
        listed = {(a["group"], a["plural"]) for a in metadata["apis"]["requires"]}
        metadata["apis"]["requires"] += [a for a in k8s_v1.status_requires(inferred)
                                         if (a["group"], a["plural"]) not in listed]
    return RenderedBundle(
        reference=fetched.reference, digest=fetched.digest, mediatype=mediatype,
        package=content.annotations.get(ANNOTATION_PACKAGE, ""), name=csv.name, version=csv.version,
        namespace=namespace, target_namespaces=plan.target_namespaces, objects=tuple(objects),
        warnings=tuple(warnings), metadata=metadata,
        operand_conditions=registry_v1.operand_conditions(csv), written_namespaces=written)


def _render_plain(content: BundleContent, install: InstallSettings, default_namespace: str) -> RenderedBundle:
    mapped = dict(install.namespace_map)
    namespace = install.namespace or default_namespace
    objects = map_namespaces(in_namespace(plain_v0.convert(content), namespace), mapped)
    fetched: FetchedBundle = content.fetched
    name = content.annotations.get(ANNOTATION_PACKAGE, "") or fetched.reference.rstrip("/").rsplit("/", 1)[-1]
    return RenderedBundle(
        reference=fetched.reference, digest=fetched.digest, mediatype=content.mediatype,
        package=content.annotations.get(ANNOTATION_PACKAGE, ""), name=name, version="",
        namespace=mapped.get(namespace, namespace), target_namespaces=(), objects=tuple(objects),
        warnings=(*content.warnings, *plain_v0.notes(content)))


def in_namespace(objects: list[Manifest], namespace: str) -> list[Manifest]:
    """``objects`` with the install namespace set on each namespaced one that names none.

    A bundle's objects are installed into its Operator's namespace (as Helm
    places a chart's objects in the release's namespace), never into whatever
    namespace a client happens to default to. Kinds are told namespaced by the
    built-in table and the bundle's own CRDs; an object of a kind neither knows
    is left as written, and the cluster's discovery judges it when planning.
    """
    lookup = resource_lookup(objects)
    out = []
    for obj in objects:
        meta = obj.get("metadata")
        found = lookup(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if isinstance(meta, dict) and not meta.get("namespace") and found and found[1]:
            obj = {**obj, "metadata": {**meta, "namespace": namespace}}
        out.append(obj)
    return out


def map_namespaces(objects: list[Manifest], mapping: dict[str, str]) -> list[Manifest]:
    """Every namespace field of ``objects`` (``metadata.namespace``, a binding's subjects, a webhook's service,
    at any depth) whose value is a key of ``mapping`` replaced by its value: an Install's namespace mapping."""
    if not mapping:
        return objects

    def walk(value: object) -> object:
        if isinstance(value, dict):
            return {k: (mapping.get(v, v) if k == "namespace" and isinstance(v, str) else walk(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value
    return [walk(o) for o in objects]   # type: ignore[misc]
