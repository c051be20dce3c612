"""Catalog and bundle images that must be signed: signed with the real cosign (v3.1.3 as users run it, v2.6.5 for
signatures made in the past), pushed to loopback registries with and without the OCI referrers API."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest

from reconciler import oci, yamlio
from reconciler.catalog.source import CONFIGS_LABEL
from reconciler.cli.parser import main
from reconciler.model.imagepolicy import parse_policy
from reconciler.oci import trustroot
from reconciler.oci.signature import (Requirements, SignatureError, fallback_tag, load_keys, signature_tag,
                                      verify_image)
from tests.catalog.test_image import push_catalog
from tests.e2e.support import cli
from tests.support.repo import example_copy
from tests.signing import Cosign, PrivateCA

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"


@pytest.fixture(scope="module")
def cosign(tmp_path_factory) -> Cosign:
    return Cosign(tmp_path_factory.mktemp("cosign"))


@pytest.fixture(scope="module")
def keys(cosign):
    """Two key pairs: ``trusted`` (its public key kept in the repository) and ``other``."""
    return {"trusted": cosign.key_pair("trusted"), "other": cosign.key_pair("other")}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two private PKIs acting as Fulcio: ``ours`` (the trust root given) and ``theirs`` (outside it)."""
    base = tmp_path_factory.mktemp("pki")
    return {"ours": PrivateCA(base / "ours", "Ours"), "theirs": PrivateCA(base / "theirs", "Theirs")}


@pytest.fixture
def trust_root(pki):
    trustroot.use([str(pki["ours"].root_pem)])
    yield pki["ours"]
    trustroot.use(None)


PIPELINE = "https://ci.example.com/pipelines/catalogs"
ISSUER = "https://issuer.example.com"


def by_digest(ref: str) -> str:
    return str(oci.parse_reference(ref).with_digest(oci.resolve(ref)))


def trusted(keys) -> tuple:
    return load_keys(keys["trusted"][1].parent, (keys["trusted"][1].name,))


def required(pairs, **cfg) -> Requirements:
    """The policy ``cfg`` (as reconciler.yaml's ``verify`` writes it), its keys read beside the key pairs."""
    policy = parse_policy(cfg, "verify")
    return Requirements(policy, load_keys(pairs["trusted"][1].parent, policy.keys))


def repo_with_catalog_image(tmp_path: Path, ref: str, keys) -> Path:
    repo = example_copy(tmp_path / "repo")
    shutil.rmtree(repo / "catalogs")
    (repo / "keys").mkdir()
    shutil.copyfile(keys["trusted"][1], repo / "keys" / "catalog.pub")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "image": ref, "verify": {"provider": "cosign", "keys": ["keys/catalog.pub"]}}}}))
    return repo


def reconcile_dry_run(repo: Path, monkeypatch, tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("KUBECONFIG", "")   # no cluster: compared with an empty one; the registry is still asked
    monkeypatch.setenv("HOME", str(tmp_path))
    try:
        return tuple(cli("reconcile", str(repo), "--dry-run", *args, capsys=capsys))
    finally:
        trustroot.use(None)


def test_a_reconcile_refuses_an_unsigned_catalog_image_and_accepts_it_signed(tmp_path, oci_registry, cosign, keys,
                                                                             monkeypatch, capsys):
    """Signed by cosign v3 with its defaults (offline flags only): a bundle listed under the fallback tag."""
    ref = push_catalog(tmp_path, oci_registry, "signed/catalog", {CONFIGS_LABEL: "/configs"})
    digest = oci.resolve(ref)
    repo = repo_with_catalog_image(tmp_path, ref, keys)
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2, out
    assert f"image {ref} ({digest}) is not signed" in err and "keys/catalog.pub (sha256:" in err
    assert f"the tag {fallback_tag(digest)}, the registry having no referrers API" in err
    assert f"sha256-{digest[7:]}.sig" in err
    cosign.sign(by_digest(ref), keys["trusted"][0])
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 1, err
    assert "plumbus" in out
    verdict = verify_image(ref, trusted(keys))
    assert verdict.key == trusted(keys)[0] and f"listed by the tag {fallback_tag(digest)}" in verdict.where


def test_signatures_found_through_the_referrers_api(tmp_path, referrers_registry, cosign, keys):
    ref = push_catalog(tmp_path, referrers_registry, "signed/api", {})
    digest = oci.resolve(ref)
    with pytest.raises(SignatureError, match=r"no signature among its referrers \(the referrers API\)"):
        verify_image(ref, trusted(keys))
    cosign.sign(by_digest(ref), keys["trusted"][0])
    verdict = verify_image(ref, trusted(keys))
    assert verdict.digest == digest and verdict.where.endswith("(listed by the referrers API)")
    with urllib.request.urlopen(f"{referrers_registry.url}/v2/signed/api/tags/list") as resp:
        assert json.load(resp)["tags"] == ["v1"]   # no fallback tag: the API lists the signature
    with pytest.raises(SignatureError, match=r"signed by a key that is none of the trusted keys \(other.pub"):
        verify_image(ref, load_keys(keys["other"][1].parent, (keys["other"][1].name,)))


def test_a_signature_by_another_key_is_refused(tmp_path, oci_registry, cosign, keys):
    ref = push_catalog(tmp_path, oci_registry, "signed/other-key", {})
    digest = oci.resolve(ref)
    cosign.sign(by_digest(ref), keys["other"][0])
    with pytest.raises(SignatureError) as info:
        verify_image(ref, trusted(keys))
    message = info.value.message
    assert message.startswith(f"image {ref} ({digest}) is signed, but not by the keys trusted.pub (sha256:")
    assert "signed by a key that is none of the trusted keys (trusted.pub (sha256:" in message
    assert "cosign sign --key cosign.key" in info.value.hint and digest in info.value.hint
    other = load_keys(keys["other"][1].parent, (keys["other"][1].name,))
    assert verify_image(ref, (*trusted(keys), *other)).key == other[0]


def test_a_signature_of_another_digest_and_a_retagged_image_are_refused(tmp_path, oci_registry, cosign, keys):
    from bench.peers.crane import crane_binary

    ref = push_catalog(tmp_path, oci_registry, "signed/retagged", {"version": "1"})
    signed = oci.resolve(ref)
    cosign.sign(by_digest(ref), keys["trusted"][0])
    assert verify_image(ref, trusted(keys)).digest == signed
    # Someone who can push moves the tag to an image of their own: its digest has no signature.
    push_catalog(tmp_path / "evil", oci_registry, "signed/retagged", {"version": "evil"})
    moved = oci.resolve(ref)
    assert moved != signed
    with pytest.raises(SignatureError, match=rf"\({moved}\) is not signed"):
        verify_image(ref, trusted(keys))
    # ... and lists the good image's signature as a referrer of theirs: a signature of another digest.
    repo = oci.parse_reference(ref)
    base = f"{repo.registry}/{repo.repository}"
    subprocess.run([str(crane_binary()), "copy", "--insecure", f"{base}:{fallback_tag(signed)}",
                    f"{base}:{fallback_tag(moved)}"], check=True, capture_output=True)
    with pytest.raises(SignatureError, match=rf"image {ref} \({moved}\) carries a signature of another image: "
                                             rf"sha256:{signed[7:]} \(referrer sha256:"):
        verify_image(ref, trusted(keys))
    assert verify_image(f"{base}@{signed}", trusted(keys)).digest == signed   # the signed image itself still verifies


@pytest.fixture(scope="module")
def cosign_v2(tmp_path_factory) -> Cosign:
    return Cosign(tmp_path_factory.mktemp("cosign-v2"), legacy=True)


def test_signatures_made_in_the_past_are_still_verified(tmp_path, oci_registry, keys, cosign, cosign_v2):
    """cosign v2's ``.sig`` tag (simple signing), and v3's ``--new-bundle-format=false`` that writes the same."""
    from bench.peers.crane import crane_binary

    old = cosign_v2
    ref = push_catalog(tmp_path, oci_registry, "signed/v2", {})
    digest = oci.resolve(ref)
    old.sign(by_digest(ref), keys["trusted"][0])
    verdict = verify_image(ref, trusted(keys))
    assert verdict.where == f"the tag {signature_tag(digest)}" and verdict.key == trusted(keys)[0]
    with pytest.raises(SignatureError, match=rf"tag {signature_tag(digest)}: signed by none of the trusted keys"):
        verify_image(ref, load_keys(keys["other"][1].parent, (keys["other"][1].name,)))
    ref3 = push_catalog(tmp_path, oci_registry, "signed/v3-old-format", {"made-by": "cosign v3"})
    cosign.sign(by_digest(ref3), keys["trusted"][0], "--new-bundle-format=false")
    assert verify_image(ref3, trusted(keys)).where == f"the tag {signature_tag(oci.resolve(ref3))}"
    # a v2 signature of another digest copied over this one's .sig tag
    repo = oci.parse_reference(ref3)
    base = f"{repo.registry}/{repo.repository}"
    subprocess.run([str(crane_binary()), "copy", "--insecure", f"{oci.parse_reference(ref).registry}/signed/v2:"
                    f"{signature_tag(digest)}", f"{base}:{signature_tag(oci.resolve(ref3))}"], check=True,
                   capture_output=True)
    with pytest.raises(SignatureError, match=rf"carries a signature of another image: {digest} \(tag "
                                             rf"{signature_tag(oci.resolve(ref3))}, signed by key trusted.pub"):
        verify_image(ref3, trusted(keys))


def test_a_certificate_of_a_declared_identity_chaining_to_the_trust_root(tmp_path, oci_registry, cosign, keys, pki,
                                                                          trust_root):
    ref = push_catalog(tmp_path, oci_registry, "signed/identity", {})
    digest = oci.resolve(ref)
    leaf = pki["ours"].issue(keys["trusted"][1], PIPELINE, ISSUER, "pipeline")
    cosign.sign(by_digest(ref), keys["trusted"][0], *pki["ours"].certificate_flags(leaf))
    exact = required(keys, identities=[{"issuer": ISSUER, "subject": PIPELINE}])
    assert verify_image(ref, exact).signer == f"certificate of {PIPELINE} (issuer {ISSUER})"
    pattern = required(keys, identities=[{"issuerRegExp": r"https://issuer\.example\.com",
                                          "subjectRegExp": r"https://ci\.example\.com/pipelines/.+"}])
    assert verify_image(ref, pattern).digest == digest
    for identity in ({"issuer": ISSUER, "subject": "https://ci.example.com/pipelines/other"},
                     {"issuer": "https://accounts.example.com", "subject": PIPELINE},
                     {"issuer": ISSUER, "subjectRegExp": "pipelines"}):
        with pytest.raises(SignatureError) as info:
            verify_image(ref, required(keys, identities=[identity]))
        assert info.value.message.startswith(f"image {ref} ({digest}) is signed, but not by the identities ")
        assert f"signed with a certificate of {PIPELINE} (issuer {ISSUER}), which is none of the identities" in \
            info.value.message
    assert verify_image(ref, required(keys, keys=[keys["trusted"][1].name])).key is not None   # the key decides too


def test_a_certificate_outside_the_trust_root_is_refused(tmp_path, oci_registry, cosign, keys, pki, trust_root):
    ref = push_catalog(tmp_path, oci_registry, "signed/foreign-ca", {})
    digest = oci.resolve(ref)
    leaf = pki["theirs"].issue(keys["other"][1], PIPELINE, ISSUER, "impostor")
    cosign.sign(by_digest(ref), keys["other"][0], *pki["theirs"].certificate_flags(leaf))
    with pytest.raises(SignatureError) as info:
        verify_image(ref, required(keys, identities=[{"issuer": ISSUER, "subject": PIPELINE}]))
    assert info.value.message.startswith(f"image {ref} ({digest}) is signed, but not by the identities")
    assert (f"signed with a certificate of {PIPELINE} (issuer {ISSUER}) issued by CN=Theirs Signing CA,O=Example, "
            f"which does not chain to the trust root ({pki['ours'].root_pem})") in info.value.message
    trustroot.use(None)
    with pytest.raises(SignatureError, match=r"no trust root is given to check it against \(--trust-root\)"):
        verify_image(ref, required(keys, identities=[{"issuer": ISSUER, "subject": PIPELINE}]))


PROVENANCE = {"buildDefinition": {"buildType": "https://ci.example.com/build/v1",
                                  "externalParameters": {"source": "git+https://git.example.com/org/catalogs"}},
              "runDetails": {"builder": {"id": "https://ci.example.com/builder"}}}


def test_attestations_of_a_predicate_type(tmp_path, oci_registry, cosign, keys):
    """``cosign attest --type slsaprovenance1``: a SLSA provenance naming the builder and the source repository."""
    ref = push_catalog(tmp_path, oci_registry, "signed/attested", {})
    digest = oci.resolve(ref)
    cosign.sign(by_digest(ref), keys["trusted"][0])
    cosign.attest(by_digest(ref), keys["trusted"][0], PROVENANCE, "slsaprovenance1")
    wanted = {"predicateType": "https://slsa.dev/provenance/v1", "predicate": {
        "runDetails.builder.id": "https://ci.example.com/builder",
        "buildDefinition.externalParameters.source": "git+https://git.example.com/org/catalogs"}}
    verdict = verify_image(ref, required(keys, keys=["trusted.pub"], attestations=[wanted]))
    assert verdict.attestations == ("https://slsa.dev/provenance/v1",) and verdict.key is not None
    other_source = dict(wanted, predicate={**wanted["predicate"],
                                           "buildDefinition.externalParameters.source": "git+https://evil.example"})
    with pytest.raises(SignatureError) as info:
        verify_image(ref, required(keys, keys=["trusted.pub"], attestations=[other_source]))
    assert info.value.message.startswith(f"image {ref} ({digest}) has no attestation of predicate type "
                                         f"https://slsa.dev/provenance/v1 with ")
    assert "its predicate's buildDefinition.externalParameters.source is 'git+https://git.example.com/org/catalogs'" \
           ", not 'git+https://evil.example'" in info.value.message
    with pytest.raises(SignatureError, match=r"has no attestation of predicate type https://spdx.dev/Document signed "
                                             r"as required \(referrer sha256:.*: an attestation of "
                                             r"https://slsa.dev/provenance/v1\)"):
        verify_image(ref, required(keys, keys=["trusted.pub"], attestations=[{"predicateType":
                                                                              "https://spdx.dev/Document"}]))
    # attested by another key: not an attestation the policy accepts
    other = push_catalog(tmp_path, oci_registry, "signed/attested-other", {})
    cosign.sign(by_digest(other), keys["trusted"][0])
    cosign.attest(by_digest(other), keys["other"][0], PROVENANCE, "slsaprovenance1")
    with pytest.raises(SignatureError, match=r"has no attestation .* signed by a key that is none of the trusted"):
        verify_image(other, required(keys, keys=["trusted.pub"], attestations=[wanted]))


def repo_with_bundle_image(tmp_path: Path, registry, name: str) -> tuple[Path, str]:
    """A copy of the example whose catalog lists plumbus 1.1.0 as a bundle image (built and pushed) at ``name``."""
    repo = example_copy(tmp_path / "repo", lock=False)
    tag = registry.ref(name, "v1.1.0")
    assert main(["bundle", "build", str(repo / "bundles" / "plumbus" / "1.1.0"), "--tag", tag, "--layout",
                 str(tmp_path / "layout")], out=io.StringIO()) == 0
    catalog = repo / "catalogs" / "community" / "plumbus.yaml"
    catalog.write_text(catalog.read_text().replace("file://bundles/plumbus/1.1.0", tag))
    return repo, tag


def test_bundle_images_of_a_catalog_that_requires_signed_bundles(tmp_path, oci_registry, cosign, keys, monkeypatch,
                                                                 capsys):
    repo, tag = repo_with_bundle_image(tmp_path, oci_registry, "signed/plumbus-bundle")
    (repo / "keys").mkdir()
    shutil.copyfile(keys["trusted"][1], repo / "keys" / "bundles.pub")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "verifyBundles": {"provider": "cosign", "keys": ["keys/bundles.pub"]}}}}))
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2 and "bundle plumbus.v1.1.0: image" in err and "is not signed" in err, err
    cosign.sign(by_digest(tag), keys["other"][0])
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2 and f"bundle plumbus.v1.1.0: image {tag} ({oci.resolve(tag)}) is signed, but not by the keys " \
                         f"keys/bundles.pub" in err, err
    cosign.sign(by_digest(tag), keys["trusted"][0])
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 1, err


def test_bundle_images_signed_by_an_identity_given_the_trust_root_on_the_command_line(
        tmp_path, oci_registry, cosign, keys, pki, monkeypatch, capsys):
    repo, tag = repo_with_bundle_image(tmp_path, oci_registry, "signed/plumbus-bundle-identity")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "verifyBundles": {"identities": [{"issuer": ISSUER, "subject": PIPELINE}]}}}}))
    leaf = pki["ours"].issue(keys["trusted"][1], PIPELINE, ISSUER, "bundles")
    cosign.sign(by_digest(tag), keys["trusted"][0], *pki["ours"].certificate_flags(leaf))
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 2 and "no trust root is given" in err, err
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys, "--trust-root", str(pki["theirs"].root_pem))
    assert code == 2 and "which does not chain to the trust root" in err, err
    monkeypatch.setenv("RECONCILER_TRUST_ROOT", str(pki["ours"].root_pem))
    code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
    assert code == 1, err


def test_adopt_verifies_a_bundle_its_catalog_requires_signed_before_reading_it(tmp_path, oci_registry, keys):
    """``adopt`` renders the bundle that runs to compare it with what OLM installed; unsigned, it is refused first."""
    from reconciler.adopt.adoption import _converts
    from reconciler.errors import BundleError
    from reconciler.repo import read_repository

    repo, tag = repo_with_bundle_image(tmp_path, oci_registry, "signed/adopted-bundle")
    (repo / "keys").mkdir()
    shutil.copyfile(keys["trusted"][1], repo / "keys" / "bundles.pub")
    (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "verifyBundles": {"keys": ["keys/bundles.pub"]}}}}))

    class Install:   # what olmv0.survey reads of a Subscription and its CSV, as far as _converts looks
        where, namespace, target_namespaces, config = "Subscription operators/plumbus", "operators", (), None

    class Listed:
        name, image = "plumbus.v1.1.0", tag

    with pytest.raises(BundleError, match=rf"bundle plumbus.v1.1.0: image {tag} \(sha256:.*\) is not signed"):
        _converts(Listed(), repo, Install(), read_repository(repo), "community")


def test_verification_settings_are_checked(tmp_path, monkeypatch, capsys):
    repo = example_copy(tmp_path / "repo")
    for cfg, message in [({"verify": {"provider": "cosign", "keys": ["k.pub"]}}, "applies to a catalog image"),
                         ({"verifyBundles": {"provider": "notation", "keys": ["k.pub"]}}, "only cosign is"),
                         ({"verifyBundles": {"keys": []}}, "must list one or more public key files"),
                         ({"verifyBundles": {"keys": ["../outside.pub"]}}, "outside the repository"),
                         ({"verifyBundles": {"keys": ["missing.pub"]}}, "cannot read the public key")]:
        (repo / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": cfg}}))
        code, out, err = reconcile_dry_run(repo, monkeypatch, tmp_path, capsys)
        assert code == 2 and message in err, (cfg, err)


def test_signing_a_catalog_image_as_the_document_prints_it(tmp_path, oci_registry, cosign, monkeypatch, capsys):
    """docs/security.md: its cosign v3 commands run as printed, its reconciler.yaml with the test registry's image
    (the example catalog's bundles are directories, so its verifyBundles is left out), then its attestation."""
    import os

    from tests.docblocks import indented_block

    commands = indented_block("docs/security.md", "cosign generate-key-pair")
    assert commands[1] == 'cosign sign --key cosign.key --use-signing-config=false --tlog-upload=false "$CATALOG_IMAGE"'
    [attest] = indented_block("docs/security.md", "cosign attest --key cosign.key --use-signing-config=false "
                                                  "--tlog-upload=false --type slsaprovenance1 --predicate "
                                                  "provenance.json \"$CATALOG_IMAGE\"")
    settings = yamlio.load_one("\n".join(indented_block("docs/security.md", "catalogs:")), "docs/security.md")
    ref = push_catalog(tmp_path, oci_registry, "docs/catalog", {})
    gitops = example_copy(tmp_path / "gitops")
    shutil.rmtree(gitops / "catalogs")
    community = settings["catalogs"]["community"]
    assert community.pop("verifyBundles")["keys"] == ["keys/bundles.pub"]
    community["image"] = ref
    (gitops / "reconciler.yaml").write_text(yamlio.dump(settings))
    env = {**cosign.env(), "CATALOG_IMAGE": by_digest(ref),
           "PATH": f"{Path(cosign.binary).parent}{os.pathsep}{os.environ['PATH']}"}

    def run(line: str) -> None:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"

    for line in commands:
        run(line)
    assert not list(gitops.rglob("*.key"))   # the private key stays out of the repository
    code, out, err = reconcile_dry_run(gitops, monkeypatch, tmp_path, capsys)
    assert code == 1, err
    assert "plumbus" in out
    (tmp_path / "provenance.json").write_text(json.dumps(PROVENANCE))
    run(attest)
    community["verify"]["attestations"] = [{"predicateType": "https://slsa.dev/provenance/v1", "predicate": {
        "runDetails.builder.id": "https://ci.example.com/builder"}}]
    (gitops / "reconciler.yaml").write_text(yamlio.dump(settings))
    code, out, err = reconcile_dry_run(gitops, monkeypatch, tmp_path, capsys)
    assert code == 1, err


def test_the_documented_verification_settings_are_what_they_say(tmp_path):
    """docs/security.md's full ``verify`` block is read as it describes it."""
    from reconciler.repo import read_settings
    from tests.docblocks import indented_block

    block = indented_block("docs/security.md", "verify:")
    (tmp_path / "reconciler.yaml").write_text(yamlio.dump({"catalogs": {"community": {
        "image": "registry.example.com/catalogs/community:latest",
        **yamlio.load_one("\n".join(block), "docs/security.md")}}}))
    policy = read_settings(tmp_path).catalogs["community"].verify
    assert policy.keys == ("keys/catalog.pub",) and policy.transparency_log and not policy.signed_timestamp
    workflow = "https://github.com/example/catalogs/.github/workflows/release.yml@refs/tags/v1.2.0"
    assert policy.identities[0].matches("https://token.actions.githubusercontent.com", (workflow,))
    assert not policy.identities[0].matches("https://token.actions.githubusercontent.com",
                                            (workflow.replace("refs/tags", "refs/heads"),))
    assert policy.identities[1].matches("https://ci.example.com/oidc", ("catalogs@example.com",))
    [provenance] = policy.attestations
    assert provenance.mismatches({"runDetails": {"builder": {"id": "https://github.com/actions/runner/github-hosted"}},
                                  "buildDefinition": {"externalParameters": {"workflow": {
                                      "repository": "https://github.com/example/catalogs"}}}}) == []


def test_the_trust_root_component_mounts_what_it_names():
    """deploy/trust-root: the file RECONCILER_TRUST_ROOT names lies in the ConfigMap's mount, which is required."""
    root = Path(__file__).resolve().parents[2] / "deploy" / "trust-root"
    patch = yamlio.load_one((root / "deployment.yaml").read_text(), "deployment.yaml")
    pod = patch["spec"]["template"]["spec"]
    [container] = pod["containers"]
    path = {e["name"]: e["value"] for e in container["env"]}["RECONCILER_TRUST_ROOT"]
    [mount] = container["volumeMounts"]
    [volume] = pod["volumes"]
    assert mount["name"] == volume["name"] and mount["readOnly"] and path.startswith(mount["mountPath"] + "/")
    assert volume["configMap"]["name"] == "reconciler-trust-root" and "optional" not in volume["configMap"]
    assert path.rsplit("/", 1)[1] == "trust-root"   # the key docs/deploy.md creates it with
    assert "--from-file=trust-root=" in (root.parents[1] / "docs" / "deploy.md").read_text()


def test_the_example_repository_shows_how_to_require_signed_images():
    """The commented block of the example's reconciler.yaml is valid settings once uncommented."""
    from reconciler.repo import read_settings

    text = (EXAMPLE / "reconciler.yaml").read_text()
    block = text[text.index("# catalogs:"):].splitlines()
    assert all(line.startswith("# ") for line in block)
    uncommented = "\n".join(line[2:] for line in block) + "\n"

    with tempfile.TemporaryDirectory() as d:
        Path(d, "reconciler.yaml").write_text(uncommented)
        community = read_settings(Path(d)).catalogs["community"]
    assert community.verify.keys == ("keys/catalog.pub",) and community.verify_bundles.keys == ("keys/bundles.pub",)
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
        with pytest.raises(SignatureError, match="is signed, but not by the keys other.pub"):
            verify_image(f"{source}/catalogs/signed@{digest}",
                         load_keys(keys["other"][1].parent, (keys["other"][1].name,)))
