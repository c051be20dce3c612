"""Bundles from a git commit and from an http tarball: real repositories and a real HTTP server on loopback."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import shutil
import tarfile
import threading
from pathlib import Path

import pytest

from reconciler.bundle import render
from reconciler.bundle.source import directory_digest, fetch
from reconciler.errors import BundleError
from reconciler.model.declarations import InstallSettings
from tests.support.repo import GitRepo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"
BUNDLE = EXAMPLE / "bundles" / "plumbus" / "1.0.0"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))


def _git_repo(path: Path) -> GitRepo:
    shutil.copytree(BUNDLE, path / "bundles" / "plumbus")
    return GitRepo(path, "bundle")


def test_git_commit_source_renders_like_the_directory(tmp_path):
    commit = _git_repo(tmp_path / "src").head
    ref = f"git+file://{tmp_path / 'src'}@{commit}#bundles/plumbus"
    fetched = fetch(ref, tmp_path)
    assert fetched.digest == directory_digest(BUNDLE, "x")
    from_git = render(ref, tmp_path, InstallSettings(namespace="ns"), "operators")
    from_dir = render("file://bundles/plumbus/1.0.0", EXAMPLE, InstallSettings(namespace="ns"), "operators")
    assert from_git.objects == from_dir.objects and from_git.digest == from_dir.digest
    shutil.rmtree(tmp_path / "src")           # pinned content is cached: no fetch needed again
    assert fetch(ref, tmp_path).digest == fetched.digest


def test_git_source_errors(tmp_path):
    commit = _git_repo(tmp_path / "src").head
    with pytest.raises(BundleError, match="is not a directory at commit"):
        fetch(f"git+file://{tmp_path / 'src'}@{commit}#bundles/nothing", tmp_path)
    with pytest.raises(BundleError, match="not in the fetched repository"):
        fetch(f"git+file://{tmp_path / 'src'}@{'1' * 40}#bundles/plumbus", tmp_path)


def test_git_link_out_of_the_tree_is_refused(tmp_path):
    repo = _git_repo(tmp_path / "src")
    (tmp_path / "src" / "bundles" / "plumbus" / "manifests" / "leak.yaml").symlink_to("/etc/passwd")
    commit = repo.commit("leak")
    with pytest.raises(BundleError):
        fetch(f"git+file://{tmp_path / 'src'}@{commit}#bundles/plumbus", tmp_path)


@pytest.fixture
def http_dir(tmp_path):
    """A real HTTP server on loopback serving a directory; yields (directory, base URL)."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _tarball(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def _bundle_members(prefix: str = "") -> dict[str, bytes]:
    return {prefix + f.relative_to(BUNDLE).as_posix(): f.read_bytes() for f in BUNDLE.rglob("*") if f.is_file()}


@pytest.mark.parametrize("prefix", ["", "plumbus-1.0.0/"])
def test_http_tarball_source_renders_like_the_directory(tmp_path, http_dir, prefix):
    served, base = http_dir
    data = _tarball(_bundle_members(prefix))
    (served / "bundle.tar.gz").write_bytes(data)
    ref = f"{base}/bundle.tar.gz#sha256={hashlib.sha256(data).hexdigest()}"
    rendered = render(ref, tmp_path, InstallSettings(namespace="ns"), "operators")
    assert rendered.digest == directory_digest(BUNDLE, "x")
    assert rendered.name == "plumbus.v1.0.0"


def test_http_tarball_with_a_wrong_pin_is_refused(tmp_path, http_dir):
    served, base = http_dir
    (served / "bundle.tar.gz").write_bytes(_tarball(_bundle_members()))
    with pytest.raises(BundleError, match="not the pinned"):
        fetch(f"{base}/bundle.tar.gz#sha256={'0' * 64}", tmp_path)


@pytest.mark.parametrize("members, links", [
    ({"../escape.yaml": b"x: 1"}, None),
    ({"manifests/a.yaml": b"x: 1"}, {"manifests/link.yaml": "/etc/passwd"}),
])
def test_hostile_tarballs_are_refused(tmp_path, http_dir, members, links):
    served, base = http_dir
    data = _tarball(members, links)
    (served / "evil.tar.gz").write_bytes(data)
    with pytest.raises(BundleError):
        fetch(f"{base}/evil.tar.gz#sha256={hashlib.sha256(data).hexdigest()}", tmp_path)
    assert not (tmp_path / "escape.yaml").exists()


def test_missing_tarball_is_a_clear_error(tmp_path, http_dir):
    _, base = http_dir
    with pytest.raises(BundleError, match="cannot download"):
        fetch(f"{base}/nothing.tar.gz#sha256={'0' * 64}", tmp_path)
