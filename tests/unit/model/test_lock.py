"""olm.lock: deterministic rendering, parsing, malformed files."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.errors import InputError, LockfileError
from reconciler.model.lock import LockEntry, Lockfile
from tests.support.paths import EXAMPLE

A = LockEntry(operator="alpha", package="alpha", name="alpha.v1.0.0", version="1.0.0", catalog="community",
              channel="stable", source="file://bundles/alpha/1.0.0", digest="sha256:" + "a" * 64)
B = LockEntry(operator="beta", package="plumbus", name="plumbus.v1.1.0", version="1.1.0", catalog="community",
              channel="stable", source="file://bundles/plumbus/1.1.0", digest="sha256:" + "b" * 64)
DIRECT = LockEntry(operator="gamma", package="gamma", name="gamma.v0.1.0", version="0.1.0", catalog="",
                   channel="", source="file://bundles/gamma", digest="sha256:" + "c" * 64, mediatype="registry+v1")


def test_round_trip():
    lock = Lockfile((A, B, DIRECT))
    text = lock.render()
    parsed = Lockfile.parse(text)
    assert parsed == lock
    assert parsed.render() == text


def test_render_is_byte_identical_regardless_of_entry_order():
    one = Lockfile((A, B, DIRECT)).render()
    assert Lockfile((DIRECT, B, A)).render().encode() == one.encode()
    assert Lockfile((B, DIRECT, A)).render().encode() == one.encode()


def test_parse_sorts_entries():
    parsed = Lockfile.parse(Lockfile((B, A)).render())
    assert parsed.entries == (A, B)


def test_render_format():
    text = Lockfile((A,)).render()
    assert text.startswith("# Written by `reconciler`; do not edit by hand.")
    assert "apiVersion: reconciler.dev/v1alpha1\n" in text
    assert "kind: Lock\n" in text
    assert "  operator: alpha\n" in text
    # keys are sorted and nothing time-dependent is written
    body = text.split("\n", 1)[1]
    assert body.index("apiVersion") < body.index("bundles") < body.index("kind")
    assert "Timestamp" not in text and "time" not in body


def test_example_lockfile_parses_and_re_renders_identically():
    text = (EXAMPLE / "olm.lock").read_text()
    lock = Lockfile.parse(text)
    entry = lock.for_operator("plumbus")
    assert entry == LockEntry(
        operator="plumbus", package="plumbus", name="plumbus.v1.1.0", version="1.1.0", catalog="community",
        channel="stable", source="file://bundles/plumbus/1.1.0",
        digest="sha256:0ba79bff16bea7575f8261b469021ba777160b45afbf81060510cffc702f91d6")
    assert lock.render() == text


def test_for_operator():
    lock = Lockfile((A, B))
    assert lock.for_operator("beta") == B
    assert lock.for_operator("nope") is None


def test_scalar_values_read_as_strings():
    text = Lockfile((dataclasses.replace(A, version="2.0"),)).render().replace("'2.0'", "2.0")
    assert "version: 2.0\n" in text
    assert Lockfile.parse(text).entries[0].version == "2.0"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "{}\n"])
def test_empty_lockfile(text):
    assert Lockfile.parse(text).entries == ()


def test_no_bundles_key():
    assert Lockfile.parse("apiVersion: reconciler.dev/v1alpha1\nkind: Lock\n").entries == ()


@pytest.mark.parametrize("text", ["kind: Operator\n", "- a\n", "just text\n",
                                  "apiVersion: reconciler.dev/v1alpha1\nbundles: []\n"])
def test_not_a_lockfile(text):
    with pytest.raises(LockfileError) as err:
        Lockfile.parse(text, "olm.lock")
    assert err.value.path == "olm.lock"
    assert err.value.message == "not a lockfile (expected kind Lock)"
    assert "delete it" in err.value.hint


def test_entry_missing_fields():
    with pytest.raises(LockfileError) as err:
        Lockfile.parse("kind: Lock\nbundles:\n- operator: x\n  package: x\n", "repo/olm.lock")
    assert err.value.path == "repo/olm.lock"
    assert err.value.message.startswith("bundles[0] is malformed")
    assert "name" in err.value.message


def test_entry_unknown_field():
    good = {f.name: "x" for f in dataclasses.fields(LockEntry)}
    text = "kind: Lock\nbundles:\n- " + "\n  ".join(f"{k}: {v}" for k, v in good.items()) + "\n  extra: 1\n"
    Lockfile.parse(text.replace("\n  extra: 1", ""))  # the same entry without the extra key is fine
    with pytest.raises(LockfileError, match=r"bundles\[0\] is malformed.*extra"):
        Lockfile.parse(text)


@pytest.mark.parametrize("bundles", ["[oops]", "[[1, 2]]", "{a: b}", "7"])
def test_malformed_bundles_list(bundles):
    with pytest.raises(LockfileError) as err:
        Lockfile.parse(f"kind: Lock\nbundles: {bundles}\n", "olm.lock")
    assert err.value.path == "olm.lock"
    assert "bundles" in err.value.message


def test_invalid_yaml_names_the_lockfile():
    with pytest.raises(InputError) as err:
        Lockfile.parse("kind: Lock\nbundles: [\n", "olm.lock")
    assert err.value.path == "olm.lock"
    assert "invalid YAML" in err.value.message


def test_several_documents_refused():
    with pytest.raises(LockfileError) as err:
        Lockfile.parse("kind: Lock\n---\nkind: Lock\n", "olm.lock")
    assert err.value.path == "olm.lock"
    assert err.value.message == "expected one YAML document, found 2"


def test_header_only_lockfile_is_empty():
    header = Lockfile(()).render().splitlines()[0] + "\n"
    assert header.startswith("#")
    assert Lockfile.parse(header).entries == ()
