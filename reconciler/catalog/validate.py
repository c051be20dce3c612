"""The rules ``opm validate`` enforces, as functions from a loaded catalog to findings.

opm stops at the first problem its model conversion meets, then validates
the rest as a tree of errors; here every rule runs over the whole catalog and
returns every finding, each naming the file, the blob and the rule. The
rules follow operator-registry's ``declcfg.ConvertToModel`` and
``model.Validate`` (channel heads, the replaces chain walked from the head,
stranded bundles, unique versions compared with build metadata, strict
semantic versions, typed property values), plus one opm leaves to run time:
a ``skipRange`` must parse (blang dialect, via ``reconciler.model.semver_range``).

Cost is linear in the catalog: one pass over packages, channels (each walk
from the head is bounded by the channel's entries) and bundles.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import defaultdict

from reconciler.catalog.findings import WARNING, Finding
from reconciler.errors import InputError
from reconciler.model.catalog import (
    PROP_BUNDLE_OBJECT, PROP_CHANNEL, PROP_CSV_METADATA, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE,
    PROP_PACKAGE_REQUIRED, PROPERTY_MEANINGS, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE, Bundle, Catalog, Channel,
)

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any, Iterable

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
STRICT_VERSION = 'MAJOR.MINOR.PATCH with optional -prerelease and +build, no "v" prefix, no leading zeros'
_PRE_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
# The strict semantic versions semver writes back unchanged, in ASCII. A version that does not match is left to
# semver itself (it also accepts other scripts' digits and a trailing newline), so a catalog of well-formed
# versions is validated without importing it.
_PLAIN_VERSION = re.compile(rf"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)"
                            rf"(?:-{_PRE_IDENT}(?:\.{_PRE_IDENT})*)?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?")

# skipRanges as catalogs write them: comparisons of such versions, separated by spaces, groups by " || ". Every
# text this matches is a range the blang parser accepts; anything else is left to the parser, whose message it is.
_PLAIN_COMPARISON = rf"(?:>=|<=|>|<|==|=|!=)?{_PLAIN_VERSION.pattern}"
_PLAIN_SKIP_RANGE = re.compile(rf"{_PLAIN_COMPARISON}(?: +(?:\|\| +)?{_PLAIN_COMPARISON})*")  # spaces or " || " between


def _strict_version(text: Any) -> str | None:
    """``str(semver.Version.parse(text))``, or None where that raises: what the version rules compare."""
    if isinstance(text, str) and _PLAIN_VERSION.fullmatch(text):
        return text
    import semver

    try:
        return str(semver.Version.parse(text))
    except (ValueError, TypeError):
        return None


def validate(catalog: Catalog) -> list[Finding]:
    """Every finding of every rule, packages in name order."""
    out: list[Finding] = []
    by_package_channels: dict[str, list[Channel]] = defaultdict(list)
    for (pkg, _), ch in sorted(catalog.channels.items()):
        by_package_channels[pkg].append(ch)
    by_package_bundles: dict[str, list[Bundle]] = defaultdict(list)
    for (pkg, _), b in sorted(catalog.bundles.items()):
        by_package_bundles[pkg].append(b)
    in_channels: dict[str, set[str]] = defaultdict(set)
    for (pkg, _), ch in catalog.channels.items():
        in_channels[pkg].update(e.name for e in ch.entries)

    for pkg_name in sorted(set(catalog.packages) | set(by_package_channels) | set(by_package_bundles)):
        pkg = catalog.packages.get(pkg_name)
        channels = by_package_channels.get(pkg_name, [])
        bundles = by_package_bundles.get(pkg_name, [])
        if pkg is None:
            for ch in channels:
                out.append(Finding("channel-package", f"channel {ch.name!r} names package {pkg_name!r}, which has "
                                   f"no olm.package blob", ch.source, f"olm.channel {ch.name}",
                                   f"add an olm.package blob named {pkg_name!r} or fix the channel's package"))
            for b in bundles:
                out.append(Finding("channel-package", f"bundle names package {pkg_name!r}, which has no "
                                   f"olm.package blob", b.source, f"olm.bundle {b.name}",
                                   f"add an olm.package blob named {pkg_name!r} or fix the bundle's package"))
            continue
        out.extend(_package(pkg_name, catalog, channels))
        names = {b.name for b in bundles}
        for ch in channels:
            out.extend(_channel(ch, names))
        for b in bundles:
            out.extend(_bundle(b, in_channels[pkg_name]))
        out.extend(_unique_versions(pkg_name, bundles, in_channels[pkg_name]))
    out.extend(_deprecations(catalog))
    out.extend(_property_types(catalog))
    return out


def _property_types(catalog: Catalog) -> Iterable[Finding]:
    """One warning per property type with no meaning here, at its first bundle: what happens to it."""
    first: dict[str, Bundle] = {}
    count: dict[str, int] = defaultdict(int)
    for _, b in sorted(catalog.bundles.items()):
        for t in {p.type for p in b.properties if p.type and p.type not in PROPERTY_MEANINGS}:
            first.setdefault(t, b)
            count[t] += 1
    for t, b in sorted(first.items()):
        n = count[t] - 1
        others = f" (and {n} other bundle{'s' if n > 1 else ''})" if n else ""
        yield Finding("property-type", f"property type {t!r}{others} is not one the reconciler interprets: it is kept "
                      f"as written (rendered, and seen by CEL rules) and plays no part in resolution, as OLM ignores "
                      f"property types it does not know", b.source, f"olm.bundle {b.name}",
                      "a requirement is written as olm.gvk.required, olm.package.required, olm.label.required or "
                      "olm.constraint; check the spelling if it was meant as one", severity=WARNING)


def _package(name: str, catalog: Catalog, channels: list[Channel]) -> Iterable[Finding]:
    pkg = catalog.packages[name]
    where = f"olm.package {name}"
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        yield Finding("package-name", f"package name {name!r} is not a valid DNS-1123 label", pkg.source, where,
                      "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or "
                      "digit")
    if not pkg.default_channel:
        yield Finding("default-channel", f"package {name!r} has no default channel", pkg.source, where,
                      "set defaultChannel to one of its channels")
    elif (name, pkg.default_channel) not in catalog.channels:
        have = ", ".join(c.name for c in channels) or "none"
        yield Finding("default-channel", f"default channel {pkg.default_channel!r} of package {name!r} does not "
                      f"exist", pkg.source, where, f"channels of the package: {have}")
    if not channels:
        yield Finding("package-channels", f"package {name!r} has no channels", pkg.source, where,
                      "add an olm.channel blob listing its bundles")


def _channel(ch: Channel, bundle_names: set[str]) -> Iterable[Finding]:
    where = f"olm.channel {ch.name}"
    if not ch.entries:
        yield Finding("channel-empty", f"channel {ch.name!r} has no entries", ch.source, where,
                      "list at least one bundle, or remove the channel")
        return
    for e in ch.entries:
        if e.name not in bundle_names:
            yield Finding("channel-entry-bundle", f"channel {ch.name!r} lists bundle {e.name!r}, which is not in "
                          f"package {ch.package!r}", ch.source, where,
                          f"add an olm.bundle blob named {e.name!r} or remove the entry")
        for i, s in enumerate(e.skips):
            if not s:
                yield Finding("skips", f"entry {e.name!r}: skips[{i}] is empty", ch.source, where,
                              "remove the empty item, or name the bundle it skips")
        if e.skip_range is not None and not _PLAIN_SKIP_RANGE.fullmatch(e.skip_range):
            from reconciler.model.semver_range import VersionRange  # imported by the first unusual skipRange

            try:
                VersionRange.parse(e.skip_range, dialect="blang")
            except InputError as exc:
                yield Finding("skip-range", f"entry {e.name!r}: skipRange: {exc.message}", ch.source, where,
                              exc.hint)
    yield from _graph(ch)


def _graph(ch: Channel) -> Iterable[Finding]:
    """Heads, the replaces chain from the head, and stranded entries, as opm walks them."""
    where = f"olm.channel {ch.name}"
    heads = ch.heads
    if len(heads) != 1:
        if not heads:
            yield Finding("channel-head", f"channel {ch.name!r} has no head: every entry is replaced or skipped "
                          f"by another", ch.source, where, "the newest entry must not be replaced or skipped")
        else:
            yield Finding("channel-head", f"channel {ch.name!r} has {len(heads)} heads: "
                          f"{', '.join(sorted(heads))}", ch.source, where,
                          "connect them: all but one must be replaced or skipped by another entry")
        return
    entries = {e.name: e for e in ch.entries}
    skipped = {s for e in ch.entries for s in e.skips}
    chain = [heads[0]]
    on_chain = {heads[0]}
    cur = entries.get(heads[0])
    while cur is not None:
        nxt = cur.replaces or ""
        if nxt in skipped:
            break
        if nxt in on_chain:
            cycle = chain[chain.index(nxt):] + [nxt]
            yield Finding("replaces-cycle", f"channel {ch.name!r}: replaces chain has a cycle: "
                          f"{' -> '.join(cycle)}", ch.source, where, "break the cycle by removing one replaces")
            return
        chain.append(nxt)
        on_chain.add(nxt)
        cur = entries.get(nxt)
    stranded = sorted(set(entries) - on_chain - skipped)
    if stranded:
        yield Finding("stranded-bundle", f"channel {ch.name!r} has stranded bundles (not reachable from the head "
                      f"{heads[0]!r} by replaces, nor skipped): {', '.join(stranded)}", ch.source, where,
                      "make another entry replace or skip each of them, or remove them from the channel")


def _bundle(b: Bundle, in_channels: set[str]) -> Iterable[Finding]:
    where = f"olm.bundle {b.name}"
    pkg_props = [p for p in b.properties if p.type == PROP_PACKAGE]
    if not pkg_props:
        yield Finding("bundle-package-property", "bundle has no olm.package property", b.source, where,
                      f"add {{type: olm.package, value: {{packageName: {b.package}, version: ...}}}}")
    elif len(pkg_props) > 1:
        yield Finding("bundle-package-property", f"bundle has {len(pkg_props)} olm.package properties; exactly one "
                      f"is required", b.source, where, "keep the one with this bundle's package and version")
    else:
        value = pkg_props[0].value
        if not isinstance(value, dict) or not all(isinstance(value.get(k), (str, type(None)))
                                                  for k in ("packageName", "version")):
            yield Finding("bundle-package-property", "the olm.package property's value must be a mapping with "
                          "packageName and version", b.source, where,
                          f"write it as {{packageName: {b.package}, version: {STRICT_VERSION}}}, both strings")
        else:
            if (value.get("packageName") or "") != b.package:
                yield Finding("bundle-package-property", f"olm.package property names package "
                              f"{value.get('packageName') or ''!r}, but the bundle is in package {b.package!r}",
                              b.source, where, "the two must agree: fix packageName or the bundle's package")
            version = value.get("version") or ""
            if _strict_version(version) is None:
                yield Finding("bundle-package-property", f'olm.package property: version "{version}" is not a '
                              f"strict semantic version", b.source, where, f"write it as {STRICT_VERSION}")
    for i, p in enumerate(b.properties):
        problem = property_problem(p.type, p.value)
        if problem:
            yield Finding("property-value", f"property {i + 1} ({p.type}): {problem}", b.source, where,
                          f"opm decodes {p.type} values in this shape and refuses the catalog otherwise; fix the "
                          f"value (quote strings YAML would read as numbers or booleans)")
    if not b.image and not any(p.type == PROP_BUNDLE_OBJECT for p in b.properties):
        yield Finding("bundle-image", "bundle has no image", b.source, where,
                      "set image: to the bundle image (or add olm.bundle.object properties)")
    if b.name not in in_channels:
        yield Finding("bundle-in-channel", f"bundle {b.name!r} is not in any channel of package {b.package!r}",
                      b.source, where, "add it to a channel's entries, or remove it")


def _unique_versions(pkg: str, bundles: list[Bundle], in_channels: set[str]) -> Iterable[Finding]:
    by_version: dict[str, list[Bundle]] = defaultdict(list)
    for b in bundles:
        if b.name not in in_channels:
            continue  # opm's model holds only channel members
        value = next((p.value for p in b.properties if p.type == PROP_PACKAGE), None)
        if not isinstance(value, dict) or not isinstance(value.get("version"), str):
            continue
        v = _strict_version(value["version"])
        if v is None:
            continue
        by_version[v].append(b)
    for version, same in sorted(by_version.items()):
        if len(same) > 1:
            first = same[0]
            yield Finding("unique-version", f"bundles {', '.join(b.name for b in same)} of package {pkg!r} all have "
                          f"version {version}", first.source, f"olm.bundle {first.name}",
                          "each bundle of a package needs its own version")


def _deprecations(catalog: Catalog) -> Iterable[Finding]:
    for pkg, dep in sorted(catalog.deprecations.items()):
        where = f"olm.deprecations {pkg}"
        if pkg not in catalog.packages:
            yield Finding("deprecation", f"deprecations name package {pkg!r}, which is not in the catalog",
                          dep.source, where, "fix the package name, or remove the olm.deprecations blob")
            continue
        seen: set[tuple[str, str]] = set()
        for i, e in enumerate(dep.entries, 1):
            label = f"entry {i}"
            if (e.schema, e.name) in seen:
                ref = f"{e.schema} {e.name!r}" if e.name else e.schema
                yield Finding("deprecation", f"{label} repeats the reference {ref}", dep.source, where,
                              "list each reference once; merge their messages")
                continue
            seen.add((e.schema, e.name))
            if not e.schema:
                yield Finding("deprecation", f"{label}: reference has no schema", dep.source, where,
                              "use olm.package, olm.channel or olm.bundle")
            elif e.schema == SCHEMA_PACKAGE:
                if e.name:
                    yield Finding("deprecation", f"{label}: an olm.package reference must not have a name (it is "
                                  f"{e.name!r})", dep.source, where, "the package is the blob's package field")
            elif e.schema == SCHEMA_CHANNEL:
                if (pkg, e.name) not in catalog.channels:
                    have = ", ".join(sorted(c for p, c in catalog.channels if p == pkg)) or "none"
                    yield Finding("deprecation", f"{label}: channel {e.name!r} is not in package {pkg!r}",
                                  dep.source, where, f"channels of the package: {have}")
            elif e.schema == SCHEMA_BUNDLE:
                if (pkg, e.name) not in catalog.bundles:
                    yield Finding("deprecation", f"{label}: bundle {e.name!r} is not in package {pkg!r}",
                                  dep.source, where, "name a bundle of the package (its olm.bundle name), or remove "
                                  "the entry")
            else:
                yield Finding("deprecation", f"{label}: unknown reference schema {e.schema!r}", dep.source, where,
                              "use olm.package, olm.channel or olm.bundle")
            if e.schema and not e.message:
                yield Finding("deprecation", f"{label}: message is empty", dep.source, where,
                              "say why it is deprecated and what to use instead")


# ---------------------------------------------------------------------------------------------------------
# Typed property values, as opm's property.Parse decodes them


def _strs(value: Any, keys: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"value must be a mapping with {', '.join(keys)}"
    for k in keys:
        if value.get(k) is not None and not isinstance(value[k], str):
            return f"{k} must be a string"
    return None


_CSV_STRINGS = ("description", "displayName", "maturity", "minKubeVersion")


def property_problem(type_: str, value: Any) -> str | None:
    """What is wrong with a well-known property's value, or None. Other types are opaque."""
    if not type_:
        return "type must be set"
    if type_ == PROP_PACKAGE:
        return None  # checked with its own rule
    if type_ == PROP_PACKAGE_REQUIRED:
        return _strs(value, ("packageName", "versionRange"))
    if type_ in (PROP_GVK, PROP_GVK_REQUIRED):
        return _strs(value, ("group", "version", "kind"))
    if type_ == PROP_CHANNEL:
        if value is not None and (not isinstance(value, dict) or not isinstance(value.get("priority", 0), int)):
            return "value must be a mapping with channelName and an integer priority"
        return _strs(value, ("channelName",))
    if type_ == PROP_BUNDLE_OBJECT:
        if problem := _strs(value, ("data",)):
            return problem
        data = (value or {}).get("data") or ""
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return "data is not valid base64"
        return None
    if type_ == PROP_CSV_METADATA:
        if value is None:
            return None
        if not isinstance(value, dict):
            return "value must be a mapping"
        for k in _CSV_STRINGS:
            if value.get(k) is not None and not isinstance(value[k], str):
                return f"{k} must be a string"
        for k in ("annotations", "labels"):
            m = value.get(k)
            if m is not None and (not isinstance(m, dict) or not all(isinstance(v, (str, type(None)))
                                                                     for v in m.values())):
                return f"{k} must map strings to strings"
        kw = value.get("keywords")
        if kw is not None and (not isinstance(kw, list) or not all(isinstance(k, (str, type(None))) for k in kw)):
            return "keywords must be a list of strings"
        modes = value.get("installModes")
        if modes is not None and (not isinstance(modes, list) or not all(
                isinstance(m, dict) and isinstance(m.get("supported", False), bool) for m in modes)):
            return "installModes must be a list of {type, supported: true|false}"
    return None
