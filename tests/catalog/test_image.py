"""Catalog images: FBC under the directory the configs label names, pulled from a real registry on loopback."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from reconciler import oci, yamlio
from reconciler.catalog.source import CONFIGS_LABEL, load_image_catalog
from tests.support.repo import example_copy
from reconciler.cli.parser import main
from reconciler.errors import CatalogError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"


def push_catalog(tmp_path: Path, registry, repo: str, labels: dict[str, str], configs: str = "configs") -> str:
    fs = tmp_path / f"{repo}-fs"
    shutil.copytree(EXAMPLE / "catalogs" / "community", fs / configs)
    layout = oci.build_layout(fs, tmp_path / f"{repo}-layout", labels)
    ref = registry.ref(repo, "v1")
    oci.push_layout(layout.path, ref)
    return ref


def test_catalog_image_loads_from_the_labelled_directory(tmp_path, oci_registry):
    ref = push_catalog(tmp_path, oci_registry, "catalogs/labelled", {CONFIGS_LABEL: "/fbc"}, configs="fbc")
    cat = load_image_catalog("community", ref, priority=5)
    assert sorted(cat.bundles) == [("plumbus", "plumbus.v1.0.0"), ("plumbus", "plumbus.v1.1.0")]
    assert cat.priority == 5
    assert cat.root.startswith(f"{ref}@sha256:")


def test_catalog_image_without_label_uses_configs(tmp_path, oci_registry):
    ref = push_catalog(tmp_path, oci_registry, "catalogs/unlabelled", {})
    assert "plumbus" in load_image_catalog("community", ref).packages


@pytest.mark.parametrize("label, message", [("/../..", "points outside the image"),
                                            ("/nothing-here", "has no /nothing-here directory")])
def test_bad_configs_label(tmp_path, oci_registry, label, message):
    ref = push_catalog(tmp_path, oci_registry, "catalogs/bad" + str(abs(hash(label)) % 1000), {CONFIGS_LABEL: label})
    with pytest.raises(CatalogError, match=message):
        load_image_catalog("community", ref)


def test_repository_resolves_from_a_catalog_image(tmp_path, oci_registry, monkeypatch):
    ref = push_catalog(tmp_path, oci_registry, "catalogs/community", {CONFIGS_LABEL: "/configs"})
    repo = example_copy(tmp_path / "repo")
    shutil.rmtree(repo / "catalogs")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {"image": ref}}}))
    out = io.StringIO()
    monkeypatch.setenv("KUBECONFIG", "")   # no cluster: the registry is still asked
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["resolve", str(repo), "-o", "json"], out=out) == 0
    doc = yamlio.load_one(out.getvalue(), "out")
    assert [(b["name"], b["catalog"]) for b in doc["bundles"]] == [("plumbus.v1.1.0", "community")]
    out = io.StringIO()   # offline, the tag is the digest it resolved to, and the image comes from the cache
    assert main(["resolve", str(repo), "--offline", "-o", "json"], out=out) == 0
    assert yamlio.load_one(out.getvalue(), "out")["bundles"] == doc["bundles"]


def test_a_catalog_name_cannot_be_both_directory_and_image(tmp_path, capsys):
    repo = example_copy(tmp_path / "repo")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {"image": "127.0.0.1:1/x:y"}}}))
    assert main(["resolve", str(repo), "--offline"], out=io.StringIO()) == 2
    assert "catalog 'community' is both a directory under catalogs/ and an image" in capsys.readouterr().err
