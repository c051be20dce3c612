"""Every bundle the resolver may choose from, indexed, with the preference orders of deppy.

A ``Candidate`` is one bundle in one catalog (the same bundle name in two
catalogs is two candidates). Preference, best first:

* not deprecated before deprecated;
* for an Operator's own choice: catalog priority, then the named channel
  (else the package's default channel), then that channel's head (unless a
  version range is declared), then newer versions;
* for a dependency: the dependent's own catalog first, then catalog
  priority, the default channel, heads, and newer versions (older ones first
  under ``minimal-version``).

Ties are broken by catalog, package and bundle name, so the order, and with
it the resolution, never depends on dict or file order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping

import semver

from reconciler.errors import InputError
from reconciler.model.catalog import SCHEMA_BUNDLE, Bundle, Catalog, Channel
from reconciler.model.constraints import (
    AllOf, AnyOf, CatalogIs, HasLabel, Labelled, Located, MatchContext, NameIs, PackageIs, Predicate, ProvidesGVK,
)
from reconciler.model.semver_range import VersionRange, order_key


@dataclass(frozen=True)
class Candidate:
    catalog: str
    priority: int
    bundle: Bundle
    channels: frozenset[str]
    heads_of: frozenset[str]       # channels in which this bundle is the head
    default_channel: str | None
    deprecated: bool
    key: tuple[str, str, str] = field(default=("", "", ""), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.catalog, self.bundle.package, self.bundle.name))

    @property
    def name(self) -> str:
        return self.bundle.name

    @property
    def package(self) -> str:
        return self.bundle.package

    @property
    def version(self) -> semver.Version:
        return self.bundle.version

    @cached_property
    def context(self) -> MatchContext:
        return MatchContext(self.catalog, self.channels)

    def __str__(self) -> str:
        return f"{self.bundle.name} (catalog {self.catalog})"


class CatalogCandidates:
    """One catalog's candidates, built a package at a time when resolution first asks for that package.

    A package's candidates need its channels (membership, heads), its
    default channel and its deprecations, and nothing of any other package:
    the catalog's ``Contents`` says which packages an API, a label or a
    bundle name leads to, so a resolution builds (and, in a cached catalog,
    decodes) only the closure its declarations reach.
    """

    def __init__(self, name: str, catalog: Catalog) -> None:
        self.name = name
        self.catalog = catalog
        self.packages: dict[str, list[Candidate]] = {}

    def package(self, pkg: str) -> list[Candidate]:
        found = self.packages.get(pkg)
        if found is None:
            found = self.packages[pkg] = self._build(pkg)
        return found

    def _build(self, pkg: str) -> list[Candidate]:
        cat = self.catalog
        member: dict[str, list[Channel]] = {}
        for channel in cat.channels_of(pkg):
            for entry in channel.entries:
                member.setdefault(entry.name, []).append(channel)
        package = cat.packages.get(pkg)
        default = package.default_channel if package else None
        package_deprecated = cat.deprecation(pkg) is not None
        out = []
        for bundle in cat.bundles_of(pkg):   # by name
            chans = member.get(bundle.name, [])
            out.append(Candidate(
                catalog=self.name, priority=cat.priority, bundle=bundle,
                channels=frozenset(c.name for c in chans),
                heads_of=frozenset(c.name for c in chans if bundle.name in c.heads),
                default_channel=default,
                deprecated=package_deprecated or cat.deprecation(pkg, SCHEMA_BUNDLE, bundle.name) is not None,
            ))
        return out


_BY_OBJECT: dict[int, tuple[str, CatalogCandidates]] = {}
_BY_DIGEST: dict[tuple[str, str, int], CatalogCandidates] = {}
_KEEP_DIGESTS = 8


def _candidates(name: str, cat: Catalog) -> CatalogCandidates:
    """The catalog's candidates, shared by every resolution over it: catalogs are immutable once loaded.

    Kept per catalog object while it lives, and per content digest for the
    last few catalogs, so a reconcile loop that reloads an unchanged catalog
    does not build its candidates again.
    """
    cached = _BY_OBJECT.get(id(cat))
    if cached is not None and cached[0] == name:
        return cached[1]
    key = (name, cat.digest, cat.priority)
    found = _BY_DIGEST.get(key) if cat.digest else None
    if found is None:
        found = CatalogCandidates(name, cat)
        if cat.digest:
            _BY_DIGEST[key] = found
            while len(_BY_DIGEST) > _KEEP_DIGESTS:
                _BY_DIGEST.pop(next(iter(_BY_DIGEST)))
    _BY_OBJECT[id(cat)] = (name, found)
    weakref.finalize(cat, _BY_OBJECT.pop, id(cat), None)
    return found


class _Whole(set):  # type: ignore[type-arg]
    """A scope that is a whole catalog: within an ``AllOf``, any narrower part's scope is used instead."""


class Universe:
    """The candidates of all catalogs, found through each catalog's contents index and built on demand.

    Nothing is built up front: ``package``, and ``matching`` through the
    packages a predicate can reach (``scope``), build the candidates of the
    packages asked for. Only a predicate no index narrows (a CEL rule, a
    version or channel alone) builds every package of every catalog.
    """

    def __init__(self, catalogs: Mapping[str, Catalog], holds: Mapping[str, frozenset[str]] | None = None) -> None:
        """``holds`` (package -> bundle names) leaves only those bundles of each package it names: what a later
        stage of a fleet may run. The catalogs' candidates stay shared; only a held package's list is filtered."""
        self.catalogs = dict(catalogs)
        self.sources = {name: _candidates(name, catalogs[name]) for name in sorted(catalogs)}
        self.built: dict[str, list[Candidate]] = {}   # package -> its candidates in every catalog
        self.holds = dict(holds or {})

    def _of(self, catalog: str, pkg: str) -> list[Candidate]:
        found = self.sources[catalog].package(pkg)
        allowed = self.holds.get(pkg)
        return found if allowed is None else [c for c in found if c.name in allowed]

    def package(self, pkg: str) -> list[Candidate]:
        """Every catalog's candidates of a package, catalogs by name, bundles by name."""
        found = self.built.get(pkg)
        if found is None:
            found = self.built[pkg] = [c for name in self.sources for c in self._of(name, pkg)]
        return found

    def matching(self, predicate: Predicate, within: Iterable[Candidate] | None = None) -> list[Candidate]:
        """Candidates the predicate accepts, looked for only in the packages the indexes say it can reach."""
        if within is None:
            within = self._pool(predicate)
        return [c for c in within if predicate.matches(c.bundle, c.context)]

    def _pool(self, predicate: Predicate) -> list[Candidate]:
        scope = self.scope(predicate)
        if scope is None:
            scope = {(name, pkg) for name, src in self.sources.items() for pkg in src.catalog.contents.members}
        pool = []
        for name, pkg in sorted(scope):
            self.package(pkg)   # the package is in this resolution's closure
            pool.extend(self._of(name, pkg))
        return pool

    def scope(self, pred: Predicate) -> set[tuple[str, str]] | None:
        """(catalog, package) pairs holding every bundle ``pred`` can accept; None when no index applies."""
        if isinstance(pred, PackageIs):
            return {(n, pred.package) for n, src in self.sources.items()
                    if pred.package in src.catalog.contents.members}
        if isinstance(pred, ProvidesGVK):
            return self._indexed("apis", (pred.group, pred.version, pred.kind))
        if isinstance(pred, NameIs):
            return self._indexed("names", pred.name)
        if isinstance(pred, HasLabel):
            return self._indexed("labels", pred.label)
        if isinstance(pred, CatalogIs):
            src = self.sources.get(pred.catalog)
            return _Whole((pred.catalog, pkg) for pkg in src.catalog.contents.members) if src is not None else _Whole()
        if isinstance(pred, (Labelled, Located)):
            return self.scope(pred.inner)
        if isinstance(pred, AllOf):   # a catalog narrows the others' scope, listed only when nothing else does
            catalogs = {p.catalog for p in pred.parts if isinstance(p, CatalogIs)}
            scopes = [s for s in (self.scope(p) for p in pred.parts if not isinstance(p, CatalogIs))
                      if s is not None and not isinstance(s, _Whole)]
            if not scopes:
                return set.intersection(*(self.scope(CatalogIs(c)) for c in catalogs)) if catalogs else None
            found = set.intersection(*scopes)
            return {pair for pair in found if pair[0] in catalogs} if catalogs else found
        if isinstance(pred, AnyOf):
            union: set[tuple[str, str]] = set()
            for part in pred.parts:
                found = self.scope(part)
                if found is None:
                    return None
                union |= found
            return union
        return None

    def _indexed(self, index: str, key: Any) -> set[tuple[str, str]]:
        return {(n, pkg) for n, src in self.sources.items()
                for pkg in getattr(src.catalog.contents, index).get(key, ())}

    def channel(self, cand: Candidate, name: str) -> Channel | None:
        return self.catalogs[cand.catalog].channels.get((cand.package, name))


def own_order(cands: Iterable[Candidate], channel: str | None, ranged: bool = False) -> list[Candidate]:
    """Preference for an Operator's own bundle: priority, the named (else default) channel, head, newest.

    Only the head of the channel the Operator follows counts: being the head
    of some other channel says nothing about this one. With a version range
    (``ranged``) the highest version inside it wins, as in OLM v1, so the
    channel's head is not preferred over a newer bundle in range either.
    """
    def key(c: Candidate) -> tuple:
        preferred = channel or c.default_channel
        head = False if ranged else preferred not in c.heads_of
        return (c.deprecated, -c.priority, preferred not in c.channels, head)
    return _stable(cands, key, newest_first=True)


def dependency_order(cands: Iterable[Candidate], dependent: Candidate, minimal: bool) -> list[Candidate]:
    """Preference for a dependency: same catalog as the dependent, priority, default channel, head, version."""
    def key(c: Candidate) -> tuple:
        head = (c.default_channel not in c.heads_of) if not minimal else False
        return (c.deprecated, c.catalog != dependent.catalog, -c.priority, c.default_channel not in c.channels,
                head)
    return _stable(cands, key, newest_first=not minimal)


def _stable(cands: Iterable[Candidate], key, newest_first: bool) -> list[Candidate]:
    ordered = sorted(cands, key=lambda c: c.key)
    ordered.sort(key=lambda c: order_key(c.version), reverse=newest_first)
    ordered.sort(key=key)
    return ordered


def successors(universe: Universe, installed: Candidate, semver_mode: bool = False) -> list[Candidate]:
    """Bundles one upgrade hop from ``installed``: replaces, skips and skipRange edges in its channels.

    In ``semver_mode`` (a catalog whose graphs are semver-based), and for a
    channel without any edges, any higher version of the same major (same
    minor for 0.x) is a successor.
    """
    out: dict[tuple[str, str, str], Candidate] = {}
    same_catalog = [c for c in universe.package(installed.package) if c.catalog == installed.catalog]
    by_name = {c.name: c for c in same_catalog}
    for channel_name in installed.channels:
        channel = universe.channel(installed, channel_name)
        if channel is None:
            continue
        has_edges = not semver_mode and any(e.replaces or e.skips or e.skip_range for e in channel.entries)
        for entry in channel.entries:
            cand = by_name.get(entry.name)
            if cand is None or cand.name == installed.name:
                continue
            if has_edges:
                hop = (entry.replaces == installed.name or installed.name in entry.skips
                       or _in_skip_range(entry.skip_range, installed.version))
            else:
                v, w = installed.version, cand.version
                hop = w > v and w.major == v.major and (v.major > 0 or w.minor == v.minor)
            if hop:
                out[cand.key] = cand
    return [out[k] for k in sorted(out)]


def _in_skip_range(skip_range: str | None, version: semver.Version) -> bool:
    if not skip_range:
        return False
    try:
        return VersionRange.parse(skip_range, dialect="blang").contains(version)
    except InputError:  # an invalid skipRange is a catalog validation finding, not an edge
        return False


def heirs(universe: Universe, catalog: str, package: str, name: str, version: semver.Version | None,
          semver_mode: bool = False) -> list[Candidate]:
    """Bundles that upgrade from ``name``, a bundle the catalog no longer has.

    As OLM does, an installed bundle that left the catalog is still upgraded
    from: any channel entry of its package whose ``replaces``, ``skips`` or
    ``skipRange`` names it is one hop away (in ``semver_mode``, any higher
    version of the same major, minor for 0.x).
    """
    cat = universe.catalogs.get(catalog)
    if cat is None:
        return []
    by_name = {c.name: c for c in universe.package(package) if c.catalog == catalog}
    out: dict[tuple[str, str, str], Candidate] = {}
    for channel in cat.channels_of(package):
        for entry in channel.entries:
            cand = by_name.get(entry.name)
            if cand is None:
                continue
            if semver_mode:
                hop = version is not None and cand.version > version and cand.version.major == version.major and (
                    version.major > 0 or cand.version.minor == version.minor)
            else:
                hop = (entry.replaces == name or name in entry.skips
                       or (version is not None and _in_skip_range(entry.skip_range, version)))
            if hop:
                out[cand.key] = cand
    return [out[k] for k in sorted(out)]
