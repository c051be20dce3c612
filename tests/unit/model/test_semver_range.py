"""Version ranges in both dialects: Masterminds (spec.version) and blang (olm.skipRange)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import semver

from reconciler.errors import InputError
from reconciler.model.semver_range import VersionRange, order_key, parse_version

# (range, version, expected) for Operator.spec.version, Masterminds semver v3 semantics.
MASTERMINDS = [
    # exact versions, with and without "v" and "="
    ("2.0.0", "2.0.0", True),
    ("2.0.0", "2.0.1", False),
    ("v2.0.0", "2.0.0", True),
    ("=2.0.0", "1.9.9", False),
    ("2.0.0+build.1", "2.0.0+other", True),
    # plain comparisons, AND by space or comma, operator aliases
    (">2.0.0 <3.0.0", "2.0.0", False),
    (">2.0.0 <3.0.0", "2.5.0", True),
    (">2.0.0 <3.0.0", "3.0.0", False),
    (">=1.2.0, <2.0.0", "1.2.0", True),
    (">=1.2.0, <2.0.0", "2.0.0", False),
    (">=1.2.0,<2.0.0", "1.1.9", False),
    (">= 1.2.0 , < 2.0.0", "1.9.9", True),
    ("=>1.0.0 =<1.5.0", "1.5.0", True),
    ("=>1.0.0 =<1.5.0", "1.5.1", False),
    ("!=1.3.0", "1.3.0", False),
    ("!=1.3.0", "1.3.1", True),
    (">=1.1 <2 !=1.2.3", "1.2.3", False),
    (">=1.1 <2 !=1.2.3", "1.2.4", True),
    (">=1.0.0 >1.0.0", "1.0.0", False),  # the stricter of two bounds at one version wins
    ("<2.0.0 <=2.0.0", "2.0.0", False),
    # tilde
    ("~1.2", "1.2.9", True),
    ("~1.2", "1.3.0", False),
    ("~1.2.3", "1.2.2", False),
    ("~1.2.3", "1.2.3", True),
    ("~1.2.3", "1.3.0", False),
    ("~>1.2.3", "1.2.8", True),
    ("~1", "1.9.0", True),
    ("~1", "2.0.0", False),
    ("~0.0.0", "5.0.0", True),  # Masterminds' special case: ~0.0.0 is >=0.0.0
    # caret
    ("^1.2.3", "1.2.2", False),
    ("^1.2.3", "1.9.9", True),
    ("^1.2.3", "2.0.0", False),
    ("^0.2.3", "0.2.9", True),
    ("^0.2.3", "0.3.0", False),
    ("^0.0.3", "0.0.3", True),
    ("^0.0.3", "0.0.4", False),
    ("^0.0", "0.0.9", True),
    ("^0.0", "0.1.0", False),
    ("^0", "0.9.0", True),
    ("^0", "1.0.0", False),
    # x-ranges and wildcards
    ("1.2.x", "1.2.7", True),
    ("1.2.x", "1.3.0", False),
    ("1.2.X", "1.1.9", False),
    ("v1.2.*", "1.2.0", True),
    ("1.x", "1.99.0", True),
    ("1.x", "2.0.0", False),
    ("*", "0.0.0", True),
    ("*", "99.1.2", True),
    (">=1.2.x", "1.2.0", True),
    ("<=2.x", "2.9.9", True),
    ("<=2.x", "3.0.0", False),
    # partial versions in comparisons
    (">1.2", "1.2.9", False),
    (">1.2", "1.3.0", True),
    (">1", "1.9.9", False),
    (">1", "2.0.0", True),
    ("<=1.2", "1.2.9", True),
    ("<=1.2", "1.3.0", False),
    ("<1.2", "1.1.9", True),
    ("<1.2", "1.2.0", False),
    (">=1.2", "1.1.9", False),
    ("=1.2", "1.2.5", True),
    ("=1.2", "1.3.0", False),
    ("1.2", "1.2.0", True),
    ("2", "2.7.1", True),
    ("!=1.2", "1.2.5", False),
    ("!=1.2", "1.3.0", True),
    # hyphen ranges
    ("1.2 - 1.4.5", "1.2.0", True),
    ("1.2 - 1.4.5", "1.4.5", True),
    ("1.2 - 1.4.5", "1.4.6", False),
    ("1.2 - 1.4.5", "1.1.9", False),
    ("1.2 - 1.4", "1.4.9", True),
    ("1.2 - 1.4", "1.5.0", False),
    ("1.0.0 - 2.0.0, !=1.5.0", "1.5.0", False),
    # OR
    (">=1.0.0 <2.0.0 || >=3.0.0", "1.5.0", True),
    (">=1.0.0 <2.0.0 || >=3.0.0", "2.5.0", False),
    (">=1.0.0 <2.0.0 || >=3.0.0", "3.0.0", True),
    ("1.2.3||2.0.0", "2.0.0", True),
]

# Pre-releases only match an AND group that names a pre-release itself (Masterminds v3).
MASTERMINDS_PRERELEASE = [
    (">=1.0.0", "1.5.0-rc.1", False),
    ("*", "1.0.0-alpha", False),
    ("^1.2.3", "1.3.0-rc.1", False),
    ("1.2.x", "1.2.1-rc.1", False),
    ("<2.0.0", "1.9.0-rc.1", False),
    ("1.3.0-rc.1", "1.3.0-rc.1", True),
    ("1.3.0-rc.1", "1.3.0-rc.2", False),
    ("^1.2.3-beta.1", "1.2.3-beta.2", True),
    ("^1.2.3-beta.1", "1.2.3-alpha", False),
    ("^1.2.3-beta.1", "1.5.0", True),
    ("^1.2.3-beta.1", "2.0.0-alpha", False),
    ("~1.2.3-beta.2", "1.2.4-beta.2", True),
    ("~1.2.3-beta.2", "1.3.0-beta.1", False),
    (">=1.0.0-0 <2.0.0", "1.5.0-rc.1", True),   # one pre-release opts the whole AND group in
    (">=1.0.0-0, <2.0.0", "2.0.0-rc.1", True),  # an explicit <2.0.0 is a plain comparison
    (">=1.0.0-0 <2.0.0 || >=3.0.0", "3.1.0-rc.1", False),  # ...but not across ||
    ("*-0", "4.0.0-alpha.1", True),
]

# (range, version, expected) for olm.skipRange, blang/semver semantics.
BLANG = [
    (">=4.1.0 <4.1.2", "4.1.0", True),
    (">=4.1.0 <4.1.2", "4.1.1", True),
    (">=4.1.0 <4.1.2", "4.1.2", False),
    (">=4.1.0 <4.1.2", "4.0.9", False),
    ("<1.0.0", "0.9.9", True),
    ("<1.0.0", "1.0.0", False),
    (">=1.0.0 <1.3.0 || >=2.0.0 <2.1.0", "1.2.9", True),
    (">=1.0.0 <1.3.0 || >=2.0.0 <2.1.0", "1.3.0", False),
    (">=1.0.0 <1.3.0 || >=2.0.0 <2.1.0", "2.0.5", True),
    (">=1.0.0 <1.3.0 || >=2.0.0 <2.1.0", "2.1.0", False),
    ("1.0.0", "1.0.0", True),
    ("=1.0.0", "1.0.1", False),
    ("==1.0.0", "1.0.0", True),
    ("!=1.0.0", "1.0.0", False),
    ("!1.0.0", "1.0.1", True),
    (">1.0.0", "1.0.0", False),
    ("<=1.0.0", "1.0.0", True),
    (">= 1.0.0 < 2.0.0", "1.5.0", True),
    ("1.2.x", "1.2.5", True),
    ("1.2.x", "1.3.0", False),
    (">1.x", "2.0.0", True),
    (">1.x", "1.9.0", False),
    ("<=1.x", "1.9.9", True),
    ("<=1.x", "2.0.0", False),
    # pre-releases are ordered like any version, not excluded
    ("<1.0.0", "1.0.0-rc.1", True),
    (">=4.1.0 <4.1.2", "4.1.2-rc.1", True),
    (">=1.0.0", "1.0.0-rc.1", False),
    (">=1.0.0-alpha", "1.0.0-beta", True),
]

MASTERMINDS_INVALID = [
    ">> 1.0",
    "1.2.3.4",
    "abc",
    "",
    "   ",
    ">=1.0.0 <",
    "==1.0.0",
    "1.0<2.0",
    ">=1.0.0,",
    ", 1.0.0",
    "1.0,,2.0",
    "|| 1.0.0",
    "1.0.0 ||",
    "1.0 | 2.0",
    "01.2.3",
    "1.x.3",
    "1.2.3-01",
    "1.2 -",
    ">1.0 - 2.0",
    "V1.2.3",
]

BLANG_INVALID = [
    "",
    "v1.0.0",
    ">=1.0",
    "~1.0.0",
    "^1.0.0",
    ">=1.0.0, <2.0.0",
    ">=1.0.0||<0.5.0",
    "|| <1.0.0",
    "<1.0.0 ||",
    "<1.0.0 || || >2.0.0",
    "=>1.0.0",
    "1.2.3.4",
    "x",
    ">=",
]


@pytest.mark.parametrize(("text", "version", "expected"), MASTERMINDS + MASTERMINDS_PRERELEASE)
def test_masterminds_contains(text: str, version: str, expected: bool) -> None:
    assert VersionRange.parse(text).contains(version) is expected


@pytest.mark.parametrize(("text", "version", "expected"), BLANG)
def test_blang_contains(text: str, version: str, expected: bool) -> None:
    assert VersionRange.parse(text, dialect="blang").contains(version) is expected


@pytest.mark.parametrize("text", MASTERMINDS_INVALID)
def test_masterminds_invalid(text: str) -> None:
    with pytest.raises(InputError) as err:
        VersionRange.parse(text)
    assert f'"{text}"' in err.value.message
    assert "accepted forms" in err.value.message
    assert err.value.hint


@pytest.mark.parametrize("text", BLANG_INVALID)
def test_blang_invalid(text: str) -> None:
    with pytest.raises(InputError) as err:
        VersionRange.parse(text, dialect="blang")
    assert f'"{text}"' in err.value.message
    assert "accepted forms" in err.value.message


def test_invalid_message_names_the_problem() -> None:
    with pytest.raises(InputError, match='operator "<" is not followed by a version'):
        VersionRange.parse(">=1.0.0 <")
    with pytest.raises(InputError, match='"1.2.3.4" is not a version'):
        VersionRange.parse("1.2.3.4")


@pytest.mark.parametrize(("text", "dialect", "exact"), [
    ("2.0.0", "masterminds", "2.0.0"),
    ("v2.0.0", "masterminds", "2.0.0"),
    ("=2.0.0", "masterminds", "2.0.0"),
    (" 2.0.0 ", "masterminds", "2.0.0"),
    ("=v2.0.0+build.7", "masterminds", "2.0.0"),
    ("1.3.0-rc.1", "masterminds", "1.3.0-rc.1"),
    (">=2.0.0 <=2.0.0", "masterminds", "2.0.0"),
    ("2.0", "masterminds", None),
    ("~2.0.0", "masterminds", None),
    ("^2.0.0", "masterminds", None),
    (">=2.0.0", "masterminds", None),
    ("2.0.0 || 2.0.1", "masterminds", None),
    ("2.0.0 !=2.0.0", "masterminds", None),
    ("==1.0.0", "blang", "1.0.0"),
    ("1.0.0", "blang", "1.0.0"),
    ("<1.0.0", "blang", None),
])
def test_is_exact(text: str, dialect: str, exact: str | None) -> None:
    r = VersionRange.parse(text, dialect=dialect)  # type: ignore[arg-type]
    assert r.is_exact is (exact is not None)
    assert (str(r.exact_version) if r.exact_version else None) == exact


@pytest.mark.parametrize(("a", "b"), [
    ("~1.2.3", ">=1.2.3, <1.3.0"),
    ("1.2.x", "~1.2"),
    ("=1.2", "1.2"),
    ("2.0.0", "v2.0.0"),
    ("=2.0.0", "2.0.0+meta"),
    ("x", "*"),
    ("1.2 - 1.4.5", ">=1.2.0 <=1.4.5"),
    ("<1.0.0 || >=2.0.0", ">=2.0.0 || <1.0.0"),
    (">=1.0.0 >=0.5.0 <2.0.0", ">=1.0.0 <2.0.0"),
])
def test_equal_by_meaning(a: str, b: str) -> None:
    ra, rb = VersionRange.parse(a), VersionRange.parse(b)
    assert ra == rb
    assert hash(ra) == hash(rb)
    assert str(ra) == a and str(rb) == b


@pytest.mark.parametrize(("a", "b"), [
    ("^1.2.3", "~1.2.3"),
    ("2.0.0", "2.0.1"),
    (">=1.0.0-0 <2.0.0", ">=1.0.0 <2.0.0"),
])
def test_not_equal(a: str, b: str) -> None:
    assert VersionRange.parse(a) != VersionRange.parse(b)


def test_dialects_differ_on_prereleases() -> None:
    mm = VersionRange.parse(">=1.0.0 <2.0.0")
    bl = VersionRange.parse(">=1.0.0 <2.0.0", dialect="blang")
    assert mm != bl
    assert not mm.contains("1.5.0-rc.1") and bl.contains("1.5.0-rc.1")


def test_sits_in_frozen_dataclass() -> None:
    @dataclass(frozen=True)
    class Decl:
        version: VersionRange

    one, two = Decl(VersionRange.parse("~1.2")), Decl(VersionRange.parse("1.2.x"))
    assert one == two and len({one, two}) == 1


def test_text_and_repr() -> None:
    r = VersionRange.parse(">=1.0.0 <2.0.0", dialect="blang")
    assert r.text == ">=1.0.0 <2.0.0" == str(r)
    assert repr(r) == "VersionRange('>=1.0.0 <2.0.0', dialect='blang')"
    assert repr(VersionRange.parse("^1")) == "VersionRange('^1')"


def test_contains_accepts_version_objects_and_checks_strings() -> None:
    r = VersionRange.parse("^1.2.3")
    assert r.contains(semver.Version(1, 4, 0))
    assert not r.contains(semver.Version(2, 0, 0))
    assert r.contains("v1.2.3")
    with pytest.raises(InputError, match='"1.4"'):
        r.contains("1.4")


def test_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="dialect"):
        VersionRange.parse("1.0.0", dialect="npm")  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "expected"), [
    ("1.2.3", semver.Version(1, 2, 3)),
    ("v1.2.3", semver.Version(1, 2, 3)),
    ("1.3.0-rc.1+build.5", semver.Version(1, 3, 0, "rc.1", "build.5")),
])
def test_parse_version(text: str, expected: semver.Version) -> None:
    parsed = parse_version(text)
    assert parsed == expected
    assert (parsed.prerelease, parsed.build) == (expected.prerelease, expected.build)


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3.4", "V1.2.3", "vv1.2.3", "", "1.2.3-01", "latest"])
def test_parse_version_invalid(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_version(text)
    assert f'"{text}"' in err.value.message
    assert "MAJOR.MINOR.PATCH" in err.value.message


def test_build_metadata_orders_only_rebuilds_of_one_version() -> None:
    texts = ["1.0.0+2", "1.0.0", "1.0.0+10", "1.0.0+1.a", "0.9.0+99", "1.0.0+1", "1.0.0+rc", "1.0.1-0+5"]
    ordered = sorted((parse_version(t) for t in texts), key=order_key)
    assert [str(v) for v in ordered] == ["0.9.0+99", "1.0.0", "1.0.0+1", "1.0.0+1.a", "1.0.0+2", "1.0.0+10",
                                         "1.0.0+rc", "1.0.1-0+5"]
    assert VersionRange.parse("1.0.0").contains("1.0.0+2")
