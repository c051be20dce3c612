"""plain+v0 bundles: a flat ``manifests/`` of static objects, applied as written.

The format (seed 003, "Plain bundle spec") has no metadata beyond its
mediatype, so the only checks are its layout rules, each with its own
message: ``manifests/`` must exist, be flat, hold only manifest files, every
file must parse, and there must be at least one object. ``content.py``
enforces the ones shared with registry+v1 while reading; the rest are here.
Duplicate keyed-list entries are resolved as for registry+v1 (``keyed``).
Objects are applied as written, as ``kubectl apply`` applies them (seed 003:
a file that would not apply with it is an error): a field its kind's API type
lacks is refused before anything is applied, every one named (``typed``),
rather than dropped as the OLM-installed formats' readers drop it.
"""

from __future__ import annotations

import copy

from reconciler.bundle import keyed, typed
from reconciler.bundle.content import BundleContent
from reconciler.errors import BundleError, UnsupportedBundleError
from reconciler.model.kube import Manifest

MEDIATYPE = "plain+v0"
KUBECTL = "objects are applied as written, and kubectl apply and server-side apply refuse unknown fields"


def convert(content: BundleContent) -> list[Manifest]:
    if content.ignored_files:
        raise BundleError(f"plain+v0 manifests/ may only hold YAML or JSON manifests, but it holds "
                          f"{', '.join(content.ignored_files)}", obj=content.name,
                          hint="move other files out of manifests/")
    if not content.manifests:
        raise BundleError("a plain+v0 bundle needs at least one object in manifests/", obj=content.name)
    objects = [copy.deepcopy(keyed.normalise(m.obj, m.file, content.name)[0]) for m in content.manifests]
    unknown = [problem for m, obj in zip(content.manifests, objects) for problem in typed.problems(
        obj, f"{m.file}: {obj.get('kind')} {(obj.get('metadata') or {}).get('name')}")]
    if unknown:
        raise UnsupportedBundleError(
            f"{len(unknown)} field{'s' if len(unknown) > 1 else ''} that the API types lack ({KUBECTL}):\n  "
            + "\n  ".join(unknown), obj=content.name,
            hint="remove each field, or write it where its type has it (a volume's secretName under its secret:)")
    return objects


def notes(content: BundleContent) -> tuple[str, ...]:
    """What conversion repairs in the bundle's objects (duplicate keyed-list entries), naming file and field."""
    return tuple(n for m in content.manifests for n in keyed.normalise(m.obj, m.file, content.name)[1])
