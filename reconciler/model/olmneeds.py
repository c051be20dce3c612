"""What an installed OLM v0 CSV needs and provides, read as catalog-operator's resolver reads it.

On every resolution of a namespace, catalog-operator turns each installed
CSV into an entry of its solver (``source_csvs.go`` in OLM v0): the
properties catalog-operator projected onto the CSV when it installed it (the
``operatorframework.io/properties`` annotation, which holds the bundle's
``olm.package``, ``olm.gvk``, and its dependencies as ``olm.package.required``,
``olm.gvk.required`` and ``olm.constraint``) or, for a CSV without that
annotation, the CRDs and APIServices its spec lists as owned and required. A
requirement no installed CSV meets any more is installed again from the
catalogs. So an install can be taken from OLM only when no CSV OLM keeps
needs it by any of these: by package as well as by API.

An ``olm.constraint`` is read for its ``package`` and ``gvk`` parts, in
``all`` and ``any`` compounds too (an ``any`` naming the package counts: it
may be the branch the solver picks); ``not`` and CEL expressions are not a
requirement of a package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.model.properties import (PROP_CONSTRAINT, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE,
                                         PROP_PACKAGE_REQUIRED)

PROPERTIES_ANNOTATION = "operatorframework.io/properties"

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Api:
    """An API as OLM names it in one place or another: a CSV's spec names CRDs ``plural.group`` (with version and
    kind where given), a property by group, version and kind. An empty part matches any."""

    group: str
    version: str = ""
    kind: str = ""
    plural: str = ""

    def meets(self, required: Api) -> bool:
        return self.group == required.group and all(
            not a or not b or a == b for a, b in ((self.version, required.version), (self.kind, required.kind),
                                                   (self.plural, required.plural)))

    def __str__(self) -> str:
        if self.plural:
            return f"{self.plural}.{self.group}"
        return f"{self.group}/{self.version} {self.kind}".replace("/ ", " ")


@dataclass(frozen=True)
class Needs:
    packages: frozenset[str] = frozenset()
    apis: frozenset[Api] = frozenset()


def _properties(csv: Manifest) -> list[dict] | None:
    """The properties catalog-operator projected onto the CSV, or None without the annotation (or unreadable)."""
    raw = ((csv.get("metadata") or {}).get("annotations") or {}).get(PROPERTIES_ANNOTATION)
    if not raw:
        return None
    try:
        found = json.loads(raw).get("properties") or []
    except (ValueError, AttributeError):
        return None
    return [p for p in found if isinstance(p, dict)] if isinstance(found, list) else None


def _value(prop: dict) -> dict:
    value = prop.get("value")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _spec_apis(csv: Manifest, which: str) -> set[Api]:
    spec = csv.get("spec") or {}
    out = set()
    for crd in (spec.get("customresourcedefinitions") or {}).get(which) or []:
        plural, _, group = str(crd.get("name") or "").partition(".")
        if group:
            out.add(Api(group, str(crd.get("version") or ""), str(crd.get("kind") or ""), plural))
    for api in (spec.get("apiservicedefinitions") or {}).get(which) or []:
        if api.get("group"):
            out.add(Api(str(api["group"]), str(api.get("version") or ""), str(api.get("kind") or ""),
                        str(api.get("name") or "")))
    return out


def _gvk(value: dict) -> Api | None:
    return Api(str(value["group"]), str(value.get("version") or ""), str(value.get("kind") or "")) \
        if value.get("group") else None


def _constraint(value: dict, packages: set[str], apis: set[Api]) -> None:
    if isinstance(value.get("package"), dict) and value["package"].get("packageName"):
        packages.add(str(value["package"]["packageName"]))
    if isinstance(value.get("gvk"), dict) and (api := _gvk(value["gvk"])) is not None:
        apis.add(api)
    for compound in ("all", "any"):
        for child in ((value.get(compound) or {}).get("constraints") or []) if isinstance(value.get(compound),
                                                                                         dict) else []:
            if isinstance(child, dict):
                _constraint(child, packages, apis)


def needs(csv: Manifest) -> Needs:
    """What catalog-operator requires to stay installed for ``csv``: packages and APIs."""
    props = _properties(csv)
    if props is None:
        return Needs(apis=frozenset(_spec_apis(csv, "required")))
    packages: set[str] = set()
    apis: set[Api] = set()
    for prop in props:
        kind, value = prop.get("type"), _value(prop)
        if kind == PROP_PACKAGE_REQUIRED and value.get("packageName"):
            packages.add(str(value["packageName"]))
        elif kind == PROP_GVK_REQUIRED and (api := _gvk(value)) is not None:
            apis.add(api)
        elif kind == PROP_CONSTRAINT:
            _constraint(value, packages, apis)
    return Needs(frozenset(packages), frozenset(apis))


def provides(csv: Manifest) -> set[Api]:
    """The APIs ``csv`` provides: its projected ``olm.gvk`` properties and the CRDs and APIServices it owns."""
    out = _spec_apis(csv, "owned")
    for prop in _properties(csv) or []:
        if prop.get("type") == PROP_GVK and (api := _gvk(_value(prop))) is not None:
            out.add(api)
    return out


def package_of(csv: Manifest) -> str:
    """The package catalog-operator recorded for ``csv`` (its projected ``olm.package``), or ""."""
    for prop in _properties(csv) or []:
        if prop.get("type") == PROP_PACKAGE and _value(prop).get("packageName"):
            return str(_value(prop)["packageName"])
    return ""


def needed(staying: Manifest, taken: Manifest, package: str) -> list[str]:
    """What ``staying`` (a CSV OLM keeps) needs of ``taken`` (a CSV of ``package`` to be taken from OLM), said
    as a person reads it ("package cert-manager", "certificates.cert-manager.io"); empty when nothing."""
    want = needs(staying)
    out = [f"package {p}" for p in sorted(want.packages) if p in {package, package_of(taken)} - {""}]
    offered = provides(taken)
    out += sorted({str(api) for api in want.apis if any(have.meets(api) for have in offered)})
    return out
