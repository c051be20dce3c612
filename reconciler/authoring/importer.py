"""`reconciler catalog import`: packages of a catalog as a cluster gets it, written into the repository as FBC.

A source is an index image named directly, or a CatalogSource of the cluster: by ``spec.image`` (the image is
read here; its registry pod need not serve), by ``spec.address`` (the registry gRPC API, as catalog-operator
reads it: ``registry_api``) or by ``sourceType: configmap`` (the old ConfigMap catalog: ``configmap_source``).
From a CatalogSource the packages are those the cluster's Subscriptions take from it, and those named; from an
image, those named (or ``--all``).

What is written, under ``catalogs/<catalog>/``:

* one directory per package, its blobs in ``catalog.json`` (split into ``catalog-2.json``, ... below the
  loader's per-file limit when a package is larger);
* ``import.yaml``: the source (the reference as given, never a mirror it was pulled through, and the digest it
  named), and per package the bundles with a digest of each bundle's blob, so that the next import says what
  changed (packages and bundles added, removed, changed); ``.indexignore`` keeps it out of the catalog.

A bundle the source carries inline and without an image (a ConfigMap catalog's, or one a registry server
serves from its objects, as the local cluster's OLM is served) cannot be pulled: its objects become a bundle
directory ``bundles/<package>/<version>/`` and its ``image`` names it (``file://``). Everything is computed
before anything is written, so a refusal writes nothing; a package the source no longer has is removed.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.catalog.configmap_source import BundleFiles
from reconciler.errors import CatalogError, ClusterError, InputError
from reconciler.report.words import counted

METADATA = "import.yaml"
INDEXIGNORE = ".indexignore"
CATALOG_FILE = "catalog.json"
FILE_LIMIT = yamlio.MAX_FILE_BYTES // 2    # each written file stays well below the loader's limit
BUNDLE_MEDIATYPE = "operators.operatorframework.io.bundle.mediatype.v1"
GROUP = "operators.coreos.com"


@dataclass(frozen=True)
class Origin:
    """Where an imported catalog came from, as ``import.yaml`` records it."""

    image: str = ""            # the reference as given (a mirror it came through is never recorded)
    digest: str = ""
    catalog_source: str = ""   # namespace/name
    address: str = ""
    config_map: str = ""       # namespace/name

    def as_dict(self) -> dict[str, str]:
        keys = (("catalogSource", self.catalog_source), ("image", self.image), ("digest", self.digest),
                ("address", self.address), ("configMap", self.config_map))
        return {k: v for k, v in keys if v}

    def describe(self) -> str:
        what = self.image or self.address or (f"ConfigMap {self.config_map}" if self.config_map else "")
        via = f"CatalogSource {self.catalog_source}: " if self.catalog_source else ""
        return f"{via}{what}" + (f" ({self.digest})" if self.digest else "")


@dataclass
class Source:
    """What a source holds: each package's blobs (only those read), the bundle directories it needs, every
    package name it has."""

    origin: Origin
    packages: dict[str, list[dict]]
    names: tuple[str, ...]
    directories: dict[str, BundleFiles] = field(default_factory=dict)   # bundle name -> files (configmap)


# ---------------------------------------------------------------------------------------------------------
# Reading a source


def read_image(reference: str, wanted: frozenset[str] | None, origin: Origin | None = None) -> Source:
    """The packages of the catalog image ``reference`` (only ``wanted`` ones are unpacked)."""
    from reconciler.catalog.load import iter_blobs
    from reconciler.catalog.source import configs_directory, image_tree

    tree = image_tree(reference, wanted)
    packages: dict[str, list[dict]] = {}
    if tree.root.is_dir():
        for _, _, blob in iter_blobs(tree.root, f"{reference}@{tree.image.digest}:{configs_directory(tree.image.labels)}"):
            name = package_of(blob)
            if name and (wanted is None or name in wanted):
                packages.setdefault(name, []).append(blob)
    names = tuple(sorted(set(tree.names) | set(packages)))
    base = origin or Origin()
    return Source(Origin(base.image or reference, tree.image.digest, base.catalog_source), packages, names)


def read_address(address: str, wanted: frozenset[str] | None, origin: Origin) -> Source:
    from reconciler.catalog import registry_api

    packages, names = registry_api.read(address, origin.describe(), wanted)
    return Source(origin, packages, names)


def read_config_map(config_map: dict, wanted: frozenset[str] | None, origin: Origin) -> Source:
    from reconciler.catalog import configmap_source

    read = configmap_source.read(config_map, f"ConfigMap {origin.config_map}")
    packages = {n: list(p.blobs) for n, p in read.items() if wanted is None or n in wanted}
    directories = {b.name: b for n in packages for b in read[n].bundles}
    return Source(origin, packages, tuple(sorted(read)), directories)


def package_of(blob: dict) -> str:
    schema = blob.get("schema")
    return str(blob.get("name") or "") if schema == "olm.package" else str(blob.get("package") or "")


# ---------------------------------------------------------------------------------------------------------
# A CatalogSource of the cluster


@dataclass(frozen=True)
class CatalogSourceView:
    """A CatalogSource, the packages the cluster's Subscriptions take from it, and its pull secrets."""

    namespace: str
    name: str
    spec: dict[str, Any]
    in_use: tuple[str, ...]
    secrets: tuple[tuple[str, dict], ...]   # (what, docker config)

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"


def read_catalog_source(kube: Any, namespace_name: str) -> CatalogSourceView:
    from reconciler.oci import auth

    namespace, _, name = namespace_name.partition("/")   # checked by the command that was given it
    info = kube.resource(f"{GROUP}/v1alpha1", "CatalogSource")
    if info is None:
        raise ClusterError("the cluster does not serve CatalogSource (operators.coreos.com/v1alpha1): it runs no "
                           "OLM v0", obj=kube.server, hint="check --kubeconfig/--context, or import an index image "
                                                           "with --image")
    source = kube.get(info, namespace, name)
    if source is None:
        names = sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in kube.list(info))
        raise ClusterError(f"CatalogSource {namespace_name} does not exist", obj=kube.server,
                           hint=_near(namespace_name, names, "CatalogSources of the cluster"))
    spec = source.get("spec") or {}
    subs = kube.resource(f"{GROUP}/v1alpha1", "Subscription")
    in_use = sorted({str((s.get("spec") or {}).get("name")) for s in (kube.list(subs) if subs else [])
                     if (s.get("spec") or {}).get("source") == name
                     and ((s.get("spec") or {}).get("sourceNamespace") or s["metadata"].get("namespace")) == namespace
                     and (s.get("spec") or {}).get("name")})
    secrets = []
    for secret_name in spec.get("secrets") or []:
        what = f"Secret {namespace}/{secret_name} (spec.secrets of CatalogSource {namespace_name})"
        secrets.append((what, auth.secret_config(read_secret(kube, namespace, str(secret_name), what), what)))
    return CatalogSourceView(namespace, name, spec, tuple(in_use), tuple(secrets))


def read_secret(kube: Any, namespace: str, name: str, what: str) -> dict:
    """A pull Secret; a missing or unreadable one is an error saying which and how to give credentials instead."""
    from reconciler.kube.client import ApiError

    info = kube.resource("v1", "Secret")
    how = ("create it (`kubectl create secret docker-registry ...`), or give the registry's credentials another "
           "way: --pull-secret NAMESPACE/NAME of a Secret that has them, or a login in ~/.docker/config.json")
    try:
        secret = kube.get(info, namespace, name)
    except ApiError as exc:
        if exc.status == 403:
            raise ClusterError(f"{what} cannot be read: this user may not get Secrets in {namespace}",
                               obj=kube.server, hint=f"ask for `get secrets` in {namespace}, or {how}") from None
        raise
    if secret is None:
        raise ClusterError(f"{what} does not exist", obj=kube.server, hint=how)
    return secret


def read_source_of(kube: Any, view: CatalogSourceView, wanted: frozenset[str] | None) -> Source:
    """The catalog a CatalogSource serves, read as catalog-operator would find it (but for an image, read here)."""
    spec = view.spec
    kind = spec.get("sourceType") or "grpc"
    if kind == "grpc" and spec.get("image"):
        return read_image(str(spec["image"]), wanted, Origin(image=str(spec["image"]), catalog_source=view.where))
    if kind == "grpc" and spec.get("address"):
        origin = Origin(catalog_source=view.where, address=str(spec["address"]))
        return read_address(str(spec["address"]), wanted, origin)
    if kind in ("configmap", "internal") and spec.get("configMap"):
        info = kube.resource("v1", "ConfigMap")
        config_map = kube.get(info, view.namespace, str(spec["configMap"]))
        where = f"{view.namespace}/{spec['configMap']}"
        if config_map is None:
            raise ClusterError(f"ConfigMap {where} (spec.configMap of CatalogSource {view.where}) does not exist",
                               obj=kube.server)
        return read_config_map(config_map, wanted, Origin(catalog_source=view.where, config_map=where))
    raise CatalogError(f"CatalogSource {view.where} has sourceType {kind!r} and neither an image, an address nor a "
                       "ConfigMap to read", hint="import its index image with --image instead")


# ---------------------------------------------------------------------------------------------------------
# Writing into the repository


@dataclass
class Change:
    package: str
    verb: str                     # "added", "changed", "removed", "unchanged"
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    bundles: int = 0


@dataclass
class Imported:
    catalog: str
    origin: Origin
    previous: Origin | None
    changes: list[Change]
    files: dict[str, str]          # repository-relative path -> content written (or that would be)
    deleted: list[str]             # repository-relative paths removed

    def lines(self) -> list[str]:
        was = ""
        if self.previous is not None and self.previous.digest and self.previous.digest != self.origin.digest:
            was = f", was {self.previous.digest}"
        out = [f"catalogs/{self.catalog} from {self.origin.describe()}{was}"]
        for c in self.changes:
            if c.verb == "added":
                out.append(f"  + package {c.package}: {counted(c.bundles, 'bundle')}")
            elif c.verb == "removed":
                out.append(f"  - package {c.package}: the source no longer has it")
            elif c.verb == "changed":
                parts = [*(f"+ {b}" for b in c.added), *(f"- {b}" for b in c.removed),
                         *(f"~ {b}" for b in c.changed)]
                out.append(f"  ~ package {c.package}: {', '.join(parts)}")
        count = {v: sum(1 for c in self.changes if c.verb == v) for v in ("added", "changed", "removed", "unchanged")}
        bundles = {k: sum(len(getattr(c, k)) for c in self.changes) for k in ("added", "removed", "changed")}
        bundles["added"] += sum(c.bundles for c in self.changes if c.verb == "added")
        out.append(f"Summary: {counted(count['added'], 'package')} added, {count['changed']} changed, {count['removed']} "
                   f"removed, {count['unchanged']} unchanged; bundles: {bundles['added']} added, "
                   f"{bundles['removed']} removed, {bundles['changed']} changed")
        return out


def previous_import(repo: Path, catalog: str) -> tuple[Origin | None, dict[str, dict[str, str]], list[str]]:
    """What the last import of ``catalog`` recorded: its source, each package's bundles and digests, the bundle
    directories it wrote. A catalog directory the import did not write is an error: it is not ours to replace."""
    directory = repo / "catalogs" / catalog
    meta = directory / METADATA
    if not meta.is_file():
        if directory.is_dir() and any(directory.iterdir()):
            raise InputError(f"catalogs/{catalog} exists and was not written by `catalog import`", path=f"catalogs/{catalog}",
                             hint="import under another name (--name), or move the directory away first")
        return None, {}, []
    doc = yamlio.load_one(yamlio.read_text(meta, f"catalogs/{catalog}/{METADATA}"), f"catalogs/{catalog}/{METADATA}")
    if not isinstance(doc, dict):
        raise InputError("not an import record", path=f"catalogs/{catalog}/{METADATA}",
                         hint="remove it and import again")
    src = doc.get("source") or {}
    origin = Origin(str(src.get("image") or ""), str(src.get("digest") or ""), str(src.get("catalogSource") or ""),
                    str(src.get("address") or ""), str(src.get("configMap") or ""))
    packages = {str(n): {str(b): str(d) for b, d in ((p or {}).get("bundles") or {}).items()}
                for n, p in (doc.get("packages") or {}).items()}
    return origin, packages, [str(d) for d in doc.get("bundleDirectories") or []]


def check_wanted(source: Source, selected: Iterable[str]) -> None:
    """Every package asked for is in the source; else an error listing the names nearest each missing one."""
    missing = [p for p in sorted(set(selected)) if p not in source.packages]
    if not missing:
        return
    lines = [f"{p}: {_near(p, list(source.names), 'packages of the source')}" for p in missing]
    raise CatalogError(f"the source has no package {', '.join(missing)}", obj=source.origin.describe(),
                       hint="; ".join(lines))


def _near(name: str, names: list[str], what: str) -> str:
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    if close:
        return f"did you mean {', '.join(close)}?"
    return f"{len(names)} {what}" + (f", e.g. {', '.join(names[:5])}" if names else "")


def plan(repo: Path, catalog: str, source: Source, previous: tuple) -> Imported:
    """The files an import writes and removes, and what changed against the previous import."""
    old_origin, old_packages, old_dirs = previous
    files: dict[str, str] = {}
    record: dict[str, Any] = {}
    changes: list[Change] = []
    directories: list[str] = []
    base = f"catalogs/{catalog}"
    for name in sorted(source.packages):
        blobs, bundle_files = _vendor(name, source.packages[name], source.directories)
        for files_of in bundle_files:
            rel = f"bundles/{files_of.package}/{files_of.version}"
            if (repo / rel).exists() and rel not in old_dirs:
                raise InputError(f"{rel} exists and was not written by `catalog import`", path=rel,
                                 hint=f"bundle {files_of.name} of the source has no image and is written there; move "
                                      "the directory away, then import again")
            directories.append(rel)
            files.update(_bundle_directory(rel, files_of))
        for i, chunk in enumerate(_chunks(blobs, f"{base}/{name}")):
            files[f"{base}/{name}/{CATALOG_FILE if i == 0 else f'catalog-{i + 1}.json'}"] = chunk
        digests = {str(b["name"]): _digest(b) for b in blobs if b.get("schema") == "olm.bundle"}
        record[name] = {"bundles": dict(sorted(digests.items()))}
        changes.append(_change(name, old_packages.get(name), digests))
    for name in sorted(set(old_packages) - set(source.packages)):
        changes.append(Change(name, "removed", removed=tuple(sorted(old_packages[name]))))
    meta = {"source": source.origin.as_dict(), "packages": record}
    if directories:
        meta["bundleDirectories"] = sorted(directories)
    files[f"{base}/{METADATA}"] = ("# Written by `reconciler catalog import`: where this catalog came from, and what "
                                   "it held.\n# Import again to update these packages; it says what changed.\n"
                                   + yamlio.dump(meta))
    files[f"{base}/{INDEXIGNORE}"] = f"# the import's record is not catalog content\n/{METADATA}\n"
    deleted = []
    directory = repo / base
    if directory.is_dir():
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(repo).as_posix()
            if path.is_file() and rel not in files:
                deleted.append(rel)
    for rel in old_dirs:
        if rel not in directories and (repo / rel).is_dir():
            deleted.extend(sorted(p.relative_to(repo).as_posix() for p in (repo / rel).rglob("*") if p.is_file()))
    for rel in directories:
        if (repo / rel).is_dir():
            deleted.extend(p.relative_to(repo).as_posix() for p in sorted((repo / rel).rglob("*"))
                           if p.is_file() and p.relative_to(repo).as_posix() not in files)
    return Imported(catalog, source.origin, old_origin, changes, files, deleted)


def write(repo: Path, imported: Imported) -> list[str]:
    """Write the planned files (only those whose content changes) and remove the stale ones; what changed."""
    written = []
    for rel in imported.deleted:
        (repo / rel).unlink(missing_ok=True)
    for rel, text in imported.files.items():
        path = repo / rel
        if path.is_file() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        yamlio.write_atomic(path, text)
        written.append(rel)
    for rel in sorted({str(Path(r).parent) for r in imported.deleted}, key=len, reverse=True):
        d = repo / rel
        while d != repo and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
            d = d.parent
    return written


def _change(name: str, old: dict[str, str] | None, new: dict[str, str]) -> Change:
    if old is None:
        return Change(name, "added", bundles=len(new))
    added = tuple(sorted(set(new) - set(old)))
    removed = tuple(sorted(set(old) - set(new)))
    changed = tuple(sorted(b for b in set(new) & set(old) if new[b] != old[b]))
    return Change(name, "changed" if added or removed or changed else "unchanged", added, removed, changed,
                  len(new))


def _digest(blob: dict) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(blob, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _chunks(blobs: list[dict], where: str) -> list[str]:
    """The package's blobs as JSON texts, each below ``FILE_LIMIT`` (the package and its channels first)."""
    texts = [json.dumps(b, indent=2, ensure_ascii=False) + "\n" for b in blobs]
    out: list[str] = []
    current: list[str] = []
    size = 0
    for text, blob in zip(texts, blobs):
        n = len(text.encode())
        if n > FILE_LIMIT:
            raise CatalogError(f"{blob.get('schema')} {blob.get('name')} is {n} bytes as JSON, over the "
                               f"{FILE_LIMIT}-byte limit of one catalog file", obj=where,
                               hint="the catalog loader reads files of at most "
                                    f"{yamlio.MAX_FILE_BYTES} bytes; such a bundle cannot be imported")
        if current and size + n > FILE_LIMIT:
            out.append("".join(current))
            current, size = [], 0
        current.append(text)
        size += n
    if current:
        out.append("".join(current))
    return out


def _order(blobs: list[dict]) -> list[dict]:
    rank = {"olm.package": 0, "olm.channel": 1, "olm.bundle": 2, "olm.deprecations": 3}
    return sorted(blobs, key=lambda b: (rank.get(str(b.get("schema")), 4), str(b.get("name") or "")))


def _vendor(package: str, blobs: list[dict], directories: dict[str, BundleFiles]) -> tuple[list[dict],
                                                                                         list[BundleFiles]]:
    """The package's blobs with each image-less bundle pointing at a bundle directory, and those directories."""
    out, files = [], []
    channels = {}
    for b in blobs:
        if b.get("schema") == "olm.channel":
            for e in b.get("entries") or []:
                channels.setdefault(str(e.get("name")), []).append(str(b.get("name")))
    default = next((str(b.get("defaultChannel") or "") for b in blobs if b.get("schema") == "olm.package"), "")
    for b in blobs:
        if b.get("schema") != "olm.bundle" or b.get("image"):
            out.append(b)
            continue
        name = str(b.get("name"))
        bundle = directories.get(name) or _from_objects(b, package, channels.get(name, []), default)
        if bundle is None:
            out.append(b)
            continue
        files.append(bundle)
        if name in directories:
            b = _rendered(bundle, f"file://bundles/{bundle.package}/{bundle.version}")
        else:
            b = {**b, "image": f"file://bundles/{bundle.package}/{bundle.version}"}
        out.append(b)
    named = {str(b.get("name")) for b in out if b.get("schema") == "olm.bundle"}
    for n, d in sorted(directories.items()):
        if d.package == package and n not in named:
            files.append(d)
            out.append(_rendered(d, f"file://bundles/{d.package}/{d.version}"))
    return _order(out), files


def _from_objects(blob: dict, package: str, channels: list[str], default: str) -> BundleFiles | None:
    """A bundle directory from the ``olm.bundle.object`` properties of a bundle that has no image."""
    manifests: dict[str, dict] = {}
    version = ""
    for p in blob.get("properties") or []:
        if p.get("type") == "olm.package":
            version = str((p.get("value") or {}).get("version") or "")
        if p.get("type") != "olm.bundle.object":
            continue
        try:
            obj = json.loads(base64.b64decode(str((p.get("value") or {}).get("data") or "")))
        except ValueError:
            raise CatalogError("an olm.bundle.object property is not base64-encoded JSON",
                               obj=f"bundle {blob.get('name')}") from None
        if not isinstance(obj, dict):
            continue
        stem = f"{(obj.get('metadata') or {}).get('name') or 'object'}.{str(obj.get('kind') or 'object').lower()}"
        file_name, n = f"{stem}.yaml", 2
        while file_name in manifests:
            file_name, n = f"{stem}-{n}.yaml", n + 1
        manifests[file_name] = obj
    if not manifests or not version:
        return None
    annotations = {BUNDLE_MEDIATYPE: "registry+v1",
                   "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
                   "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
                   "operators.operatorframework.io.bundle.package.v1": package,
                   "operators.operatorframework.io.bundle.channels.v1": ",".join(sorted(set(channels))) or default}
    if default:
        annotations["operators.operatorframework.io.bundle.channel.default.v1"] = default
    return BundleFiles(str(blob.get("name")), package, version, manifests, annotations)


def _bundle_directory(rel: str, bundle: BundleFiles) -> dict[str, str]:
    out = {f"{rel}/manifests/{name}": yamlio.dump(doc) for name, doc in sorted(bundle.manifests.items())}
    out[f"{rel}/metadata/annotations.yaml"] = yamlio.dump({"annotations": bundle.annotations})
    return out


def _rendered(bundle: BundleFiles, image: str) -> dict:
    """The ``olm.bundle`` blob of a bundle directory made here, as ``catalog render`` writes it."""
    import tempfile

    from reconciler.authoring.render import render_bundle_dir

    with tempfile.TemporaryDirectory(prefix="reconciler-import-") as scratch:
        root = Path(scratch) / "bundle"
        for rel, text in _bundle_directory("", bundle).items():
            path = root / rel.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return render_bundle_dir(root, image, display=image)

