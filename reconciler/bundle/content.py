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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.bundle import shapes
from reconciler.bundle.source import FetchedBundle
from reconciler.errors import BundleError, InputError
from reconciler.model.kube import Manifest

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

    @property
    def name(self) -> str:
        return self.fetched.reference


_CACHE_FORMAT = "2"  # 2: manifests are shape-checked before they are cached


def _cache_path(fetched: FetchedBundle) -> Path | None:
    """The cache entry: the content digest plus the directory layout (the digest covers files only)."""
    if os.environ.get("RECONCILER_BUNDLE_CACHE") == "off" or not fetched.digest.startswith("sha256:"):
        return None
    from reconciler.gobuild import cache_dir

    key = hashlib.sha256(f"{_CACHE_FORMAT}\0{fetched.digest}".encode())
    for dirpath, dirnames, _ in sorted(os.walk(fetched.path)):
        key.update(b"\0" + os.path.relpath(dirpath, fetched.path).encode())
    return cache_dir() / "bundle-content" / f"{key.hexdigest()}.marshal"


def read_content(fetched: FetchedBundle) -> BundleContent:
    cache = _cache_path(fetched)
    if cache is not None and cache.is_file():
        try:
            mediatype, annotations, manifests, ignored = marshal.loads(cache.read_bytes())
            return BundleContent(fetched, mediatype, annotations,
                                 tuple(ParsedManifest(f, o) for f, o in manifests), tuple(ignored))
        except (ValueError, EOFError, TypeError):
            pass  # a damaged entry is re-parsed and rewritten
    content = _parse(fetched)
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((content.mediatype, content.annotations,
                                           [(m.file, m.obj) for m in content.manifests],
                                           list(content.ignored_files))))
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
        raise BundleError(f"bundle has no {manifests_dir.relative_to(root).as_posix()}/ directory",
                          obj=fetched.reference)
    parsed = []
    ignored = []
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
            if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
                raise BundleError("every manifest needs apiVersion and kind", path=rel, obj=fetched.reference)
            shapes.check_manifest(doc, rel, fetched.reference)
            parsed.append(ParsedManifest(rel, doc))
    return BundleContent(fetched, mediatype, annotations, tuple(parsed), tuple(ignored))


def _annotations(root: Path, name: str) -> dict[str, str]:
    path = root / "metadata" / "annotations.yaml"
    if not path.is_file():
        return {}
    try:
        rel = "metadata/annotations.yaml"
        doc: Any = yamlio.load_one(yamlio.read_text(path, rel), rel)
    except InputError as exc:
        raise BundleError(exc.message, path=exc.path, obj=name) from None
    raw = doc.get("annotations") if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise BundleError("metadata/annotations.yaml has no 'annotations' mapping", obj=name)
    if any(not isinstance(v, (str, int, float, bool)) for v in raw.values()):
        key = next(k for k, v in raw.items() if not isinstance(v, (str, int, float, bool)))
        raise BundleError(f"annotations.{key} must be a string", path="metadata/annotations.yaml", obj=name)
    return {str(k): str(v) for k, v in raw.items()}
