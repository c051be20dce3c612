"""Loading file-based catalogs (FBC) from a directory.

A catalog directory is walked recursively; every ``.json``, ``.yaml`` and
``.yml`` file is a stream of blobs, each with a ``schema``. Blobs of the
schemas ``olm.package``, ``olm.channel`` and ``olm.bundle`` become model
objects; others are kept aside untouched. ``.indexignore`` files exclude
paths below the directory that holds them.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.errors import CatalogError, InputError
from reconciler.model.catalog import (
    PROP_PACKAGE, Bundle, Catalog, Channel, ChannelEntry, Package, Property,
)

_SUFFIXES = (".json", ".yaml", ".yml")


def iter_blobs(root: Path, display_root: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Every blob under ``root`` as (display path, index in file, blob)."""
    out = []
    ignores: dict[Path, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames.sort()
        if ".indexignore" in filenames:
            ignores[here] = [ln.strip() for ln in (here / ".indexignore").read_text().splitlines()
                             if ln.strip() and not ln.startswith("#")]
        for name in sorted(filenames):
            path = here / name
            if not name.endswith(_SUFFIXES) or _ignored(path, ignores):
                continue
            display = f"{display_root}/{path.relative_to(root).as_posix()}"
            for i, doc in enumerate(yamlio.read_all(path, display)):
                if not isinstance(doc, dict):
                    raise CatalogError(f"blob {i + 1} is not a mapping", path=display)
                out.append((display, i, doc))
    return out


def _ignored(path: Path, ignores: dict[Path, list[str]]) -> bool:
    for base, patterns in ignores.items():
        if base not in path.parents:
            continue
        rel = path.relative_to(base).as_posix()
        if any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(path.name, p) for p in patterns):
            return True
    return False


def load_catalog(name: str, root: Path, display_root: str | None = None, priority: int = 0) -> Catalog:
    """Load and cross-check one catalog; raises CatalogError naming file and blob."""
    display_root = display_root or str(root)
    packages: dict[str, Package] = {}
    channels: dict[tuple[str, str], Channel] = {}
    bundles: dict[tuple[str, str], Bundle] = {}
    for path, _index, blob in iter_blobs(root, display_root):
        schema = blob.get("schema")
        if schema == "olm.package":
            pkg = _str(blob, "name", path, "olm.package")
            if pkg in packages:
                raise CatalogError(f"package {pkg!r} is defined twice", path=path,
                                   hint=f"the first definition is in {packages[pkg].source}")
            packages[pkg] = Package(pkg, blob.get("defaultChannel"), path, blob.get("description") or "")
        elif schema == "olm.channel":
            pkg = _str(blob, "package", path, "olm.channel")
            cname = _str(blob, "name", path, f"olm.channel in package {pkg}")
            entries = tuple(_entry(e, path, f"olm.channel {pkg}/{cname}") for e in blob.get("entries") or [])
            if (pkg, cname) in channels:
                raise CatalogError(f"channel {cname!r} is defined twice in package {pkg!r}", path=path,
                                   hint=f"the first definition is in {channels[(pkg, cname)].source}")
            channels[(pkg, cname)] = Channel(pkg, cname, entries, path)
        elif schema == "olm.bundle":
            pkg = _str(blob, "package", path, "olm.bundle")
            bname = _str(blob, "name", path, f"olm.bundle in package {pkg}")
            props = tuple(Property(p["type"], p.get("value")) for p in blob.get("properties") or []
                          if isinstance(p, dict) and isinstance(p.get("type"), str))
            if (pkg, bname) in bundles:
                raise CatalogError(f"bundle {bname!r} is defined twice in package {pkg!r}", path=path)
            bundle = Bundle(pkg, bname, blob.get("image") or "", props, path,
                            tuple(r.get("image", "") for r in blob.get("relatedImages") or []
                                  if isinstance(r, dict)))
            if not any(p.type == PROP_PACKAGE for p in props):
                raise CatalogError("bundle has no olm.package property", path=path, obj=f"olm.bundle {bname}")
            if not any(p.type == PROP_PACKAGE and isinstance(p.value, dict) for p in props):
                raise CatalogError("the olm.package property's value must be a mapping with packageName and "
                                   "version", path=path, obj=f"olm.bundle {bname}")
            try:
                bundle.version
            except InputError as exc:
                raise CatalogError(f"olm.package property: {exc.message}", path=path,
                                   obj=f"olm.bundle {bname}") from None
            bundles[(pkg, bname)] = bundle
    for (pkg, cname), ch in channels.items():
        if pkg not in packages:
            raise CatalogError(f"channel {cname!r} names package {pkg!r}, which has no olm.package blob",
                               path=ch.source)
        for e in ch.entries:
            if (pkg, e.name) not in bundles:
                raise CatalogError(f"channel {cname!r} lists bundle {e.name!r}, which is not in package {pkg!r}",
                                   path=ch.source)
    for pkg in packages.values():
        if pkg.default_channel and (pkg.name, pkg.default_channel) not in channels:
            raise CatalogError(f"default channel {pkg.default_channel!r} of package {pkg.name!r} does not exist",
                               path=pkg.source)
    return Catalog(name=name, root=display_root, packages=packages, channels=channels, bundles=bundles,
                   priority=priority)


def _str(blob: dict[str, Any], key: str, path: str, what: str) -> str:
    value = blob.get(key)
    if not isinstance(value, str) or not value:
        raise CatalogError(f"{what} has no {key!r}", path=path)
    return value


def _entry(raw: Any, path: str, what: str) -> ChannelEntry:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise CatalogError(f"{what}: every entry needs a name", path=path)
    skips = raw.get("skips") or []
    return ChannelEntry(raw["name"], raw.get("replaces") or None, tuple(str(s) for s in skips),
                        raw.get("skipRange") or None)
