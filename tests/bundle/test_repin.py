"""A moved OCI tag: `resolve` re-pins the lock to the tag's new image and says so; nothing else moves it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reconciler import oci
from reconciler.bundle import render
from reconciler.cli.parser import main
from reconciler.model.declarations import InstallSettings
from reconciler.model.lock import Lockfile
from tests.unit.helpers import write, write_docs


def _image(tmp_path: Path, text: str) -> Path:
    src = tmp_path / "src"
    write(src, "manifests/cm.yaml", text)
    write(src, "metadata/annotations.yaml", "annotations: {x: y}\n")
    return src


def _repo(root: Path, image: str) -> None:
    write_docs(root, "catalogs/community/catalog.yaml",
               {"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"},
               {"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": [{"name": "plumbus.v1.0.0"}]},
               {"schema": "olm.bundle", "package": "plumbus", "name": "plumbus.v1.0.0", "image": image,
                "properties": [{"type": "olm.package", "value": {"packageName": "plumbus", "version": "1.0.0"}}]})
    write_docs(root, "operators/plumbus.yaml", {"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
                                                "metadata": {"name": "plumbus"},
                                                "spec": {"catalog": {"name": "community", "package": "plumbus"}}})


@pytest.fixture
def no_cluster(monkeypatch, tmp_path):
    """No kubeconfig anywhere and not in a pod: `resolve` reads no cluster, but may ask registries."""
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def _moving_tag(tmp_path: Path, ref: str, first: Path,
                second: Path) -> tuple[str, oci.ImageLayout, oci.ImageLayout, Path]:
    """Two images for one tag, the first pushed; a repository whose Operator's catalog names the tag."""
    one = oci.build_layout(first, tmp_path / "l1", {})
    two = oci.build_layout(second, tmp_path / "l2", {})
    oci.push_layout(one.path, ref)
    _repo(tmp_path / "repo", ref)
    return ref, one, two, tmp_path / "repo"


def test_resolve_repins_a_moved_tag_and_says_so(tmp_path, oci_registry, oci_cache, no_cluster, capsys):
    ref, one, two, repo = _moving_tag(tmp_path, oci_registry.ref("moving/plumbus-bundle", "v1.0.0"),
                                      _image(tmp_path / "1", "a: 1\n"), _image(tmp_path / "2", "a: 2\n"))
    assert main(["resolve", str(repo)], out=io.StringIO()) == 0
    lock = Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock")
    entry = lock.entries[0]
    (repo / "olm.lock").write_text(Lockfile((type(entry)(**{**entry.__dict__, "digest": one.digest}),)).render())

    capsys.readouterr()
    assert main(["resolve", str(repo)], out=io.StringIO()) == 0   # tag unchanged: nothing to say
    assert "re-pinned" not in capsys.readouterr().err
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == one.digest

    oci.push_layout(two.path, ref)
    assert main(["resolve", str(repo), "--offline"], out=io.StringIO()) == 0   # offline: no registry is asked
    assert "re-pinned" not in capsys.readouterr().err
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == one.digest
    assert main(["resolve", str(repo)], out=io.StringIO()) == 0
    err = capsys.readouterr().err
    assert f"plumbus: re-pinned {ref}: the tag moved from {one.digest} to {two.digest}" in err
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == two.digest


def _plain_image(tmp_path: Path, value: str) -> Path:
    src = tmp_path / "src"
    write(src, "manifests/cm.yaml",
          f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plumbus}}\ndata: {{v: '{value}'}}\n")
    write(src, "metadata/annotations.yaml",
          "annotations: {operators.operatorframework.io.bundle.mediatype.v1: plain+v0}\n")
    return src


def test_reconcile_installs_the_locked_digest_after_the_tag_moved(tmp_path, oci_registry, oci_cache, monkeypatch,
                                                                   capsys):
    """The lock pins the image: a moved tag changes nothing until `resolve` re-pins it, even with no cache."""
    import json
    import shutil

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))   # no ~/.kube/config: compare against an empty cluster
    ref, one, two, repo = _moving_tag(tmp_path, oci_registry.ref("moving/plain-bundle", "v1"),
                                      _plain_image(tmp_path / "1", "one"), _plain_image(tmp_path / "2", "two"))

    def dry_run() -> None:
        out = io.StringIO()
        code = main(["reconcile", str(repo), "--dry-run", "--write-lock", "-o", "json"], out=out)
        assert code == 1, capsys.readouterr().err   # 1: there are changes to make
        assert [c["name"] for c in json.loads(out.getvalue())["changes"] if c["kind"] == "ConfigMap"] == ["plumbus"]

    dry_run()
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == one.digest
    oci.push_layout(two.path, ref)
    dry_run()                   # from the cache
    shutil.rmtree(oci_cache)
    dry_run()                   # pulled again, by the locked digest
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == one.digest
    pinned = render(ref, repo, InstallSettings(), "operators", digest=one.digest)   # what those runs installed
    assert (pinned.digest, pinned.objects[0]["data"]) == (one.digest, {"v": "one"})
    assert main(["resolve", str(repo)], out=io.StringIO()) == 0   # re-pins, and says so
    assert f"re-pinned {ref}" in capsys.readouterr().err
    dry_run()
    assert Lockfile.parse((repo / "olm.lock").read_text(), "olm.lock").entries[0].digest == two.digest
