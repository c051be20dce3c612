"""Listing a catalog's packages, channels and bundles, filtered and printed as a table, JSON or YAML.

Filters are small predicates over rows built from the model, combined with
AND, so the CLI and any other caller filter the same way. Rows are plain
dicts of strings, numbers and lists, which is all three output formats need.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from reconciler import yamlio
from reconciler.model.catalog import SCHEMA_BUNDLE, SCHEMA_CHANNEL, Bundle, Catalog

Row = dict[str, Any]


@dataclass(frozen=True)
class Filters:
    package: str | None = None      # glob on the package name
    channel: str | None = None      # glob on the channel name
    name: str | None = None         # glob on the bundle name
    provides: str | None = None     # a kind, or group/version/kind, the bundle provides (olm.gvk)
    deprecated: bool | None = None  # only deprecated (True) or only current (False) entries

    def predicates(self) -> list[Callable[[Row], bool]]:
        out: list[Callable[[Row], bool]] = []
        if self.package:
            out.append(lambda r: fnmatch.fnmatchcase(r["package"], self.package))
        if self.channel:
            out.append(lambda r: any(fnmatch.fnmatchcase(c, self.channel) for c in _channels_of(r)))
        if self.name:
            out.append(lambda r: fnmatch.fnmatchcase(r.get("name", ""), self.name))
        if self.provides:
            want = self.provides
            out.append(lambda r: any(g == want or g.rsplit("/", 1)[-1] == want for g in r.get("provides", [])))
        if self.deprecated is not None:
            out.append(lambda r: bool(r.get("deprecated")) == self.deprecated)
        return out


def _channels_of(row: Row) -> list[str]:
    if "channels" in row and isinstance(row["channels"], list):
        return row["channels"]
    return [row.get("channel", "")]


def _apply(rows: Iterable[Row], filters: Filters) -> list[Row]:
    preds = filters.predicates()
    return [r for r in rows if all(p(r) for p in preds)]


def packages(catalog: Catalog, filters: Filters = Filters()) -> list[Row]:
    rows = []
    for name, pkg in sorted(catalog.packages.items()):
        chans = [c.name for c in catalog.channels_of(name)]
        default = catalog.channels.get((name, pkg.default_channel or ""))
        head = default.heads[0] if default and len(default.heads) == 1 else ""
        hb = catalog.bundle(name, head) if head else None
        rows.append({"package": name, "defaultChannel": pkg.default_channel or "", "channels": chans,
                     "bundles": len(catalog.bundles_of(name)), "head": head,
                     "version": _version(hb) if hb else "", "deprecated": catalog.deprecation(name) or ""})
    return _apply(rows, filters)


def channels(catalog: Catalog, filters: Filters = Filters()) -> list[Row]:
    rows = []
    for (pkg, name), ch in sorted(catalog.channels.items()):
        rows.append({"package": pkg, "channel": name, "head": ", ".join(ch.heads), "entries": len(ch.entries),
                     "default": catalog.packages.get(pkg) is not None
                     and catalog.packages[pkg].default_channel == name,
                     "deprecated": catalog.deprecation(pkg, SCHEMA_CHANNEL, name) or ""})
    return _apply(rows, filters)


def bundles(catalog: Catalog, filters: Filters = Filters()) -> list[Row]:
    member: dict[tuple[str, str], list[str]] = {}
    for (pkg, cname), ch in sorted(catalog.channels.items()):
        for e in ch.entries:
            member.setdefault((pkg, e.name), []).append(cname)
    rows = []
    for (pkg, name), b in sorted(catalog.bundles.items(), key=lambda kv: (kv[0][0], _sort_version(kv[1]),
                                                                           kv[0][1])):
        rows.append({"package": pkg, "name": name, "version": _version(b), "channels": member.get((pkg, name), []),
                     "image": b.image, "mediatype": b.mediatype,
                     "provides": [str(g) for g in b.provided_gvks],
                     "deprecated": catalog.deprecation(pkg, SCHEMA_BUNDLE, name) or ""})
    return _apply(rows, filters)


def _version(b: Bundle) -> str:
    try:
        return str(b.version)
    except Exception:
        return ""


def _sort_version(b: Bundle) -> tuple[int, Any]:
    try:
        return (0, b.version)
    except Exception:
        return (1, None)


# ---------------------------------------------------------------------------------------------------------
# Output


TABLE_COLUMNS = {
    "packages": ("package", "defaultChannel", "channels", "bundles", "version", "deprecated"),
    "channels": ("package", "channel", "default", "entries", "head", "deprecated"),
    "bundles": ("package", "name", "version", "channels", "mediatype", "deprecated"),
}


def render(rows: list[Row], what: str, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return yamlio.dump(rows) if rows else "[]\n"
    cols = TABLE_COLUMNS[what]
    cells = [[c.upper() for c in cols]] + [[_cell(bool(r.get(c)) if c == "deprecated" else r.get(c)) for c in cols]
                                           for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n" for row in cells)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return "" if v is None else str(v)
