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
from typing import Iterable, Mapping

import semver

from reconciler.errors import InputError
from reconciler.model.catalog import PROP_LABEL, Bundle, Catalog, Channel
from reconciler.model.constraints import (
    AllOf, AnyOf, HasLabel, Labelled, Located, MatchContext, NameIs, PackageIs, Predicate, ProvidesGVK,
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


@dataclass
class CatalogIndex:
    """The candidates of one catalog, indexed; built once per loaded catalog."""

    candidates: list[Candidate]
    by_package: dict[str, list[Candidate]]
    by_api: dict[tuple[str, str, str], list[Candidate]]
    by_name: dict[str, list[Candidate]]
    by_label: dict[str, list[Candidate]]

    @classmethod
    def build(cls, name: str, cat: Catalog) -> CatalogIndex:
        index = cls([], {}, {}, {}, {})
        member: dict[tuple[str, str], list[Channel]] = {}
        for channel in cat.channels.values():
            for entry in channel.entries:
                member.setdefault((channel.package, entry.name), []).append(channel)
        deprecated_packages = {pkg for pkg in cat.packages if cat.deprecation(pkg) is not None}
        for (pkg, bname), bundle in sorted(cat.bundles.items()):
            chans = member.get((pkg, bname), [])
            package = cat.packages.get(pkg)
            cand = Candidate(
                catalog=name, priority=cat.priority, bundle=bundle,
                channels=frozenset(c.name for c in chans),
                heads_of=frozenset(c.name for c in chans if bname in c.heads),
                default_channel=package.default_channel if package else None,
                deprecated=pkg in deprecated_packages or cat.deprecation(pkg, "olm.bundle", bname) is not None,
            )
            index.candidates.append(cand)
            index.by_package.setdefault(pkg, []).append(cand)
            index.by_name.setdefault(bname, []).append(cand)
            for v in bundle.properties_of("olm.gvk"):
                if isinstance(v, dict):
                    api = (v.get("group") or "", v.get("version") or "", v.get("kind") or "")
                    index.by_api.setdefault(api, []).append(cand)
            for v in bundle.properties_of(PROP_LABEL):
                label = v.get("label") if isinstance(v, dict) else v
                if isinstance(label, str):
                    index.by_label.setdefault(label, []).append(cand)
        return index


_BY_OBJECT: dict[int, tuple[str, CatalogIndex]] = {}
_BY_DIGEST: dict[tuple[str, str, int], CatalogIndex] = {}
_KEEP_DIGESTS = 8


def _index(name: str, cat: Catalog) -> CatalogIndex:
    """The catalog's index, built once: catalogs are immutable once loaded.

    Kept per catalog object while it lives, and per content digest for the
    last few catalogs, so a reconcile loop that reloads an unchanged catalog
    does not rebuild its index.
    """
    cached = _BY_OBJECT.get(id(cat))
    if cached is not None and cached[0] == name:
        return cached[1]
    key = (name, cat.digest, cat.priority)
    index = _BY_DIGEST.get(key) if cat.digest else None
    if index is None:
        index = CatalogIndex.build(name, cat)
        if cat.digest:
            _BY_DIGEST[key] = index
            while len(_BY_DIGEST) > _KEEP_DIGESTS:
                _BY_DIGEST.pop(next(iter(_BY_DIGEST)))
    _BY_OBJECT[id(cat)] = (name, index)
    weakref.finalize(cat, _BY_OBJECT.pop, id(cat), None)
    return index


class Universe:
    """The candidates of all catalogs, with indexes by package, provided API and name."""

    def __init__(self, catalogs: Mapping[str, Catalog]) -> None:
        self.catalogs = dict(catalogs)
        self.candidates: list[Candidate] = []
        self.by_package: dict[str, list[Candidate]] = {}
        self.by_api: dict[tuple[str, str, str], list[Candidate]] = {}
        self.by_name: dict[str, list[Candidate]] = {}
        self.by_label: dict[str, list[Candidate]] = {}
        indexes = [_index(name, catalogs[name]) for name in sorted(catalogs)]
        if len(indexes) == 1:
            only = indexes[0]
            self.candidates, self.by_package, self.by_api, self.by_name, self.by_label = (
                only.candidates, only.by_package, only.by_api, only.by_name, only.by_label)
            return
        for index in indexes:
            self.candidates.extend(index.candidates)
            for mine, theirs in ((self.by_package, index.by_package), (self.by_api, index.by_api),
                                 (self.by_name, index.by_name), (self.by_label, index.by_label)):
                for k, v in theirs.items():
                    mine.setdefault(k, []).extend(v)

    def matching(self, predicate: Predicate, within: Iterable[Candidate] | None = None) -> list[Candidate]:
        """Candidates the predicate accepts, looked for only where the indexes say they can be."""
        if within is None:
            narrowed = self._pool(predicate)
            within = self.candidates if narrowed is None else narrowed
        return [c for c in within if predicate.matches(c.bundle, c.context)]

    def _pool(self, pred: Predicate) -> list[Candidate] | None:
        """A superset of the candidates ``pred`` can accept, from an index; None when no index applies."""
        if isinstance(pred, PackageIs):
            return self.by_package.get(pred.package, [])
        if isinstance(pred, ProvidesGVK):
            return self.by_api.get((pred.group, pred.version, pred.kind), [])
        if isinstance(pred, NameIs):
            return self.by_name.get(pred.name, [])
        if isinstance(pred, HasLabel):
            return self.by_label.get(pred.label, [])
        if isinstance(pred, (Labelled, Located)):
            return self._pool(pred.inner)
        if isinstance(pred, AllOf):
            pools = [p for p in map(self._pool, pred.parts) if p is not None]
            return min(pools, key=len) if pools else None
        if isinstance(pred, AnyOf):
            pools = [self._pool(p) for p in pred.parts]
            if any(p is None for p in pools):
                return None
            seen: dict[tuple[str, str, str], Candidate] = {}
            for pool in pools:
                for c in pool or ():
                    seen.setdefault(c.key, c)
            return list(seen.values())
        return None

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
    same_catalog = [c for c in universe.by_package.get(installed.package, []) if c.catalog == installed.catalog]
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
    by_name = {c.name: c for c in universe.by_package.get(package, []) if c.catalog == catalog}
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
