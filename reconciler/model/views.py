"""Typed views of catalog values: the well-known property types' values and a bundle's related images.

Loading and validating a catalog reads the raw values only; these views are
built on demand (``Property.typed``, ``Bundle.provided_gvks``,
``Bundle.related``), and this module is imported by the first of them, so a
command that never asks for one does not pay for defining the classes (each
frozen dataclass generates its methods from source when it is defined).
They remain importable from ``reconciler.model.catalog``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.model.properties import (
    PROP_BUNDLE_OBJECT, PROP_CONSTRAINT, PROP_CSV_METADATA, PROP_DEPRECATED, PROP_GVK, PROP_GVK_REQUIRED, PROP_LABEL,
    PROP_LABEL_REQUIRED, PROP_PACKAGE, PROP_PACKAGE_REQUIRED,
)


@dataclass(frozen=True)
class PackageValue:
    """``olm.package``: the package a bundle belongs to and its version."""

    package_name: str
    version: str


@dataclass(frozen=True)
class GVK:
    """``olm.gvk`` (provided) and ``olm.gvk.required``: an API group, version and kind."""

    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        return f"{self.group}/{self.version}/{self.kind}" if self.group else f"{self.version}/{self.kind}"


@dataclass(frozen=True)
class PackageRequired:
    """``olm.package.required``: another package, within a (blang) version range."""

    package_name: str
    version_range: str


@dataclass(frozen=True)
class Constraint:
    """``olm.constraint``: a failure message and one constraint (``gvk``, ``package``, ``cel``, ``all``, ...)."""

    failure_message: str
    kind: str
    spec: Any


@dataclass(frozen=True)
class BundleObject:
    """``olm.bundle.object``: one bundle manifest, base64 in ``data`` (or a reference)."""

    data: str
    ref: str = ""


@dataclass(frozen=True)
class CSVMetadata:
    """``olm.csv.metadata``: the CSV fields a UI shows, kept as the mapping it was written as."""

    fields: dict[str, Any]

    @property
    def annotations(self) -> dict[str, Any]:
        return self.fields.get("annotations") or {}


@dataclass(frozen=True)
class Label:
    """``olm.label`` (provided) and ``olm.label.required``: a free-form label."""

    label: str


@dataclass(frozen=True)
class Deprecated:
    """``olm.deprecated`` (the older, property form of deprecation)."""

    value: Any


def _s(value: Any, key: str) -> str:
    v = value.get(key) if isinstance(value, dict) else None
    return v if isinstance(v, str) else ""


def typed(type_: str, value: Any) -> Any:
    """The typed view of a property's value (``Property.typed``); other types' raw values, opaque."""
    if type_ == PROP_PACKAGE:
        return PackageValue(_s(value, "packageName"), _s(value, "version"))
    if type_ in (PROP_GVK, PROP_GVK_REQUIRED):
        return GVK(_s(value, "group"), _s(value, "version"), _s(value, "kind"))
    if type_ == PROP_PACKAGE_REQUIRED:
        return PackageRequired(_s(value, "packageName"), _s(value, "versionRange"))
    if type_ == PROP_CONSTRAINT and isinstance(value, dict):
        kinds = [k for k in value if k != "failureMessage"]
        kind = kinds[0] if len(kinds) == 1 else ""
        return Constraint(_s(value, "failureMessage"), kind, value.get(kind) if kind else None)
    if type_ == PROP_BUNDLE_OBJECT:
        return BundleObject(_s(value, "data"), _s(value, "ref"))
    if type_ == PROP_CSV_METADATA and isinstance(value, dict):
        return CSVMetadata(value)
    if type_ in (PROP_LABEL, PROP_LABEL_REQUIRED):
        return Label(_s(value, "label"))
    if type_ == PROP_DEPRECATED:
        return Deprecated(value)
    return value


@dataclass(frozen=True)
class RelatedImage:
    """One of a bundle's related images: its name ("" where unnamed) and its reference."""

    name: str
    image: str
