"""Shapes: the types of the fields a stage reads from parsed YAML, checked once at the boundary.

Parsed YAML is untyped: any field may be a string where a list is expected, a
list where a mapping is. Rather than guard every read, each stage declares
the shape of the fields it reads (``Obj``, ``ListOf``, ``MapOf``, scalar
types) and checks a document against it once, as it enters; the code after
that reads plain dicts safely. A mismatch names the field by its JSON path
(``spec.install.spec.deployments[0].spec``), what was expected and what was
found, and is raised as the caller's error class with its file and object.

Shapes are open: fields they do not name are not checked (the API server,
or a later rule, judges those). ``null`` counts as absent unless a field is
``required``, since Kubernetes treats an explicit null as an unset field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import InputError, ReconcilerError


class Mismatch(Exception):
    """A value does not have its shape; ``where`` is its JSON path."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where, self.message = where, message


def kind_of(value: Any) -> str:
    """How a YAML value reads to a user: 'a string', 'a list', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


class Shape:
    def check(self, value: Any, where: str) -> None:
        raise NotImplementedError

    @property
    def want(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Scalar(Shape):
    types: tuple[type, ...]
    name: str

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) and bool not in self.types:
            raise Mismatch(where, f"must be {self.name}, not {kind_of(value)}")
        if not isinstance(value, self.types):
            raise Mismatch(where, f"must be {self.name}, not {kind_of(value)}")

    @property
    def want(self) -> str:
        return self.name


STR = Scalar((str,), "a string")
INT = Scalar((int,), "an integer")
BOOL = Scalar((bool,), "true or false")
INT_OR_STR = Scalar((int, str), "an integer or a string")
SCALAR = Scalar((str, int, float, bool), "a string, a number or a boolean")


@dataclass(frozen=True)
class _Any(Shape):
    def check(self, value: Any, where: str) -> None:
        return None

    @property
    def want(self) -> str:
        return "any value"


ANY = _Any()


@dataclass(frozen=True)
class ListOf(Shape):
    item: Shape = ANY

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise Mismatch(where, f"must be a list, not {kind_of(value)}")
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]")

    @property
    def want(self) -> str:
        return "a list"


@dataclass(frozen=True)
class MapOf(Shape):
    """A mapping with string keys whose values all have one shape (labels, annotations); ``key``, when given,
    checks each key too."""

    value: Shape = ANY
    key: Shape | None = None

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Mismatch(where, f"must be a mapping, not {kind_of(value)}")
        for key, item in value.items():
            if not isinstance(key, str):
                raise Mismatch(where, f"keys must be strings, not {kind_of(key)} ({key!r})")
            if self.key is not None:
                self.key.check(key, f"{where}: {key!r}")
            self.value.check(item, f"{where}.{key}")

    @property
    def want(self) -> str:
        return "a mapping"


@dataclass(frozen=True)
class Obj(Shape):
    """A mapping with named fields; ``required`` ones must be present and not null."""

    fields: dict[str, Shape] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    nonempty: tuple[str, ...] = ()   # required strings that may not be ""
    closed: bool = False             # a field it does not name is an error (our own kinds, not Kubernetes')

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Mismatch(where, f"must be a mapping, not {kind_of(value)}")
        if self.closed:
            extra = sorted(set(value) - set(self.fields), key=str)
            if extra:
                more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
                raise Mismatch("", f"unknown field {_join(where, str(extra[0]))}{more}; known fields of "
                                   f"{where or 'the document'}: {', '.join(self.fields)}")
        for key in self.required:
            if value.get(key) is None:
                raise Mismatch(_join(where, key), "is required")
        for key in self.nonempty:
            if value.get(key) == "":
                raise Mismatch(_join(where, key), "must not be empty")
        for key, shape in self.fields.items():
            item = value.get(key)
            if item is not None:
                shape.check(item, _join(where, key))

    @property
    def want(self) -> str:
        return "a mapping"


@dataclass(frozen=True)
class Valid(Shape):
    """``base``, and a value ``test`` accepts: ``name`` says what it must be (``a DNS-1123 label``)."""

    base: Shape
    test: Callable[[Any], bool]
    name: str

    def check(self, value: Any, where: str) -> None:
        self.base.check(value, where)
        if not self.test(value):
            raise Mismatch(where, f"{value!r} is not {self.name}")

    @property
    def want(self) -> str:
        return self.name


@dataclass(frozen=True)
class OneOf(Shape):
    """One of a few strings."""

    values: tuple[str, ...]

    def check(self, value: Any, where: str) -> None:
        if value not in self.values:
            raise Mismatch(where, f"must be one of {', '.join(self.values)}, not {value!r}")

    @property
    def want(self) -> str:
        return f"one of {', '.join(self.values)}"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def check(value: Any, shape: Shape, *, where: str = "", path: str | None = None, obj: str | None = None,
          error: type[ReconcilerError] = InputError, hint: str | None = None) -> None:
    """Check ``value`` against ``shape``; a mismatch is raised as ``error`` naming file, object and field."""
    try:
        shape.check(value, where)
    except Mismatch as exc:
        raise error(str(exc), path=path, obj=obj, hint=hint) from None


__all__ = ["ANY", "BOOL", "INT", "INT_OR_STR", "ListOf", "MapOf", "Mismatch", "Obj", "OneOf", "SCALAR", "STR",
           "Shape", "Valid", "check", "kind_of"]
