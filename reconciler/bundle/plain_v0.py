"""plain+v0 bundles: a flat ``manifests/`` of static objects, applied as written.

The format (seed 003, "Plain bundle spec") has no metadata beyond its
mediatype, so the only checks are its layout rules, each with its own
message: ``manifests/`` must exist, be flat, hold only manifest files, every
file must parse, and there must be at least one object. ``content.py``
enforces the ones shared with registry+v1 while reading; the rest are here.
Duplicate keyed-list entries are resolved as for registry+v1 (``keyed``).
"""

from __future__ import annotations

import copy

from reconciler.bundle import keyed
from reconciler.bundle.content import BundleContent
from reconciler.errors import BundleError
from reconciler.model.kube import Manifest

MEDIATYPE = "plain+v0"


def convert(content: BundleContent) -> list[Manifest]:
    if content.ignored_files:
        raise BundleError(f"plain+v0 manifests/ may only hold YAML or JSON manifests, but it holds "
                          f"{', '.join(content.ignored_files)}", obj=content.name,
                          hint="move other files out of manifests/")
    if not content.manifests:
        raise BundleError("a plain+v0 bundle needs at least one object in manifests/", obj=content.name)
    return [copy.deepcopy(keyed.normalise(m.obj, m.file, content.name)[0]) for m in content.manifests]


def notes(content: BundleContent) -> tuple[str, ...]:
    """What conversion repairs in the bundle's objects (duplicate keyed-list entries), naming file and field."""
    return tuple(n for m in content.manifests for n in keyed.normalise(m.obj, m.file, content.name)[1])
