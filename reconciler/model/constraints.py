"""Constraints as predicates over catalog bundles.

One parser serves every place a constraint is written: ``spec.constraints``
of an Operator or Input, the ``olm.constraint`` properties of bundles
(compound ``all`` / ``any`` / ``not``, ``gvk``, ``package`` and ``cel``), and
the sugar ``spec.catalog`` / ``spec.version``. A predicate answers one
question, "does this bundle match?", and describes itself in words for
explanations. CEL rules run on a real CEL implementation (cel-python) with
the bundle's ``properties`` and a ``semver_compare(a, b)`` function, as OLM's
CEL constraints do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from reconciler.errors import InputError
from reconciler.model.catalog import (
    PROP_CONSTRAINT, PROP_GVK, PROP_GVK_REQUIRED, PROP_LABEL, PROP_LABEL_REQUIRED, PROP_PACKAGE_REQUIRED,
    Bundle,
)
from reconciler.model.semver_range import VersionRange, parse_version


class Predicate(Protocol):
    def matches(self, bundle: Bundle, context: MatchContext) -> bool: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class MatchContext:
    """Where a bundle sits, for predicates that are about its catalog or channel."""

    catalog: str
    channels: frozenset[str]


@dataclass(frozen=True)
class PackageIs:
    package: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return bundle.package == self.package

    def describe(self) -> str:
        return f"package {self.package}"


@dataclass(frozen=True)
class CatalogIs:
    catalog: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return context.catalog == self.catalog

    def describe(self) -> str:
        return f"catalog {self.catalog}"


@dataclass(frozen=True)
class ChannelIs:
    channel: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return self.channel in context.channels

    def describe(self) -> str:
        return f"channel {self.channel}"


@dataclass(frozen=True)
class VersionIn:
    versions: VersionRange

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return self.versions.contains(bundle.version)

    def describe(self) -> str:
        return f"version {self.versions}"


@dataclass(frozen=True)
class NameIs:
    name: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return bundle.name == self.name

    def describe(self) -> str:
        return f"bundle {self.name}"


@dataclass(frozen=True)
class ProvidesGVK:
    group: str
    version: str
    kind: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return any(isinstance(v, dict) and v.get("group") == self.group and v.get("version") == self.version
                   and v.get("kind") == self.kind for v in bundle.properties_of(PROP_GVK))

    def describe(self) -> str:
        return f"API {gvk_text(self.group, self.version, self.kind)}"


@dataclass(frozen=True)
class HasLabel:
    label: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        for v in bundle.properties_of(PROP_LABEL):
            value = v.get("label") if isinstance(v, dict) else v
            if value == self.label:
                return True
        return False

    def describe(self) -> str:
        return f"label {self.label}"


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Predicate, ...]

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return all(p.matches(bundle, context) for p in self.parts)

    def describe(self) -> str:
        return " and ".join(p.describe() for p in self.parts) or "anything"


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Predicate, ...]

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return any(p.matches(bundle, context) for p in self.parts)

    def describe(self) -> str:
        return "(" + " or ".join(p.describe() for p in self.parts) + ")"


@dataclass(frozen=True)
class NoneOf:
    parts: tuple[Predicate, ...]

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return not any(p.matches(bundle, context) for p in self.parts)

    def describe(self) -> str:
        return "not (" + " or ".join(p.describe() for p in self.parts) + ")"


@dataclass(frozen=True)
class Cel:
    rule: str
    program: Callable[[Any], Any] = field(compare=False, hash=False, repr=False)

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        import celpy

        from reconciler.model import celbudget

        props = [{"type": p.type, "value": p.value} for p in bundle.properties]
        try:
            result = celbudget.evaluate(self.program, {"properties": celpy.json_to_cel(props)})
        except celbudget.BudgetExceeded:
            raise InputError(f"CEL rule {self.rule!r} exceeded the evaluation budget ({celbudget.BUDGET} steps) "
                             f"on bundle {bundle.name}",
                             hint="nest fewer comprehensions (all, exists, map, filter) or iterate over "
                                  "smaller lists") from None
        except Exception:  # a rule that errors on a bundle does not match it (as in OLM)
            return False
        if not isinstance(result, celpy.celtypes.BoolType):
            # OLM refuses such a rule when it compiles it ("must have type Bool"); truthiness would guess.
            raise InputError(f"CEL rule {self.rule!r} returned {type(result).__name__.removesuffix('Type').lower()}, "
                             f"not a boolean (on bundle {bundle.name})",
                             hint="a constraint's rule must evaluate to true or false, e.g. compare the value: "
                                  "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'x')")
        return bool(result)

    def describe(self) -> str:
        return f"CEL rule {self.rule!r}"


@dataclass(frozen=True)
class Labelled:
    """A predicate with the author's ``failureMessage`` carried into explanations."""

    inner: Predicate
    message: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        return self.inner.matches(bundle, context)

    def describe(self) -> str:
        return f"{self.inner.describe()} ({self.message})"


@dataclass(frozen=True)
class Located:
    """A declaration's constraint, so that an error while matching it names the file and the Operator."""

    inner: Predicate
    path: str
    obj: str

    def matches(self, bundle: Bundle, context: MatchContext) -> bool:
        try:
            return self.inner.matches(bundle, context)
        except InputError as exc:
            if exc.path is not None:
                raise
            raise type(exc)(exc.message, path=self.path, obj=self.obj, hint=exc.hint) from None

    def describe(self) -> str:
        return self.inner.describe()


def gvk_text(group: str, version: str, kind: str) -> str:
    return f"{kind}.{group}/{version}" if group else f"{kind}/{version}"


def _semver_compare(a: Any, b: Any) -> Any:
    """``semver_compare(a, b)``: -1, 0 or 1; a CEL error value when either is not a semantic version.

    The error is a value, not an exception, as in OLM's CEL environment: a rule
    such as ``properties.exists(p, p.type == 'olm.package' && semver_compare(...))``
    also meets ``olm.gvk`` properties, whose ``version`` (``v1``) is not semver,
    and CEL's ``&&`` and ``||`` absorb an error when the other side decides.
    """
    import celpy
    from celpy.evaluation import CELEvalError

    try:
        return celpy.celtypes.IntType(parse_version(str(a)).compare(parse_version(str(b))))
    except InputError as exc:
        return CELEvalError(f"semver_compare: {exc.message}")


def compile_cel(rule: str) -> Cel:
    from reconciler.model import celbudget

    env = celbudget.environment()
    try:
        ast = env.compile(rule)
    except Exception as exc:  # cel-python raises its own parse error types
        raise InputError(f"CEL rule {rule!r} does not compile: {str(exc).strip().splitlines()[0]}",
                         hint="see https://github.com/google/cel-spec for the syntax; 'properties' is the "
                              "bundle's property list") from None
    program = env.program(ast, functions={"semver_compare": _semver_compare})
    return Cel(rule, program.evaluate)


def _gvk(value: Any, where: str) -> ProvidesGVK:
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value.get(k)
                                              for k in ("version", "kind")):
        raise InputError(f"{where} needs a mapping with group, version and kind")
    return ProvidesGVK(value.get("group") or "", value["version"], value["kind"])


def _package_range(value: Any, where: str, key: str) -> Predicate:
    if not isinstance(value, dict) or not isinstance(value.get("packageName"), str):
        raise InputError(f"{where} needs packageName and {key}")
    parts: list[Predicate] = [PackageIs(value["packageName"])]
    if value.get(key) not in (None, ""):
        parts.append(VersionIn(VersionRange.parse(str(value[key]))))
    return AllOf(tuple(parts))


def parse_olm_constraint(value: Any, where: str = "olm.constraint") -> Predicate:
    """The value of an ``olm.constraint`` property or constraint: one of gvk, package, cel, all, any, not."""
    if not isinstance(value, dict):
        raise InputError(f"{where} must be a mapping")
    message = value.get("failureMessage")
    kinds = [k for k in ("gvk", "package", "cel", "all", "any", "not") if k in value]
    if len(kinds) != 1:
        raise InputError(f"{where} must have exactly one of gvk, package, cel, all, any, not; found "
                         f"{', '.join(kinds) or 'none'}")
    kind, body = kinds[0], value[kinds[0]]
    pred: Predicate
    if kind == "gvk":
        pred = _gvk(body, f"{where}.gvk")
    elif kind == "package":
        pred = _package_range(body, f"{where}.package", "versionRange")
    elif kind == "cel":
        if not isinstance(body, dict) or not isinstance(body.get("rule"), str):
            raise InputError(f"{where}.cel needs a string 'rule'")
        pred = compile_cel(body["rule"])
    else:
        items = body.get("constraints") if isinstance(body, dict) else None
        if not isinstance(items, list) or not items:
            raise InputError(f"{where}.{kind} needs a non-empty 'constraints' list")
        parts = tuple(parse_olm_constraint(c, f"{where}.{kind}.constraints[{i}]") for i, c in enumerate(items))
        pred = {"all": AllOf, "any": AnyOf, "not": NoneOf}[kind](parts)
    return Labelled(pred, message) if isinstance(message, str) and message else pred


def parse_constraint(type_: str, value: Any, where: str) -> Predicate:
    """A ``{type, value}`` constraint of an Operator or Input, as in the design documents."""
    if type_ == "olm.catalog":
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            raise InputError(f"{where}: olm.catalog needs at least a name")
        parts: list[Predicate] = [CatalogIs(value["name"])]
        if value.get("package"):
            parts.append(PackageIs(str(value["package"])))
        if value.get("channel"):
            parts.append(ChannelIs(str(value["channel"])))
        return AllOf(tuple(parts))
    if type_ == "olm.packageVersion":
        if not isinstance(value, dict) or not isinstance(value.get("package"), str):
            raise InputError(f"{where}: olm.packageVersion needs package and version")
        parts = [PackageIs(value["package"])]
        if value.get("version") not in (None, ""):
            parts.append(VersionIn(VersionRange.parse(str(value["version"]))))
        return AllOf(tuple(parts))
    if type_ == "olm.name":
        if not isinstance(value, str) or not value:
            raise InputError(f"{where}: olm.name needs a bundle name")
        return NameIs(value)
    if type_ == PROP_GVK:
        return _gvk(value, f"{where}: olm.gvk")
    if type_ == PROP_LABEL:
        return _label(value, f"{where}: olm.label")
    if type_ == PROP_PACKAGE_REQUIRED:
        return _package_range(value, f"{where}: olm.package.required", "versionRange")
    if type_ == PROP_CONSTRAINT:
        return parse_olm_constraint(value, f"{where}: olm.constraint")
    if type_ == "olm.rego":
        raise InputError(f"{where}: olm.rego constraints are not supported",
                         hint="write the rule in CEL: {type: olm.constraint, value: {cel: {rule: ...}}}")
    raise InputError(f"{where}: unknown constraint type {type_!r}",
                     hint="supported: olm.catalog, olm.packageVersion, olm.name, olm.gvk, olm.label, "
                          "olm.package.required, olm.constraint")


def _label(value: Any, where: str) -> HasLabel:
    label = value.get("label") if isinstance(value, dict) else value
    if not isinstance(label, str) or not label:
        raise InputError(f"{where} needs a label", hint="write it as {label: <the label>}")
    return HasLabel(label)


def bundle_dependencies(bundle: Bundle) -> list[Predicate]:
    """What a bundle requires of other bundles, as OLM reads its properties.

    ``olm.gvk.required``, ``olm.package.required``, ``olm.label.required``
    (met by a bundle with that ``olm.label``) and ``olm.constraint``; other
    property types are not requirements, as in OLM.
    """
    deps: list[Predicate] = []
    for p in bundle.properties:
        try:
            if p.type == PROP_GVK_REQUIRED:
                deps.append(_gvk(p.value, PROP_GVK_REQUIRED))
            elif p.type == PROP_PACKAGE_REQUIRED:
                deps.append(_package_range(p.value, PROP_PACKAGE_REQUIRED, "versionRange"))
            elif p.type == PROP_LABEL_REQUIRED:
                deps.append(_label(p.value, PROP_LABEL_REQUIRED))
            elif p.type == PROP_CONSTRAINT:
                deps.append(parse_olm_constraint(p.value))
        except InputError as exc:
            raise InputError(f"bundle {bundle.name}: {exc.message}", path=bundle.source, hint=exc.hint) from None
    return deps
