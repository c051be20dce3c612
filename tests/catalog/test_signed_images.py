"""Catalog and bundle images that must be signed: signed with the real cosign, pushed to a loopback registry."""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from reconciler import oci, yamlio
from reconciler.catalog.source import CONFIGS_LABEL
from reconciler.cli.parser import main
from reconciler.oci.signature import SignatureError, load_keys, signature_tag, verify_image
from tests.catalog.test_image import push_catalog
from tests.e2e.support import cli
from tests.example import approved_copy
from tests.signing import Cosign

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"


@pytest.fixture(scope="module")
def cosign(tmp_path_factory) -> Cosign:
    return Cosign(tmp_path_factory.mktemp("cosign"))


@pytest.fixture(scope="module")
def keys(cosign):
    """Two key pairs: ``trusted`` (its public key kept in the repository) and ``other``."""
    return {"trusted": cosign.key_pair("trusted"), "other": cosign.key_pair("other")}


def by_digest(ref: str) -> str:
    return str(oci.parse_reference(ref).with_digest(oci.resolve(ref)))


def repo_with_catalog_image(tmp_path: Path, ref: str, keys) -> Path:
    repo = approved_copy(tmp_path / "repo")
    shutil.rmtree(repo / "catalogs")
    (repo / "keys").mkdir()
    shutil.copyfile(keys["trusted"][1], repo / "keys" / "catalog.pub")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "image": ref, "verify": {"provider": "cosign", "keys": ["keys/catalog.pub"]}}}}))
    return repo


def reconcile_dry_run(repo: Path, monkeypatch, tmp_path: Path, capsys) -> tuple[int, str, str]:
    monkeypatch.setenv("KUBECONFIG", "")   # no cluster: compared with an empty one; the registry is still asked
    monkeypatch.setenv("HOME", str(tmp_path))
    return tuple(cli("reconcile", str(repo), "--dry-run", capsys=capsys))


def test_a_reconcile_refuses_an_unsigned_catalog_image_and_accepts_it_signed(tmp_path, oci_registry, cosign, keys,
                                                                             monkeypatch, capsys):
    ref = push_catalog(tmp_path, oci_registry, "signed/catalog", {CONFIGS_LABEL: "/configs"})
    digest = oci.resolve(ref)
    repo = repo_with_catalog_image(tmp_path, ref, keys)
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2, out
    assert f"image {ref} ({digest}) is not signed" in err and "keys/catalog.pub (sha256:" in err
    assert f"sha256-{digest[7:]}.sig" in err
    cosign.sign(by_digest(ref), keys["trusted"][0])
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 1, err
    assert "plumbus" in out


def test_a_signature_by_another_key_is_refused(tmp_path, oci_registry, cosign, keys):
    ref = push_catalog(tmp_path, oci_registry, "signed/other-key", {})
    cosign.sign(by_digest(ref), keys["other"][0])
    trusted = load_keys(keys["trusted"][1].parent, (keys["trusted"][1].name,))
    with pytest.raises(SignatureError, match=r"is signed, but by none of the trusted keys trusted.pub \(sha256:"):
        verify_image(ref, trusted)
    other = load_keys(keys["other"][1].parent, (keys["other"][1].name,))
    assert verify_image(ref, (*trusted, *other)).key == other[0]


def test_a_signature_of_another_digest_and_a_retagged_image_are_refused(tmp_path, oci_registry, cosign, keys):
    from bench.peers.crane import crane_binary

    trusted = load_keys(keys["trusted"][1].parent, (keys["trusted"][1].name,))
    ref = push_catalog(tmp_path, oci_registry, "signed/retagged", {"version": "1"})
    signed = oci.resolve(ref)
    cosign.sign(by_digest(ref), keys["trusted"][0])
    assert verify_image(ref, trusted).digest == signed
    # Someone who can push moves the tag to an image of their own: its digest has no signature.
    push_catalog(tmp_path / "evil", oci_registry, "signed/retagged", {"version": "evil"})
    moved = oci.resolve(ref)
    assert moved != signed
    with pytest.raises(SignatureError, match=rf"\({moved}\) is not signed"):
        verify_image(ref, trusted)
    # ... and copies the good image's signature next to it: a signature of another digest.
    repo = oci.parse_reference(ref)
    base = f"{repo.registry}/{repo.repository}"
    subprocess.run([str(crane_binary()), "copy", "--insecure", f"{base}:{signature_tag(signed)}",
                    f"{base}:{signature_tag(moved)}"], check=True, capture_output=True)
    with pytest.raises(SignatureError, match=rf"carries a signature of another image: {signed}"):
        verify_image(ref, trusted)
    assert verify_image(f"{base}@{signed}", trusted).digest == signed   # the signed image itself still verifies


def test_bundle_images_of_a_catalog_that_requires_signed_bundles(tmp_path, oci_registry, cosign, keys, monkeypatch,
                                                                 capsys):
    repo = approved_copy(tmp_path / "repo", lock=False)
    tag = oci_registry.ref("signed/plumbus-bundle", "v1.1.0")
    assert main(["bundle", "build", str(repo / "bundles" / "plumbus" / "1.1.0"), "--tag", tag, "--layout",
                 str(tmp_path / "layout")], out=io.StringIO()) == 0
    catalog = repo / "catalogs" / "community" / "plumbus.yaml"
    catalog.write_text(catalog.read_text().replace("file://bundles/plumbus/1.1.0", tag))
    (repo / "keys").mkdir()
    shutil.copyfile(keys["trusted"][1], repo / "keys" / "bundles.pub")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "verifyBundles": {"provider": "cosign", "keys": ["keys/bundles.pub"]}}}}))
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2 and "bundle plumbus.v1.1.0: image" in err and "is not signed" in err, err
    cosign.sign(by_digest(tag), keys["trusted"][0])
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 1, err


def test_verification_settings_are_checked(tmp_path, monkeypatch, capsys):
    repo = approved_copy(tmp_path / "repo")
    for cfg, message in [({"verify": {"provider": "cosign", "keys": ["k.pub"]}}, "applies to a catalog image"),
                         ({"verifyBundles": {"provider": "notation", "keys": ["k.pub"]}}, "only cosign is"),
                         ({"verifyBundles": {"keys": []}}, "must list one or more public key files"),
                         ({"verifyBundles": {"keys": ["../outside.pub"]}}, "outside the repository"),
                         ({"verifyBundles": {"keys": ["missing.pub"]}}, "cannot read the public key")]:
        (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": cfg}}))
        code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
        assert code == 2 and message in err, (cfg, err)


def test_signing_a_catalog_image_as_the_document_prints_it(tmp_path, oci_registry, cosign, monkeypatch, capsys):
    """docs/security.md: its cosign commands run as printed, its reconciler.yaml with the test registry's image
    (the example catalog's bundles are directories, so its verifyBundles is left out)."""
    import os

    from tests.docblocks import indented_block

    commands = indented_block("docs/security.md", "cosign generate-key-pair")
    assert commands[1] == 'cosign sign --key cosign.key --tlog-upload=false "$CATALOG_IMAGE"'
    settings = yamlio.load_one("\n".join(indented_block("docs/security.md", "catalogs:")), "docs/security.md")
    ref = push_catalog(tmp_path, oci_registry, "docs/catalog", {})
    gitops = approved_copy(tmp_path / "gitops")
    shutil.rmtree(gitops / "catalogs")
    community = settings["catalogs"]["community"]
    assert community.pop("verifyBundles")["keys"] == ["keys/bundles.pub"]
    community["image"] = ref
    (gitops / "reconciler.yaml").write_text(yamlio.dump(settings))
    env = {**cosign.env(), "CATALOG_IMAGE": by_digest(ref),
           "PATH": f"{Path(cosign.binary).parent}{os.pathsep}{os.environ['PATH']}"}
    for line in commands:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    assert not list(gitops.rglob("*.key"))   # the private key stays out of the repository
    code, out, err = reconcile_dry_run(gitops, monkeypatch, tmp_path, capsys)
    assert code == 1, err
    assert "plumbus" in out


def test_the_example_repository_shows_how_to_require_signed_images():
    """The commented block of the example's reconciler.yaml is valid settings once uncommented."""
    from reconciler.repo import _read_settings

    text = (EXAMPLE / "reconciler.yaml").read_text()
    block = text[text.index("# catalogs:"):].splitlines()
    assert all(line.startswith("# ") for line in block)
    uncommented = "\n".join(line[2:] for line in block) + "\n"

    with tempfile.TemporaryDirectory() as d:
        Path(d, "reconciler.yaml").write_text(uncommented)
        community = _read_settings(Path(d)).catalogs["community"]
    assert community.verify == ("keys/catalog.pub",) and community.verify_bundles == ("keys/bundles.pub",)
    assert community.image == "registry.example.com/catalogs/community:latest"


def test_a_signature_is_read_through_a_mirror_and_checked_against_the_source_digest(tmp_path, oci_registry, cosign,
                                                                                    keys):
    """A disconnected cluster's mirror holds the image and its signature; the source is unreachable."""
    import socket

    from reconciler.oci.mirrors import MirrorRule, using

    mirrored = push_catalog(tmp_path, oci_registry, "mirrored/catalogs/signed", {CONFIGS_LABEL: "/configs"})
    digest = oci.resolve(mirrored)
    cosign.sign(by_digest(mirrored), keys["trusted"][0])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        source = f"127.0.0.1:{s.getsockname()[1]}"   # nothing listens there: the source is gone
    trusted = load_keys(keys["trusted"][1].parent, (keys["trusted"][1].name,))
    with using([MirrorRule(source, (f"{oci_registry.host}/mirrored",), "digest-only")]):
        verdict = verify_image(f"{source}/catalogs/signed@{digest}", trusted)
        assert (verdict.image, verdict.digest) == (f"{source}/catalogs/signed@{digest}", digest)
        with pytest.raises(SignatureError, match="is signed, but by none of the trusted keys"):
            verify_image(f"{source}/catalogs/signed@{digest}",
                         load_keys(keys["other"][1].parent, (keys["other"][1].name,)))
