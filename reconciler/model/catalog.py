"""File-based catalog (FBC) content: packages, channels, bundles, deprecations and their properties.

These are the blobs of the FBC schemas ``olm.package``, ``olm.channel``,
``olm.bundle`` and ``olm.deprecations`` after loading; each keeps the file it
came from (and its position in that file) so findings and resolution errors
can point at it. Blobs of other schemas are kept untouched as ``Meta``.

A property keeps its raw JSON value (``Property.value``), which is what
consumers that pass properties on (CEL constraints, rendering) need; the
well-known property types also have a typed view (``Property.typed``), built
on demand so that loading a catalog never pays for views nobody reads.
"""

from __future__ import annotations

import base64
import binascii
import marshal
import re
from functools import cached_property

from reconciler.model.record import Record

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:  # semver is imported by the first version read (semver_range), not by loading a catalog
    from typing import Any
    import semver

    from reconciler.model.views import GVK, PackageRequired, RelatedImage

PROP_PACKAGE = "olm.package"
PROP_GVK = "olm.gvk"
PROP_GVK_REQUIRED = "olm.gvk.required"
PROP_PACKAGE_REQUIRED = "olm.package.required"
PROP_CONSTRAINT = "olm.constraint"
PROP_BUNDLE_OBJECT = "olm.bundle.object"
PROP_CSV_METADATA = "olm.csv.metadata"
PROP_DEPRECATED = "olm.deprecated"
PROP_LABEL = "olm.label"
PROP_LABEL_REQUIRED = "olm.label.required"
PROP_CHANNEL = "olm.channel"
PROP_BUNDLE_MEDIATYPE = "olm.bundle.mediatype"

# What each property type means here; any other type is kept as written (rendered, seen by CEL rules) and plays
# no part in resolution, as OLM ignores property types it does not know (catalog validate says so).
PROPERTY_MEANINGS = {
    PROP_PACKAGE: "the bundle's package and version",
    PROP_GVK: "an API the bundle provides",
    PROP_GVK_REQUIRED: "an API the bundle needs another bundle to provide",
    PROP_PACKAGE_REQUIRED: "a package (within a version range) the bundle needs installed",
    PROP_LABEL: "a label the bundle provides",
    PROP_LABEL_REQUIRED: "a label the bundle needs another bundle to provide",
    PROP_CONSTRAINT: "a constraint another bundle must satisfy (gvk, package, cel, all, any, not)",
    PROP_BUNDLE_OBJECT: "one of the bundle's manifests",
    PROP_CSV_METADATA: "the ClusterServiceVersion's display fields and minKubeVersion",
    PROP_DEPRECATED: "the bundle is deprecated",
    PROP_CHANNEL: "a channel the bundle belongs to (opm's older form)",
    PROP_BUNDLE_MEDIATYPE: "the bundle's format (registry+v1, k8s+v1, plain+v0)",
}

SCHEMA_PACKAGE = "olm.package"
SCHEMA_CHANNEL = "olm.channel"
SCHEMA_BUNDLE = "olm.bundle"
SCHEMA_DEPRECATIONS = "olm.deprecations"


# ---------------------------------------------------------------------------------------------------------
# Typed property values: the classes are in ``reconciler.model.views``, imported by the first typed read.

VIEWS = ("PackageValue", "GVK", "PackageRequired", "Constraint", "BundleObject", "CSVMetadata", "Label", "Deprecated",
         "RelatedImage")


def __getattr__(name: str) -> Any:
    """The typed views, importable from here as from ``reconciler.model.views``."""
    if name in VIEWS:
        from reconciler.model import views

        return getattr(views, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The CSV fields ``olm.csv.metadata`` keeps (operator-registry's set), and where in the CSV each lives.
CSV_METADATA_FIELDS = (("annotations", "metadata"), ("apiServiceDefinitions", "spec"),
                       ("crdDescriptions", "spec"), ("description", "spec"), ("displayName", "spec"),
                       ("installModes", "spec"), ("keywords", "spec"), ("labels", "metadata"), ("links", "spec"),
                       ("maintainers", "spec"), ("maturity", "spec"), ("minKubeVersion", "spec"),
                       ("nativeAPIs", "spec"), ("provider", "spec"))


_CSV_METADATA_STRUCTS = ("apiServiceDefinitions", "crdDescriptions", "provider")   # opm writes them even when empty


def csv_metadata(csv: dict[str, Any]) -> dict[str, Any]:
    """The ``olm.csv.metadata`` value: the CSV fields a catalog keeps for display and resolution."""
    meta, spec = csv.get("metadata") or {}, csv.get("spec") or {}
    meta, spec = (meta if isinstance(meta, dict) else {}), (spec if isinstance(spec, dict) else {})
    out = {}
    for name, where in CSV_METADATA_FIELDS:
        src = meta if where == "metadata" else spec
        key = {"apiServiceDefinitions": "apiservicedefinitions", "crdDescriptions": "customresourcedefinitions"
               }.get(name, name)
        if src.get(key) not in (None, "", [], {}):
            out[name] = src[key]
        elif name in _CSV_METADATA_STRUCTS:
            out[name] = {}
    return out


_CSV_KIND = re.compile(rb'"kind"\s*:\s*"ClusterServiceVersion"')


def embedded_csv(objects: list[Any]) -> dict[str, Any] | None:
    """The ClusterServiceVersion among ``olm.bundle.object`` values, or None.

    Only the object that is the CSV is decoded in full: opm writes objects as
    JSON with sorted keys, so ``kind`` is in the first bytes, and a glance at
    those finds the CSV. Objects written otherwise are then decoded whole,
    and only one that names the CSV kind is parsed.
    """
    import json  # only a bundle whose CSV fields are read from its objects needs it

    datas = [v["data"] for v in objects if isinstance(v, dict) and isinstance(v.get("data"), str)]
    first = [d for d in datas if _CSV_KIND.search(_b64(d[:_GLANCE]))]
    for data in first + [d for d in datas if d not in first]:
        raw = _b64(data)
        if data not in first and not _CSV_KIND.search(raw):
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):   # RecursionError: nested deeper than the decoder recurses
            continue   # a catalog finding (validate), not a reason to fail here
        if isinstance(obj, dict) and obj.get("kind") == "ClusterServiceVersion":
            return obj
    return None


_GLANCE = 256   # base64 characters: 192 bytes, past '{"apiVersion":"operators.coreos.com/v1alpha1","kind":...'


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text[: len(text) // 4 * 4])
    except (binascii.Error, ValueError):
        return b""


class Property(Record):
    """One property of a bundle: its type and raw JSON value (the value is not part of equality)."""

    type: str
    value: Any
    UNCOMPARED = ("value",)

    def __init__(self, type: str, value: Any) -> None:
        d = self.__dict__  # a catalog holds about ten properties per bundle: the fastest form of assignment
        d["type"], d["value"] = type, value

    @property
    def typed(self) -> Any:
        """A typed view of a well-known property's value; other types' raw values, opaque."""
        from reconciler.model.views import typed

        return typed(self.type, self.value)


# ---------------------------------------------------------------------------------------------------------
# Blobs


class Icon(Record):
    """A package's icon, as the olm.package blob carries it."""

    base64data: str
    mediatype: str

    def __init__(self, base64data: str, mediatype: str) -> None:
        self.__dict__.update(base64data=base64data, mediatype=mediatype)


class Package(Record):
    """An ``olm.package`` blob."""

    name: str
    default_channel: str | None
    source: str
    description: str
    icon: Icon | None
    blob: int  # position of the blob in its file, from 1 (0: unknown)

    def __init__(self, name: str, default_channel: str | None, source: str, description: str = "",
                 icon: Icon | None = None, blob: int = 0) -> None:
        self.__dict__.update(name=name, default_channel=default_channel, source=source, description=description,
                             icon=icon, blob=blob)


class ChannelEntry(Record):
    """One entry of a channel: a bundle name and the upgrade edges into it."""

    name: str
    replaces: str | None
    skips: tuple[str, ...]
    skip_range: str | None

    def __init__(self, name: str, replaces: str | None = None, skips: tuple[str, ...] = (),
                 skip_range: str | None = None) -> None:
        self.__dict__.update(name=name, replaces=replaces, skips=skips, skip_range=skip_range)


class Channel(Record):
    """An ``olm.channel`` blob: a package's channel and its entries."""

    package: str
    name: str
    entries: tuple[ChannelEntry, ...]
    source: str
    blob: int

    def __init__(self, package: str, name: str, entries: tuple[ChannelEntry, ...], source: str,
                 blob: int = 0) -> None:
        self.__dict__.update(package=package, name=name, entries=entries, source=source, blob=blob)

    @cached_property
    def heads(self) -> tuple[str, ...]:
        """Entries that nothing else in the channel replaces or skips."""
        replaced = {e.replaces for e in self.entries if e.replaces}
        skipped = {s for e in self.entries for s in e.skips}
        return tuple(e.name for e in self.entries if e.name not in replaced and e.name not in skipped)

    def entry(self, name: str) -> ChannelEntry | None:
        for e in self.entries:
            if e.name == name:
                return e
        return None


class Bundle(Record):
    """An ``olm.bundle`` blob; the version and CSV fields are read from its properties when first asked for."""

    package: str
    name: str
    image: str
    properties: tuple[Property, ...]
    source: str
    related_images: tuple[str, ...]
    blob: int
    related_image_names: tuple[str, ...]  # parallel to related_images ("" where unnamed)

    def __init__(self, package: str, name: str, image: str, properties: tuple[Property, ...], source: str,
                 related_images: tuple[str, ...] = (), blob: int = 0,
                 related_image_names: tuple[str, ...] = ()) -> None:
        self.__dict__.update(package=package, name=name, image=image, properties=properties, source=source,
                             related_images=related_images, blob=blob, related_image_names=related_image_names)

    @cached_property
    def version(self) -> semver.Version:
        from reconciler.model.semver_range import parse_version  # the range parsers: not needed to load a catalog

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

    def typed_properties(self, type_: str) -> list[Any]:
        return [p.typed for p in self.properties if p.type == type_]

    @cached_property
    def csv_fields(self) -> dict[str, Any]:
        """The CSV fields of ``olm.csv.metadata``; without it, those of the CSV among ``olm.bundle.object``.

        Catalogs rendered without opm's csv-metadata migration carry the CSV
        only as a bundle object; it is decoded on first read, once per bundle,
        so only the bundles resolution looks at pay for it.
        """
        for value in self.properties_of(PROP_CSV_METADATA):
            if isinstance(value, dict):
                return value
        csv = embedded_csv(self.properties_of(PROP_BUNDLE_OBJECT))
        return csv_metadata(csv) if csv is not None else {}

    @property
    def provided_gvks(self) -> list[GVK]:
        return self.typed_properties(PROP_GVK)

    @property
    def required_gvks(self) -> list[GVK]:
        return self.typed_properties(PROP_GVK_REQUIRED)

    @property
    def required_packages(self) -> list[PackageRequired]:
        return self.typed_properties(PROP_PACKAGE_REQUIRED)

    @property
    def related(self) -> tuple[RelatedImage, ...]:
        from reconciler.model.views import RelatedImage

        names = self.related_image_names or ("",) * len(self.related_images)
        return tuple(RelatedImage(n, i) for n, i in zip(names, self.related_images))


class LazyBundle(Bundle):
    """A ``Bundle`` whose properties stay marshalled until first read.

    The catalog cache stores bundles in this form: a warm load then builds
    one small object per bundle, and only the bundles a caller looks into
    pay for decoding their properties.
    """

    @classmethod
    def of(cls, b: Bundle) -> LazyBundle:
        lazy = object.__new__(cls)
        state = {k: v for k, v in b.__dict__.items() if k not in ("properties", "version", "csv_fields")}
        state["_raw"] = marshal.dumps(tuple((p.type, p.value) for p in b.properties))
        lazy.__dict__.update(state)
        return lazy

    @cached_property
    def properties(self) -> tuple[Property, ...]:  # type: ignore[override]
        return tuple(Property(t, v) for t, v in marshal.loads(self.__dict__["_raw"]))

    def __eq__(self, other: object) -> bool:
        """Equal to a plain ``Bundle`` with the same fields (the cache must not change meanings)."""
        if not isinstance(other, Bundle):
            return NotImplemented
        return self._key(self) == self._key(other)

    __hash__ = Bundle.__hash__


class DeprecationEntry(Record):
    """One entry of an ``olm.deprecations`` blob: ``schema`` is olm.package, olm.channel or olm.bundle."""

    schema: str
    name: str
    message: str

    def __init__(self, schema: str, name: str, message: str) -> None:
        self.__dict__.update(schema=schema, name=name, message=message)


class Deprecations(Record):
    """An ``olm.deprecations`` blob: a package's deprecated package, channels and bundles."""

    package: str
    entries: tuple[DeprecationEntry, ...]
    source: str
    blob: int

    def __init__(self, package: str, entries: tuple[DeprecationEntry, ...], source: str, blob: int = 0) -> None:
        self.__dict__.update(package=package, entries=entries, source=source, blob=blob)


class Meta(Record):
    """A blob of a schema this project does not interpret, passed through untouched."""

    schema: str
    package: str
    name: str
    blob: dict[str, Any]  # not part of equality
    source: str
    index: int
    UNCOMPARED = ("blob",)

    def __init__(self, schema: str, package: str, name: str, blob: dict[str, Any], source: str = "",
                 index: int = 0) -> None:
        self.__dict__.update(schema=schema, package=package, name=name, blob=blob, source=source, index=index)


class Catalog(Record):
    """One named catalog: ``catalogs/<name>/`` in the repository, or a catalog image."""

    name: str
    root: str
    packages: dict[str, Package]
    channels: dict[tuple[str, str], Channel]
    bundles: dict[tuple[str, str], Bundle]
    priority: int
    deprecations: dict[str, Deprecations]
    others: tuple[Meta, ...]
    digest: str  # content digest of the source, when known

    def __init__(self, name: str, root: str, packages: dict[str, Package], channels: dict[tuple[str, str], Channel],
                 bundles: dict[tuple[str, str], Bundle], priority: int = 0,
                 deprecations: dict[str, Deprecations] | None = None, others: tuple[Meta, ...] = (),
                 digest: str = "") -> None:
        self.__dict__.update(name=name, root=root, packages=packages, channels=channels, bundles=bundles,
                             priority=priority, deprecations={} if deprecations is None else deprecations,
                             others=others, digest=digest)

    def channels_of(self, package: str) -> list[Channel]:
        return [c for (p, _), c in sorted(self.channels.items()) if p == package]

    def bundle(self, package: str, name: str) -> Bundle | None:
        return self.bundles.get((package, name))

    def bundles_of(self, package: str) -> list[Bundle]:
        return [b for (p, _), b in sorted(self.bundles.items()) if p == package]

    def deprecation(self, package: str, schema: str = SCHEMA_PACKAGE, name: str = "") -> str | None:
        """The deprecation message for a package, channel or bundle, if the catalog deprecates it."""
        dep = self.deprecations.get(package)
        if dep is not None:
            for e in dep.entries:
                if e.schema == schema and (schema == SCHEMA_PACKAGE or e.name == name):
                    return e.message
        if schema == SCHEMA_BUNDLE:
            b = self.bundles.get((package, name))
            if b is not None and any(p.type == PROP_DEPRECATED for p in b.properties):
                return "deprecated (olm.deprecated property)"
        return None
