"""Bundle sources: turning a reference into bundle files on disk, pinned by content digest.

Reference forms accepted in a catalog's ``olm.bundle`` ``image`` field or an
Operator's ``spec.bundle.spec.refs``:

* ``file://<path>``: a directory in the GitOps repository, relative to its
  root (for example ``file://bundles/plumbus/1.0.0``). It must stay inside the
  repository; its identity is a sha256 over its file names and contents.

* an OCI image reference (``quay.io/org/bundle:v1``, ``...@sha256:<digest>``,
  optionally prefixed ``docker://``): resolved to its manifest digest,
  pulled and unpacked through ``reconciler.oci`` (cached by digest, layers
  unpacked as hostile input); the digest pins it.

Other sources (git, http) raise a clear error until supported.
Content is hostile input: symlinks that leave the bundle, oversized files and
oversized bundles are refused.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import BundleError

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_BUNDLE_BYTES = 100 * 1024 * 1024
FILE_SCHEME = "file://"


@dataclass(frozen=True)
class FetchedBundle:
    """Bundle files on local disk, and the digest that pins them."""

    reference: str
    path: Path
    digest: str


def fetch(reference: str, repo_root: Path) -> FetchedBundle:
    if reference.startswith(FILE_SCHEME):
        return _fetch_directory(reference, repo_root)
    if "://" not in reference or reference.startswith("docker://"):
        return _fetch_image(reference)
    scheme = reference.split("://", 1)[0]
    raise BundleError(f"bundle source {reference!r} ({scheme}) cannot be fetched: supported are file:// "
                      f"directories in the repository and OCI image references",
                      hint="reference an image (registry/repository@sha256:...) or a directory as file://bundles/<dir>")


def _fetch_image(reference: str) -> FetchedBundle:
    from reconciler import oci

    try:
        image = oci.pull(reference)
    except oci.RegistryError as exc:
        raise BundleError(exc.message, obj=exc.obj or reference, hint=exc.hint) from None
    return FetchedBundle(reference, image.root, image.digest)


def _fetch_directory(reference: str, repo_root: Path) -> FetchedBundle:
    rel = reference[len(FILE_SCHEME):].strip("/")
    root = repo_root.resolve()
    path = (root / rel).resolve()
    if root != path and root not in path.parents:
        raise BundleError(f"bundle reference {reference!r} points outside the repository",
                          hint="bundle directories must live inside the repository, e.g. under bundles/")
    if not path.is_dir():
        raise BundleError(f"bundle directory {rel!r} does not exist", obj=reference)
    return FetchedBundle(reference, path, directory_digest(path, reference))


def directory_digest(path: Path, name: str) -> str:
    """sha256 over (relative path, content) of every file, in sorted order."""
    h = hashlib.sha256()
    total = 0
    for file in sorted(_walk_files(path, name)):
        rel = file.relative_to(path).as_posix()
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BundleError(f"file {rel} is {size} bytes, over the {MAX_FILE_BYTES}-byte limit", obj=name)
        total += size
        if total > MAX_BUNDLE_BYTES:
            raise BundleError(f"bundle is over the {MAX_BUNDLE_BYTES}-byte limit", obj=name)
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(file.read_bytes()).digest())
    return "sha256:" + h.hexdigest()


def _walk_files(path: Path, name: str) -> list[Path]:
    files = []
    root = path.resolve()
    for dirpath, dirnames, filenames in os.walk(path):
        for entry in dirnames + filenames:
            full = Path(dirpath) / entry
            if full.is_symlink():
                target = full.resolve()
                if target != root and root not in target.parents:
                    raise BundleError(f"{full.relative_to(path)} is a link out of the bundle", obj=name)
        files.extend(Path(dirpath) / f for f in filenames if (Path(dirpath) / f).is_file())
    return files
