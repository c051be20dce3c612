"""The user's declarations: ``Operator`` in the shapes of the design documents.

Two apiVersions are accepted as written in git:

* ``operators.coreos.com/v1`` (``spec.catalog``, ``spec.version``,
  ``spec.inputClass``, ``spec.constraints``, ``spec.bundle``), and
* ``operators.coreos.com/v2alpha1`` (``spec.updates.catalogSource``),

and both become one ``OperatorDecl``. Parsing is strict: an unknown field is
an error naming the file and the field, since a typo that silently drops a
version pin is worse than a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DeclarationError, InputError
from reconciler.model.kube import is_dns1123_label
from reconciler.model.semver_range import VersionRange

OPERATOR_API_VERSIONS = ("operators.coreos.com/v1", "operators.coreos.com/v2alpha1")
DEFAULT_INPUT_CLASS = "subscription"


@dataclass(frozen=True)
class Origin:
    """Where a declaration came from: a repository-relative path and document index."""

    path: str
    document: int = 0

    def __str__(self) -> str:
        return self.path if self.document == 0 else f"{self.path} (document {self.document + 1})"


@dataclass(frozen=True)
class CatalogSelector:
    name: str
    package: str
    channel: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Constraint:
    """An extra constraint as written (``type`` / ``value``); interpreted by the resolver."""

    type: str
    value: Any = field(compare=False, hash=False)


@dataclass(frozen=True)
class DirectBundle:
    """``spec.bundle``: install a bundle without a catalog."""

    name: str
    refs: tuple[str, ...]
    bundle_class: str = "olm.bundle"


@dataclass(frozen=True)
class InstallSettings:
    """Where the operator runs and which namespaces it watches.

    ``target_namespaces`` None means "let the bundle decide" (AllNamespaces
    when supported, else OwnNamespace).
    """

    namespace: str | None = None
    target_namespaces: tuple[str, ...] | None = None


@dataclass(frozen=True)
class OperatorDecl:
    name: str
    origin: Origin
    input_class: str = DEFAULT_INPUT_CLASS
    catalog: CatalogSelector | None = None
    version: VersionRange | None = None
    entrypoint: str | None = None
    constraints: tuple[Constraint, ...] = ()
    bundle: DirectBundle | None = None
    install: InstallSettings = InstallSettings()

    @property
    def package(self) -> str | None:
        return self.catalog.package if self.catalog else None


class _Reader:
    """Walks a mapping, recording which keys were read, so leftovers are reported."""

    def __init__(self, data: Any, where: str, obj: str, origin: Origin) -> None:
        if not isinstance(data, dict):
            raise DeclarationError(f"{where} must be a mapping, not {type(data).__name__}",
                                   path=str(origin), obj=obj)
        self.data, self.where, self.obj, self.origin = data, where, obj, origin
        self.seen: set[str] = set()

    def fail(self, message: str, hint: str | None = None) -> DeclarationError:
        return DeclarationError(message, path=str(self.origin), obj=self.obj, hint=hint)

    def get(self, key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
        self.seen.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.fail(f"{self.where}.{key} is required")
            return None
        value = self.data[key]
        if not isinstance(value, kind):
            want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"{self.where}.{key} must be a {want}, not {type(value).__name__}")
        return value

    def child(self, key: str, required: bool = False) -> _Reader | None:
        value = self.get(key, dict, required)
        return None if value is None else _Reader(value, f"{self.where}.{key}", self.obj, self.origin)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            raise self.fail(f"unknown field {self.where}.{extra[0]}"
                            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""),
                            hint=f"known fields of {self.where}: {', '.join(sorted(self.seen))}")


def parse_operator(doc: dict[str, Any], origin: Origin) -> OperatorDecl:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise DeclarationError("Operator has no metadata.name", path=str(origin))
    obj = f"Operator {name}"
    if not is_dns1123_label(name):
        raise DeclarationError("metadata.name must be a DNS-1123 label (lowercase letters, digits and '-', "
                               "at most 63 characters)", path=str(origin), obj=obj)
    spec = _Reader(doc.get("spec") or {}, "spec", obj, origin)
    if doc["apiVersion"] == "operators.coreos.com/v2alpha1":
        decl = _parse_v2alpha1(spec, name, origin)
    else:
        decl = _parse_v1(spec, name, origin)
    spec.done()
    if decl.catalog is None and decl.bundle is None:
        raise spec.fail("spec must name a catalog package (spec.catalog) or a bundle (spec.bundle)")
    if decl.catalog is not None and decl.bundle is not None:
        raise spec.fail("spec.catalog and spec.bundle are mutually exclusive",
                        hint="install from a catalog, or a bundle directly, not both")
    return decl


def _parse_v1(spec: _Reader, name: str, origin: Origin) -> OperatorDecl:
    input_class = spec.get("inputClass", str) or DEFAULT_INPUT_CLASS
    catalog = None
    if (c := spec.child("catalog")) is not None:
        catalog = CatalogSelector(
            name=c.get("name", str, required=True),
            package=c.get("package", str, required=True),
            channel=c.get("channel", str),
            namespace=c.get("namespace", str),
        )
        c.done()
    version = _version(spec, spec.get("version", (str, int, float)))
    constraints = _constraints(spec)
    bundle = None
    if (b := spec.child("bundle")) is not None:
        bname = b.get("name", str, required=True)
        bspec = b.child("spec", required=True)
        assert bspec is not None
        refs = bspec.get("refs", list, required=True)
        if not refs or not all(isinstance(r, str) and r for r in refs):
            raise spec.fail("spec.bundle.spec.refs must be a non-empty list of references")
        bundle = DirectBundle(bname, tuple(refs), bspec.get("class", str) or "olm.bundle")
        bspec.done()
        b.done()
    return OperatorDecl(name=name, origin=origin, input_class=input_class, catalog=catalog,
                        version=version, constraints=constraints, bundle=bundle,
                        install=_install(spec))


def _parse_v2alpha1(spec: _Reader, name: str, origin: Origin) -> OperatorDecl:
    updates = spec.child("updates", required=True)
    assert updates is not None
    kind = updates.get("type", str) or "CatalogSource"
    if kind != "CatalogSource":
        raise updates.fail(f"spec.updates.type {kind!r} is not supported", hint="use CatalogSource")
    cs = updates.child("catalogSource", required=True)
    assert cs is not None
    ref = cs.child("ref", required=True)
    assert ref is not None
    catalog = CatalogSelector(name=ref.get("name", str, required=True),
                              namespace=ref.get("namespace", str),
                              package=cs.get("package", str, required=True),
                              channel=cs.get("channel", str))
    ref.done()
    entrypoint = cs.get("entrypoint", str)
    approval = cs.get("approval", str) or "Automatic"
    if approval not in ("Automatic", "Manual"):
        raise cs.fail(f"spec.updates.catalogSource.approval must be Automatic or Manual, not {approval!r}")
    cs.done()
    updates.done()
    return OperatorDecl(name=name, origin=origin, catalog=catalog, entrypoint=entrypoint,
                        version=_version(spec, spec.get("version", (str, int, float))),
                        install=_install(spec))


def _version(spec: _Reader, raw: Any) -> VersionRange | None:
    if raw is None:
        return None
    if isinstance(raw, float):
        raise spec.fail(f"spec.version {raw!r} was read as a number, which loses digits (1.10 becomes 1.1)",
                        hint='quote it: version: "1.10"')
    try:
        return VersionRange.parse(str(raw))
    except InputError as exc:  # the range parser says what forms it accepts
        raise spec.fail(f"spec.version: {exc.message}", hint=exc.hint) from None


def _constraints(spec: _Reader) -> tuple[Constraint, ...]:
    raw = spec.get("constraints", list) or []
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise spec.fail(f"spec.constraints[{i}] must be a mapping with a string 'type'")
        out.append(Constraint(item["type"], item.get("value")))
    return tuple(out)


def _install(spec: _Reader) -> InstallSettings:
    inst = spec.child("install")
    if inst is None:
        return InstallSettings()
    ns = inst.get("namespace", str)
    if ns is not None and not is_dns1123_label(ns):
        raise inst.fail(f"spec.install.namespace {ns!r} is not a valid namespace name")
    targets = inst.get("targetNamespaces", list)
    if targets is not None:
        for t in targets:
            if not isinstance(t, str) or (t and not is_dns1123_label(t)):
                raise inst.fail(f"spec.install.targetNamespaces entry {t!r} is not a valid namespace name",
                                hint='use [""] for all namespaces, or a list of namespace names')
        targets = tuple(targets)
    inst.done()
    return InstallSettings(namespace=ns, target_namespaces=targets)


__all__ = [
    "OPERATOR_API_VERSIONS", "CatalogSelector", "Constraint", "DirectBundle", "InstallSettings",
    "OperatorDecl", "Origin", "parse_operator"
]
