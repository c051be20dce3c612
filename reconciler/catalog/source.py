"""Where a catalog comes from: a directory of the repository, or a catalog image in an OCI registry.

A catalog image carries its file-based catalog under the directory its
``operators.operatorframework.io.index.configs.v1`` label names (``/configs``
when unlabelled). The image is resolved to its manifest digest and unpacked
once per digest by ``reconciler.oci``; the catalog parsed from it is cached by
content like any other, so an unchanged image costs a digest lookup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.errors import CatalogError
from reconciler.model.catalog import Catalog

CONFIGS_LABEL = "operators.operatorframework.io.index.configs.v1"


def load_image_catalog(name: str, reference: str, priority: int = 0, required: Any = None) -> Catalog:
    """The catalog in an image; with ``required`` (``oci.signature.Requirements``, or a tuple of its keys), only
    once its digest is verified to be signed as required, before any of its content is fetched."""
    from reconciler import oci
    from reconciler.catalog.reading import load_catalog

    if required:
        from reconciler.oci.signature import verify_image

        digest = verify_image(reference, required).digest
        image = oci.pull(str(oci.parse_reference(reference).with_digest(digest)))
    else:
        image = oci.pull(reference)
    configs = image.labels.get(CONFIGS_LABEL, "/configs")
    root = image.root.resolve()
    directory = (root / configs.lstrip("/")).resolve()
    if directory != root and root not in directory.parents:
        raise CatalogError(f"label {CONFIGS_LABEL}={configs!r} points outside the image", obj=reference)
    if not directory.is_dir():
        raise CatalogError(f"the image has no {configs} directory for its file-based catalog",
                           obj=f"{reference}@{image.digest}",
                           hint=f"a catalog image keeps its FBC under the directory named by {CONFIGS_LABEL}")
    return load_catalog(name, Path(directory), f"{reference}@{image.digest}", priority=priority)
