"""cosign signatures of an image digest, found where cosign stores them and verified as reconciler.yaml requires.

A tag can be moved by whoever can push to the registry; a digest cannot be
forged, but anyone can publish one. A signature says who vouched for a
digest. Signatures are looked for where cosign puts them, in this order:

1. the OCI 1.1 referrers of the digest (``GET /v2/<name>/referrers/<digest>``,
   filtered by ``artifactType`` ``application/vnd.dev.sigstore.bundle.v0.3+json``):
   what cosign v3 writes by default, a manifest whose one layer is a Sigstore
   bundle (``oci/sigstore.py`` verifies it);
2. on a registry without that API (it answers 404), the referrers tag schema:
   the tag ``sha256-<hex>``, an OCI index listing the same referrers;
3. the legacy tag ``sha256-<hex>.sig``, where cosign v2 (and v3 with
   ``--new-bundle-format=false``) stores *simple signing* payloads
   (``application/vnd.dev.cosign.simplesigning.v1+json``): a small JSON
   document naming the manifest digest under
   ``critical.image.docker-manifest-digest``, its signature (base64) in the
   layer annotation ``dev.cosignproject.cosign/signature``.

A simple-signing payload is checked against each trusted public key with
``cryptography`` (ECDSA P-256/P-384, RSA PKCS#1 v1.5, Ed25519); no maintained
Python library verifies that format against a plain key offline, and it is
two JSON lookups and one signature check. Keyless signatures in that legacy
form (a certificate in the layer's annotations) are not verified: cosign v3
writes keyless signatures as bundles, which are.

Whatever signed it, a signature that verifies must name the digest being
verified, else it is a signature of another image moved next to this one.
Attestations (``cosign attest``) are bundles among the same referrers, told
apart by their statement's predicate type.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collections.abc import Iterator

from reconciler.errors import ReconcilerError
from reconciler.model.imagepolicy import ImagePolicy
from reconciler.oci import sigstore, trustroot
from reconciler.oci.client import (INDEX_TYPES, MANIFEST_TYPES, MAX_OBJECT_BYTES, Reference, RegistryError, _check,
                                   _client, _container, _request, _small_blob, parse_reference, resolve, sources)

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
SIGNATURE_TYPE = "cosign container image signature"
MAX_SIGNATURES = 64
MAX_PAGES = 8
BUNDLE_LAYER_PREFIX = "application/vnd.dev.sigstore.bundle"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
FILTERS_APPLIED = "org.opencontainers.referrers.filtersApplied"
NO_REFERRERS_API = (404, 405, 501)   # the spec's 404; a method or route the registry does not implement


class SignatureError(ReconcilerError):
    """An image required to be signed is not signed by a trusted key for its digest."""


@dataclass(frozen=True)
class PublicKey:
    """A trusted public key: where it came from (a file of the repository) and a short fingerprint."""

    path: str
    key: Any
    fingerprint: str

    @classmethod
    def load(cls, path: Path, shown: str) -> PublicKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        try:
            data = path.read_bytes()
            key = serialization.load_pem_public_key(data)
        except OSError as exc:
            raise SignatureError(f"cannot read the public key: {exc.strerror}", path=shown,
                                 hint="keep the key (cosign.pub) in the repository and name it relative to its root")\
                from None
        except ValueError:
            raise SignatureError("the file is not a PEM public key", path=shown,
                                 hint="give the public half written by `cosign generate-key-pair` (cosign.pub)") \
                from None
        if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey, ed25519.Ed25519PublicKey)):
            raise SignatureError(f"{type(key).__name__} keys are not supported", path=shown,
                                 hint="use an ECDSA, RSA or Ed25519 key, as cosign does")
        der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return cls(shown, key, "sha256:" + hashlib.sha256(der).hexdigest()[:16])

    def __str__(self) -> str:
        return f"{self.path} ({self.fingerprint})"

    def verifies(self, signature: bytes, payload: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

        try:
            if isinstance(self.key, ec.EllipticCurvePublicKey):
                digest = hashes.SHA384() if self.key.curve.key_size >= 384 else hashes.SHA256()
                self.key.verify(signature, payload, ec.ECDSA(digest))
            elif isinstance(self.key, rsa.RSAPublicKey):
                self.key.verify(signature, payload, padding.PKCS1v15(), hashes.SHA256())
            else:
                self.key.verify(signature, payload)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True)
class ImageVerdict:
    image: str
    digest: str
    signer: str                       # "key keys/catalog.pub (sha256:…)" or "certificate of … (issuer …)"
    key: PublicKey | None = None      # the key, when a key signed it
    where: str = ""                   # the referrer or tag the signature was found at
    attestations: tuple[str, ...] = ()   # the predicate types verified

    def __str__(self) -> str:
        extra = f"; attested {', '.join(self.attestations)}" if self.attestations else ""
        return f"image {self.image} ({self.digest}) is signed by {self.signer}{extra}"


@dataclass(frozen=True)
class Requirements:
    """An ``ImagePolicy`` with its keys loaded: what ``verify_image`` checks an image against."""

    policy: ImagePolicy
    keys: tuple[PublicKey, ...]

    def __str__(self) -> str:
        parts = []
        if self.keys:
            parts.append(f"the keys {', '.join(str(k) for k in self.keys)}")
        if self.policy.identities:
            parts.append(f"the identities {'; '.join(str(i) for i in self.policy.identities)}")
        return " or ".join(parts)


def requirements(root: Path, policy: ImagePolicy, what: str = "") -> Requirements:
    """The policy of reconciler.yaml ready to check: its keys read from the repository at ``root``."""
    return Requirements(policy, load_keys(root, policy.keys, what))


def load_keys(root: Path, paths: tuple[str, ...], what: str = "") -> tuple[PublicKey, ...]:
    """The public keys named (relative to the repository's ``root``) for ``what`` (e.g. ``catalog community``);
    never a path out of the repository."""
    top = root.resolve()
    keys = []
    for rel in paths:
        target = (top / rel).resolve()
        if target != top and top not in target.parents:
            raise SignatureError(f"{what + ': ' if what else ''}the public key lies outside the repository", path=rel)
        try:
            keys.append(PublicKey.load(target, rel))
        except SignatureError as exc:
            raise SignatureError(f"{what + ': ' if what else ''}{exc.message}", path=exc.path, hint=exc.hint) from None
    return tuple(keys)


def signature_tag(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}.sig"


def fallback_tag(digest: str) -> str:
    """The referrers tag schema's tag for ``digest``: where referrers are listed on a registry without the API."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}"


def verify_image(reference: str, required: Requirements | tuple[PublicKey, ...],
                 digest: str | None = None) -> ImageVerdict:
    """The digest ``reference`` names (or ``digest``), verified: signed as ``required`` says for that digest, and
    carrying the attestations it lists. A tuple of keys is the policy "signed by one of these keys"."""
    from reconciler import network

    if not isinstance(required, Requirements):
        required = Requirements(ImagePolicy(keys=tuple(k.path for k in required)), tuple(required))
    ref = parse_reference(reference)
    digest = digest or resolve(reference)
    if network.is_offline():
        raise network.refuse(f"checking the signature of {digest}", reference)
    # Through the digest's mirrors, as the image itself: a mirror of a disconnected cluster holds its signatures
    # beside it, and what they sign is checked against the digest of the source reference all the same.
    places = [Reference(p.registry, p.repository) for p in sources(ref.with_digest(digest))] or [ref]
    refused: SignatureError | None = None   # the first place that held signatures that do not verify
    for place in places:
        try:
            return _verify_at(place, ref, reference, digest, required)
        except SignatureError as exc:
            refused = refused or exc
            if place == places[-1]:
                raise refused from None
        except RegistryError:
            if place == places[-1]:
                if refused is not None:
                    raise refused from None
                raise
    raise AssertionError("unreachable")   # the last place returns or raises


def _verify_at(at: Reference, ref: Reference, reference: str, digest: str, required: Requirements) -> ImageVerdict:
    """``verify_image`` with the signatures read from ``at`` (the image's repository, or a mirror of it)."""
    policy = required.policy
    roots = trustroot.current() if policy.identities or policy.transparency_log or policy.signed_timestamp \
        else trustroot.TrustRoot()
    subject = f"image {reference} ({digest})"
    hint = _hint(ref, digest, required)
    bundles, looked = _bundles(at, digest)
    reasons: list[str] = []
    others: list[str] = []
    signature: tuple[str, sigstore.Verified] | None = None
    verified: list[tuple[str, sigstore.Verified]] = []
    for where, data in bundles:
        if isinstance(data, str):   # what went wrong reading it
            reasons.append(f"{where}: {data}")
            continue
        try:
            result = sigstore.verify_bundle(sigstore.parse_bundle(data), digest, policy, required.keys, roots)
        except sigstore._Other as exc:
            others.append(f"{', '.join(exc.digests) or 'no digest'} ({where}, {str(exc).split(', but')[0]})")
            continue
        except sigstore.Mismatch as exc:
            reasons.append(f"{where}: {exc}")
            continue
        verified.append((where, result))
        if signature is None and result.predicate_type in (None, sigstore.SIGN_PREDICATE):
            signature = (where, result)
            if not policy.attestations:
                break
    legacy = None
    if signature is None:
        legacy = _legacy(at, digest, required, reasons, others)
    if signature is None and legacy is None:
        if others:
            raise SignatureError(f"{subject} carries a signature of another image: {', '.join(others)}; a signature "
                                 f"copied from another digest vouches for nothing here", obj=reference, hint=hint)
        if not reasons:
            raise SignatureError(f"{subject} is not signed: there is no signature among its referrers ({looked}) "
                                 f"and none at {Reference(at.registry, at.repository, signature_tag(digest))}",
                                 obj=reference, hint=hint)
        raise SignatureError(f"{subject} is signed, but not by {required}: {'; '.join(reasons)}", obj=reference,
                             hint=hint)
    attested = _attestations(subject, policy, verified, reasons, reference)
    if signature is not None:
        where, result = signature
        key = next((k for k in required.keys if result.signer == f"key {k}"), None)
        return ImageVerdict(reference, digest, result.signer, key, f"{where} (listed by {looked})", attested)
    assert legacy is not None
    return ImageVerdict(reference, digest, f"key {legacy}", legacy, f"the tag {signature_tag(digest)}", attested)


def _hint(ref: Reference, digest: str, required: Requirements) -> str:
    image = f"{ref.registry}/{ref.repository}@{digest}"
    ways = []
    if required.keys:
        ways.append(f"sign it with `cosign sign --key cosign.key {image}` using a key whose public half is one of "
                    f"{', '.join(str(k) for k in required.keys)}")
    if required.policy.identities:
        ways.append(f"sign it as {' or '.join(str(i) for i in required.policy.identities)} with a certificate that "
                    f"chains to the trust root ({trustroot.configured() and ', '.join(trustroot.configured()) or '--trust-root'})")
    return "; or ".join(ways)


def _attestations(subject: str, policy: ImagePolicy, verified: list[tuple[str, sigstore.Verified]],
                  reasons: list[str], reference: str) -> tuple[str, ...]:
    """Each attestation the policy requires, found among the verified bundles; else a refusal saying what was."""
    done = []
    for wanted in policy.attestations:
        seen = []
        for where, result in verified:
            if result.predicate_type != wanted.predicate_type:
                if result.predicate_type not in (None, sigstore.SIGN_PREDICATE):
                    seen.append(f"{where}: an attestation of {result.predicate_type}")
                continue
            wrong = wanted.mismatches((result.statement or {}).get("predicate"))
            if not wrong:
                break
            seen.append(f"{where}: its predicate's {', '.join(wrong)}")
        else:
            found = "; ".join(seen + reasons) or "no other attestation"
            raise SignatureError(f"{subject} has no attestation of predicate type {wanted.predicate_type}"
                                 f"{' with ' + ', '.join(f'{p} {v!r}' for p, v in wanted.predicate) if wanted.predicate else ''}"
                                 f" signed as required ({found})", obj=reference,
                                 hint=f"attest it with `cosign attest --key cosign.key --type "
                                      f"{wanted.predicate_type} --predicate FILE {reference.split('@')[0]}@…` "
                                      f"(the predicate holding the fields required), signed as its signature is")
        done.append(wanted.predicate_type)
    return tuple(done)


def _bundles(ref: Reference, digest: str) -> tuple[Iterator[tuple[str, bytes | str]], str]:
    """The Sigstore bundles referring to ``digest`` (lazily, each with where it was found), and where they were
    looked for: the referrers API, else the referrers tag schema."""
    client = _client(ref)
    descriptors, looked = _referrers(client, ref, digest)

    def fetch() -> Iterator[tuple[str, bytes | str]]:
        for desc in descriptors[:MAX_SIGNATURES]:
            manifest_digest = str(desc.get("digest") or "")
            where = f"referrer {manifest_digest[:19]}…"
            try:
                manifest = _manifest_by_digest(client, ref, manifest_digest)
            except (RegistryError, SignatureError) as exc:
                yield where, f"its manifest cannot be read: {exc.message}"
                continue
            for layer in (manifest.get("layers") or [])[:MAX_SIGNATURES]:
                if isinstance(layer, dict) and str(layer.get("mediaType") or "").startswith(BUNDLE_LAYER_PREFIX):
                    yield where, _small_blob(client, ref, layer, "signature bundle")

    return fetch(), looked


def _referrers(client: Any, ref: Reference, digest: str) -> tuple[list[dict[str, Any]], str]:
    """The descriptors of bundle referrers of ``digest``, and where they were listed."""
    base = f"{client.prefix}://{ref.host}/v2/{ref.repository}/referrers/{digest}"
    url: str | None = f"{base}?artifactType={sigstore.BUNDLE_ARTIFACT}"
    found: list[dict[str, Any]] = []
    pages = 0
    filtered = True
    while url and pages < MAX_PAGES:
        resp = _request(client, url, "GET", ref, headers={"Accept": INDEX_TYPES[0]})
        if resp.status_code in NO_REFERRERS_API and not pages:
            return _fallback(client, ref, digest)
        _check(resp, ref, "listing the referrers")
        entries, applied = _index_entries(resp.content, f"{ref.registry}/{ref.repository} referrers of {digest}")
        found += entries
        filtered = filtered and "artifactType" in applied
        url = _next_page(resp, client, ref)
        pages += 1
    # A registry that did not filter may also report a referrer's type from its config, not its artifactType
    # (go-containerregistry's does): cosign's bundles then show the empty config's type, and their manifests say.
    unsure = () if filtered else ("", EMPTY_CONFIG)
    return [d for d in found if d.get("artifactType", "") in (sigstore.BUNDLE_ARTIFACT, *unsure)], "the referrers API"


def _fallback(client: Any, ref: Reference, digest: str) -> tuple[list[dict[str, Any]], str]:
    where = Reference(ref.registry, ref.repository, fallback_tag(digest))
    url = f"{client.prefix}://{_container(where).manifest_url()}"
    resp = _request(client, url, "GET", where, headers={"Accept": ", ".join(INDEX_TYPES + MANIFEST_TYPES)})
    looked = f"the tag {where.tag}, the registry having no referrers API"
    if resp.status_code == 404:
        return [], looked
    _check(resp, where, "fetching the referrers tag")
    entries, _ = _index_entries(resp.content, str(where))
    return [d for d in entries if d.get("artifactType") == sigstore.BUNDLE_ARTIFACT], looked


def _index_entries(body: bytes, where: str) -> tuple[list[dict[str, Any]], str]:
    """An index's manifest descriptors, and the filters the registry says it applied."""
    if len(body) > MAX_OBJECT_BYTES:
        raise SignatureError(f"the referrers index is over {MAX_OBJECT_BYTES} bytes", obj=where)
    try:
        doc = json.loads(body)
    except ValueError:
        raise SignatureError("the referrers index is not JSON", obj=where) from None
    if not isinstance(doc, dict):
        return [], ""
    entries = doc.get("manifests")
    applied = str((doc.get("annotations") or {}).get(FILTERS_APPLIED, "")) if isinstance(doc.get("annotations"),
                                                                                         dict) else ""
    return ([e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []), applied


def _next_page(resp: Any, client: Any, ref: Reference) -> str | None:
    """The ``Link: <...>; rel="next"`` of a paginated referrers list, on the same registry."""
    link = resp.headers.get("Link", "")
    if 'rel="next"' not in link or "<" not in link:
        return None
    target = link[link.index("<") + 1:link.index(">")]
    if target.startswith("/"):
        return f"{client.prefix}://{ref.host}{target}"
    return target if target.startswith(f"{client.prefix}://{ref.host}/") else None


def _manifest_by_digest(client: Any, ref: Reference, digest: str) -> dict[str, Any]:
    if not digest.startswith("sha256:"):
        raise SignatureError(f"referrer digest {digest!r} is not sha256", obj=str(ref))
    url = f"{client.prefix}://{_container(ref).manifest_url(digest)}"
    resp = _request(client, url, "GET", ref, headers={"Accept": ", ".join(MANIFEST_TYPES)})
    _check(resp, ref, f"fetching the referrer {digest}")
    if len(resp.content) > MAX_OBJECT_BYTES or "sha256:" + hashlib.sha256(resp.content).hexdigest() != digest:
        raise SignatureError(f"the registry served a referrer manifest that does not match {digest}", obj=str(ref))
    doc = json.loads(resp.content)
    return doc if isinstance(doc, dict) else {}


def _legacy(ref: Reference, digest: str, required: Requirements, reasons: list[str],
            others: list[str]) -> PublicKey | None:
    """The key that signed ``digest`` at the legacy ``.sig`` tag, if one did; what it found is added to
    ``reasons`` and ``others`` (signatures by a trusted key of another digest)."""
    where = Reference(ref.registry, ref.repository, signature_tag(digest))
    layers = _signature_layers(where)
    if layers is None:
        return None
    client = _client(where)
    keyless = False
    for layer in layers[:MAX_SIGNATURES]:
        annotations = layer.get("annotations") or {}
        if layer.get("mediaType") != SIMPLE_SIGNING or SIGNATURE_ANNOTATION not in annotations:
            continue
        keyless = keyless or CERTIFICATE_ANNOTATION in annotations
        try:
            signature = base64.b64decode(annotations[SIGNATURE_ANNOTATION], validate=True)
        except (binascii.Error, ValueError):
            continue
        payload = _small_blob(client, where, layer, "signature payload")
        key = next((k for k in required.keys if k.verifies(signature, payload)), None)
        if key is None:
            continue
        signed = _signed_digest(payload)
        if signed == digest:
            return key
        others.append(f"{signed or 'no digest'} (tag {where.tag}, signed by key {key})")
    if keyless:
        reasons.append(f"tag {where.tag}: its signatures are keyless in cosign v2's form (a certificate in an "
                       f"annotation), which is not verified; sign with cosign v3, whose keyless signatures are bundles")
    elif layers:
        trusted = ", ".join(str(k) for k in required.keys) or "none (reconciler.yaml lists no keys)"
        reasons.append(f"tag {where.tag}: signed by none of the trusted keys ({trusted})")
    return None


def _signed_digest(payload: bytes) -> str | None:
    try:
        doc = json.loads(payload)
        critical = doc["critical"]
        if critical.get("type") != SIGNATURE_TYPE:
            return None
        return str(critical["image"]["docker-manifest-digest"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _signature_layers(where: Reference) -> list[dict[str, Any]] | None:
    """The layers of the signature manifest at ``where`` (a tag), or None when there is none."""
    client = _client(where)
    url = f"{client.prefix}://{_container(where).manifest_url()}"
    resp = _request(client, url, "GET", where, headers={"Accept": ", ".join(MANIFEST_TYPES)})
    if resp.status_code == 404:
        return None
    _check(resp, where, "fetching the signatures")
    if len(resp.content) > MAX_OBJECT_BYTES:
        raise SignatureError(f"the signature manifest is over {MAX_OBJECT_BYTES} bytes", obj=str(where))
    try:
        doc = json.loads(resp.content)
    except ValueError:
        raise SignatureError("the signature manifest is not JSON", obj=str(where)) from None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    return [layer for layer in layers if isinstance(layer, dict)] if isinstance(layers, list) else []
