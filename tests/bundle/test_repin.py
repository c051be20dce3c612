"""A moved OCI tag: `resolve` re-pins the lock to the tag's new image and says so; nothing else moves it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reconciler import oci
from reconciler.cli import main
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


def test_resolve_repins_a_moved_tag_and_says_so(tmp_path, oci_registry, oci_cache, no_cluster, capsys):
    ref = oci_registry.ref("moving/plumbus-bundle", "v1.0.0")
    one = oci.build_layout(_image(tmp_path / "1", "a: 1\n"), tmp_path / "l1", {})
    two = oci.build_layout(_image(tmp_path / "2", "a: 2\n"), tmp_path / "l2", {})
    oci.push_layout(one.path, ref)
    repo = tmp_path / "repo"
    _repo(repo, ref)
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
