"""Talking to registries through oras-py: resolve, pull (verified, cached, safely unpacked) and push.

Why the shape: an image reference is mutable (a tag), the reconciler's inputs
must not be, so everything starts from ``resolve`` and continues by digest.
A manifest or blob whose bytes do not hash to the digest that named it is
refused. The unpacked filesystem is cached by manifest digest: a second pull
of the same digest reads no network at all.
"""

from __future__ import annotations

import hashlib
import ipaddress
import io
import json
import os
import platform
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from reconciler.errors import ReconcilerError
from reconciler import cachedir
from reconciler.kube.reach import unreached

MAX_OBJECT_BYTES = 16 * 1024 * 1024      # one file in a layer, or a manifest / config blob
MAX_IMAGE_BYTES = 512 * 1024 * 1024      # all layers of an image, compressed or not
MAX_ENTRIES = 100_000                    # tar members over all layers
_CHUNK = 1 << 16

MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")


class RegistryError(ReconcilerError):
    """An image cannot be resolved, pulled, unpacked or pushed."""


@dataclass(frozen=True)
class Reference:
    """``registry/repository[:tag][@digest]``, normalised (Docker Hub names get ``library/``)."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, None, digest)

    @property
    def host(self) -> str:
        """The host to connect to (Docker Hub's API lives on another name than its images)."""
        return "registry-1.docker.io" if self.registry in _DOCKER_HUB else self.registry

    @property
    def loopback(self) -> bool:
        host = self.registry.rsplit(":", 1)[0] if not self.registry.endswith("]") else self.registry
        host = host.strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def parse_reference(text: str) -> Reference:
    """Parse an image reference; a missing registry means Docker Hub, a missing tag ``latest``."""
    raw = text.removeprefix("docker://")
    name, digest = (raw.split("@", 1) + [None])[:2] if "@" in raw else (raw, None)
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = "docker.io", name
    if registry in _DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if digest is not None and (not digest.startswith("sha256:") or len(digest) != 71
                               or any(c not in "0123456789abcdef" for c in digest[7:])):
        raise RegistryError(f"image reference {text!r} has a malformed digest (expected sha256:<64 hex>)")
    if not repository or repository != repository.lower() or any(c in repository for c in " \t\\") or \
            (tag is not None and not tag):
        raise RegistryError(f"{text!r} is not a valid image reference",
                            hint="write registry/repository:tag or registry/repository@sha256:<digest>")
    if tag is None and digest is None:
        tag = "latest"
    return Reference(registry, repository, tag, digest)


def _auth_files() -> list[str]:
    """Credential files in the order container tools read them."""
    files = []
    if explicit := os.environ.get("REGISTRY_AUTH_FILE"):
        files.append(explicit)
    if docker := os.environ.get("DOCKER_CONFIG"):
        files.append(str(Path(docker) / "config.json"))
    files.append(str(Path.home() / ".docker" / "config.json"))
    return [f for f in files if Path(f).is_file()]


_CHALLENGES: dict[str, str] = {}


def _challenge(ref: Reference) -> str:
    """The auth scheme the registry asks for on /v2/ ("bearer", "basic" or "" for none), once per host.

    Registries differ: the big public ones hand out bearer tokens, a private
    registry with htpasswd (and many appliances) asks for HTTP Basic. The
    token flow misreads a Basic challenge, so the scheme decides the backend.
    """
    if ref.host not in _CHALLENGES:
        import requests

        url = f"{'http' if ref.loopback else 'https'}://{ref.host}/v2/"
        try:
            resp = requests.get(url, timeout=30)
        except requests.exceptions.RequestException as exc:
            raise RegistryError(f"cannot reach registry {ref.registry}: {unreached(exc)}", obj=str(ref)) from None
        header = resp.headers.get("Www-Authenticate", "") if resp.status_code == 401 else ""
        _CHALLENGES[ref.host] = header.split(" ", 1)[0].lower()
    return _CHALLENGES[ref.host]


def _credentials() -> dict[str, Any]:
    """Registry credentials by host, from the auth files in priority order (the first file naming a host wins)."""
    merged: dict[str, Any] = {}
    for path in _auth_files():
        try:
            auths = json.loads(Path(path).read_text()).get("auths") or {}
        except (OSError, ValueError, AttributeError):
            raise RegistryError(f"cannot read registry credentials from {path}",
                                hint="it must be a docker config.json with an 'auths' mapping") from None
        for key, entry in auths.items():
            host = key.split("://", 1)[-1].split("/", 1)[0]    # "https://index.docker.io/v1/" -> the host
            merged.setdefault(host, entry)
    return merged


def _client(ref: Reference) -> Any:
    import oras.provider

    scheme = _challenge(ref)
    client = oras.provider.Registry(hostname=ref.host, insecure=ref.loopback,
                                    auth_backend="basic" if scheme == "basic" else "token")
    # oras would merge the config files in no defined order; merge them ourselves, first file winning.
    auths = _credentials()
    names = [ref.registry, *(_DOCKER_HUB if ref.registry in _DOCKER_HUB else ())]
    found = next((auths[n] for n in names if n in auths), None)
    if found is not None and ref.host not in auths:
        auths[ref.host] = found
    client.auth._auth_config = {"auths": auths}
    client.auth._load_auth(ref.host)
    if scheme == "basic" and not getattr(client.auth, "_basic_auth", None):
        raise RegistryError(f"registry {ref.registry} requires a login, and no credentials for it were found",
                            obj=str(ref), hint=_LOGIN_HINT)
    return client


def _container(ref: Reference, what: str | None = None) -> Any:
    import oras.container

    return oras.container.Container(f"{ref.host}/{ref.repository}:{what or ref.tag or 'latest'}")


_LOGIN_HINT = ("log in to the registry (credentials are read from $REGISTRY_AUTH_FILE, "
               "$DOCKER_CONFIG/config.json or ~/.docker/config.json)")


def _request(client: Any, url: str, method: str, ref: Reference, **kw: Any) -> Any:
    import requests

    try:
        return client.do_request(url, method, **kw)
    except requests.exceptions.SSLError as exc:
        raise RegistryError(f"TLS error talking to {ref.registry}: {unreached(exc)}", obj=str(ref),
                            hint="plain HTTP is only used for loopback registries") from None
    except (requests.exceptions.RequestException, ValueError) as exc:
        raise RegistryError(f"cannot reach registry {ref.registry}: {unreached(exc)}", obj=str(ref)) from None


def _check(resp: Any, ref: Reference, what: str) -> None:
    if resp.status_code in (200, 201, 202):
        return
    detail = ""
    try:
        errors = resp.json().get("errors") or []
        detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict))
    except ValueError:
        pass
    hint = _LOGIN_HINT if resp.status_code in (401, 403) else None
    raise RegistryError(f"{what} failed: HTTP {resp.status_code}{' (' + detail + ')' if detail else ''}",
                        obj=str(ref), hint=hint)


def resolve(reference: str) -> str:
    """The manifest digest a reference names now (a digest reference names itself).

    Offline (``reconciler.network``), a tag is the digest the lock pins it to, else the one it had when it was
    last resolved here; the registry is never asked.
    """
    from reconciler import network

    ref = parse_reference(reference)
    if ref.digest:
        return ref.digest
    if network.is_offline():
        known = network.pinned(reference) or _tag_index().get(str(ref))
        if not known:
            raise network.refuse("resolving the tag", reference)
        return known
    digest = _resolve_tag(ref)
    _remember_tag(str(ref), digest)
    return digest


_TAGS_KEPT = 1000


def _tag_index() -> dict[str, str]:
    """The digest each tag had when this machine last resolved it: what an offline run may use."""
    try:
        doc = json.loads((_cache_root() / "tags.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(doc, dict) \
        else {}


def _remember_tag(ref: str, digest: str) -> None:
    from reconciler import cachedir

    index = _tag_index()
    if index.get(ref) == digest:
        return
    index.pop(ref, None)
    index[ref] = digest
    try:
        _cache_root().mkdir(parents=True, exist_ok=True)
        cachedir.write_atomic(str(_cache_root() / "tags.json"),
                              json.dumps(dict(list(index.items())[-_TAGS_KEPT:]), indent=0).encode())
    except OSError:
        pass


def _resolve_tag(ref: Reference) -> str:
    client = _client(ref)
    url = f"{client.prefix}://{_container(ref).manifest_url()}"
    accept = {"Accept": ", ".join(MANIFEST_TYPES + INDEX_TYPES)}
    resp = _request(client, url, "HEAD", ref, headers=dict(accept))
    digest = resp.headers.get("Docker-Content-Digest") if resp.status_code == 200 else None
    if not digest:
        resp = _request(client, url, "GET", ref, headers=dict(accept))
        _check(resp, ref, "resolving the tag")
        digest = "sha256:" + hashlib.sha256(resp.content).hexdigest()
    return digest


@dataclass(frozen=True)
class PulledImage:
    """An image unpacked on disk: its manifest digest, config labels and root filesystem."""

    reference: str
    digest: str
    labels: dict[str, str] = field(hash=False)
    root: Path


def _cache_root() -> Path:
    """``$RECONCILER_OCI_CACHE_DIR``, else ``oci/`` in the reconciler's cache."""
    if explicit := os.environ.get("RECONCILER_OCI_CACHE_DIR"):
        return Path(explicit)
    return Path(cachedir.root()) / "oci"


def _entry(digest: str) -> Path:
    algo, _, hexpart = digest.partition(":")
    return _cache_root() / algo / hexpart


def pull(reference: str, dest: Path | None = None) -> PulledImage:
    """Resolve, fetch and unpack an image; ``root`` is ``dest`` (a copy) or the shared cache entry (read-only)."""
    from reconciler import network

    ref = parse_reference(reference)
    digest = resolve(reference)
    entry = _entry(digest)
    if not (entry / "image.json").is_file():
        if network.is_offline():
            raise network.refuse(f"pulling the image {digest}", reference)
        _fetch_into_cache(ref.with_digest(digest), entry)
    meta = json.loads((entry / "image.json").read_text())
    root = entry / "root"
    if dest is not None:
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise RegistryError(f"cannot unpack into {dest}: the directory is not empty", obj=reference)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(root, dest, symlinks=True, dirs_exist_ok=True)
        root = dest
    return PulledImage(reference, digest, dict(meta.get("labels") or {}), root)


def _fetch_into_cache(ref: Reference, entry: Path) -> None:
    client = _client(ref)
    manifest = _manifest(client, ref, ref.digest or "")
    config_desc = manifest.get("config") or {}
    config = json.loads(_small_blob(client, ref, config_desc, "image config"))
    labels = ((config.get("config") or {}).get("Labels")) or {}
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name[:12]}-", dir=entry.parent))
    try:
        root = staging / "root"
        root.mkdir()
        budget = _Budget()
        for layer in manifest.get("layers") or []:
            media = str(layer.get("mediaType") or "")
            if "zstd" in media:
                raise RegistryError(f"layer media type {media} is not supported (only tar and tar+gzip)",
                                    obj=str(ref))
            with tempfile.TemporaryFile(dir=staging) as blob:
                _stream_blob(client, ref, layer, blob, budget)
                blob.seek(0)
                unpack_layer(blob, root, budget, str(ref))
        (staging / "image.json").write_text(json.dumps({"digest": ref.digest, "labels": labels,
                                                        "reference": str(ref)}, sort_keys=True))
        try:
            staging.rename(entry)
        except OSError:
            if not (entry / "image.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _manifest(client: Any, ref: Reference, digest: str, depth: int = 0) -> dict[str, Any]:
    url = f"{client.prefix}://{_container(ref).manifest_url(digest)}"
    resp = _request(client, url, "GET", ref, headers={"Accept": ", ".join(MANIFEST_TYPES + INDEX_TYPES)})
    _check(resp, ref, "fetching the manifest")
    body = resp.content
    if len(body) > MAX_OBJECT_BYTES:
        raise RegistryError(f"manifest is over {MAX_OBJECT_BYTES} bytes", obj=str(ref))
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise RegistryError(f"the registry served a manifest that does not match {digest}", obj=str(ref))
    doc = json.loads(body)
    media = doc.get("mediaType") or resp.headers.get("Content-Type", "").split(";")[0]
    if media in INDEX_TYPES or "manifests" in doc:
        if depth:
            raise RegistryError("nested image indexes are not supported", obj=str(ref))
        return _manifest(client, ref, _pick_platform(doc, ref), depth + 1)
    if media and media not in MANIFEST_TYPES:
        raise RegistryError(f"manifest media type {media} is not an image manifest", obj=str(ref))
    return doc


def _pick_platform(index: dict[str, Any], ref: Reference) -> str:
    """The manifest for this machine's platform, else the only one."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    entries = [m for m in index.get("manifests") or [] if m.get("mediaType") in MANIFEST_TYPES + ("",)
               or "mediaType" not in m]
    for m in entries:
        p = m.get("platform") or {}
        if p.get("os") == "linux" and p.get("architecture") == arch:
            return str(m["digest"])
    if len(entries) == 1:
        return str(entries[0]["digest"])
    raise RegistryError(f"the image index has no manifest for linux/{arch}", obj=str(ref))


def _small_blob(client: Any, ref: Reference, desc: dict[str, Any], what: str) -> bytes:
    import io

    out = io.BytesIO()
    budget = _Budget(limit=MAX_OBJECT_BYTES)
    _stream_blob(client, ref, desc, out, budget, what=what)
    return out.getvalue()


class _Budget:
    """Bytes and entries left for one image; shared by downloads and unpacking."""

    def __init__(self, limit: int = MAX_IMAGE_BYTES) -> None:
        self.limit = limit
        self.downloaded = 0
        self.unpacked = 0
        self.entries = 0


def _stream_blob(client: Any, ref: Reference, desc: dict[str, Any], out: BinaryIO, budget: _Budget,
                 what: str = "layer") -> None:
    digest = str(desc.get("digest") or "")
    if not digest.startswith("sha256:"):
        raise RegistryError(f"{what} digest {digest!r} is not sha256", obj=str(ref))
    size = int(desc.get("size") or 0)
    if budget.downloaded + size > budget.limit:
        raise RegistryError(f"image is over the {budget.limit}-byte limit", obj=str(ref))
    url = f"{client.prefix}://{_container(ref).get_blob_url(digest)}"
    resp = _request(client, url, "GET", ref, stream=True)
    with resp:
        _check(resp, ref, f"fetching {what} {digest}")
        h = hashlib.sha256()
        for chunk in resp.iter_content(_CHUNK):
            budget.downloaded += len(chunk)
            if budget.downloaded > budget.limit:
                raise RegistryError(f"image is over the {budget.limit}-byte limit", obj=str(ref))
            h.update(chunk)
            out.write(chunk)
    if "sha256:" + h.hexdigest() != digest:
        raise RegistryError(f"{what} {digest} does not match its content", obj=str(ref))


def unpack_archive(data: bytes, root: Path, limit: int, name: str) -> None:
    """Unpack a (gzipped) tar archive onto ``root`` with the same checks as an image layer."""
    unpack_layer(io.BytesIO(data), root, _Budget(limit), name)


def unpack_layer(blob: BinaryIO, root: Path, budget: _Budget, name: str) -> None:
    """Apply one (optionally gzipped) tar layer onto ``root``, refusing anything that could escape it.

    Whiteouts (``.wh.<name>``, ``.wh..wh..opq``) delete what earlier layers
    put there, as container runtimes do.
    """
    try:
        tar = tarfile.open(fileobj=blob, mode="r:*", tarinfo=_BoundedTarInfo)
    except tarfile.TarError as exc:
        raise RegistryError(f"a layer is not a tar archive: {exc}", obj=name) from None
    except _HeaderTooLarge as exc:
        raise RegistryError(str(exc), obj=name) from None
    with tar:
        try:
            for member in tar:
                _apply_member(tar, member, root, budget, name)
        except _HeaderTooLarge as exc:
            raise RegistryError(str(exc), obj=name) from None
        except (tarfile.TarError, EOFError, OSError) as exc:
            if isinstance(exc, tarfile.FilterError):
                raise RegistryError(f"layer entry refused: {exc}", obj=name) from None
            raise RegistryError(f"a layer cannot be unpacked: {exc}", obj=name) from None


MAX_HEADER_BYTES = 1024 * 1024   # a pax or GNU long-name header; real ones hold a path and a few times
MAX_PATH_DEPTH = 64             # directory levels of an entry's path; bundles stay under 5
MAX_EXTENDED_CHAIN = 16          # extended headers before one entry; real archives have one or two
_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
             tarfile.GNUTYPE_LONGLINK)


class _HeaderTooLarge(Exception):
    pass


class _BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose extended headers are bounded before they are read.

    The tar reader reads a pax or GNU long-name header's content into memory
    whole, as the header declares it: a few hundred bytes of gzip can declare
    gigabytes. Sparse files are refused: their maps grow with the layer too,
    and images do not need them.
    """

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _HeaderTooLarge(f"layer entry {self.name!r} is a sparse file, which images do not use")
        if self.type not in _EXTENDED:
            return super()._proc_member(tarfile_)
        if self.size > MAX_HEADER_BYTES:
            raise _HeaderTooLarge(f"a tar extended header of {self.size} bytes, over the "
                                  f"{MAX_HEADER_BYTES}-byte limit")
        # The reader recurses once per extended header before the entry it describes.
        chain = getattr(tarfile_, "_extended_chain", 0)
        if chain >= MAX_EXTENDED_CHAIN:
            raise _HeaderTooLarge(f"more than {MAX_EXTENDED_CHAIN} tar extended headers in a row")
        tarfile_._extended_chain = chain + 1
        try:
            return super()._proc_member(tarfile_)
        finally:
            tarfile_._extended_chain = chain


def _apply_member(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path, budget: _Budget, name: str) -> None:
    path = PurePosixPath(member.name.lstrip("/"))
    parts = [p for p in path.parts if p not in ("", ".")]
    if ".." in parts:
        raise RegistryError(f"layer entry {member.name!r} escapes the image root", obj=name)
    if len(parts) > MAX_PATH_DEPTH:   # extraction creates parents recursively, one call per level
        raise RegistryError(f"layer entry {'/'.join(parts[:4])}/... nests {len(parts)} levels deep, over "
                            f"{MAX_PATH_DEPTH}", obj=name)
    # The reader skips an entry's data by decompressing it, so every entry's size counts, written or not.
    budget.unpacked += member.size
    if budget.unpacked > budget.limit:
        raise RegistryError(f"image unpacks to more than {budget.limit} bytes", obj=name)
    if not parts:
        return
    budget.entries += 1
    if budget.entries > MAX_ENTRIES:
        raise RegistryError(f"image has more than {MAX_ENTRIES} files", obj=name)
    base = parts[-1]
    if base.startswith(".wh."):
        parent = _inside(root, parts[:-1], name)
        if base == ".wh..wh..opq":
            if parent.is_dir() and not parent.is_symlink():
                for child in parent.iterdir():
                    _remove(child)
        else:
            _remove(parent / base[len(".wh."):])
        return
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise RegistryError(f"layer entry {member.name!r} is a device, fifo or other special file", obj=name)
    if member.size > MAX_OBJECT_BYTES:
        raise RegistryError(f"layer entry {member.name!r} is {member.size} bytes, over the "
                            f"{MAX_OBJECT_BYTES}-byte per-file limit", obj=name)
    target = _inside(root, parts, name)
    if (target.exists() or target.is_symlink()) and not (member.isdir() and target.is_dir()
                                                          and not target.is_symlink()):
        _remove(target)
    member.name = "/".join(parts)
    if member.islnk():
        member.linkname = member.linkname.lstrip("/")
    tar.extract(member, root, filter="data")


def _inside(root: Path, parts: list[str], name: str) -> Path:
    """``root/parts`` after checking no existing parent is a link leading out of ``root``."""
    resolved_root = root.resolve()
    target = root.joinpath(*parts) if parts else root
    parent = target.parent.resolve() if parts else resolved_root
    if parent != resolved_root and resolved_root not in parent.parents:
        raise RegistryError(f"layer entry {'/'.join(parts)!r} would be written through a link out of the image",
                            obj=name)
    return target


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def push_layout(layout: Path, reference: str) -> str:
    """Push the single image of an OCI layout directory to ``reference``; returns its manifest digest."""
    ref = parse_reference(reference)
    if ref.digest:
        raise RegistryError(f"push to a tag, not a digest: {reference!r}")
    index = json.loads((layout / "index.json").read_text())
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise RegistryError(f"{layout}/index.json must list exactly one image, found {len(manifests)}")
    desc = manifests[0]
    digest, media = str(desc["digest"]), str(desc["mediaType"])
    body = _blob_path(layout, digest).read_bytes()
    manifest = json.loads(body)
    client = _client(ref)
    container = _container(ref)
    for blob in [manifest["config"], *manifest.get("layers", [])]:
        resp = client.upload_blob(str(_blob_path(layout, blob["digest"])), container,
                                  {"digest": blob["digest"], "size": blob["size"], "mediaType": blob["mediaType"]})
        _check(resp, ref, f"uploading blob {blob['digest']}")
    url = f"{client.prefix}://{container.manifest_url()}"
    resp = _request(client, url, "PUT", ref, data=body, headers={"Content-Type": media})
    _check(resp, ref, "uploading the manifest")
    served = resp.headers.get("Docker-Content-Digest")
    if served and served != digest:
        raise RegistryError(f"the registry stored the manifest as {served}, expected {digest}", obj=str(ref))
    return digest


def _blob_path(layout: Path, digest: str) -> Path:
    algo, _, hexpart = digest.partition(":")
    return layout / "blobs" / algo / hexpart
