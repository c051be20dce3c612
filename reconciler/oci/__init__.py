"""OCI images: resolve a reference to a digest, pull and unpack it safely, build and push one.

The registry protocol is spoken by ``oras`` (oras-py); this package adds what
the reconciler needs on top of it: every image is pinned to its manifest
digest, every blob is verified against its digest while it streams, and
layers are unpacked as hostile input (no path escapes, no links out of the
root, no device files, bounded sizes). Unpacked images are cached by
manifest digest under ``cache_dir()/oci``, so a digest is fetched once per
machine. Plain HTTP is used only for loopback registries; credentials come
from the usual docker config files.
"""

from __future__ import annotations

from reconciler.oci.client import (
    MAX_IMAGE_BYTES,
    MAX_OBJECT_BYTES,
    PulledImage,
    Reference,
    RegistryError,
    parse_reference,
    pull,
    push_layout,
    resolve,
    unpack_archive,
)
from reconciler.oci.layout import ImageLayout, build_layout

__all__ = ["ImageLayout", "MAX_IMAGE_BYTES", "MAX_OBJECT_BYTES", "PulledImage", "Reference", "RegistryError",
           "build_layout", "parse_reference", "pull", "push_layout", "resolve", "unpack_archive"]
