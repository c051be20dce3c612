"""Where a catalog comes from: a directory of the repository, or a catalog image in an OCI registry.

A catalog image carries its file-based catalog under the directory its
``operators.operatorframework.io.index.configs.v1`` label names (``/configs``
when unlabelled). The image is resolved to its manifest digest and unpacked
once per digest by ``reconciler.oci``; the catalog parsed from it is cached by
content like any other, so an unchanged image costs a digest lookup.

With a package filter (``packages:`` of the catalog's settings) only those
packages' directories are written while the layers stream (``oci.tree``): the
rest of a large index is read past, never unpacked or parsed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.errors import CatalogError
from reconciler.model.catalog import Catalog
from reconciler.report.words import counted

CONFIGS_LABEL = "operators.operatorframework.io.index.configs.v1"
BUNDLE_LABEL = "operators.operatorframework.io.bundle.mediatype.v1"


def configs_directory(labels: dict[str, str]) -> str:
    return labels.get(CONFIGS_LABEL, "/configs")


def load_image_catalog(name: str, reference: str, priority: int = 0, required: Any = None,
                       packages: tuple[str, ...] = ()) -> Catalog:
    """The catalog in an image; with ``required`` (``oci.signature.Requirements``, or a tuple of its keys), only
    once its digest is verified to be signed as required, before any of its content is fetched; with
    ``packages``, only those."""
    from reconciler import oci
    from reconciler.catalog.reading import load_catalog

    if required:
        from reconciler.oci.signature import verify_image

        digest = verify_image(reference, required).digest
        reference_read = str(oci.parse_reference(reference).with_digest(digest))
    else:
        reference_read = reference
    if packages:
        tree = image_tree(reference_read, frozenset(packages))
        catalog = load_catalog(name, tree.root, f"{reference}@{tree.image.digest}", priority=priority)
        missing = sorted(set(packages) - set(catalog.packages))
        if missing:
            import difflib

            have = sorted(set(tree.names) | set(catalog.packages))
            near = {p: difflib.get_close_matches(p, have, n=5, cutoff=0.5) for p in missing}
            raise CatalogError(f"catalogs.{name}.packages: the image has no package {', '.join(missing)}",
                               obj=f"{reference}@{tree.image.digest}",
                               hint="; ".join(f"{p}: did you mean {', '.join(n)}?" if n else
                                              f"{p}: not near any of its {counted(len(have), 'package')}"
                                              for p, n in near.items()))
        return only(catalog, packages)
    image = oci.pull(reference_read)
    configs = configs_directory(image.labels)
    root = image.root.resolve()
    directory = (root / configs.lstrip("/")).resolve()
    if directory != root and root not in directory.parents:
        raise CatalogError(f"label {CONFIGS_LABEL}={configs!r} points outside the image", obj=reference)
    if not directory.is_dir():
        raise not_a_catalog(reference, image.digest, image.labels)
    return load_catalog(name, Path(directory), f"{reference}@{image.digest}", priority=priority)


def image_tree(reference: str, wanted: frozenset[str] | None):  # noqa: ANN201 - oci.tree.Tree
    """The configs directory of a catalog image, only ``wanted`` packages' directories unpacked (all when None);
    an image that has no such directory is an error saying it is not a catalog."""
    from reconciler.oci.tree import pull_tree

    tree = pull_tree(reference, configs_directory, wanted)
    if not tree.names:
        raise not_a_catalog(reference, tree.image.digest, tree.image.labels)
    return tree


def not_a_catalog(reference: str, digest: str, labels: dict[str, str]) -> CatalogError:
    configs = configs_directory(labels)
    what = (" it is a bundle image (label " + BUNDLE_LABEL + ")") if BUNDLE_LABEL in labels else ""
    return CatalogError(f"the image is not a catalog: it has no {configs} directory holding a file-based "
                        f"catalog{';' + what if what else ''}", obj=f"{reference}@{digest}",
                        hint=f"a catalog image keeps its FBC under the directory named by {CONFIGS_LABEL}"
                             + ("; a bundle is named in a catalog's olm.bundle image, not as a catalog" if what else ""))


def only(catalog: Catalog, packages: tuple[str, ...]) -> Catalog:
    """``catalog`` without the packages a filter leaves out (files at the top of an index hold several)."""
    keep = set(packages)
    if set(catalog.packages) <= keep:
        return catalog
    return Catalog(catalog.name, catalog.root, {n: p for n, p in catalog.packages.items() if n in keep},
                   {k: c for k, c in catalog.channels.items() if k[0] in keep},
                   {k: b for k, b in catalog.bundles.items() if k[0] in keep}, catalog.priority,
                   {k: d for k, d in catalog.deprecations.items() if k in keep}, catalog.others)
