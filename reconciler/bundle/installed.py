"""The conversion stage's output: each resolved bundle fetched, converted and pinned (``Installed``).

``convert`` is the one path from a resolution and its planned lock to rendered bundles, for the pipeline, a
review and ``update`` alike; a locked digest must match what is fetched.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from reconciler.bundle import source as bundle_source
from reconciler.bundle.formats import RenderedBundle, render
from reconciler.report import progress
from reconciler.kube.client import Kube
from reconciler.errors import BundleError, LockfileError, ResolutionError
from reconciler.model.lock import LockEntry, Lockfile
from reconciler.repo import RepoSnapshot
from reconciler.resolve import Resolution, Selection


@dataclass(frozen=True)
class Installed:
    """One Operator, Input or dependency after resolution and conversion."""

    selection: Selection
    bundle: RenderedBundle
    lock: LockEntry


def convert(snapshot: RepoSnapshot, resolution: Resolution, lock: Lockfile,
            kube: Kube | None = None, certificates=None) -> tuple[Installed, ...]:
    """Fetch and convert every bundle to apply; a locked digest must match the fetched content.

    With ``kube``, self-signed webhook certificates already in the cluster are
    reused until they near expiry, so a reconcile does not rotate them each time.
    ``certificates`` replaces the provider (a review reuses the other side's).
    """
    from reconciler.oci.mirrors import using

    with using(snapshot.settings.mirrors):   # bundle images come through the repository's mirrors, as catalogs do
        return _convert(snapshot, resolution, lock, kube, certificates)


def _convert(snapshot: RepoSnapshot, resolution: Resolution, lock: Lockfile, kube: Kube | None,
             certificates) -> tuple[Installed, ...]:
    from reconciler.bundle.certs import SelfSignedProvider, cluster_lookup

    if certificates is None:
        certificates = SelfSignedProvider(lookup=cluster_lookup(kube) if kube is not None else None)
    planned = {e.operator: e for e in lock.entries}
    installs = []
    for sel in resolution.selections:
        if not sel.apply:
            continue
        progress.stage(f"converting {sel.bundle_name} for {sel.owner}")
        entry = planned[sel.owner]
        digest = verify_bundle_image(snapshot, sel, entry.digest) or entry.digest
        try:
            bundle = render(sel.image, snapshot.root, sel.install, snapshot.settings.default_install_namespace,
                            certificates, digest=digest or None)
        except BundleError as exc:
            raise bundle_source.located(exc, sel) from None
        if sel.package and bundle.package and bundle.package != sel.package:
            raise ResolutionError(f"bundle {sel.bundle_name} is listed in package {sel.package!r} but its "
                                  f"annotations say package {bundle.package!r}", path=sel.origin,
                                  obj=f"{sel.kind} {sel.owner}")
        if entry.digest and entry.digest != bundle.digest:
            raise LockfileError(f"the content of {sel.image} changed: locked {entry.digest}, fetched "
                                f"{bundle.digest}", path=snapshot.lock_file, obj=f"{sel.kind} {sel.owner}",
                                hint="bundles are immutable; publish a new version, or re-resolve if the "
                                     "change is intended")
        lock = dataclasses.replace(entry, package=entry.package or bundle.package,
                                   version=entry.version or bundle.version, digest=bundle.digest,
                                   mediatype=bundle.mediatype)
        installs.append(Installed(sel, bundle, lock))
    return tuple(installs)



def verify_bundle_image(snapshot: RepoSnapshot, sel: Selection, locked: str) -> str | None:
    """The verified digest of a bundle image whose catalog requires signed bundles (``verifyBundles``), checked
    before the image is pulled; None when its catalog requires nothing."""
    return verify_catalog_bundle(snapshot, sel.catalog, sel.bundle_name, sel.image, locked,
                                 dict(path=sel.origin, obj=f"{sel.kind} {sel.owner}"))


def verify_catalog_bundle(snapshot: RepoSnapshot, catalog_name: str, bundle_name: str, image: str, locked: str = "",
                          where: dict | None = None) -> str | None:
    """``verify_bundle_image`` for a bundle a catalog lists (also what ``adopt`` checks before it renders one). A
    bundle that is not an image cannot carry a cosign signature, so a catalog that requires them refuses it."""
    catalog = snapshot.settings.catalogs.get(catalog_name)
    if catalog is None or not catalog.verify_bundles:
        return None
    from reconciler import oci
    from reconciler.oci.signature import SignatureError, requirements, verify_image

    required = requirements(snapshot.root, catalog.verify_bundles, f"catalog {catalog_name}")
    where = where or {"obj": f"bundle {bundle_name}"}
    bare = image.removeprefix("docker://")
    if "://" in bare:
        raise BundleError(f"catalog {catalog_name} requires signed bundle images (verifyBundles), and bundle "
                          f"{bundle_name} comes from {image}, which is not an image", **where)
    try:
        return verify_image(bare, required, locked or oci.resolve(bare)).digest
    except SignatureError as exc:
        raise BundleError(f"bundle {bundle_name}: {exc.message}", hint=exc.hint, **where) from None
