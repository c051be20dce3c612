"""Reading a fetched bundle once: its annotations, mediatype and parsed manifests.

Every manifest file is parsed exactly once here; converters only look at the
parsed objects. Parsing YAML dominates the cost of a conversion, so the parsed
content is also cached on disk by the bundle's content digest (with
``marshal``, which stores plain data only and runs no code): a bundle whose
bytes were parsed before is never parsed again on this machine.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.bundle import shapes
from reconciler.bundle.source import FetchedBundle
from reconciler.errors import BundleError, InputError
from reconciler.model.kube import Manifest
from reconciler.report.words import counted

ANNOTATION_MEDIATYPE = "operators.operatorframework.io.bundle.mediatype.v1"
ANNOTATION_PACKAGE = "operators.operatorframework.io.bundle.package.v1"
ANNOTATION_MANIFESTS = "operators.operatorframework.io.bundle.manifests.v1"


@dataclass(frozen=True)
class ParsedManifest:
    file: str
    obj: Manifest


@dataclass(frozen=True)
class BundleContent:
    fetched: FetchedBundle
    mediatype: str
    annotations: dict[str, str]
    manifests: tuple[ParsedManifest, ...]
    ignored_files: tuple[str, ...] = ()  # files in manifests/ that are not YAML or JSON
    warnings: tuple[str, ...] = ()       # what reading repaired, each naming the file
    properties: tuple[dict, ...] = ()    # metadata/'s properties (metadata/properties.yaml), as opm reads them

    @property
    def name(self) -> str:
        return self.fetched.reference


_CACHE_FORMAT = "5"  # 3: manifests are decoded as the cluster does and shape-checked before caching; 4: Secret data;
# 5: metadata/'s properties


def _cache_path(fetched: FetchedBundle) -> Path | None:
    """The cache entry: the content digest plus the directory layout (the digest covers files only)."""
    if os.environ.get("RECONCILER_BUNDLE_CACHE") == "off" or not fetched.digest.startswith("sha256:"):
        return None
    from reconciler import cachedir

    key = hashlib.sha256(f"{_CACHE_FORMAT}\0{fetched.digest}".encode())
    for dirpath, dirnames, _ in sorted(os.walk(fetched.path)):
        key.update(b"\0" + os.path.relpath(dirpath, fetched.path).encode())
    return Path(cachedir.root()) / "bundle-content" / f"{key.hexdigest()}.marshal"


def read_content(fetched: FetchedBundle) -> BundleContent:
    cache = _cache_path(fetched)
    if cache is not None and cache.is_file():
        try:
            mediatype, annotations, manifests, ignored, warnings, properties = marshal.loads(cache.read_bytes())
            return BundleContent(fetched, mediatype, annotations,
                                 tuple(ParsedManifest(f, o) for f, o in manifests), tuple(ignored),
                                 tuple(warnings), tuple(properties))
        except (ValueError, EOFError, TypeError):
            pass  # a damaged entry is re-parsed and rewritten
    content = _parse(fetched)
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((content.mediatype, content.annotations,
                                           [(m.file, m.obj) for m in content.manifests],
                                           list(content.ignored_files), list(content.warnings),
                                           list(content.properties))))
            tmp.replace(cache)
        except (OSError, ValueError):
            pass  # the cache is an optimisation; content marshal cannot store is simply not cached
    return content


def _parse(fetched: FetchedBundle) -> BundleContent:
    root = fetched.path
    annotations = _annotations(root, fetched.reference)
    mediatype = annotations.get(ANNOTATION_MEDIATYPE) or ("plain+v0" if not annotations else "")
    if not mediatype:
        raise BundleError(f"metadata/annotations.yaml has no {ANNOTATION_MEDIATYPE}",
                          obj=fetched.reference)
    manifests_rel = (annotations.get(ANNOTATION_MANIFESTS) or "manifests/").strip("/")
    manifests_dir = root / manifests_rel
    resolved = manifests_dir.resolve()
    if resolved != root.resolve() and root.resolve() not in resolved.parents:
        raise BundleError(f"{ANNOTATION_MANIFESTS} {manifests_rel!r} points outside the bundle",
                          obj=fetched.reference)
    if not manifests_dir.is_dir():
        raise _no_manifests(root, manifests_dir, fetched.reference)
    parsed = []
    ignored = []
    warnings: list[str] = []
    for file in sorted(manifests_dir.iterdir()):
        if file.is_dir():
            raise BundleError(f"manifests must be flat, but {file.relative_to(root).as_posix()} is a directory",
                              obj=fetched.reference)
        if not file.name.endswith((".yaml", ".yml", ".json")):
            ignored.append(file.relative_to(root).as_posix())
            continue
        rel = file.relative_to(root).as_posix()
        try:
            docs = yamlio.read_all(file, rel, strict=mediatype == "plain+v0")
        except InputError as exc:
            raise BundleError(exc.message, path=rel, obj=fetched.reference, hint=exc.hint) from None
        for doc in docs:
            if isinstance(doc, dict):
                doc = _decoded_as_kubernetes_does(doc, rel, warnings, olm=mediatype == "registry+v1")
            if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
                raise BundleError("every manifest needs apiVersion and kind", path=rel, obj=fetched.reference,
                                  hint="in a registry+v1 bundle a manifest without apiVersion is accepted for a "
                                       f"kind with one obvious group ({', '.join(sorted(OBVIOUS_API_VERSIONS))})")
            shapes.check_manifest(doc, rel, fetched.reference)
            parsed.append(ParsedManifest(rel, doc))
    return BundleContent(fetched, mediatype, annotations, tuple(parsed), tuple(ignored), tuple(warnings),
                         _metadata_properties(root))


# Kinds whose group is beyond doubt, so that a manifest without apiVersion can still be read, as OLM v0 does.
OBVIOUS_API_VERSIONS = {
    "ClusterServiceVersion": "operators.coreos.com/v1alpha1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ServiceAccount": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1",
    "Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1", "PriorityClass": "scheduling.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
}
CSV_API_VERSION = OBVIOUS_API_VERSIONS["ClusterServiceVersion"]
_TOP_KEYS = ("apiVersion", "kind", "metadata")



# A ``schema: olm.…`` key marks a file-based catalog blob or a catalog template, never a manifest; an
# unindented one is the document's own (a template's entries have theirs too).
_TOP_SCHEMA = re.compile(r"""^["']?schema["']?[ \t]*:[ \t]*["']?(olm\.[A-Za-z0-9_.-]+)""", re.I | re.M)
_ANY_SCHEMA = re.compile(r"""^[ \t{-]*["']?schema["']?[ \t]*:[ \t]*["']?(olm\.[A-Za-z0-9_.-]+)""", re.I | re.M)


def _no_manifests(root: Path, manifests_dir: Path, reference: str) -> BundleError:
    """Why a directory without its manifests directory is not a bundle, for the layouts people actually pass."""
    flat = sorted(p.name for p in root.iterdir() if p.is_file() and p.name.endswith((".yaml", ".yml", ".json")))
    if flat and not (root / "metadata").is_dir():
        csvs = [n for n in flat if ".clusterserviceversion." in n]
        schemas = {} if csvs else {n: _catalog_schema(root / n) for n in flat}
        catalog = {n: s for n, s in schemas.items() if s}
        if catalog:
            first = next(iter(catalog))
            return BundleError(
                f"the directory holds file-based catalog or catalog template documents, not a bundle "
                f"({first} has schema {catalog[first]}"
                f"{', and ' + counted(len(catalog) - 1, 'more file') + ' like it' if len(catalog) > 1 else ''})",
                obj=reference,
                hint="a bundle is a directory with manifests/ and metadata/annotations.yaml; expand a template "
                     "with `reconciler catalog template basic|semver FILE` and check a catalog with "
                     "`reconciler catalog validate`")
        return BundleError(
            f"the bundle directory has manifests at its top level ({', '.join((csvs or flat)[:3])}"
            f"{', ...' if len(csvs or flat) > 3 else ''}) and no manifests/ or metadata/ directory: this is the "
            f"community 'flat' (package manifest) layout, not a bundle", obj=reference,
            hint="a registry+v1 bundle keeps its manifests in manifests/ and its annotations in "
                 "metadata/annotations.yaml (`operator-sdk generate bundle` or `opm alpha bundle generate` "
                 "converts the flat layout)")
    rel = manifests_dir.relative_to(root).as_posix()
    nested = sorted(p.name for p in root.iterdir()
                    if p.is_dir() and not p.is_symlink() and (p / rel).is_dir() and (p / "metadata").is_dir())
    if nested:
        return BundleError(f"bundle has no {rel}/ directory, but its subdirectory {nested[0]}/ holds {rel}/ and "
                           f"metadata/: the bundle is nested one level down", obj=reference,
                           hint=f"pass the directory {nested[0]}/ as the bundle")
    others = sorted(p.name + "/" for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return BundleError(f"bundle has no {rel}/ directory" + (f" (it has {', '.join(others)})" if others else ""),
                       obj=reference,
                       hint=f"a bundle keeps its manifests (the CSV, CRDs, ...) in {rel}/"
                            + (" as metadata/annotations.yaml says (operators.operatorframework.io.bundle."
                               "manifests.v1)" if rel != "manifests" else "")
                            + ": move them there, or point the catalog's image (or spec.bundle) at the bundle's "
                              "own directory")


def _catalog_schema(file: Path) -> str:
    """The ``olm.*`` schema a file's documents declare, if any (the first MiB is enough to tell)."""
    try:
        with file.open("rb") as f:
            head = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return ""
    found = _TOP_SCHEMA.search(head) or _ANY_SCHEMA.search(head)
    return found.group(1) if found else ""


def _decoded_as_kubernetes_does(doc: dict[str, Any], rel: str, warnings: list[str], *,
                                olm: bool) -> dict[str, Any]:
    """The manifest as the cluster's decoders and OLM read it, with a warning for each difference.

    Top-level keys match case-insensitively (Go's JSON decoding: ``ApiVersion``
    is apiVersion). In a registry+v1 bundle (``olm``), as OLM reads one: a
    ClusterServiceVersion is one whatever group its apiVersion names (every
    peer finds it by kind), and a manifest without apiVersion whose kind has
    one obvious group gets that group's version.
    """
    out = dict(doc)
    for key in _TOP_KEYS:
        if key in out:
            continue
        other = next((k for k in out if isinstance(k, str) and k.lower() == key.lower()), None)
        if other is not None:
            out[key] = out.pop(other)
            warnings.append(f"{rel}: key {other!r} read as {key!r} (Kubernetes matches keys case-insensitively)")
    kind = out.get("kind")
    if not olm:
        return out
    if kind == "ClusterServiceVersion" and out.get("apiVersion") not in (None, "", CSV_API_VERSION):
        warnings.append(f"{rel}: ClusterServiceVersion with apiVersion {out['apiVersion']!r} read as "
                        f"{CSV_API_VERSION} (a CSV is found by its kind)")
        out["apiVersion"] = CSV_API_VERSION
    if not out.get("apiVersion") and isinstance(kind, str) and kind in OBVIOUS_API_VERSIONS:
        out["apiVersion"] = OBVIOUS_API_VERSIONS[kind]
        warnings.append(f"{rel}: {kind} without apiVersion read as {out['apiVersion']}")
    return out


def _metadata_properties(root: Path) -> tuple[dict, ...]:
    """The properties of the first file of ``metadata/`` (annotations.yaml aside, read above) that lists some, as
    opm reads a bundle's metadata/properties.yaml; an unreadable file is left to the catalog's renderer to report."""
    meta = root / "metadata"
    if not meta.is_dir():
        return ()
    for path in sorted(meta.iterdir()):
        if path.name == "annotations.yaml" or not path.name.endswith((".yaml", ".yml", ".json")) \
                or not path.is_file():
            continue
        rel = f"metadata/{path.name}"
        try:
            docs = yamlio.read_all(path, rel)
        except InputError:
            continue
        for doc in docs:
            props = doc.get("properties") if isinstance(doc, dict) else None
            if isinstance(props, list) and props:
                return tuple(p for p in props if isinstance(p, dict))
    return ()


def _annotations(root: Path, name: str) -> dict[str, str]:
    path = root / "metadata" / "annotations.yaml"
    if os.path.lexists(root / "metadata") and not (root / "metadata").is_dir():
        raise BundleError("not a directory", path="metadata", obj=name,
                          hint="a bundle keeps its annotations in metadata/annotations.yaml; a bundle without "
                               "metadata/ is a plain+v0 bundle")
    if not os.path.lexists(path):
        return {}   # no annotations: a plain+v0 bundle
    try:
        rel = "metadata/annotations.yaml"
        doc: Any = yamlio.load_one(yamlio.read_text(path, rel), rel)   # a directory or a FIFO is refused here
    except InputError as exc:
        raise BundleError(exc.message, path=exc.path, obj=name, hint=exc.hint) from None
    raw = doc.get("annotations") if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise BundleError("metadata/annotations.yaml has no 'annotations' mapping", obj=name)
    if any(not isinstance(v, (str, int, float, bool)) for v in raw.values()):
        key = next(k for k, v in raw.items() if not isinstance(v, (str, int, float, bool)))
        raise BundleError(f"annotations.{key} must be a string", path="metadata/annotations.yaml", obj=name)
    return {str(k): str(v) for k, v in raw.items()}
