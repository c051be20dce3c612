"""Sigstore bundles made by the public Sigstore instance, verified offline against its trusted root.

The bundles and trusted roots are the ones sigstore-go ships as test data (a
keyless SLSA provenance of the sigstore-js release, logged in Rekor; a
key-signed message with an RFC 3161 timestamp), read from the Go module cache
at the version the cosign peer's pin requires: real signatures, not ours.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reconciler.model.imagepolicy import Attestation, Identity, ImagePolicy, parse_policy
from reconciler.oci import sigstore, trustroot
from reconciler.errors import InputError
from tests.support.parts import not_tested

RELEASE = Identity(issuer="https://token.actions.githubusercontent.com",
                   subject="https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main")


@pytest.fixture(scope="module")
def data() -> Path:
    from bench.peers.cosign import module_source

    try:
        return module_source("github.com/sigstore/sigstore-go") / "pkg" / "testing" / "data"
    except (RuntimeError, OSError) as exc:
        not_tested("sigstore", f"sigstore-go's test data cannot be had from the Go module proxy: {exc}")


@pytest.fixture(scope="module")
def provenance(data):
    """The keyless bundle, the public-good trust root, and the digest its statement names (sha512 of a tarball)."""
    raw = (data / "bundles" / "sigstore.js@2.0.0-provenance.sigstore.json").read_bytes()
    bundle = sigstore.parse_bundle(raw)
    digest = json.loads(bundle.payload)["subject"][0]["digest"]["sha512"]
    return raw, bundle, trustroot.load((str(data / "trusted-roots" / "public-good.json"),)), f"sha512:{digest}"


def test_a_keyless_bundle_verifies_offline_with_its_log_entry(provenance):
    _, bundle, roots, digest = provenance
    verified = sigstore.verify_bundle(bundle, digest, ImagePolicy(identities=(RELEASE,), transparency_log=True), (),
                                      roots)
    assert verified.signer.startswith(f"certificate of {RELEASE.subject} (issuer {RELEASE.issuer})")
    assert verified.predicate_type == "https://slsa.dev/provenance/v1"
    assert verified.times == ("log entry 2023-08-18T16:05:35+00:00",)
    by_pattern = Identity(issuer_regexp=r"https://token\.actions\.githubusercontent\.com",
                          subject_regexp=r"https://github\.com/sigstore/sigstore-js/.+")
    assert sigstore.verify_bundle(bundle, digest, ImagePolicy(identities=(by_pattern,), transparency_log=True), (),
                                  roots)


def test_a_short_lived_certificate_needs_the_time_the_log_proves(provenance):
    _, bundle, roots, digest = provenance
    with pytest.raises(sigstore.Mismatch, match=r"was not valid at .* \(valid 2023-08-18T16:05:35\+00:00 to "
                                                r"2023-08-18T16:15:35\+00:00\); a short-lived certificate"):
        sigstore.verify_bundle(bundle, digest, ImagePolicy(identities=(RELEASE,)), (), roots)


@pytest.mark.parametrize("identity, message", [
    (Identity(issuer=RELEASE.issuer, subject_regexp=r"https://github\.com/other/.+"), "none of the identities"),
    (Identity(issuer="https://accounts.google.com", subject=RELEASE.subject), "none of the identities"),
    # a pattern matches the whole value, not a part of it
    (Identity(issuer=RELEASE.issuer, subject_regexp="sigstore-js"), "none of the identities"),
])
def test_another_identity_is_refused(provenance, identity, message):
    _, bundle, roots, digest = provenance
    with pytest.raises(sigstore.Mismatch, match=message) as info:
        sigstore.verify_bundle(bundle, digest, ImagePolicy(identities=(identity,), transparency_log=True), (), roots)
    assert RELEASE.subject in str(info.value)


def test_another_digest_a_foreign_trust_root_and_a_tampered_log_entry_are_refused(provenance, data, tmp_path):
    raw, bundle, roots, digest = provenance
    policy = ImagePolicy(identities=(RELEASE,), transparency_log=True)
    with pytest.raises(sigstore.Mismatch, match=rf"but for {digest}"):
        sigstore.verify_bundle(bundle, "sha512:" + "0" * 128, policy, (), roots)
    other = trustroot.load((str(data / "trusted-roots" / "scaffolding.json"),))
    with pytest.raises(sigstore.Mismatch, match="in a log the trust root does not list"):
        sigstore.verify_bundle(bundle, digest, policy, (), other)
    with pytest.raises(sigstore.Mismatch, match="does not chain to the trust root"):
        sigstore.verify_bundle(bundle, digest, ImagePolicy(identities=(RELEASE,)), (), other,
                               now=datetime(2023, 8, 18, 16, 10, tzinfo=timezone.utc))
    doc = json.loads(raw)
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    hashes = entry["inclusionProof"]["hashes"]
    hashes[0] = base64.b64encode(bytes(32)).decode()
    with pytest.raises(sigstore.Mismatch, match="inclusion proof .* does not lead to the root"):
        sigstore.verify_bundle(sigstore.parse_bundle(json.dumps(doc).encode()), digest, policy, (), roots)
    doc = json.loads(raw)
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    entry["integratedTime"] = str(int(entry["integratedTime"]) + 1)
    with pytest.raises(sigstore.Mismatch, match="signed entry timestamp .* does not verify"):
        sigstore.verify_bundle(sigstore.parse_bundle(json.dumps(doc).encode()), digest, policy, (), roots)


def test_a_signed_timestamp_is_verified_against_the_timestamp_authorities(data):
    bundle = sigstore.parse_bundle((data / "bundles" / "public-key-validity.sigstore.json").read_bytes())
    assert bundle.public_key_hint and bundle.message_digest and bundle.message_digest[0] == "sha256"
    roots = trustroot.load((str(data / "trusted-roots" / "public-key-validity.json"),))
    when = sigstore._verify_timestamps(bundle, roots)
    assert when.tzinfo is not None
    assert any(tsa.valid.covers(when) for tsa in roots.timestamp_authorities)
    with pytest.raises(sigstore.Mismatch, match="lists no timestamp authority"):
        sigstore._verify_timestamps(bundle, trustroot.load((str(data / "trusted-roots" / "scaffolding.json"),)))
    tampered = sigstore.Bundle(**{**bundle.__dict__, "signature": bytes(len(bundle.signature))})
    with pytest.raises(sigstore.Mismatch, match="by none of the timestamp authorities|verif"):
        sigstore._verify_timestamps(tampered, roots)


def test_merkle_inclusion_paths():
    import hashlib

    def leaf(n: int) -> bytes:
        return hashlib.sha256(b"\x00" + bytes([n])).digest()

    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + a + b).digest()

    leaves = [leaf(n) for n in range(5)]
    # RFC 6962's tree of 5: ((0 1) (2 3)) 4
    root = node(node(node(leaves[0], leaves[1]), node(leaves[2], leaves[3])), leaves[4])
    assert sigstore.merkle_root(4, 5, leaves[4], [node(node(leaves[0], leaves[1]), node(leaves[2], leaves[3]))]) == root
    assert sigstore.merkle_root(2, 5, leaves[2], [leaves[3], node(leaves[0], leaves[1]), leaves[4]]) == root
    assert sigstore.merkle_root(2, 5, leaves[2], [leaves[3], node(leaves[0], leaves[1])]) != root
    assert sigstore.merkle_root(5, 5, leaves[4], []) is None


def test_bundles_that_are_not_bundles():
    for data, message in [(b"[", "not JSON"), (b'{"mediaType": "application/json"}', "not a Sigstore bundle"),
                          (json.dumps({"mediaType": sigstore.BUNDLE_ARTIFACT, "verificationMaterial": {}}).encode(),
                           "malformed")]:
        with pytest.raises(sigstore.Mismatch, match=message):
            sigstore.parse_bundle(data)


def test_policies_as_reconciler_yaml_writes_them():
    policy = parse_policy({"identities": [{"issuer": "https://issuer.example", "subjectRegExp": "ci@.*"}],
                           "transparencyLog": True, "attestations": [
                               {"predicateType": "https://slsa.dev/provenance/v1",
                                "predicate": {"runDetails.builder.id": "https://builder.example"}}]}, "verify")
    assert policy and policy.transparency_log and not policy.signed_timestamp and not policy.keys
    assert policy.identities[0].matches("https://issuer.example", ("ci@example.com",))
    assert not policy.identities[0].matches("https://issuer.example", ("dev@example.com",))
    assert policy.attestations == (Attestation("https://slsa.dev/provenance/v1",
                                               (("runDetails.builder.id", "https://builder.example"),)),)
    assert policy.attestations[0].mismatches({"runDetails": {"builder": {"id": "x"}}}) == \
        ["runDetails.builder.id is 'x', not 'https://builder.example'"]
    for cfg, message in [({"identities": [{"issuer": "x"}]}, "exactly one of 'subject' and 'subjectRegExp'"),
                         ({"identities": [{"issuer": "x", "subjectRegExp": "("}]}, "not a valid regular expression"),
                         ({"keys": ["k.pub"], "transparencyLog": "yes"}, "must be true or false"),
                         ({"keys": ["k.pub"], "attestations": [{"predicate": {}}]}, "must give a 'predicateType'"),
                         ({"keys": ["k.pub"], "trustRoot": "x"}, "unknown: 'trustRoot'"),
                         ({"identities": []}, "one or more public key files")]:
        with pytest.raises(InputError, match=message):
            parse_policy(cfg, "verify")


def test_trust_root_files_that_cannot_be_used(tmp_path):
    from reconciler.oci.trustroot import TrustRootError

    cases = [("missing.json", None, "cannot read the trust root"),
             ("broken.json", "{", "not valid JSON"),
             ("other.json", '{"mediaType": "application/json"}', "not a Sigstore trusted root"),
             ("short.json", json.dumps({"mediaType": trustroot.TRUSTED_ROOT_TYPES[0],
                                        "certificateAuthorities": [{"subject": {}}]}), "has no field 'certChain'"),
             ("words.pem", "not a certificate\n", "neither a Sigstore trusted_root.json nor PEM certificates")]
    for name, text, message in cases:
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(TrustRootError, match=message) as info:
            trustroot.load((str(tmp_path / name),))
        assert info.value.path == str(tmp_path / name)
