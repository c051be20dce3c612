"""Catalog templates: terse inputs that expand to file-based catalogs, as opm's templates do.

* ``olm.template.basic``: FBC blobs where an ``olm.bundle`` may be just an
  ``image``; each such bundle is rendered from its content.
* ``olm.semver``: bundles listed under ``Candidate``, ``Fast`` and ``Stable``;
  channels are generated per major (``stable-v1``) and/or minor
  (``stable-v1.2``) version. Edges are opm's, walking one channel type's
  bundles in version order: the highest bundle of each minor version
  replaces the highest of the previous minor version of the same major, and
  skips every other bundle of that major below it (earlier minors too, as
  opm accumulates them); no edge crosses a major version, and an edge may
  name a bundle of another minor channel, as opm's do. The default channel
  is opm's high-water mark: the most stable channel type that has bundles,
  then the channel whose first (lowest) bundle is highest, then the
  ``DefaultChannelTypePreference`` (``minor`` or ``major``; by default minor
  when minor channels are generated). Without either ``Generate*`` flag only
  minor channels are generated. Field names match case-insensitively
  (``schema`` or ``Schema``) and unknown fields are refused, as opm's strict
  decoding does. ``tests/catalog/test_template.py`` compares all of this
  with opm on generated templates.

A bundle reference is a bundle directory (``file://`` or a path, relative to
the template file) or an OCI image reference, pulled through ``reconciler.oci``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import semver

from reconciler.authoring.render import APIKinds, render_bundle_dir
from reconciler.errors import CatalogError
from reconciler.model.semver_range import parse_version
from reconciler.report.words import agree

BundleRenderer = Callable[[str], dict[str, Any]]
SEMVER_TYPES = ("Candidate", "Fast", "Stable")   # increasing stability


def bundle_renderer(base: Path, providers: APIKinds | None = None,
                    warn: Callable[[str], object] | None = None) -> BundleRenderer:
    """Render a template's bundle reference: a directory near the template, or an OCI image.

    Bundles are rendered with ``olm.csv.metadata`` (opm's ``--migrate-level
    bundle-object-to-csv-metadata``), which resolution reads; ``providers``
    maps the resources a k8s+v1 bundle's RBAC requires to kinds.
    """
    def render(ref: str) -> dict[str, Any]:
        local = ref[len("file://"):] if ref.startswith("file://") else ref
        path = (base / local) if not Path(local).is_absolute() else Path(local)
        if path.is_dir():
            return render_bundle_dir(path, ref, display=ref, migrate=True, providers=providers, warn=warn)
        from reconciler import oci

        image = oci.pull(ref)   # the read-only, digest-keyed cache entry: rendering only reads it
        return render_bundle_dir(image.root, ref, display=ref, migrate=True, providers=providers, warn=warn)
    return render


def render_basic(doc: dict[str, Any], render: BundleRenderer, source: str) -> list[dict[str, Any]]:
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise CatalogError("an olm.template.basic template needs an 'entries' list", path=source)
    out = []
    for i, blob in enumerate(entries):
        if not isinstance(blob, dict) or not isinstance(blob.get("schema"), str):
            raise CatalogError(f"entries[{i}] is not a blob with a schema", path=source)
        if blob["schema"] == "olm.bundle" and set(blob) <= {"schema", "image"}:
            if not isinstance(blob.get("image"), str) or not blob["image"]:
                raise CatalogError(f"entries[{i}]: an olm.bundle entry needs an image", path=source)
            out.append(render(blob["image"]))
        else:
            out.append(blob)
    return out


SEMVER_FIELDS = ("Schema", "GenerateMajorChannels", "GenerateMinorChannels", "DefaultChannelTypePreference",
                 *SEMVER_TYPES)


def _field(doc: dict[str, Any], name: str) -> Any:
    """A field matched as Go's JSON decoding does: the exact name, else case-insensitively."""
    if name in doc:
        return doc[name]
    return next((v for k, v in doc.items() if isinstance(k, str) and k.lower() == name.lower()), None)


def _check_fields(doc: dict[str, Any], known: tuple[str, ...], where: str, source: str) -> None:
    lowered = {k.lower() for k in known}
    unknown = sorted(str(k) for k in doc if not isinstance(k, str) or k.lower() not in lowered)
    if unknown:
        raise CatalogError(f"{where}: unknown {agree(len(unknown), 'field', 'fields')} {', '.join(unknown)}", path=source,
                           hint=f"known fields: {', '.join(known)}")


def render_semver(doc: dict[str, Any], render: BundleRenderer, source: str) -> list[dict[str, Any]]:
    _check_fields(doc, SEMVER_FIELDS, "semver template", source)
    major = bool(_field(doc, "GenerateMajorChannels") or False)
    minor = bool(_field(doc, "GenerateMinorChannels") or False)
    if not major and not minor:
        minor = True
    preference = _field(doc, "DefaultChannelTypePreference") or ("minor" if minor else "major")
    if preference not in ("minor", "major"):
        raise CatalogError(f"unknown DefaultChannelTypePreference {preference!r}", path=source,
                           hint="valid values are 'major' or 'minor'")
    if not (minor if preference == "minor" else major):
        raise CatalogError(f"DefaultChannelTypePreference is {preference!r}, but no {preference}-version "
                           f"channels are generated", path=source,
                           hint=f"set Generate{preference.capitalize()}Channels: true or change the preference")
    rendered: dict[str, dict[str, Any]] = {}
    by_type: dict[str, list[tuple[semver.Version, str]]] = {}
    package = None
    for kind in SEMVER_TYPES:
        section = _field(doc, kind) or {}
        if not isinstance(section, dict):
            raise CatalogError(f"{kind} must be a mapping with Bundles", path=source)
        _check_fields(section, ("Bundles",), kind, source)
        refs = [_field(b, "Image") for b in _field(section, "Bundles") or [] if isinstance(b, dict)]
        for ref in refs:
            if not isinstance(ref, str) or not ref:
                raise CatalogError(f"{kind}.Bundles: every entry needs an Image", path=source)
            if ref not in rendered:
                rendered[ref] = render(ref)
            blob = rendered[ref]
            version = _version(blob, ref, source)
            if package is None:
                package = blob["package"]
            elif blob["package"] != package:
                raise CatalogError(f"{ref} is in package {blob['package']!r}, the template's other bundles in "
                                   f"{package!r}", path=source, hint="a semver template describes one package")
            by_type.setdefault(kind, []).append((version, blob["name"]))
    if package is None:
        raise CatalogError("the semver template lists no bundles", path=source)
    channels: list[dict[str, Any]] = []
    # (type rank, first version, 1 for the preferred channel kind, channel): opm's high-water mark, which it
    # compares when it creates a channel, that is at the channel's first (lowest) bundle
    heads: list[tuple[int, semver.Version, int, str]] = []
    for rank, kind in enumerate(SEMVER_TYPES):
        bundles = sorted(set(by_type.get(kind, [])), key=lambda b: (b[0], b[1]))
        if not bundles:
            continue
        _check_builds(kind, bundles, source)
        edges = _edges(bundles)
        if major:
            for mj in sorted({v.major for v, _ in bundles}):
                members = [(v, n) for v, n in bundles if v.major == mj]
                name = f"{kind.lower()}-v{mj}"
                channels.append(_channel(package, name, members, edges))
                heads.append((rank, members[0][0], int(preference == "major"), name))
        if minor:
            for mj, mn in sorted({(v.major, v.minor) for v, _ in bundles}):
                members = [(v, n) for v, n in bundles if (v.major, v.minor) == (mj, mn)]
                name = f"{kind.lower()}-v{mj}.{mn}"
                channels.append(_channel(package, name, members, edges))
                heads.append((rank, members[0][0], int(preference == "minor"), name))
    default = max(heads, key=lambda h: h[:3])[3]   # a full tie keeps the first, as opm's high-water mark does
    out: list[dict[str, Any]] = [{"schema": "olm.package", "name": package, "defaultChannel": default}]
    out += sorted(channels, key=lambda c: c["name"])
    out += sorted(rendered.values(), key=lambda b: b["name"])
    return out


def _version(blob: dict[str, Any], ref: str, source: str) -> semver.Version:
    for p in blob.get("properties", []):
        if p.get("type") == "olm.package":
            return parse_version(str(p["value"].get("version", "")))
    raise CatalogError(f"{ref} has no olm.package property", path=source)


def _check_builds(kind: str, bundles: list[tuple[semver.Version, str]], source: str) -> None:
    """As opm: versions of one channel type that differ only by build metadata cannot be ordered."""
    seen: dict[semver.Version, str] = {}
    for v, name in bundles:
        core = v.replace(build=None)
        if core in seen and seen[core] != name:
            raise CatalogError(f"{kind}: bundles {seen[core]} and {name} have versions that differ only by build "
                               f"metadata ({core}), which the semver template cannot order", path=source,
                               hint="semver precedence ignores build metadata; list one of them, or give them "
                                    "different versions")
        seen.setdefault(core, name)


def _edges(bundles: list[tuple[semver.Version, str]]) -> dict[str, dict[str, Any]]:
    """opm's edges for one channel type's bundles (ascending): set on the highest bundle of each minor version.

    It replaces the highest bundle of the previous minor version of the same
    major, and skips every bundle of that major seen before it but the one it
    replaces (sorted by name, as opm lists a set); a new major starts afresh.
    """
    edges: dict[str, dict[str, Any]] = {}
    replaces, seen = "", set()

    def link(name: str) -> None:
        entry: dict[str, Any] = {"replaces": replaces} if replaces else {}
        if skips := sorted(seen - {replaces}):
            entry["skips"] = skips
        if entry:
            edges[name] = entry

    for (prev, prev_name), (cur, _) in zip(bundles, bundles[1:]):
        if prev.major != cur.major:
            link(prev_name)
            replaces, seen = "", set()
            continue
        if prev.minor != cur.minor:
            link(prev_name)
            replaces = prev_name
        seen.add(prev_name)
    if len(bundles) > 1 and bundles[-2][0].major == bundles[-1][0].major:
        link(bundles[-1][1])
    return edges


def _channel(package: str, name: str, members: list[tuple[semver.Version, str]],
             edges: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"schema": "olm.channel", "package": package, "name": name,
            "entries": [{"name": n, **edges.get(n, {})} for _, n in members]}


def render_template(kind: str, doc: Any, base: Path, source: str,
                    render: BundleRenderer | None = None) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise CatalogError("a template must be a mapping", path=source)
    render = render or bundle_renderer(base)
    if kind == "basic":
        if doc.get("schema") != "olm.template.basic":
            raise CatalogError(f"schema is {doc.get('schema')!r}, not olm.template.basic", path=source)
        return render_basic(doc, render, source)
    if _field(doc, "Schema") != "olm.semver":
        raise CatalogError(f"Schema is {_field(doc, 'Schema')!r}, not olm.semver", path=source)
    return render_semver(doc, render, source)
