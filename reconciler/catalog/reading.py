"""Reading catalogs: ``load`` is the one entry point for reading a catalog directory: it walks the
tree (``load.walk``), consults the content-digest cache (``cache``), and on a
miss parses file by file into the model (``load.Builder``) and runs every
validation rule (``validate``), returning the catalog with all its findings.
``load_catalog`` is the pipeline's strict form: it raises ``CatalogInvalid``
(a ``CatalogError``) listing every error finding; ``compose`` merges catalogs.
"""

from __future__ import annotations

import os
from stat import S_ISREG

from reconciler import yamlio
from reconciler.catalog.findings import ERROR, RULES, WARNING, CatalogInvalid, Finding, errors_of
from reconciler.catalog.load import Builder, adopt, empty_document_findings, iter_blobs, walk, walk_order
from reconciler.catalog.parallel import parse_all
from reconciler.catalog.validate import validate
from reconciler.errors import CatalogError
from reconciler.model.catalog import Catalog
from reconciler.model.record import Record

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from os import PathLike

__all__ = ["ERROR", "RULES", "WARNING", "CatalogInvalid", "Finding", "Loaded", "compose", "errors_of",
           "iter_blobs", "load", "load_catalog", "validate"]


class Loaded(Record):
    """A loaded catalog and every finding of its load and validation."""

    catalog: Catalog
    findings: tuple[Finding, ...]
    cached: bool

    def __init__(self, catalog: Catalog, findings: tuple[Finding, ...], cached: bool = False) -> None:
        self.__dict__.update(catalog=catalog, findings=findings, cached=cached)

    @property
    def errors(self) -> list[Finding]:
        return errors_of(self.findings)


def load(root: str | PathLike[str], name: str | None = None, display_root: str | None = None, priority: int = 0,
         *, use_cache: bool = True) -> Loaded:
    """Load and validate the catalog under ``root``; problems are findings, never exceptions.

    ``name`` defaults to the directory's name, ``display_root`` (how findings name the root) to ``root``.
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise CatalogError(f"catalog directory {display_root or root} does not exist or is not a directory",
                           path=display_root or root)
    display_root = display_root or root
    name = name or next((part for part in reversed(root.split(os.sep)) if part not in ("", ".")), "")  # Path.name
    walked = walk(root, display_root)
    every = walked.files + walked.skipped  # a file of another name may hold catalog blobs: it keys the cache too
    stats = [(f.rel, f.stat or os.stat(f.path)) for f in every]
    if use_cache:  # hashlib and pickle: not imported by a load that does not use the cache
        from reconciler.catalog import cache as _cache
    skey = _cache.stat_key(stats, display_root) if use_cache else None
    if skey and (ckey := _cache.lookup_stat(skey)) and (entry := _cache.get(ckey)):
        return _loaded(entry, name, priority, cached=True)
    ckey = ""
    if use_cache:
        hasher = _cache.ContentHasher(display_root)
        for f, (_, st) in zip(every, stats):
            if not S_ISREG(st.st_mode) or st.st_size > yamlio.MAX_FILE_BYTES:
                hasher.add(f.rel, b"\0refused")   # a FIFO would block, a device never end: the parse reports it
                continue
            try:
                with open(f.path, "rb") as fh:
                    hasher.add(f.rel, fh.read())
            except OSError:
                hasher.add(f.rel, b"\0unreadable")
        ckey = hasher.hexdigest()
        if entry := _cache.get(ckey):
            if skey:
                _cache.remember_stat(skey, ckey)
            return _loaded(entry, name, priority, cached=True)
    adopted, extra = adopt(walked.skipped)
    files = tuple(sorted(walked.files + tuple(adopted), key=walk_order)) if adopted else walked.files
    builder = Builder()
    for f, (docs, refused, empty) in parse_all(files):
        if refused is None:
            builder.add_file(f.display, docs)
            builder.findings.extend(empty_document_findings(f, empty))
        else:
            message, path, hint = refused
            builder.findings.append(Finding("parse", message, path or f.display, None, hint))
    catalog = builder.catalog(name, display_root, priority, digest=f"sha256:{ckey}" if ckey else "")
    findings = tuple(extra) + tuple(builder.findings) + tuple(validate(catalog))
    if use_cache:   # kept per package, with its contents index: a warm load decodes only what is looked into
        _cache.put(ckey, {"catalog": catalog.shelved(), "findings": findings}, skey)
    return Loaded(catalog, findings)


def _loaded(entry: dict, name: str, priority: int, *, cached: bool) -> Loaded:
    catalog: Catalog = entry["catalog"]
    if catalog.name != name or catalog.priority != priority:
        catalog = catalog.replace(name=name, priority=priority)
    return Loaded(catalog, tuple(entry["findings"]), cached)


def load_catalog(name: str, root: str | PathLike[str], display_root: str | None = None, priority: int = 0) -> Catalog:
    """Load one catalog for the pipeline; raises ``CatalogInvalid`` listing every error finding."""
    loaded = load(root, name, display_root, priority)
    if errs := loaded.errors:
        raise CatalogInvalid(errs, name)
    return loaded.catalog


def compose(name: str, catalogs: list[Catalog], priority: int = 0) -> tuple[Catalog, list[Finding]]:
    """One catalog holding all of ``catalogs``, as if their directories were copied side by side.

    A package defined in two of them, or a bundle of one package defined in
    two, is a ``compose-duplicate`` finding; the first definition is kept.
    """
    findings: list[Finding] = []
    packages, channels, bundles, deprecations, others = {}, {}, {}, {}, []
    origin: dict[str, str] = {}
    for cat in catalogs:
        for pname, pkg in cat.packages.items():
            if pname in packages:
                findings.append(Finding("compose-duplicate", f"package {pname!r} is defined in catalogs "
                                        f"{origin[pname]!r} and {cat.name!r}", pkg.source, f"olm.package {pname}",
                                        "a package may come from one catalog only"))
                continue
            packages[pname] = pkg
            origin[pname] = cat.name
        for key, b in cat.bundles.items():
            if key in bundles:
                findings.append(Finding("compose-duplicate", f"bundle {key[1]!r} of package {key[0]!r} is defined "
                                        f"in more than one catalog (also in {bundles[key].source})", b.source,
                                        f"olm.bundle {key[1]}"))
                continue
            bundles[key] = b
        for key, ch in cat.channels.items():
            channels.setdefault(key, ch)
        for key, dep in cat.deprecations.items():
            deprecations.setdefault(key, dep)
        others.extend(cat.others)
    root = ",".join(c.root for c in catalogs)
    return Catalog(name, root, packages, channels, bundles, priority, deprecations, tuple(others)), findings
