"""Record: the value classes of the catalog model behave as the frozen dataclasses they stand for."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

import reconciler.catalog  # noqa: F401 - defines Loaded, Finding, CatalogFile and Walk
from reconciler.model.catalog import Bundle, Catalog, Channel, ChannelEntry, Meta, Package, Property
from reconciler.model.record import Record


def _records(cls=Record):
    for sub in cls.__subclasses__():
        yield sub
        yield from _records(sub)


ALL = sorted(set(_records()), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_record_is_found():
    names = {c.__name__ for c in ALL}
    assert {"Bundle", "Catalog", "Channel", "ChannelEntry", "Property", "Finding", "Loaded", "CatalogFile"} <= names


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__qualname__)
def test_init_takes_exactly_the_declared_fields_in_order(cls):
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert params == list(cls.FIELDS), f"{cls.__qualname__}.__init__ and its annotations disagree"
    assert set(cls.UNCOMPARED) <= set(cls.FIELDS)


def _twin(cls):
    """The frozen dataclass ``cls`` stands for: same fields, same defaults, same fields left out of equality."""
    sig = inspect.signature(cls.__init__)
    specs = []
    for name in cls.FIELDS:
        default = sig.parameters[name].default
        kw = {"compare": name not in cls.UNCOMPARED}
        if default is not inspect.Parameter.empty:
            kw["default"] = default
        specs.append((name, object, dataclasses.field(**kw)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True)


CASES = [
    (Property, [("olm.gvk", {"kind": "A"}), ("olm.gvk", {"kind": "B"}), ("olm.package", {"kind": "A"})]),
    (Package, [("demo", "stable", "a.yaml"), ("demo", "stable", "a.yaml", "text"), ("demo", None, "a.yaml")]),
    (Meta, [("olm.x", "demo", "n", {"a": 1}), ("olm.x", "demo", "n", {"a": 2}), ("olm.x", "demo", "m", {"a": 1})]),
    (Bundle, [("demo", "demo.v1", "img", (Property("olm.gvk", 1),), "a.yaml"),
              ("demo", "demo.v1", "img", (Property("olm.gvk", 2),), "a.yaml"),
              ("demo", "demo.v1", "img", (), "a.yaml", ("x",), 3)]),
]


@pytest.mark.parametrize("cls,argsets", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_equality_hash_and_repr_match_the_dataclass(cls, argsets):
    twin = _twin(cls)
    for a in argsets:
        for b in argsets:
            assert (cls(*a) == cls(*b)) == (twin(*a) == twin(*b)), (a, b)
            if twin(*a) == twin(*b):
                assert hash(cls(*a)) == hash(cls(*b))
        assert repr(cls(*a)) == repr(twin(*a))
    assert cls(*argsets[0]) != twin(*argsets[0])  # as a dataclass, never equal to another class


def test_a_record_is_immutable():
    p = Package("demo", "stable", "a.yaml")
    with pytest.raises(AttributeError, match="immutable"):
        p.name = "other"
    with pytest.raises(AttributeError, match="immutable"):
        del p.name
    assert p.name == "demo"


def test_replace_copies_with_changes_and_refuses_unknown_fields():
    p = Package("demo", "stable", "a.yaml", blob=3)
    q = p.replace(default_channel=None)
    assert (q.name, q.default_channel, q.source, q.blob) == ("demo", None, "a.yaml", 3)
    assert p.default_channel == "stable"
    with pytest.raises(TypeError, match="no field 'channel'"):
        p.replace(channel="x")


def test_catalog_default_deprecations_are_not_shared():
    a, b = Catalog("a", "r", {}, {}, {}), Catalog("b", "r", {}, {}, {})
    a.deprecations["x"] = None
    assert b.deprecations == {}


def test_records_survive_pickling_and_a_shelved_catalog_equals_its_catalog():
    b = Bundle("demo", "demo.v1", "img", (Property("olm.package", {"packageName": "demo", "version": "1.0.0"}),),
               "a.yaml")
    assert str(b.version) == "1.0.0"  # a cached_property on an immutable record
    ch = Channel("demo", "stable", (ChannelEntry("demo.v1"),), "a.yaml")
    plain = Catalog("c", "r", {"demo": Package("demo", "stable", "a.yaml")}, {("demo", "stable"): ch},
                    {("demo", "demo.v1"): b})
    shelved = plain.shelved()
    assert shelved == plain and plain == shelved
    for value in (b, plain, shelved):
        again = pickle.loads(pickle.dumps(value))
        assert again == value and type(again) is type(value)
    again = pickle.loads(pickle.dumps(shelved))
    assert again.bundles.shelf.decoded == {}   # nothing decoded until asked
    assert again.bundle("demo", "demo.v1") == b and list(again.bundles) == [("demo", "demo.v1")]
