"""reconciler.oci against a real registry on loopback: build, push, resolve, pull, cache, hostile layers."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from reconciler import oci
from reconciler.oci.client import MAX_OBJECT_BYTES, RegistryError, _Budget, unpack_layer


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _source(tmp_path: Path, text: str = "a: 1\n") -> Path:
    src = tmp_path / "src"
    (src / "manifests").mkdir(parents=True)
    (src / "metadata").mkdir()
    (src / "manifests" / "cm.yaml").write_text(text)
    (src / "metadata" / "annotations.yaml").write_text("annotations: {x: y}\n")
    return src


def test_parse_reference_forms():
    r = oci.parse_reference("127.0.0.1:5000/ns/repo:v1")
    assert (r.registry, r.repository, r.tag, r.digest, r.loopback) == ("127.0.0.1:5000", "ns/repo", "v1", None, True)
    d = "sha256:" + "a" * 64
    r = oci.parse_reference(f"quay.io/org/op@{d}")
    assert (r.registry, r.repository, r.tag, r.digest, r.loopback) == ("quay.io", "org/op", None, d, False)
    r = oci.parse_reference("busybox")
    assert (r.registry, r.repository, r.tag, r.host) == ("docker.io", "library/busybox", "latest",
                                                         "registry-1.docker.io")
    assert oci.parse_reference("localhost:5000/x").loopback
    assert not oci.parse_reference("registry.example.com:5000/x").loopback


@pytest.mark.parametrize("bad", ["quay.io/org/op@sha256:abc", "quay.io/Org/Op:v1", "quay.io/org/op:"])
def test_parse_reference_rejects_malformed(bad):
    with pytest.raises(RegistryError):
        oci.parse_reference(bad)


def test_build_layout_is_reproducible(tmp_path):
    src = _source(tmp_path)
    a = oci.build_layout(src, tmp_path / "a", {"l": "v"})
    b = oci.build_layout(src, tmp_path / "b", {"l": "v"})
    assert a.digest == b.digest
    c = oci.build_layout(src, tmp_path / "c", {"l": "other"})
    assert c.digest != a.digest
    index = json.loads((tmp_path / "a" / "index.json").read_text())
    assert index["manifests"][0]["digest"] == a.digest
    assert json.loads((tmp_path / "a" / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}


def test_push_resolve_pull_roundtrip(tmp_path, oci_registry, oci_cache):
    src = _source(tmp_path)
    layout = oci.build_layout(src, tmp_path / "layout", {"com.example.label": "yes"})
    ref = oci_registry.ref("roundtrip/bundle", "v1")
    assert oci.push_layout(layout.path, ref) == layout.digest
    assert oci.resolve(ref) == layout.digest
    pulled = oci.pull(ref, tmp_path / "out")
    assert pulled.digest == layout.digest
    assert pulled.labels == {"com.example.label": "yes"}
    assert pulled.root == tmp_path / "out"
    assert _tree(pulled.root) == _tree(src)
    # without dest, root is the cache entry, keyed by digest
    shared = oci.pull(ref)
    assert layout.digest.split(":")[1] in str(shared.root) and str(oci_cache) in str(shared.root)


def test_cached_digest_needs_no_registry(tmp_path, oci_registry, oci_cache):
    layout = oci.build_layout(_source(tmp_path), tmp_path / "layout", {})
    oci.push_layout(layout.path, oci_registry.ref("cached/bundle"))
    oci.pull(oci_registry.ref("cached/bundle"))
    # a digest reference is immutable: once cached, a dead registry does not matter
    dead = f"127.0.0.1:1/cached/bundle@{layout.digest}"
    assert oci.pull(dead).digest == layout.digest
    with pytest.raises(RegistryError, match="cannot reach registry"):
        oci.pull("127.0.0.1:1/cached/bundle:latest")


def test_moved_tag_resolves_to_new_digest(tmp_path, oci_registry, oci_cache):
    ref = oci_registry.ref("moving/bundle", "stable")
    one = oci.build_layout(_source(tmp_path / "1", "a: 1\n"), tmp_path / "l1", {})
    two = oci.build_layout(_source(tmp_path / "2", "a: 2\n"), tmp_path / "l2", {})
    oci.push_layout(one.path, ref)
    assert oci.resolve(ref) == one.digest
    oci.push_layout(two.path, ref)
    assert oci.resolve(ref) == two.digest
    assert (oci.pull(ref).root / "manifests" / "cm.yaml").read_text() == "a: 2\n"
    assert (oci.pull(f"{oci_registry.host}/moving/bundle@{one.digest}").root / "manifests" / "cm.yaml"
            ).read_text() == "a: 1\n"


def test_unknown_image_is_a_clear_error(oci_registry, oci_cache):
    with pytest.raises(RegistryError, match="HTTP 404") as err:
        oci.pull(oci_registry.ref("nothing/here", "v9"))
    assert "nothing/here" in str(err.value)


def _push_raw_layer(tmp_path: Path, registry, repo: str, layer_tar: bytes) -> str:
    """Push an image whose single layer is exactly ``layer_tar`` (gzipped), bypassing build_layout's checks."""
    layout = tmp_path / f"raw-{repo.replace('/', '-')}"
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes, media: str) -> dict:
        h = hashlib.sha256(data).hexdigest()
        (blobs / h).write_bytes(data)
        return {"mediaType": media, "digest": f"sha256:{h}", "size": len(data)}

    layer = blob(gzip.compress(layer_tar, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip")
    config = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                              "rootfs": {"type": "layers", "diff_ids": []}}).encode(),
                  "application/vnd.oci.image.config.v1+json")
    manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                                "config": config, "layers": [layer]}).encode(),
                    "application/vnd.oci.image.manifest.v1+json")
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))
    return oci.push_layout(layout, registry.ref(repo))


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _link(name: str, target: str, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


def test_hostile_layer_pulled_from_registry_is_refused(tmp_path, oci_registry, oci_cache):
    _push_raw_layer(tmp_path, oci_registry, "hostile/escape", _tar(_file("../../evil", b"boom")))
    with pytest.raises(RegistryError, match="escapes the image root"):
        oci.pull(oci_registry.ref("hostile/escape"))
    assert not list(oci_cache.rglob("evil")) and not (tmp_path / "evil").exists()
    # nothing half-unpacked is left in the cache
    assert not [p for p in oci_cache.rglob("image.json")]


def _unpack(tmp_path: Path, layer: bytes) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    unpack_layer(io.BytesIO(layer), root, _Budget(), "test")
    return root


@pytest.mark.parametrize("members, message", [
    ([_file("../x")], "escapes the image root"),
    ([_file("a/../../x")], "escapes the image root"),
    ([_link("out", "/etc/passwd")], "layer entry refused"),
    ([_link("out", "../../../etc")], "layer entry refused"),
    ([_link("hard", "../../etc/passwd", hard=True)], "escapes|refused"),
    ([_link("dir", "/tmp"), _file("dir/x")], "through a link out of the image|refused"),
])
def test_hostile_layer_entries_refused(tmp_path, members, message):
    with pytest.raises(RegistryError, match=message):
        _unpack(tmp_path, _tar(*members))


def test_device_files_refused(tmp_path):
    dev = tarfile.TarInfo("dev/null")
    dev.type = tarfile.CHRTYPE
    with pytest.raises(RegistryError, match="device, fifo or other special file"):
        _unpack(tmp_path, _tar((dev, None)))


def test_oversized_entry_refused(tmp_path):
    with pytest.raises(RegistryError, match="per-file limit"):
        _unpack(tmp_path, _tar(_file("big", b"\0" * (MAX_OBJECT_BYTES + 1))))


def test_image_size_budget(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(RegistryError, match="unpacks to more than 10 bytes"):
        unpack_layer(io.BytesIO(_tar(_file("a", b"123456"), _file("b", b"123456"))), root, _Budget(limit=10), "t")


def test_links_inside_the_root_and_whiteouts(tmp_path):
    root = _unpack(tmp_path, _tar(_file("a/one", b"1"), _file("a/two", b"2"), _link("a/ln", "one"),
                                  _file("b/keep", b"k")))
    assert (root / "a" / "ln").read_bytes() == b"1"
    unpack_layer(io.BytesIO(_tar(_file("a/.wh.one", b""), _file("b/.wh..wh..opq", b""), _file("b/new", b"n"))),
                 root, _Budget(), "t")
    assert sorted(_tree(root)) == ["a/two", "b/new"]


def _header(name: str, type_: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = type_, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


@pytest.mark.parametrize("type_", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME])
def test_an_extended_header_is_bounded_before_it_is_read(tmp_path, type_):
    """The tar reader reads an extended header whole: 20 MB of them, compressed to 20 kB, are refused unread."""
    size = 20 * 1024 * 1024
    layer = gzip.compress(_header("././@x", type_, size) + b"\0" * size + _header("f", tarfile.REGTYPE, 0)
                          + b"\0" * 1024)
    assert len(layer) < 100_000
    with pytest.raises(RegistryError, match=f"a tar extended header of {size} bytes, over the 1048576-byte limit"):
        _unpack(tmp_path, layer)


def test_a_chain_of_extended_headers_is_refused_not_a_recursion_error(tmp_path):
    record = b"20 path=aaaaaaaaaaa\n"
    one = _header("././@PaxHeader", tarfile.XHDTYPE, len(record)) + record.ljust(512, b"\0")
    entry = _header("f", tarfile.REGTYPE, 0) + b"\0" * 1024
    with pytest.raises(RegistryError, match="more than 16 tar extended headers in a row"):
        _unpack(tmp_path, one * 5000 + entry)
    assert sorted(_tree(_unpack(tmp_path, one * 2 + entry))) == ["aaaaaaaaaaa"]


def test_entries_that_are_skipped_still_count_against_the_budget(tmp_path):
    """An entry named '.' or a whiteout is not written, but its data is decompressed to skip it."""
    for index, name in enumerate((".", "a/.wh.b")):
        root = tmp_path / str(index)
        root.mkdir()
        with pytest.raises(RegistryError, match="unpacks to more than 1000 bytes"):
            unpack_layer(io.BytesIO(_tar(_file(name, b"\0" * 2000))), root, _Budget(limit=1000), "t")


def test_sparse_entries_refused(tmp_path):
    with pytest.raises(RegistryError, match="is a sparse file"):
        _unpack(tmp_path, _header("s", tarfile.GNUTYPE_SPARSE, 0) + b"\0" * 1024)


def test_extended_header_bomb_pulled_from_registry_is_refused(tmp_path, oci_registry, oci_cache):
    size = 20 * 1024 * 1024
    _push_raw_layer(tmp_path, oci_registry, "hostile/paxbomb",
                    _header("././@x", tarfile.XHDTYPE, size) + b"\0" * size + b"\0" * 1024)
    with pytest.raises(RegistryError, match="extended header of 20971520 bytes") as err:
        oci.pull(oci_registry.ref("hostile/paxbomb"))
    assert "hostile/paxbomb" in str(err.value)
    assert not [p for p in oci_cache.rglob("image.json")]


def test_an_entry_nested_too_deeply_is_refused(tmp_path):
    """Extraction creates an entry's parents one recursive call per level: 1,500 levels were a RecursionError."""
    with pytest.raises(RegistryError, match="layer entry a/a/a/a/... nests 1501 levels deep, over 64"):
        _unpack(tmp_path, _tar(_file("/".join(["a"] * 1500 + ["f"]))))
    assert _tree(_unpack(tmp_path, _tar(_file("/".join(["a"] * 60 + ["f"])))))
