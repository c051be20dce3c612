"""Reading a file-based catalog directory into the model, one file at a time.

The directory is walked recursively (a directory's own files first, then its
subdirectories, each sorted by name, so results never depend on the file
system's order). Every ``.json``, ``.yaml`` and ``.yml`` file is a stream of
blobs (multi-document YAML or concatenated JSON) parsed by
``reconciler.yamlio``; ``.indexignore`` files exclude paths below the
directory that holds them with gitignore semantics (``pathspec``'s
``GitIgnoreSpec``; a deeper file's verdict overrides a shallower one's).

Each file's blobs are turned into model objects as soon as it is parsed and
the parsed text is dropped, so memory holds the model, not the catalog's
text. Problems never stop the load: a file that does not parse, a blob of
the wrong shape, a duplicate definition, each becomes a ``Finding`` and
loading continues with the rest; ``validate`` adds the cross-blob rules.
The shape checks follow what opm's JSON decoding accepts (a field of the
wrong type fails there, an unknown field is ignored).
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from reconciler import yamlio
from reconciler.catalog.findings import WARNING, Finding
from reconciler.errors import CatalogError, InputError
from reconciler.model.catalog import (
    SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE, Bundle, Catalog, Channel, ChannelEntry,
    DeprecationEntry, Deprecations, Icon, Meta, Package, Property,
)
from reconciler.model.record import Record

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:  # pathspec is imported when a tree has an .indexignore: most catalogs do not
    from os import PathLike
    from typing import Any, Iterator

    import pathspec

SUFFIXES = (".json", ".yaml", ".yml")
INDEXIGNORE = ".indexignore"


class CatalogFile(Record):
    """One catalog file of a walk."""

    path: str        # on disk
    display: str     # as shown in findings
    rel: str         # relative to the catalog root, posix
    stat: os.stat_result | None

    def __init__(self, path: str, display: str, rel: str, stat: os.stat_result | None = None) -> None:
        self.__dict__.update(path=path, display=display, rel=rel, stat=stat)


class Walk(Record):
    """What ``walk`` found under a catalog root."""

    files: tuple[CatalogFile, ...]       # catalog files to read, in load order
    skipped: tuple[CatalogFile, ...]     # other files that are not ignored

    def __init__(self, files: tuple[CatalogFile, ...], skipped: tuple[CatalogFile, ...]) -> None:
        self.__dict__.update(files=files, skipped=skipped)


def walk(root: str | PathLike[str], display_root: str) -> Walk:
    """The catalog files under ``root`` in load order, honouring every ``.indexignore``.

    Uses ``os.scandir`` directly (not ``os.walk`` and ``pathlib``): on a warm
    load of a large catalog the walk is most of the cost.
    """
    files: list[CatalogFile] = []
    skipped: list[CatalogFile] = []
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []  # (dir prefix relative to root, spec)
    pending: list[tuple[str, str, frozenset[tuple[int, int]]]] = [(os.fspath(root), "", frozenset())]
    while pending:
        here, prefix, above = pending.pop()   # above: the (device, inode) of each directory it is in
        st = os.stat(here)
        if (st.st_dev, st.st_ino) in above:   # a link back up: walking it would never end
            raise CatalogError("symbolic link points to a directory that contains it",
                               path=f"{display_root}/{prefix.rstrip('/')}",
                               hint="remove the link, or list it in an .indexignore file")
        above = above | {(st.st_dev, st.st_ino)}
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
        names = {e.name for e in entries}
        if INDEXIGNORE in names:
            import pathspec

            text = yamlio.read_text(os.path.join(here, INDEXIGNORE), f"{display_root}/{prefix}{INDEXIGNORE}")
            specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(text.splitlines())))
        active = [(p, s) for p, s in specs if prefix.startswith(p)]
        subdirs = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError as exc:   # a link that cannot be followed (a loop of links, too long a chain)
                raise CatalogError(f"cannot be read: {exc.strerror}", path=f"{display_root}/{prefix}{e.name}",
                                   hint="remove the link, or list it in an .indexignore file") from None
            if is_dir:
                # a directory that is ignored as a whole is not descended into (as git does)
                if not (active and _ignored(f"{prefix}{e.name}/", active)):
                    subdirs.append((e.path, f"{prefix}{e.name}/", above))
                continue
            if e.name == INDEXIGNORE or (active and _ignored(prefix + e.name, active)):
                continue
            rel = prefix + e.name
            f = CatalogFile(e.path, f"{display_root}/{rel}", rel, e.stat())
            (files if e.name.endswith(SUFFIXES) else skipped).append(f)
        pending.extend(reversed(subdirs))  # depth first, in name order
    return Walk(tuple(files), tuple(skipped))


def _ignored(rel: str, active: list[tuple[str, pathspec.GitIgnoreSpec]]) -> bool:
    verdict = False
    for prefix, spec in active:  # shallow to deep: the deepest decisive match wins
        result = spec.check_file(rel[len(prefix):])
        if result.include is not None:
            verdict = result.include
    return verdict


def iter_blobs(root: str | PathLike[str], display_root: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Every blob under ``root`` as (display path, index in file, blob); raises on the first bad file."""
    out = []
    for f in walk(root, display_root).files:
        for i, doc in enumerate(yamlio.read_all(f.path, f.display, go=True)):
            if not isinstance(doc, dict):
                raise CatalogError(f"blob {i + 1} is not a mapping", path=f.display)
            out.append((f.display, i, doc))
    return out


# ---------------------------------------------------------------------------------------------------------
# Blob shapes


class _Shape(Exception):
    """A blob field of the wrong type (reported as a blob-shape finding)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


_PROPERTY_HINT = "each property is a mapping {type: <property type>, value: <its value>}"
# YAML reads unquoted yes/no/on/off/true/false, numbers and dates as other types: the usual cause
QUOTE_HINT = "quote the value: YAML reads an unquoted yes, no, on, off, number or date as another type"


def _opt_str(blob: dict[str, Any], key: str, what: str) -> str:
    v = blob.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _Shape(f"{what}: {key!r} must be a string, not {_kind(v)}", QUOTE_HINT)
    return v


def _opt_list(blob: dict[str, Any], key: str, what: str) -> list[Any]:
    v = blob.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Shape(f"{what}: {key!r} must be a list, not {_kind(v)}", "write it as a list (items starting with '- ')")
    return v


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(v), "null" if v is None else "a value")


def _entry(raw: Any, what: str) -> ChannelEntry:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise _Shape(f"{what}: every entry needs a name",
                     "each entry is a mapping: name: <bundle>, and optionally replaces, skips, skipRange")
    skips = _opt_list(raw, "skips", f"{what} entry {raw['name']}")
    if any(not isinstance(s, str) for s in skips):
        raise _Shape(f"{what} entry {raw['name']}: skips must be a list of strings", "list the bundle names it skips")
    return ChannelEntry(raw["name"], _opt_str(raw, "replaces", f"{what} entry {raw['name']}") or None,
                        tuple(skips), _opt_str(raw, "skipRange", f"{what} entry {raw['name']}") or None)


def _properties(blob: dict[str, Any], what: str) -> tuple[Property, ...]:
    out = []
    for i, p in enumerate(_opt_list(blob, "properties", what)):
        if not isinstance(p, dict):
            raise _Shape(f"{what}: property {i + 1} is not a mapping", _PROPERTY_HINT)
        t = p.get("type")
        if not isinstance(t, str):
            raise _Shape(f"{what}: property {i + 1} has no type", _PROPERTY_HINT)
        if "value" not in p:
            raise _Shape(f"{what}: property {i + 1} ({t}) has no value", _PROPERTY_HINT)
        out.append(Property(t, p["value"]))
    return tuple(out)


# The top-level fields of the four schemas. opm reads ``schema``, ``package`` and ``name`` of every blob
# whatever their case (the documented template examples write ``Schema:``), and decodes the known schemas
# with Go's JSON decoder, which matches field names case-insensitively; two keys of one blob that differ
# only in case are an error there. Nested fields (entries, properties) are read as spelled.
_FIELDS = {f.casefold(): f for f in ("schema", "package", "name", "defaultChannel", "icon", "description",
                                     "entries", "properties", "image", "relatedImages")}
_FIELD_NAMES = frozenset(_FIELDS.values())
_TEMPLATES = {"olm.template.basic": "basic", "olm.semver": "semver"}  # schema: `catalog template` subcommand


def _canonical_keys(blob: dict[str, Any]) -> dict[str, Any]:
    """``blob`` with each key that differs from a known field only in case spelled as the field."""
    seen: dict[str, str] = {}
    for key in blob:
        folded = key.casefold() if isinstance(key, str) else key
        if folded in seen:
            raise _Shape(f"keys {seen[folded]!r} and {key!r} differ only in case; opm reads them as one",
                         "keep one of them")
        seen[folded] = key
    return {_FIELDS.get(folded, key) if isinstance(key, str) else key: blob[key] for folded, key in seen.items()}


# ---------------------------------------------------------------------------------------------------------
# Building the catalog


class Builder:
    """Accumulates blobs into model objects, recording duplicates and shape problems as findings."""

    def __init__(self) -> None:
        self.packages: dict[str, Package] = {}
        self.channels: dict[tuple[str, str], Channel] = {}
        self.bundles: dict[tuple[str, str], Bundle] = {}
        self.deprecations: dict[str, Deprecations] = {}
        self.others: list[Meta] = []
        self.findings: list[Finding] = []

    def add_file(self, display: str, docs: list[Any]) -> None:
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                self.findings.append(Finding("blob-shape", f"blob {i + 1} is not a mapping", display, None,
                                             "every document of a catalog file must be a mapping with a schema"))
                continue
            try:
                self.add(doc, display, i + 1)
            except _Shape as exc:
                self.findings.append(Finding("blob-shape", str(exc), display, f"blob {i + 1}", exc.hint))

    def add(self, blob: dict[str, Any], path: str, index: int) -> None:
        raw = blob
        if not _FIELD_NAMES.issuperset(blob):
            blob = _canonical_keys(blob)
        for key in ("schema", "package", "name"):
            if key in blob and blob[key] is None:  # opm reads these three of every blob, as strings
                raise _Shape(f"{key!r} is null", f"opm needs a string there: give it one, or remove {key!r}")
        schema = blob.get("schema")
        if not isinstance(schema, str) or not schema:
            if schema not in (None, ""):
                raise _Shape("'schema' must be a string", "schema names what the blob is, e.g. olm.package")
            if isinstance(kind := blob.get("kind"), str) and "apiVersion" in blob:
                meta = blob.get("metadata")
                named = f" {meta['name']}" if isinstance(meta, dict) and isinstance(meta.get("name"), str) else ""
                raise _Shape(f"blob has no 'schema': it is a Kubernetes {kind}{named}, not catalog content",
                             "a catalog holds only catalog blobs; move the file out of the catalog directory or "
                             "list it in an .indexignore file")
            raise _Shape("blob has no 'schema'", "every catalog blob needs one: olm.package, olm.channel, "
                         "olm.bundle, olm.deprecations, or a schema of your own")
        if schema == SCHEMA_PACKAGE:
            self._package(blob, path, index)
        elif schema == SCHEMA_CHANNEL:
            self._channel(blob, path, index)
        elif schema == SCHEMA_BUNDLE:
            self._bundle(blob, path, index)
        elif schema == SCHEMA_DEPRECATIONS:
            self._deprecations(blob, path, index)
        else:
            if schema in _TEMPLATES:
                self.findings.append(Finding(
                    "template", f"an {schema} template is not catalog content: opm keeps it as an unknown blob, "
                    "so the packages it describes are not in the catalog", path, f"blob {index}",
                    f"expand it (`reconciler catalog template {_TEMPLATES[schema]} FILE`) into the catalog, and "
                    "keep the template outside the catalog directory or in an .indexignore file",
                    severity=WARNING))
            pkg, name = blob.get("package"), blob.get("name")
            for key, v in (("package", pkg), ("name", name)):
                if v is not None and not isinstance(v, str):
                    raise _Shape(f"{schema}: {key!r} must be a string, not {_kind(v)}", QUOTE_HINT)
            self.others.append(Meta(schema, pkg or "", name or "", raw, path, index))

    def _package(self, blob: dict[str, Any], path: str, index: int) -> None:
        name = _required(blob, "name", "olm.package")
        what = f"olm.package {name}"
        icon = None
        if (raw := blob.get("icon")) is not None:
            if not isinstance(raw, dict):
                raise _Shape(f"{what}: 'icon' must be a mapping with base64data and mediatype",
                             "icon: {base64data: <the image, base64>, mediatype: image/svg+xml}")
            data = _opt_str(raw, "base64data", f"{what} icon")
            try:
                base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise _Shape(f"{what}: icon base64data is not valid base64",
                             "encode the image file with base64, with no other characters") from None
            icon = Icon(data, _opt_str(raw, "mediatype", f"{what} icon"))
        pkg = Package(name, _opt_str(blob, "defaultChannel", what) or None, path,
                      _opt_str(blob, "description", what), icon, index)
        if (first := self.packages.get(name)) is not None:
            self.findings.append(Finding("duplicate-package", f"package {name!r} is defined twice", path,
                                         f"olm.package {name}", f"the first definition is in {first.source}"))
            return
        self.packages[name] = pkg

    def _channel(self, blob: dict[str, Any], path: str, index: int) -> None:
        pkg = _required(blob, "package", "olm.channel")
        name = _required(blob, "name", f"olm.channel in package {pkg}")
        what = f"olm.channel {pkg}/{name}"
        entries = []
        seen: set[str] = set()
        for raw in _opt_list(blob, "entries", what):
            e = _entry(raw, what)
            if e.name in seen:
                self.findings.append(Finding("duplicate-entry", f"bundle {e.name!r} appears twice in channel "
                                             f"{name!r}", path, f"olm.channel {name}",
                                             "list each bundle once per channel"))
                continue
            seen.add(e.name)
            entries.append(e)
        _properties(blob, what)
        if (first := self.channels.get((pkg, name))) is not None:
            self.findings.append(Finding("duplicate-channel", f"channel {name!r} is defined twice in package "
                                         f"{pkg!r}", path, f"olm.channel {name}",
                                         f"the first definition is in {first.source}; merge their entries"))
            return
        self.channels[(pkg, name)] = Channel(pkg, name, tuple(entries), path, index)

    def _bundle(self, blob: dict[str, Any], path: str, index: int) -> None:
        pkg = _required(blob, "package", "olm.bundle")
        name = _required(blob, "name", f"olm.bundle in package {pkg}")
        what = f"olm.bundle {name}"
        props = _properties(blob, what)
        images, names = [], []
        for r in _opt_list(blob, "relatedImages", what):
            if not isinstance(r, dict):
                raise _Shape(f"{what}: every relatedImages item must be a mapping with an image",
                             "each item is {name: <optional>, image: <reference>}")
            images.append(_opt_str(r, "image", f"{what} relatedImages"))
            names.append(_opt_str(r, "name", f"{what} relatedImages"))
        bundle = Bundle(pkg, name, _opt_str(blob, "image", what), props, path, tuple(images), index,
                        tuple(names) if any(names) else ())
        if (pkg, name) in self.bundles:
            self.findings.append(Finding("duplicate-bundle", f"bundle {name!r} is defined twice in package "
                                         f"{pkg!r}", path, what,
                                         f"the first definition is in {self.bundles[(pkg, name)].source}"))
            return
        self.bundles[(pkg, name)] = bundle

    def _deprecations(self, blob: dict[str, Any], path: str, index: int) -> None:
        pkg = _opt_str(blob, "package", "olm.deprecations")
        what = f"olm.deprecations {pkg}" if pkg else "olm.deprecations"
        entries = []
        for i, raw in enumerate(_opt_list(blob, "entries", what)):
            if not isinstance(raw, dict) or not isinstance(raw.get("reference"), dict):
                raise _Shape(f"{what}: entry {i + 1} needs a reference mapping",
                             "each entry is {reference: {schema: olm.bundle, name: <bundle>}, message: <why>} "
                             "(schema olm.channel with a channel name, or olm.package with no name)")
            ref = raw["reference"]
            entries.append(DeprecationEntry(_opt_str(ref, "schema", f"{what} entry {i + 1}"),
                                            _opt_str(ref, "name", f"{what} entry {i + 1}"),
                                            _opt_str(raw, "message", f"{what} entry {i + 1}")))
        dep = Deprecations(pkg, tuple(entries), path, index)
        if not pkg:
            self.findings.append(Finding("deprecation", "olm.deprecations blob has no package", path,
                                         f"blob {index}", "set package: to the package it deprecates"))
            return
        if (first := self.deprecations.get(pkg)) is not None:
            self.findings.append(Finding("deprecation", f"package {pkg!r} has more than one olm.deprecations "
                                         f"blob", path, what, f"merge it with the one in {first.source}"))
            return
        self.deprecations[pkg] = dep

    def catalog(self, name: str, root: str, priority: int = 0, digest: str = "") -> Catalog:
        return Catalog(name=name, root=root, packages=self.packages, channels=self.channels, bundles=self.bundles,
                       priority=priority, deprecations=self.deprecations, others=tuple(self.others), digest=digest)


def _required(blob: dict[str, Any], key: str, what: str) -> str:
    value = blob.get(key)
    if value is not None and not isinstance(value, str):
        raise _Shape(f"{what}: {key!r} must be a string, not {_kind(value)}", QUOTE_HINT)
    if not value:
        raise _Shape(f"{what} has no {key!r}", f"set {key}: every {what.split()[0]} blob needs one")
    return value


def read_file(f: CatalogFile) -> list[Any]:
    """Every document of one catalog file (raises InputError naming the file)."""
    return yamlio.read_all(f.path, f.display, go=True)


# How opm splits a YAML stream (Kubernetes' YAML reader): at each line that starts with ``---`` (followed by
# nothing but blanks or a comment); a separator that opens the stream, or follows another, belongs to the next
# document. A document whose lines are all blank, comments or separators is a blob with no schema there.
_SEPARATOR = re.compile(r"^---[ \t\r]*(?:#[^\n]*)?$", re.M)
_CONTENT = re.compile(r"^(?!---(?:[ \t\r#]|$))[ \t]*[^\s#]", re.M)
_NULL_DOCUMENT = re.compile(r"[ \t]*(?:null|Null|NULL|~)[ \t]*(?:#[^\n]*)?(?:\n[ \t]*(?:#[^\n]*)?)*\n?")


def empty_documents(text: str) -> list[int]:
    """The first line of each document of a YAML stream that opm reads as an empty blob.

    PyYAML drops such documents (a comment before the first ``---``, a ``---``
    with nothing after it but a blank line, a document that is just ``null``),
    so they never reach the builder; opm refuses the whole catalog over each. JSON (a stream that
    starts with ``{``) has no documents of this kind; an empty file has none.
    """
    if not text or text.lstrip().startswith("{"):
        return []
    out: list[int] = []
    start = 0
    for at, end in _separator_lines(text):
        if at > start:  # a separator ends the document before it, and is dropped
            if _empty(text, start, at):
                out.append(text.count("\n", 0, start) + 1)
            start = end
    if start < len(text) and _empty(text, start, len(text)):
        out.append(text.count("\n", 0, start) + 1)
    return out


def _empty(text: str, start: int, end: int) -> bool:
    m = _CONTENT.search(text, start, end)
    return m is None or (text[m.end() - 1] in "nN~" and _NULL_DOCUMENT.fullmatch(text, m.start(), end) is not None)


def _separator_lines(text: str) -> Iterator[tuple[int, int]]:
    """Where each separator line starts, and where the line after it starts (``str.find``: a regular
    expression tried at every position of a large catalog costs a sixth of its parse)."""
    at = 0 if text.startswith("---") else text.find("\n---") + 1
    while at or text.startswith("---"):
        if m := _SEPARATOR.match(text, at):
            yield at, m.end() + 1
        at = text.find("\n---", at) + 1
        if not at:
            return


def empty_document_findings(f: CatalogFile, lines: tuple[int, ...]) -> list[Finding]:
    """The ``empty_documents`` of one catalog file, found where it was parsed, as findings."""
    return [Finding("blob-shape", f"the YAML document at line {line} is empty (null, or only blank lines, "
                    f"comments or '---')", f.display, None, "opm reads it as a blob with no schema and refuses "
                    "the catalog; delete it, or move its comments after the next '---'")
            for line in lines]


def adopt(skipped: tuple[CatalogFile, ...]) -> tuple[list[CatalogFile], list[Finding]]:
    """The files of other names that hold catalog blobs, and a warning for each skipped file.

    opm parses every file it is not told to ignore: a stray README fails it
    (here it is only skipped, with a warning), and a file named ``catalog.YAML``
    or ``index`` that holds blobs is part of its catalog, so it is part of this
    one too. A file is read as catalog content when it parses and one of its
    documents is a mapping with a schema; the rest of it is judged as any
    catalog file's.
    """
    adopted: list[CatalogFile] = []
    found: list[Finding] = []
    for f in skipped:
        try:
            docs = read_file(f)
        except InputError:
            docs = []
        if any(isinstance(d, dict) and _schema_key(d) for d in docs):
            adopted.append(f)
            found.append(Finding("non-catalog-file", "not a .json, .yaml or .yml file, but it holds catalog blobs: "
                                 "read as part of the catalog, as opm reads it", f.display, None,
                                 "rename it to .yaml or .json", severity=WARNING))
        else:
            found.append(Finding("non-catalog-file", "not a .json, .yaml or .yml file; skipped", f.display, None,
                                 f"opm parses every file it is not told to ignore: add {f.rel!r} to an .indexignore "
                                 f"file", severity=WARNING))
    return adopted, found


def _schema_key(doc: dict[Any, Any]) -> bool:
    return any(isinstance(k, str) and k.casefold() == "schema" and isinstance(v, str) and v for k, v in doc.items())


def walk_order(f: CatalogFile) -> list[tuple[int, str]]:
    """A sort key that puts files in ``walk``'s order: a directory's files, then its subdirectories."""
    parts = f.rel.split("/")
    return [(1, d) for d in parts[:-1]] + [(0, parts[-1])]
