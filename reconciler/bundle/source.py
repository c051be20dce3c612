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

* ``git+<url>@<commit>#<path>``: the directory ``path`` of a git repository at
  a full 40-hex commit (``git+https://host/org/repo.git@3f2a...#bundles/foo``;
  ``git+ssh://`` and ``git+file://`` too). Branches and tags are refused: they
  move, and a bundle must not. Fetched with pygit2 into a bare cache clone.
  A ``git+file://`` repository is confined like ``file://``: its path must
  lie inside the GitOps repository (a relative path is taken from its root).

* ``https://<host>/<path>.tar.gz#sha256=<hex>``: a tarball whose sha256 pins it
  (plain ``http://`` only on loopback). The bundle is the archive's root, or
  its single top-level directory.

Git and tarball bundles are identified, like directories, by the sha256 of
their files, and cached by their pin (commit and path, or tarball sha256).
An offline run (``reconciler.network``) uses only what the cache holds: a
bundle that would need fetching is an ``OfflineError`` naming it.
Content is hostile input: paths that escape, links that leave the bundle,
oversized files and oversized bundles are refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from reconciler.errors import BundleError, InputError

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_BUNDLE_BYTES = 100 * 1024 * 1024
FILE_SCHEME = "file://"


@dataclass(frozen=True)
class FetchedBundle:
    """Bundle files on local disk, and the digest that pins them."""

    reference: str
    path: Path
    digest: str


def fetch(reference: str, repo_root: Path, digest: str | None = None) -> FetchedBundle:
    """The bundle ``reference`` names; ``digest``, a lockfile's pin, is what an image tag is pulled by.

    A tag may have moved since it was locked: the locked image is still the one
    to install (``resolve`` is what moves a pin). Other sources are fetched as
    named; their caller compares the digest.
    """
    if reference.startswith(FILE_SCHEME):
        return _fetch_directory(reference, repo_root)
    if reference.startswith(GIT_PREFIX):
        return _fetch_git(reference, repo_root)
    if reference.startswith(("https://", "http://")):
        return _fetch_tarball(reference)
    if "://" not in reference or reference.startswith("docker://"):
        return _fetch_image(reference, digest)
    scheme = reference.split("://", 1)[0]
    raise BundleError(f"bundle source {reference!r} ({scheme}) cannot be fetched: supported are file:// "
                      f"directories in the repository, OCI image references, git+<url>@<commit>#<path> and "
                      f"https://...tar.gz#sha256=<hex>",
                      hint="reference an image (registry/repository@sha256:...) or a directory as file://bundles/<dir>")


GIT_PREFIX = "git+"
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_SHA256_FRAGMENT = re.compile(r"^sha256=([0-9a-f]{64})$")


def _cache(kind: str) -> Path:
    from reconciler import cachedir

    return Path(cachedir.root()) / "bundles" / kind


def _fetch_git(reference: str, repo_root: Path) -> FetchedBundle:
    """``git+<url>@<commit>#<path>``: the bundle directory at a pinned commit."""
    from reconciler.repo.git import Ref, RemoteRepository, SourceError

    body, _, subpath = reference[len(GIT_PREFIX):].partition("#")
    url, at, commit = body.rpartition("@")
    if not at or not _HEX40.match(commit) or "://" not in url:
        raise BundleError(f"git bundle reference {reference!r} must be git+<url>@<40-hex commit>#<path>",
                          hint="pin a full commit id; branches and tags move, and a bundle must not")
    if url.startswith(FILE_SCHEME):
        url = _confined_file_url(url, repo_root, reference)
    rel = PurePosixPath(subpath.strip("/") or ".")
    if rel.is_absolute() or ".." in rel.parts:
        raise BundleError(f"the path {subpath!r} in {reference!r} must stay inside the repository")
    entry = _cache("git") / f"{commit}-{hashlib.sha256(f'{url}#{rel}'.encode()).hexdigest()[:16]}"
    if not (entry / _COMPLETE).is_file():
        _online("fetching the repository", reference)
        remote = RemoteRepository(url, Ref(commit=commit), _cache("git-clones"))
        try:
            remote.fetch()
            with remote.checkout(commit) as tree:
                source = tree / rel
                if not source.is_dir():
                    raise BundleError(f"{rel} is not a directory at commit {commit}", obj=reference)
                _store(entry, lambda staging: shutil.copytree(source, staging, symlinks=True,
                                                              dirs_exist_ok=True))
        except (SourceError, InputError) as exc:   # fetch failures; a hostile tree (links out, size)
            raise BundleError(exc.message, path=exc.path, obj=reference, hint=exc.hint) from None
    return FetchedBundle(reference, entry / "bundle", directory_digest(entry / "bundle", reference))


def _confined_file_url(url: str, repo_root: Path, reference: str) -> str:
    """A ``file://`` git URL whose repository lies inside ``repo_root`` (links resolved), as an absolute URL."""
    root = repo_root.resolve()
    raw = url[len(FILE_SCHEME):]
    path = (Path(raw) if raw.startswith("/") else root / raw).resolve()
    if path != root and root not in path.parents:
        raise BundleError(f"git repository {url} is outside the repository",
                          obj=reference, hint="a git+file:// bundle must live inside the GitOps repository; "
                                              "publish it over https or ssh, or as an image")
    return FILE_SCHEME + path.as_posix()


def _fetch_tarball(reference: str) -> FetchedBundle:
    """``https://.../bundle.tar.gz#sha256=<hex>``: downloaded once, verified, unpacked as hostile input."""
    from urllib.parse import urlsplit

    from reconciler import oci

    url, _, fragment = reference.partition("#")
    match = _SHA256_FRAGMENT.match(fragment)
    if not match:
        raise BundleError(f"tarball bundle reference {reference!r} needs #sha256=<64 hex digits>",
                          hint="pin the archive's sha256, e.g. from `sha256sum bundle.tar.gz`")
    parts = urlsplit(url)
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise BundleError(f"{url} uses plain http; only https is allowed off loopback", obj=reference)
    want = match.group(1)
    entry = _cache("tarball") / want
    if not (entry / _COMPLETE).is_file():
        _online("downloading the archive", reference)
        data = _download(url, reference)
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            raise BundleError(f"the archive's sha256 is {got}, not the pinned {want}", obj=reference,
                              hint="the content changed or the pin is wrong; bundles are immutable")

        def unpack(staging: Path) -> None:
            try:
                oci.unpack_archive(data, staging, MAX_BUNDLE_BYTES, reference)
            except oci.RegistryError as exc:
                raise BundleError(exc.message, obj=reference) from None
            tops = [p for p in staging.iterdir()]
            if not (staging / "manifests").is_dir() and len(tops) == 1 and tops[0].is_dir():
                inner = tops[0]
                for child in inner.iterdir():
                    child.rename(staging / child.name)
                inner.rmdir()
        _store(entry, unpack)
    return FetchedBundle(reference, entry / "bundle", directory_digest(entry / "bundle", reference))


def _download(url: str, reference: str) -> bytes:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 (scheme checked by the caller)
            data = resp.read(MAX_BUNDLE_BYTES + 1)
    except (urllib.error.URLError, OSError) as exc:
        raise BundleError(f"cannot download {url}: {getattr(exc, 'reason', exc)}", obj=reference) from None
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"the archive is over the {MAX_BUNDLE_BYTES}-byte limit", obj=reference)
    return data


_COMPLETE = ".complete"


def _online(what: str, reference: str) -> None:
    """Refuse ``what`` in an offline run: only what the cache holds may be used (``reconciler.network``)."""
    from reconciler import network

    if network.is_offline():
        raise network.refuse(what, reference)


def _store(entry: Path, fill) -> None:
    """Fill a cache entry atomically: a staging directory renamed into place, then marked complete."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    try:
        (staging / "bundle").mkdir()
        fill(staging / "bundle")
        directory_digest(staging / "bundle", str(entry))   # enforce the size and link limits before keeping it
        (staging / _COMPLETE).write_text("")
        if entry.exists():
            shutil.rmtree(entry)
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_image(reference: str, digest: str | None = None) -> FetchedBundle:
    from reconciler import oci

    pinned = reference
    try:
        pinned = str(oci.parse_reference(reference).with_digest(digest)) if digest else reference
        image = oci.pull(pinned)
    except oci.RegistryError as exc:
        hint = exc.hint
        if digest and pinned != reference:
            hint = (f"the lockfile pins {reference} to {digest}; if that image is gone from the registry, "
                    f"`reconciler resolve` re-pins the reference to what it names now")
        raise BundleError(exc.message, obj=exc.obj or reference, hint=hint) from None
    return FetchedBundle(reference, image.root, image.digest)


def located(exc: BundleError, selection: Any) -> BundleError:
    """``exc`` saying where the failing reference comes from, when it does not say already: the catalog file
    that lists the bundle (or the declaration that names it), and which bundle for which Operator.
    ``selection`` is the resolver's Selection of the bundle."""
    if exc.path:
        return exc
    which = f"bundle {selection.bundle_name}" + (f" of catalog {selection.catalog}" if selection.catalog else "") \
        + f" (for {selection.kind} {selection.owner})"
    exc.path = selection.listed_in or selection.origin
    exc.obj = f"{which}: {exc.obj}" if exc.obj and exc.obj not in which else which
    exc.args = (exc.render(),)
    return exc


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
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        h.update(hashlib.sha256(file.read_bytes()).digest())
    return "sha256:" + h.hexdigest()


def _walk_files(path: Path, name: str) -> list[Path]:
    from reconciler.repo import MAX_TREE_DEPTH

    files = []
    root = path.resolve()
    for dirpath, dirnames, filenames in os.walk(path):
        depth = len(Path(dirpath).relative_to(path).parts)
        if depth >= MAX_TREE_DEPTH:   # os.walk recurses per level
            raise BundleError(f"directories nest more than {MAX_TREE_DEPTH} levels deep",
                              path="/".join(Path(dirpath).relative_to(path).parts[:4]) + "/...", obj=name)
        for entry in dirnames + filenames:
            full = Path(dirpath) / entry
            if full.is_symlink():
                target = full.resolve()
                if target != root and root not in target.parents:
                    raise BundleError(f"{full.relative_to(path)} is a link out of the bundle", obj=name)
        files.extend(Path(dirpath) / f for f in filenames if (Path(dirpath) / f).is_file())
    return files
