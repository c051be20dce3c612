"""Resolution: declarations + catalogs (+ what is installed) -> one bundle per Operator.

Resolution reads catalog metadata only; it never fetches bundle content.
``Resolver`` is the interface the pipeline calls; ``ChannelHeadResolver``
picks, per Operator, the newest bundle of its channel that satisfies its
version range, starting from the channel head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

from reconciler.errors import ResolutionError
from reconciler.model.catalog import Bundle, Catalog, Channel
from reconciler.model.declarations import OperatorDecl
from reconciler.model.lock import Lockfile


@dataclass(frozen=True)
class Selection:
    """The bundle chosen for one Operator, and where it came from."""

    operator: OperatorDecl
    bundle_name: str
    image: str
    package: str = ""
    version: str = ""
    catalog: str = ""
    channel: str = ""


@dataclass(frozen=True)
class Resolution:
    selections: tuple[Selection, ...]


class Resolver(Protocol):
    def resolve(self, operators: tuple[OperatorDecl, ...], catalogs: Mapping[str, Catalog],
                installed: Lockfile | None) -> Resolution: ...


class ChannelHeadResolver:
    """Each Operator independently: the channel head if it satisfies the version, else the newest that does."""

    def resolve(self, operators: tuple[OperatorDecl, ...], catalogs: Mapping[str, Catalog],
                installed: Lockfile | None) -> Resolution:
        return Resolution(tuple(self._one(op, catalogs) for op in operators))

    def _one(self, op: OperatorDecl, catalogs: Mapping[str, Catalog]) -> Selection:
        where = str(op.origin)
        obj = f"Operator {op.name}"
        if op.bundle is not None:
            return Selection(operator=op, bundle_name=op.bundle.name, image=op.bundle.refs[0])
        sel = op.catalog
        assert sel is not None
        catalog = catalogs.get(sel.name)
        if catalog is None:
            raise ResolutionError(f"catalog {sel.name!r} not found", path=where, obj=obj,
                                  hint=f"catalogs in this repository: {_names(catalogs)} "
                                       f"(each is a directory under catalogs/)")
        package = catalog.packages.get(sel.package)
        if package is None:
            raise ResolutionError(f"package {sel.package!r} not found in catalog {sel.name!r}", path=where,
                                  obj=obj, hint=f"packages in {sel.name}: {_names(catalog.packages)}")
        channel_name = sel.channel or package.default_channel
        if channel_name is None:
            raise ResolutionError(f"package {sel.package!r} has no default channel; set spec.catalog.channel",
                                  path=where, obj=obj)
        channel = catalog.channels.get((sel.package, channel_name))
        if channel is None:
            raise ResolutionError(
                f"channel {channel_name!r} not found in package {sel.package!r} of catalog {sel.name!r}",
                path=where, obj=obj,
                hint=f"channels: {_names({c.name: c for c in catalog.channels_of(sel.package)})}")
        candidates = self._ordered(channel, catalog)
        if op.entrypoint:
            candidates = [b for b in candidates if b.name == op.entrypoint] or candidates[:0]
        if op.version is not None:
            candidates = [b for b in candidates if op.version.contains(b.version)]
        if not candidates:
            have = ", ".join(f"{b.name} ({b.version})" for b in self._ordered(channel, catalog))
            want = f"version {op.version}" if op.version else f"entrypoint {op.entrypoint}"
            raise ResolutionError(
                f"no bundle in channel {channel_name!r} of package {sel.package!r} satisfies {want}",
                path=where, obj=obj, hint=f"the channel has: {have or 'no bundles'}")
        best = candidates[0]
        return Selection(operator=op, bundle_name=best.name, image=best.image, package=best.package,
                         version=str(best.version), catalog=catalog.name, channel=channel_name)

    @staticmethod
    def _ordered(channel: Channel, catalog: Catalog) -> list[Bundle]:
        """Channel entries, heads first, then by descending version (name breaks ties)."""
        heads = set(channel.heads)
        bundles = sorted((b for e in channel.entries if (b := catalog.bundle(channel.package, e.name))),
                         key=lambda b: b.name)
        bundles.sort(key=lambda b: b.version, reverse=True)
        bundles.sort(key=lambda b: b.name not in heads)
        return bundles


def _names(items: Mapping[str, object]) -> str:
    return ", ".join(sorted(items)) or "none"
