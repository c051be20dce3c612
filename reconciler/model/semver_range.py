"""Semantic versions and version ranges, in the two dialects operators meet.

``Operator.spec.version`` follows the constraint language of OLM v1
(operator-controller), which is Masterminds semver v3: comma or whitespace
means AND, ``||`` means OR, and the sugar ``~1.2``, ``^1.2.3``, ``1.2.x``,
``*`` and ``1.2 - 1.4.5`` expands to plain comparisons. A pre-release version
only matches an AND group that itself names a pre-release.

``olm.skipRange`` follows blang/semver ranges as OLM v0 reads them: whitespace
means AND, ``||`` means OR, only comparison operators (plus the ``1.x`` and
``1.2.x`` wildcards blang expands), full versions without a ``v`` prefix, and
pre-releases are ordered like any other version.

Both dialects parse into the same shape: a ``VersionRange`` is an OR of
``Clause``s; a clause is one ``Interval`` (the AND of its bounds) minus some
excluded intervals (from ``!=``), plus whether pre-releases may match it.
Versions themselves are ``semver.Version``; build metadata never matters to a
range, and orders two versions only when they are otherwise equal
(``release_key``: a rebuild of the same version, ``1.0.0+2`` after ``1.0.0+1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import semver

from reconciler.errors import InputError

Dialect = Literal["masterminds", "blang"]

VERSION_FORMS = ('MAJOR.MINOR.PATCH with an optional -prerelease and +build (semantic versioning 2.0), '
                 'optionally prefixed with "v", e.g. 1.2.3, v1.2.3, 1.3.0-rc.1')

MASTERMINDS_FORMS = ('accepted forms are a version (1.2.3, v1.2.3, 1.2, 1.2.x, 1.x, *), a version after one of '
                     '=, !=, >, >=, <, <=, ~, ^, or a hyphen range "1.2 - 1.4.5"; join them with spaces or '
                     'commas for AND and with "||" for OR')
MASTERMINDS_EXAMPLES = '"2.0.0", ">=1.2.0, <2.0.0", "~1.2", "^1.2.3", "1.2.x", ">=1.0.0 <2.0.0 || >=3.0.0"'

BLANG_FORMS = ('accepted forms are a full version (1.2.3, no "v" prefix; 1.x and 1.2.x wildcards are allowed) '
               'after one of =, ==, !=, >, >=, <, <=, or alone for an exact match; join them with spaces for '
               'AND and with " || " for OR')
BLANG_EXAMPLES = '">=4.1.0 <4.1.2", "<1.0.0", ">=1.0.0 <1.3.0 || >=2.0.0 <2.1.0"'


def parse_version(text: str) -> semver.Version:
    """Parse a strict semantic version; a single leading ``v`` is allowed."""
    if not isinstance(text, str):
        raise InputError(f"invalid version {text!r}: expected a string in the form {VERSION_FORMS}")
    body = text.strip()
    if body.startswith("v"):
        body = body[1:]
    try:
        return semver.Version.parse(body)
    except (ValueError, TypeError):
        raise InputError(f'invalid version "{text}": expected {VERSION_FORMS}',
                         hint="loose forms such as 1.2, 01.2.3 or 1.2.3.4 are not semantic versions") from None


def release_key(version: semver.Version) -> tuple[tuple[int, int | str], ...]:
    """How the build metadata of two otherwise equal versions orders them, as OLM v1 orders releases.

    Precedence ignores build metadata, so ``1.0.0+1`` and ``1.0.0+2`` are the
    same version; publishers use it to number rebuilds, and operator-controller
    prefers the higher one. Identifiers compare as pre-release identifiers do
    (numbers numerically, below words, which compare as text); no build
    metadata sorts before any.
    """
    if not version.build:
        return ()
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in version.build.split("."))


def order_key(version: semver.Version) -> tuple[semver.Version, tuple[tuple[int, int | str], ...]]:
    """A sort key for "newer": precedence, then ``release_key`` between rebuilds of one version."""
    return version, release_key(version)


def _release(version: semver.Version) -> semver.Version:
    """The version with its build metadata dropped (it never takes part in comparisons)."""
    return version.replace(build=None) if version.build else version


def _floor(major: int, minor: int, patch: int) -> semver.Version:
    """The lowest version with this core: its ``-0`` pre-release sorts before every other one."""
    return semver.Version(major, minor, patch, prerelease="0")


# ---------------------------------------------------------------------------------------------------------
# The shape a range parses into


@dataclass(frozen=True)
class Bound:
    """One end of an interval."""

    version: semver.Version
    inclusive: bool


@dataclass(frozen=True)
class Interval:
    """The versions between ``lower`` and ``upper``; ``None`` leaves that side open."""

    lower: Bound | None = None
    upper: Bound | None = None

    def contains(self, version: semver.Version) -> bool:
        if self.lower is not None:
            c = version.compare(self.lower.version)
            if c < 0 or (c == 0 and not self.lower.inclusive):
                return False
        if self.upper is not None:
            c = version.compare(self.upper.version)
            if c > 0 or (c == 0 and not self.upper.inclusive):
                return False
        return True

    def intersect(self, other: Interval) -> Interval:
        return Interval(_tighter(self.lower, other.lower, lower=True),
                        _tighter(self.upper, other.upper, lower=False))

    @property
    def single(self) -> semver.Version | None:
        """The one version this interval holds, if it is closed on both sides at the same version."""
        lo, hi = self.lower, self.upper
        if lo and hi and lo.inclusive and hi.inclusive and lo.version.compare(hi.version) == 0:
            return lo.version
        return None

    def __str__(self) -> str:
        if self.single is not None:
            return f"={self.single}"
        parts = []
        if self.lower is not None:
            parts.append(f"{'>=' if self.lower.inclusive else '>'}{self.lower.version}")
        if self.upper is not None:
            parts.append(f"{'<=' if self.upper.inclusive else '<'}{self.upper.version}")
        return " ".join(parts) or "*"


def _tighter(a: Bound | None, b: Bound | None, *, lower: bool) -> Bound | None:
    if a is None or b is None:
        return b if a is None else a
    c = a.version.compare(b.version)
    if c == 0:
        return a if not a.inclusive else b
    return a if (c > 0) == lower else b


ANY = Interval()


@dataclass(frozen=True)
class Clause:
    """One AND group: inside ``interval``, outside every ``excluded`` interval.

    ``prereleases`` says whether a pre-release version may match at all
    (Masterminds: only when the group names a pre-release; blang: always).
    """

    interval: Interval = ANY
    excluded: tuple[Interval, ...] = ()
    prereleases: bool = False

    def contains(self, version: semver.Version) -> bool:
        if version.prerelease and not self.prereleases:
            return False
        return self.interval.contains(version) and not any(x.contains(version) for x in self.excluded)

    def __str__(self) -> str:
        parts = [str(self.interval)] if self.interval != ANY or not self.excluded else []
        for x in self.excluded:
            parts.append(f"!{x}" if x.single is not None else f"!({x})")
        return " ".join(parts)

    def sort_key(self) -> tuple[str, bool]:
        return str(self), self.prereleases


def _clause(intervals: list[Interval], excluded: list[Interval], prereleases: bool) -> Clause:
    """Build a clause in normal form, so equal meanings compare equal."""
    interval = ANY
    for i in intervals:
        interval = interval.intersect(i)
    if not prereleases:
        # Without pre-releases in play, a bound at X-0 and one at X admit the same release versions.
        interval = _drop_prerelease(interval)
        excluded = [_drop_prerelease(x) for x in excluded]
    return Clause(interval, tuple(sorted(set(excluded), key=str)), prereleases)


def _drop_prerelease(interval: Interval) -> Interval:
    def strip(b: Bound | None) -> Bound | None:
        if b is None or not b.version.prerelease:
            return b
        return Bound(b.version.replace(prerelease=None), b.inclusive)
    return Interval(strip(interval.lower), strip(interval.upper))


@dataclass(frozen=True)
class VersionRange:
    """A parsed version range: an OR of clauses, compared and hashed by its normal form.

    Build one with ``VersionRange.parse``; ``str()`` gives back the text as written.
    """

    clauses: tuple[Clause, ...]
    text: str = field(default="", compare=False)
    dialect: Dialect = field(default="masterminds", compare=False)

    @classmethod
    def parse(cls, text: str, *, dialect: Dialect = "masterminds") -> VersionRange:
        """Parse ``text``; raise ``InputError`` quoting it and the accepted forms if it is not a range."""
        if dialect == "masterminds":
            clauses = _MastermindsParser(text).parse()
        elif dialect == "blang":
            clauses = _BlangParser(text).parse()
        else:
            raise ValueError(f"unknown range dialect {dialect!r}")
        return cls(tuple(sorted(set(clauses), key=Clause.sort_key)), text, dialect)

    def contains(self, version: semver.Version | str) -> bool:
        """Whether ``version`` (a ``semver.Version`` or a string for ``parse_version``) is in the range."""
        v = parse_version(version) if isinstance(version, str) else version
        v = _release(v)
        return any(c.contains(v) for c in self.clauses)

    @property
    def exact_version(self) -> semver.Version | None:
        """The single version the range pins (``2.0.0``, ``v2.0.0``, ``=2.0.0``), else ``None``."""
        if len(self.clauses) != 1:
            return None
        clause = self.clauses[0]
        pinned = clause.interval.single
        return pinned if pinned is not None and clause.contains(pinned) else None

    @property
    def is_exact(self) -> bool:
        return self.exact_version is not None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        extra = "" if self.dialect == "masterminds" else f", dialect={self.dialect!r}"
        return f"VersionRange({self.text!r}{extra})"


# ---------------------------------------------------------------------------------------------------------
# Parsing, shared pieces


class _RangeSyntaxError(Exception):
    """Raised inside the parsers with the specific problem; turned into an InputError at the top."""


_NUM = r"(?:0|[1-9][0-9]*)"
_IDENT = r"[0-9A-Za-z-]+"
_PRERELEASE_IDENT = re.compile(r"0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*")


@dataclass(frozen=True)
class _Partial:
    """A possibly partial version from a constraint: ``1``, ``1.2``, ``1.2.x``, ``*``, ``1.2.3-rc.1``."""

    parts: tuple[int, ...]          # the numbers given before any wildcard or the end, 0 to 3 of them
    prerelease: str | None = None

    @property
    def precision(self) -> int:
        return len(self.parts)

    @property
    def base(self) -> semver.Version:
        """The lowest version named: missing parts are 0, the pre-release is kept."""
        major, minor, patch = (self.parts + (0, 0, 0))[:3]
        return semver.Version(major, minor, patch, prerelease=self.prerelease)

    def next_floor(self) -> semver.Version:
        """The first version past everything this partial version names (precision 1 or 2)."""
        if self.precision == 1:
            return _floor(self.parts[0] + 1, 0, 0)
        return _floor(self.parts[0], self.parts[1] + 1, 0)

    def x_range(self) -> Interval:
        """What ``=1.2`` / ``1.2.x`` means: every version that starts with the numbers given."""
        if self.precision == 3:
            return Interval(Bound(self.base, True), Bound(self.base, True))
        if self.precision == 0:
            return Interval(Bound(self.base, True))
        return Interval(Bound(self.base, True), Bound(self.next_floor(), False))


def _check_prerelease(pre: str | None) -> None:
    if pre is None:
        return
    for ident in pre.split("."):
        if not _PRERELEASE_IDENT.fullmatch(ident):
            raise _RangeSyntaxError(f'pre-release "{pre}" has an invalid identifier "{ident}" '
                                    "(numbers may not have leading zeros)")


# ---------------------------------------------------------------------------------------------------------
# Masterminds (OLM v1, Operator.spec.version)

_MM_OPERATORS = {"": "=", "=": "=", "!=": "!=", ">": ">", "<": "<", ">=": ">=", "=>": ">=",
                 "<=": "<=", "=<": "<=", "~": "~", "~>": "~", "^": "^"}
_MM_SEPARATOR = re.compile(r"\s*(,)?\s*")
_MM_ITEM = re.compile(r"(?P<op>!=|>=|=>|<=|=<|~>|[=<>~^])?\s*(?P<word>[^\s,!=<>~^|]*)")
_BAD_HYPHEN = 'a hyphen range needs a plain version on each side, e.g. "1.2 - 1.4.5"'
_MM_VERSION = re.compile(rf"v?(?P<parts>[0-9xX*]+(?:\.[0-9xX*]+){{0,2}})"
                         rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+{_IDENT}(?:\.{_IDENT})*)?")


@dataclass(frozen=True)
class _Item:
    op: str
    word: str
    after_comma: bool


class _MastermindsParser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, problem: str) -> InputError:
        return InputError(f'invalid version range "{self.text}": {problem}; {MASTERMINDS_FORMS}',
                          hint=f"for example {MASTERMINDS_EXAMPLES}")

    def parse(self) -> list[Clause]:
        if not isinstance(self.text, str):
            raise self.fail("expected a string")
        if not self.text.strip():
            raise self.fail("it is empty")
        try:
            return [self.group(alt) for alt in self.text.split("||")]
        except _RangeSyntaxError as exc:
            raise self.fail(str(exc)) from None

    def group(self, text: str) -> Clause:
        if not text.strip():
            raise _RangeSyntaxError('an alternative between "||" is empty')
        comparators = self.comparators(self.items(text))
        prereleases = any(p.prerelease for _, p in comparators)
        intervals: list[Interval] = []
        excluded: list[Interval] = []
        for op, partial in comparators:
            if op == "!=":
                excluded.append(ANY if partial.precision == 0 else partial.x_range())
            else:
                intervals.append(_mm_interval(op, partial))
        return _clause(intervals, excluded, prereleases)

    @staticmethod
    def items(text: str) -> list[_Item]:
        """Split one AND group into (operator, word) items, checking the separators between them."""
        items: list[_Item] = []
        pos = 0
        while True:
            sep = _MM_SEPARATOR.match(text, pos)
            assert sep is not None
            comma = sep.group(1) is not None
            pos = sep.end()
            if pos == len(text):
                if comma:
                    raise _RangeSyntaxError("it ends with a comma")
                return items
            if comma and not items:
                raise _RangeSyntaxError("it starts with a comma")
            if items and not sep.group(0):
                raise _RangeSyntaxError(f'"{text[pos:].strip()}" must be separated from what comes before it '
                                        "by a space or a comma")
            if text.startswith("==", pos):
                raise _RangeSyntaxError('"==" is not an operator here; write "=1.2.3" or just "1.2.3"')
            m = _MM_ITEM.match(text, pos)
            assert m is not None
            op, word = m.group("op") or "", m.group("word")
            if not word:
                if op:
                    raise _RangeSyntaxError(f'operator "{op}" is not followed by a version')
                raise _RangeSyntaxError(f'unexpected "{text[pos]}"')
            items.append(_Item(op, word, comma))
            pos = m.end()

    def comparators(self, items: list[_Item]) -> list[tuple[str, _Partial]]:
        """Resolve hyphen ranges and parse every version, giving (operator, partial version) pairs."""
        out: list[tuple[str, _Partial]] = []
        i = 0
        while i < len(items):
            item = items[i]
            nxt = items[i + 1] if i + 1 < len(items) else None
            if nxt is not None and nxt.word == "-" and not nxt.op:
                after = items[i + 2] if i + 2 < len(items) else None
                if (after is None or item.op or after.op or after.word == "-"
                        or nxt.after_comma or after.after_comma):
                    raise _RangeSyntaxError(_BAD_HYPHEN)
                out.append((">=", _mm_partial(item.word)))
                out.append(("<=", _mm_partial(after.word)))
                i += 3
                continue
            if item.word == "-":
                raise _RangeSyntaxError(_BAD_HYPHEN)
            out.append((_MM_OPERATORS[item.op], _mm_partial(item.word)))
            i += 1
        return out


def _mm_partial(word: str) -> _Partial:
    m = _MM_VERSION.fullmatch(word)
    if m is None:
        raise _RangeSyntaxError(f'"{word}" is not a version')
    numbers: list[int] = []
    wildcard = False
    for part in m.group("parts").split("."):
        if part in ("x", "X", "*"):
            wildcard = True
        elif re.fullmatch(_NUM, part) is None:
            raise _RangeSyntaxError(f'"{word}" is not a version (each part is a number without leading zeros, '
                                    "or a wildcard x, X or *)")
        elif wildcard:
            raise _RangeSyntaxError(f'"{word}" has a number after a wildcard')
        else:
            numbers.append(int(part))
    _check_prerelease(m.group("pre"))
    return _Partial(tuple(numbers), m.group("pre"))


def _mm_interval(op: str, p: _Partial) -> Interval:
    """The interval one Masterminds comparator admits (``!=`` is handled by the caller)."""
    base, k = p.base, p.precision
    at_least = Interval(Bound(base, True))
    nothing = Interval(upper=Bound(_floor(0, 0, 0), False))
    if op == "=":
        return p.x_range()
    if op == ">=":
        return at_least
    if op == "<":
        return nothing if k == 0 else Interval(upper=Bound(base, False))
    if op == ">":
        if k == 0:
            return nothing
        if k == 3:
            return Interval(Bound(base, False))
        return Interval(Bound(p.next_floor(), True))           # >1.2 means >=1.3.0
    if op == "<=":
        if k == 0:
            return ANY
        if k == 3:
            return Interval(upper=Bound(base, True))
        return Interval(upper=Bound(p.next_floor(), False))    # <=1.2 means <1.3.0
    major, minor, patch = base.major, base.minor, base.patch
    if op == "~":
        # ~0.0.0 (and ~*) accept everything from the base up, as in Masterminds.
        if k == 0 or (k == 3 and major == minor == patch == 0):
            return at_least
        top = _floor(major + 1, 0, 0) if k == 1 else _floor(major, minor + 1, 0)
        return Interval(Bound(base, True), Bound(top, False))
    if op == "^":
        if k == 0:
            return at_least
        if major > 0 or k == 1:
            top = _floor(major + 1, 0, 0)
        elif minor > 0 or k == 2:
            top = _floor(0, minor + 1, 0)
        else:
            top = _floor(0, 0, patch + 1)                      # ^0.0.3 means >=0.0.3 <0.0.4
        return Interval(Bound(base, True), Bound(top, False))
    raise AssertionError(op)


# ---------------------------------------------------------------------------------------------------------
# blang (OLM v0, olm.skipRange)

_BLANG_TOKEN = re.compile(r"(?P<op>[<>=!]*)(?P<version>.*)")
_BLANG_OPERATORS = {"": "=", "=": "=", "==": "=", "!": "!=", "!=": "!=", ">": ">", ">=": ">=", "<": "<",
                    "<=": "<="}
_BLANG_WILDCARD = re.compile(rf"(?P<major>{_NUM})\.(?:x(?:\.x)?|(?P<minor>{_NUM})\.x)")


class _BlangParser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, problem: str) -> InputError:
        return InputError(f'invalid version range "{self.text}": {problem}; {BLANG_FORMS}',
                          hint=f"for example {BLANG_EXAMPLES}")

    def parse(self) -> list[Clause]:
        if not isinstance(self.text, str):
            raise self.fail("expected a string")
        tokens = self.tokens(self.text)
        if not tokens:
            raise self.fail("it is empty")
        groups: list[list[str]] = [[]]
        for token in tokens:
            if token == "||":
                groups.append([])
            else:
                groups[-1].append(token)
        try:
            if any(not g for g in groups):
                raise _RangeSyntaxError('"||" needs a comparison on each side')
            return [self.group(g) for g in groups]
        except _RangeSyntaxError as exc:
            raise self.fail(str(exc)) from None

    @staticmethod
    def tokens(text: str) -> list[str]:
        """Split on whitespace; an operator standing alone joins the version after it (">= 1.0.0")."""
        out: list[str] = []
        pending = ""
        for word in text.split():
            if word != "||" and set(word) <= set("<>=!"):
                pending += word
                continue
            out.append(pending + word)
            pending = ""
        if pending:
            out.append(pending)
        return out

    def group(self, tokens: list[str]) -> Clause:
        intervals: list[Interval] = []
        excluded: list[Interval] = []
        for token in tokens:
            m = _BLANG_TOKEN.fullmatch(token)
            assert m is not None
            op_text, version = m.group("op"), m.group("version")
            if op_text not in _BLANG_OPERATORS:
                raise _RangeSyntaxError(f'"{op_text}" in "{token}" is not an operator')
            if not version:
                raise _RangeSyntaxError(f'operator "{op_text}" is not followed by a version')
            op = _BLANG_OPERATORS[op_text]
            if op == "!=":
                excluded.append(_blang_interval("=", version))
            else:
                intervals.append(_blang_interval(op, version))
        return _clause(intervals, excluded, prereleases=True)


def _blang_interval(op: str, version: str) -> Interval:
    wild = _BLANG_WILDCARD.fullmatch(version)
    if wild is not None:
        major = int(wild.group("major"))
        minor = wild.group("minor")
        low = semver.Version(major, int(minor) if minor else 0, 0)
        high = semver.Version(major, int(minor) + 1, 0) if minor else semver.Version(major + 1, 0, 0)
        return {"=": Interval(Bound(low, True), Bound(high, False)),
                ">=": Interval(Bound(low, True)),
                ">": Interval(Bound(high, True)),
                "<": Interval(upper=Bound(low, False)),
                "<=": Interval(upper=Bound(high, False))}[op]
    try:
        v = _release(semver.Version.parse(version))
    except ValueError:
        raise _RangeSyntaxError(f'"{version}" is not a version') from None
    return {"=": Interval(Bound(v, True), Bound(v, True)),
            ">=": Interval(Bound(v, True)),
            ">": Interval(Bound(v, False)),
            "<": Interval(upper=Bound(v, False)),
            "<=": Interval(upper=Bound(v, True))}[op]
