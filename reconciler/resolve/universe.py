"""Every bundle the resolver may choose from, indexed, with the preference orders of deppy.

A ``Candidate`` is one bundle in one catalog (the same bundle name in two
catalogs is two candidates). Preference, best first:

* not deprecated before deprecated;
* for an Operator's own choice: catalog priority, then the default channel,
  then channel heads, then newer versions;
* for a dependency: the dependent's own catalog first, then catalog
  priority, the default channel, heads, and newer versions (older ones first
  under ``minimal-version``).

Ties are broken by catalog, package and bundle name, so the order, and with
it the resolution, never depends on dict or file order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

import semver

from reconciler.errors import InputError
from reconciler.model.catalog import Bundle, Catalog, Channel
from reconciler.model.constraints import MatchContext, Predicate
from reconciler.model.semver_range import VersionRange


@dataclass(frozen=True)
class Candidate:
    catalog: str
    priority: int
    bundle: Bundle
    channels: frozenset[str]
    heads_of: frozenset[str]       # channels in which this bundle is the head
    default_channel: str | None
    deprecated: bool

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.catalog, self.bundle.package, self.bundle.name)

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


class Universe:
    """The candidates of all catalogs, with indexes by package and by provided API."""

    def __init__(self, catalogs: Mapping[str, Catalog]) -> None:
        self.catalogs = dict(catalogs)
        self.candidates: list[Candidate] = []
        self.by_package: dict[str, list[Candidate]] = {}
        for name in sorted(catalogs):
            cat = catalogs[name]
            member: dict[tuple[str, str], list[Channel]] = {}
            for channel in cat.channels.values():
                for entry in channel.entries:
                    member.setdefault((channel.package, entry.name), []).append(channel)
            for (pkg, bname), bundle in sorted(cat.bundles.items()):
                chans = member.get((pkg, bname), [])
                package = cat.packages.get(pkg)
                cand = Candidate(
                    catalog=name, priority=cat.priority, bundle=bundle,
                    channels=frozenset(c.name for c in chans),
                    heads_of=frozenset(c.name for c in chans if bname in c.heads),
                    default_channel=package.default_channel if package else None,
                    deprecated=bool(bundle.properties_of("olm.deprecated")),
                )
                self.candidates.append(cand)
                self.by_package.setdefault(pkg, []).append(cand)

    def matching(self, predicate: Predicate, within: Iterable[Candidate] | None = None) -> list[Candidate]:
        return [c for c in (self.candidates if within is None else within)
                if predicate.matches(c.bundle, c.context)]

    def channel(self, cand: Candidate, name: str) -> Channel | None:
        return self.catalogs[cand.catalog].channels.get((cand.package, name))


def own_order(cands: Iterable[Candidate], channel: str | None) -> list[Candidate]:
    """Preference for an Operator's own bundle: priority, default channel, head, newest."""
    def key(c: Candidate) -> tuple:
        preferred = channel or c.default_channel
        return (c.deprecated, -c.priority, preferred not in c.channels, preferred not in c.heads_of,
                not c.heads_of)
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
    ordered.sort(key=lambda c: c.version, reverse=newest_first)
    ordered.sort(key=key)
    return ordered


def successors(universe: Universe, installed: Candidate) -> list[Candidate]:
    """Bundles one upgrade hop from ``installed``: replaces, skips and skipRange edges in its channels.

    A channel without any edges is semver-ordered: any higher version of the
    same major (same minor for 0.x) is a successor.
    """
    out: dict[tuple[str, str, str], Candidate] = {}
    same_catalog = [c for c in universe.by_package.get(installed.package, []) if c.catalog == installed.catalog]
    by_name = {c.name: c for c in same_catalog}
    for channel_name in installed.channels:
        channel = universe.channel(installed, channel_name)
        if channel is None:
            continue
        has_edges = any(e.replaces or e.skips or e.skip_range for e in channel.entries)
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
