"""Update proposals: which Operators could move to a newer bundle, and what the move needs.

An update is *within* the declaration when a resolution with the lock as
what is installed already picks a newer bundle (only ``olm.lock`` changes);
it is *outside* when the newer bundle is in another channel, beyond the
version range or in another catalog (the declaration changes too). Every
proposal is newer than what is installed and reached by an upgrade edge from
it (replaces, skips, skipRange, or semver in a semver-mode catalog): a
downgrade or a jump the catalog does not allow is never proposed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from reconciler.model.catalog import Catalog
from reconciler.model.lock import LockEntry
from reconciler.model.semver_range import parse_version
from reconciler.review.compare import upgrade_edge

LEVELS = ("patch", "minor", "major")


@dataclass(frozen=True)
class Proposal:
    operator: str
    package: str
    installed: str            # bundle name
    installed_version: str
    target: str
    target_version: str
    catalog: str
    channel: str
    scope: str                # "within" the declaration, or "outside" it
    edge: str
    level: str                # patch, minor or major
    changes: tuple[str, ...] = ()   # what the declaration must change ("channel stable -> fast", ...)
    version_text: str = ""          # the spec.version written when it must change: a pin stays a pin

    def to_dict(self) -> dict:
        return {"operator": self.operator, "package": self.package,
                "installed": {"name": self.installed, "version": self.installed_version},
                "target": {"name": self.target, "version": self.target_version, "catalog": self.catalog,
                           "channel": self.channel},
                "scope": self.scope, "edge": self.edge, "level": self.level,
                "declarationChanges": list(self.changes)}


def level(old: str, new: str) -> str:
    a, b = parse_version(old), parse_version(new)
    if b.major != a.major:
        return "major"
    return "minor" if b.minor != a.minor else "patch"


def allowed(lvl: str, allow: str) -> bool:
    return LEVELS.index(lvl) <= LEVELS.index(allow)


def proposals(snapshot, resolution, catalogs: Mapping[str, Catalog], installed: Mapping[str, LockEntry], *,
              allow: str = "major", include_outside: bool = False, only: tuple[str, ...] = (),
              semver_catalogs: frozenset[str] = frozenset()) -> list[Proposal]:
    """One proposal per Operator with an update (the newest allowed), in name order."""
    out = []
    for decl in snapshot.operators:
        if decl.bundle is not None or decl.catalog is None or (only and decl.name not in only):
            continue
        cls = snapshot.input_classes.get(decl.input_class)
        if cls is not None and cls.dry_run:
            continue
        entry = installed.get(decl.name)
        if entry is None or not entry.version:
            continue
        options: list[Proposal] = []
        sel = resolution.for_owner(decl.name)
        if sel is not None and sel.bundle_name != entry.name and sel.version:
            options += _option(decl.name, entry, sel.bundle_name, sel.version, sel.catalog, sel.channel, "within",
                               catalogs, semver_catalogs, forced=bool(cls is not None and cls.force), changes=())
        if include_outside:
            for name, cat in sorted(catalogs.items()):
                for b in cat.bundles_of(entry.package):
                    if sel is not None and b.name == sel.bundle_name and name == sel.catalog:
                        continue
                    for ch in cat.channels_of(entry.package):
                        if ch.entry(b.name) is None:
                            continue
                        changes, version_text = _declaration_changes(decl, name, ch.name, str(b.version))
                        if not changes:
                            continue  # the declaration already allows it; the resolution did not pick it
                        options += _option(decl.name, entry, b.name, str(b.version), name, ch.name, "outside",
                                           catalogs, semver_catalogs, forced=False, changes=changes,
                                           version_text=version_text)
        options = [p for p in options if allowed(p.level, allow)]
        if options:
            best = max(options, key=lambda p: (parse_version(p.target_version), p.scope == "within",
                                               p.channel == (decl.catalog.channel or "")))
            out.append(best)
    return sorted(out, key=lambda p: p.operator)


def _option(operator: str, entry: LockEntry, target: str, version: str, catalog: str, channel: str, scope: str,
            catalogs: Mapping[str, Catalog], semver_catalogs: frozenset[str], *, forced: bool,
            changes: tuple[str, ...], version_text: str = "") -> list[Proposal]:
    try:
        if parse_version(version) <= parse_version(entry.version):
            return []   # never a downgrade, nor a "move" to the same version
    except Exception:  # noqa: BLE001 - an unversioned bundle is not an update candidate
        return []
    edge = upgrade_edge(catalogs.get(catalog), entry.package, entry.name, target,
                        semver_mode=catalog in semver_catalogs, forced=forced)
    if edge == "no upgrade edge":
        return []
    return [Proposal(operator, entry.package, entry.name, entry.version, target, version, catalog, channel, scope,
                     edge, level(entry.version, version), changes, version_text)]


def _declaration_changes(decl, catalog: str, channel: str, version: str) -> tuple[tuple[str, ...], str]:
    """What the declaration must change to reach ``version`` in ``catalog``/``channel``, and its new
    spec.version ("" when the version stays)."""
    ref = decl.catalog
    out = []
    text = ""
    if ref.name != catalog:
        out.append(f"catalog {ref.name} -> {catalog}")
    if (ref.channel or "") and ref.channel != channel:
        out.append(f"channel {ref.channel} -> {channel}")
    if decl.version is not None and not decl.version.contains(parse_version(version)):
        text = new_version_text(str(decl.version), version, pinned=decl.version.is_exact)
        out.append(f"version {str(decl.version)!r} -> {text!r}")
    return tuple(out), text


def new_version_text(declared: str, version: str, *, pinned: bool) -> str:
    """The spec.version that admits ``version``: a pin moves to the new version, written as it was (``0.7.0``,
    ``v0.7.0``, ``=0.7.0`` stay in their form), as update bots keep a pinned dependency pinned; a range is
    widened (``widened``)."""
    if not pinned:
        return widened(version)
    body = declared.strip()
    prefix = body[:len(body) - len(body.lstrip("=v "))]
    return f"{prefix}{version}"


def widened(version: str) -> str:
    """The range written for a target beyond the declared one: from it, up to its next major (minor for 0.x)."""
    v = parse_version(version)
    upper = f"{v.major + 1}.0.0" if v.major > 0 else f"0.{v.minor + 1}.0"
    return f">={v.major}.{v.minor}.{v.patch} <{upper}"


_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.M)


def rewrite_declaration(text: str, name: str, p: Proposal, current_catalog: str, current_channel: str | None) -> str:
    """The declaration file with the Operator ``name`` pointed at the proposal (only the lines that change).

    Edits lines in place so comments and layout stay; the document is found
    by its ``name:`` and only its ``spec.catalog`` and ``spec.version`` lines move.
    """
    parts = _DOC_SPLIT.split(text)
    seps = _DOC_SPLIT.findall(text)
    for i, doc in enumerate(parts):
        if not re.search(rf"^\s+name:\s*['\"]?{re.escape(name)}['\"]?\s*(#.*)?$", doc, re.M):
            continue
        for change in p.changes:
            what = change.split(" ", 1)[0]
            if what == "version":
                doc, n = re.subn(r"^(\s+version:\s*).*$", lambda m: f'{m.group(1)}"{p.version_text}"',
                                 doc, count=1, flags=re.M)
            elif what == "channel":
                doc, n = re.subn(rf"^(\s+channel:\s*)['\"]?{re.escape(current_channel or '')}['\"]?\s*$",
                                 lambda m: f"{m.group(1)}{p.channel}", doc, count=1, flags=re.M)
            else:
                doc, n = re.subn(r"^(\s+catalog:\s*\n(?:\s+\S.*\n)*?\s+name:\s*)['\"]?" + re.escape(current_catalog)
                                 + r"['\"]?\s*$", lambda m: f"{m.group(1)}{p.catalog}", doc, count=1, flags=re.M)
            if n != 1:
                raise ValueError(f"cannot find the line to change for {change}")
        parts[i] = doc
        break
    out = parts[0]
    for sep, doc in zip(seps, parts[1:]):
        out += sep + doc
    return out
