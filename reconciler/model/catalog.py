"""File-based catalog (FBC) content: packages, channels, bundles and their properties.

These are the blobs of the FBC schemas ``olm.package``, ``olm.channel`` and
``olm.bundle`` after loading; each keeps the file it came from so findings
and resolution errors can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import semver

from reconciler.model.semver_range import parse_version

PROP_PACKAGE = "olm.package"
PROP_GVK = "olm.gvk"
PROP_GVK_REQUIRED = "olm.gvk.required"
PROP_PACKAGE_REQUIRED = "olm.package.required"
PROP_BUNDLE_MEDIATYPE = "olm.bundle.mediatype"


@dataclass(frozen=True)
class Property:
    type: str
    value: Any = field(compare=False, hash=False)


@dataclass(frozen=True)
class Package:
    name: str
    default_channel: str | None
    source: str
    description: str = ""


@dataclass(frozen=True)
class ChannelEntry:
    name: str
    replaces: str | None = None
    skips: tuple[str, ...] = ()
    skip_range: str | None = None


@dataclass(frozen=True)
class Channel:
    package: str
    name: str
    entries: tuple[ChannelEntry, ...]
    source: str

    @cached_property
    def heads(self) -> tuple[str, ...]:
        """Entries that nothing else in the channel replaces or skips."""
        replaced = {e.replaces for e in self.entries if e.replaces}
        skipped = {s for e in self.entries for s in e.skips}
        return tuple(e.name for e in self.entries if e.name not in replaced and e.name not in skipped)


@dataclass(frozen=True)
class Bundle:
    package: str
    name: str
    image: str
    properties: tuple[Property, ...]
    source: str
    related_images: tuple[str, ...] = ()

    @cached_property
    def version(self) -> semver.Version:
        for p in self.properties:
            if p.type == PROP_PACKAGE and isinstance(p.value, dict):
                return parse_version(str(p.value.get("version", "")))
        raise ValueError(f"bundle {self.name} has no olm.package property")

    @property
    def mediatype(self) -> str:
        for p in self.properties:
            if p.type == PROP_BUNDLE_MEDIATYPE and isinstance(p.value, str):
                return p.value
        return "registry+v1"

    def properties_of(self, type_: str) -> list[Any]:
        return [p.value for p in self.properties if p.type == type_]


@dataclass(frozen=True)
class Catalog:
    """One named catalog: ``catalogs/<name>/`` in the repository."""

    name: str
    root: str
    packages: dict[str, Package]
    channels: dict[tuple[str, str], Channel]
    bundles: dict[tuple[str, str], Bundle]
    priority: int = 0

    def channels_of(self, package: str) -> list[Channel]:
        return [c for (p, _), c in sorted(self.channels.items()) if p == package]

    def bundle(self, package: str, name: str) -> Bundle | None:
        return self.bundles.get((package, name))
