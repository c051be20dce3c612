"""Building a one-layer image as an OCI image layout directory, byte-for-byte reproducibly.

No container engine is needed: a bundle or catalog image is data (files
under ``/``) plus labels in the image config. Files are written sorted, with
owner 0, fixed modes and a zero mtime, and gzip gets a zero timestamp, so the
same input always gives the same manifest digest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from reconciler.oci.client import RegistryError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class ImageLayout:
    """An OCI image layout on disk holding one image, and that image's manifest digest."""

    path: Path
    digest: str


def build_layout(source: Path, dest: Path, labels: dict[str, str], *, include: tuple[str, ...] = ()) -> ImageLayout:
    """Write an image whose filesystem is ``source`` (only the top-level ``include`` entries, if given)."""
    layer_tar = _tar(source, include)
    layer = gzip.compress(layer_tar, mtime=0)
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": dict(sorted(labels.items()))},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
        "history": [{"created_by": "reconciler bundle build"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    dest.mkdir(parents=True, exist_ok=True)
    config_desc = _write_blob(dest, config_bytes, OCI_CONFIG)
    layer_desc = _write_blob(dest, layer, OCI_LAYER)
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_desc, "layers": [layer_desc],
                "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.")}}
    if not manifest["annotations"]:
        del manifest["annotations"]
    manifest_desc = _write_blob(dest, json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode(),
                                OCI_MANIFEST)
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (dest / "index.json").write_text(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                                                 "manifests": [manifest_desc]}, sort_keys=True))
    return ImageLayout(dest, manifest_desc["digest"])


def _write_blob(layout: Path, data: bytes, media_type: str) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _tar(source: Path, include: tuple[str, ...]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tops = sorted(include) if include else sorted(p.name for p in source.iterdir())
        for top in tops:
            start = source / top
            if not start.exists():
                raise RegistryError(f"{start} does not exist")
            for path in [start, *sorted(start.rglob("*"))] if start.is_dir() else [start]:
                rel = path.relative_to(source).as_posix()
                if path.is_symlink():
                    raise RegistryError(f"{rel} is a symbolic link; images are built from regular files only",
                                        path=str(path))
                info = tarfile.TarInfo(rel)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if path.is_dir():
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    data = path.read_bytes()
                    info.size, info.mode = len(data), 0o644
                    tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
