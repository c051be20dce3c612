"""Immutable value classes for the objects a short command builds: the catalog model and its findings.

A ``Record`` behaves as ``@dataclass(frozen=True)`` would make it: equality
and hashing over its fields, a ``Name(field=value, ...)`` repr, no assignment
after ``__init__``, and ``replace(**changes)`` for a modified copy. It is
written out instead because ``catalog validate`` of a small catalog is mostly
start-up, and ``dataclasses`` costs a third of it: importing it imports
``inspect``, and each decorated class compiles its generated methods.

A subclass declares its fields as class annotations, in ``__init__``'s order,
and writes its own ``__init__``, which stores them in ``self.__dict__``
(``cached_property`` works as on a frozen dataclass). ``UNCOMPARED`` names
fields left out of equality and hashing. tests/unit/model/test_record.py checks
that every ``__init__`` takes exactly the declared fields.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar

    R = TypeVar("R", bound="Record")


class Record:
    FIELDS: tuple[str, ...] = ()      # every field, in __init__'s order (from the class annotations)
    UNCOMPARED: tuple[str, ...] = ()  # fields not part of equality and hashing
    _key: Callable[[Any], Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("__annotations__", ()))
        if own:
            cls.FIELDS = own
        compared = [f for f in cls.FIELDS if f not in cls.UNCOMPARED]
        # attrgetter of one name returns the value, of several a tuple: either way a key for == and hash
        cls._key = attrgetter(*compared) if compared else staticmethod(lambda obj: ())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key(self) == self._key(other)

    def __hash__(self) -> int:
        return hash(self._key(self))

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({fields})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of {type(self).__qualname__}: it is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of {type(self).__qualname__}: it is immutable")

    def replace(self: R, **changes: Any) -> R:
        """A copy with ``changes`` applied, as ``dataclasses.replace`` makes one."""
        unknown = set(changes) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{f: changes[f] if f in changes else getattr(self, f) for f in self.FIELDS})
