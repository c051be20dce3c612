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
from collections.abc import Mapping
from functools import cached_property

from reconciler.model.record import Record

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:  # semver is imported by the first version read (semver_range), not by loading a catalog
    from typing import Any, Iterable
    import semver

    from reconciler.model.views import GVK, RelatedImage

from reconciler.model.properties import (  # noqa: F401 - the catalog model's vocabulary, importable from here
    PROP_BUNDLE_MEDIATYPE, PROP_BUNDLE_OBJECT, PROP_CHANNEL, PROP_CONSTRAINT, PROP_CSV_METADATA, PROP_DEPRECATED,
    PROP_GVK, PROP_GVK_REQUIRED, PROP_LABEL, PROP_LABEL_REQUIRED, PROP_PACKAGE, PROP_PACKAGE_REQUIRED,
)

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
    def related(self) -> tuple[RelatedImage, ...]:
        from reconciler.model.views import RelatedImage

        names = self.related_image_names or ("",) * len(self.related_images)
        return tuple(RelatedImage(n, i) for n, i in zip(names, self.related_images))


class Contents(Record):
    """What a catalog offers, by package: the index resolution starts from instead of reading every bundle.

    ``members`` lists each package's channels and bundles; ``apis`` and
    ``labels`` the packages whose bundles provide an API (``olm.gvk``) or a
    label (``olm.label``); ``names`` the packages that have a bundle of a
    name. Built once per loaded catalog and kept with it in the catalog cache,
    so a warm load knows where to look without decoding any bundle.
    """

    members: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]   # package -> (channel names, bundle names)
    apis: dict[tuple[str, str, str], tuple[str, ...]]
    labels: dict[str, tuple[str, ...]]
    names: dict[str, tuple[str, ...]]

    def __init__(self, members: dict[str, tuple[tuple[str, ...], tuple[str, ...]]],
                 apis: dict[tuple[str, str, str], tuple[str, ...]], labels: dict[str, tuple[str, ...]],
                 names: dict[str, tuple[str, ...]]) -> None:
        self.__dict__.update(members=members, apis=apis, labels=labels, names=names)

    @classmethod
    def of(cls, bundles: Iterable[Bundle], channels: Iterable[tuple[str, str]]) -> Contents:
        """The contents of these bundles and (package, channel) keys: one pass over every bundle's properties."""
        members: dict[str, tuple[list[str], list[str]]] = {}
        apis: dict[tuple[str, str, str], dict[str, None]] = {}
        labels: dict[str, dict[str, None]] = {}
        names: dict[str, dict[str, None]] = {}
        for b in bundles:
            members.setdefault(b.package, ([], []))[1].append(b.name)
            names.setdefault(b.name, {})[b.package] = None
            for p in b.properties:
                if p.type == PROP_GVK and isinstance(p.value, dict):
                    v = p.value
                    apis.setdefault((v.get("group") or "", v.get("version") or "", v.get("kind") or ""),
                                    {})[b.package] = None
                elif p.type == PROP_LABEL:
                    label = p.value.get("label") if isinstance(p.value, dict) else p.value
                    if isinstance(label, str):
                        labels.setdefault(label, {})[b.package] = None
        for pkg, ch in channels:
            members.setdefault(pkg, ([], []))[0].append(ch)
        return cls({p: (tuple(sorted(c)), tuple(sorted(b))) for p, (c, b) in sorted(members.items())},
                   {k: tuple(sorted(v)) for k, v in apis.items()}, {k: tuple(sorted(v)) for k, v in labels.items()},
                   {k: tuple(sorted(v)) for k, v in names.items()})


class Shelf:
    """A catalog's channels and bundles kept marshalled per package, decoded one package at a time.

    The catalog cache stores a catalog this way: a warm load unpickles one
    compressed bytes value per package, and only the packages a caller looks into (a
    resolution's closure, a graph, a bundle by name) are decoded, into plain
    ``Channel`` and ``Bundle`` records. ``bundles`` and ``channels`` are the
    two read-only mappings a ``Catalog`` holds, keyed as its dicts are.
    """

    def __init__(self, chunks: dict[str, bytes], contents: Contents) -> None:
        self.chunks = chunks
        self.contents = contents
        self.decoded: dict[str, tuple[dict[str, Channel], dict[str, Bundle]]] = {}
        self.bundles = ShelfView(self, 1)
        self.channels = ShelfView(self, 0)

    @classmethod
    def of(cls, channels: dict[tuple[str, str], Channel], bundles: dict[tuple[str, str], Bundle],
           contents: Contents) -> Shelf:
        by_package: dict[str, tuple[list[Any], list[Any]]] = {p: ([], []) for p in contents.members}
        for (pkg, _), ch in sorted(channels.items()):
            by_package[pkg][0].append((ch.name, tuple((e.name, e.replaces, e.skips, e.skip_range)
                                                      for e in ch.entries), ch.source, ch.blob))
        for (pkg, _), b in sorted(bundles.items()):
            by_package[pkg][1].append((b.name, b.image, tuple((p.type, p.value) for p in b.properties), b.source,
                                       b.related_images, b.blob, b.related_image_names))
        import zlib   # only a catalog being cached is shelved

        # level 1: a tenth of the bytes to read and keep (catalog text repeats itself), at 40 us a package to decode
        return cls({p: zlib.compress(marshal.dumps((tuple(c), tuple(b))), 1) for p, (c, b) in by_package.items()},
                   contents)

    def __reduce__(self) -> tuple[Any, ...]:
        return Shelf, (self.chunks, self.contents)   # what was decoded is not kept

    def package(self, name: str) -> tuple[dict[str, Channel], dict[str, Bundle]]:
        """(channels, bundles) of one package by name, decoded on first use; empty for a package not here."""
        found = self.decoded.get(name)
        if found is None:
            chunk = self.chunks.get(name)
            if chunk is None:
                return {}, {}
            import zlib

            chans, bundles = marshal.loads(zlib.decompress(chunk))
            found = self.decoded[name] = (
                {n: Channel(name, n, tuple(ChannelEntry(*e) for e in entries), src, blob)
                 for n, entries, src, blob in chans},
                {n: Bundle(name, n, image, tuple(Property(t, v) for t, v in props), src, related, blob, names)
                 for n, image, props, src, related, blob, names in bundles})
        return found


class ShelfView(Mapping):  # type: ignore[type-arg]
    """``Catalog.channels`` or ``Catalog.bundles`` of a shelved catalog: (package, name) -> record."""

    def __init__(self, shelf: Shelf, which: int) -> None:
        self.shelf, self.which = shelf, which

    def __getitem__(self, key: tuple[str, str]) -> Any:
        return self.shelf.package(key[0])[self.which][key[1]]

    def __iter__(self) -> Any:
        for pkg, names in self.shelf.contents.members.items():
            for name in names[self.which]:
                yield pkg, name

    def __len__(self) -> int:
        return sum(len(names[self.which]) for names in self.shelf.contents.members.values())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and key[1] in self.shelf.package(key[0])[self.which]

    def of(self, package: str) -> list[Any]:
        """The records of one package, by name."""
        return [v for _, v in sorted(self.shelf.package(package)[self.which].items())]

    def __reduce__(self) -> tuple[Any, ...]:
        return _view, (self.shelf, self.which)


def _view(shelf: Shelf, which: int) -> ShelfView:
    return shelf.bundles if which else shelf.channels


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

    @cached_property
    def contents(self) -> Contents:
        """The catalog's index by package, API, label and bundle name (kept in the cache with a shelved catalog)."""
        if isinstance(self.bundles, ShelfView):
            return self.bundles.shelf.contents
        return Contents.of(self.bundles.values(), self.channels)

    def shelved(self) -> Catalog:
        """This catalog with its channels and bundles kept per package (``Shelf``), as the catalog cache keeps it."""
        shelf = Shelf.of(self.channels, self.bundles, self.contents)
        return self.replace(channels=shelf.channels, bundles=shelf.bundles)

    def channels_of(self, package: str) -> list[Channel]:
        if isinstance(self.channels, ShelfView):
            return self.channels.of(package)
        names = self.contents.members.get(package, ((), ()))[0]
        return [self.channels[(package, n)] for n in names if (package, n) in self.channels]

    def bundle(self, package: str, name: str) -> Bundle | None:
        return self.bundles.get((package, name))

    def bundles_of(self, package: str) -> list[Bundle]:
        if isinstance(self.bundles, ShelfView):
            return self.bundles.of(package)
        names = self.contents.members.get(package, ((), ()))[1]
        return [self.bundles[(package, n)] for n in names if (package, n) in self.bundles]

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
