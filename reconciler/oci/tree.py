"""One directory of an image, or some of its entries, read while the layers stream: nothing else is unpacked.

A catalog image of a large index holds hundreds of packages, one directory each under the directory its
configs label names; a repository that follows five of them needs five. ``pull_tree`` streams each layer once
(its digest checked as it streams, as ``pull`` checks it), writes only the entries of the directory whose first
path component is wanted (and the files directly in it), and lists every first component it met, wanted or
not, so a caller can say which names the image has. The result is cached by manifest digest and selection.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from reconciler.oci.client import (
    MAX_IMAGE_BYTES, PulledImage, Reference, RegistryError, _apply_member, _BoundedTarInfo, _Budget, _cache_root,
    _check, _client, _container, _HeaderTooLarge, _manifest, _request, _small_blob, fetch_sources, first_source,
    parse_reference, resolve,
)

MAX_STREAMED_BYTES = 16 * 1024 * 1024 * 1024   # what may be downloaded, and decompressed, to find the entries kept
MAX_TREE_BYTES = 4 * 1024 * 1024 * 1024        # what may be kept: a whole index of a few hundred packages fits
MAX_TREE_FILE = 64 * 1024 * 1024               # one file kept: the catalog loader's limit (yamlio.MAX_FILE_BYTES)
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Tree:
    """The kept part of one directory of an image: ``root`` holds it (the directory itself), ``names`` every entry
    the directory had."""

    image: PulledImage
    directory: str
    names: tuple[str, ...] = field(hash=False)

    @property
    def root(self) -> Path:
        return self.image.root


def pull_tree(reference: str, directory: Callable[[dict[str, str]], str], wanted: frozenset[str] | None) -> Tree:
    """The directory ``directory(labels)`` of the image, keeping only the entries named in ``wanted`` (all when
    None) and the plain files directly in it."""
    from reconciler import network

    digest = resolve(reference)
    ref = parse_reference(reference)
    selection = hashlib.sha256(json.dumps(sorted(wanted) if wanted is not None else None).encode()).hexdigest()[:16]
    entry = _cache_root() / "trees" / f"{digest.partition(':')[2]}-{selection}"
    if not (entry / "tree.json").is_file():
        if network.is_offline():
            raise network.refuse(f"pulling the image {digest}", reference)
        first_source(ref.with_digest(digest), "pulling the image",
                     lambda place: _stream_into(place, entry, directory, wanted), fetch_sources(reference, digest))
    meta = json.loads((entry / "tree.json").read_text())
    image = PulledImage(reference, digest, dict(meta.get("labels") or {}), entry / "root")
    return Tree(image, str(meta.get("directory") or ""), tuple(meta.get("names") or ()))


def _stream_into(ref: Reference, entry: Path, directory: Callable[[dict[str, str]], str],
                 wanted: frozenset[str] | None) -> None:
    client = _client(ref)
    manifest = _manifest(client, ref, ref.digest or "")
    config = json.loads(_small_blob(client, ref, manifest.get("config") or {}, "image config"))
    labels = ((config.get("config") or {}).get("Labels")) or {}
    prefix = tuple(p for p in PurePosixPath("/" + directory(labels).strip("/")).parts[1:] if p not in ("", "."))
    if ".." in prefix:
        raise RegistryError(f"the directory {directory(labels)!r} leaves the image", obj=str(ref))
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name[:12]}-", dir=entry.parent))
    names: set[str] = set()
    try:
        root = staging / "image"
        root.mkdir()
        kept, streamed = _Budget(limit=MAX_TREE_BYTES), _Budget(limit=MAX_STREAMED_BYTES)
        for layer in manifest.get("layers") or []:
            media = str(layer.get("mediaType") or "")
            if "zstd" in media:
                raise RegistryError(f"layer media type {media} is not supported (only tar and tar+gzip)", obj=str(ref))
            _stream_layer(client, ref, layer, root, prefix, wanted, names, kept, streamed)
        inside = root.joinpath(*prefix)
        (staging / "root").mkdir()
        if inside.is_dir():
            for child in inside.iterdir():
                child.rename(staging / "root" / child.name)
        shutil.rmtree(root)
        (staging / "tree.json").write_text(json.dumps({"digest": ref.digest, "labels": labels,
                                                       "directory": "/" + "/".join(prefix),
                                                       "names": sorted(names)}, sort_keys=True))
        if entry.exists():
            shutil.rmtree(entry)
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class _Verified:
    """A layer's bytes as a file for tarfile's stream mode, hashed and counted as they are read."""

    def __init__(self, chunks: Any, budget: _Budget, name: str) -> None:
        self.chunks, self.budget, self.name = chunks, budget, name
        self.hash = hashlib.sha256()
        self.buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            chunk = next(self.chunks, b"")
            if not chunk:
                break
            self.budget.downloaded += len(chunk)
            if self.budget.downloaded > self.budget.limit:
                raise RegistryError(f"the image is over the {self.budget.limit}-byte limit", obj=self.name)
            self.hash.update(chunk)
            self.buffer += chunk
        if size < 0:
            out, self.buffer = self.buffer, b""
        else:
            out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def drain(self) -> str:
        while self.read(_CHUNK):
            pass
        return "sha256:" + self.hash.hexdigest()


def _stream_layer(client: Any, ref: Reference, layer: dict[str, Any], root: Path, prefix: tuple[str, ...],
                  wanted: frozenset[str] | None, names: set[str], kept: _Budget, streamed: _Budget) -> None:
    digest = str(layer.get("digest") or "")
    if not digest.startswith("sha256:"):
        raise RegistryError(f"layer digest {digest!r} is not sha256", obj=str(ref))
    url = f"{client.prefix}://{_container(ref).get_blob_url(digest)}"
    resp = _request(client, url, "GET", ref, stream=True)
    with resp:
        _check(resp, ref, f"fetching layer {digest}")
        source = _Verified(resp.iter_content(_CHUNK), streamed, str(ref))
        try:
            with tarfile.open(fileobj=source, mode="r|*", tarinfo=_BoundedTarInfo) as tar:
                for member in tar:
                    streamed.unpacked += member.size
                    if streamed.unpacked > streamed.limit:
                        raise RegistryError(f"the image unpacks to more than {streamed.limit} bytes", obj=str(ref))
                    parts = tuple(p for p in PurePosixPath(member.name.lstrip("/")).parts if p not in ("", "."))
                    if parts[:len(prefix)] != prefix or len(parts) == len(prefix):
                        continue
                    first = parts[len(prefix)]
                    if first == ".wh..wh..opq":
                        names.clear()
                    elif first.startswith(".wh."):
                        names.discard(first[len(".wh."):])
                    else:
                        names.add(first)
                    below = len(parts) > len(prefix) + 1
                    if wanted is not None and below and first not in wanted and not first.startswith(".wh."):
                        continue
                    if wanted is not None and not below and member.isdir() and first not in wanted:
                        continue
                    _apply_member(tar, member, root, kept, str(ref), MAX_TREE_FILE)
        except _HeaderTooLarge as exc:
            raise RegistryError(str(exc), obj=str(ref)) from None
        except (tarfile.TarError, EOFError, OSError) as exc:
            if isinstance(exc, tarfile.FilterError):
                raise RegistryError(f"layer entry refused: {exc}", obj=str(ref)) from None
            raise RegistryError(f"a layer cannot be read as a tar archive: {exc}", obj=str(ref)) from None
        if source.drain() != digest:
            raise RegistryError(f"layer {digest} does not match its content", obj=str(ref))


__all__ = ["MAX_IMAGE_BYTES", "Tree", "pull_tree"]
