"""cosign signatures of an image digest, found where cosign stores them and verified against public keys.

A tag can be moved by whoever can push to the registry; a digest cannot be
forged, but anyone can publish one. A signature says who vouched for a
digest. cosign (``cosign sign --key``) stores it in the image's own
repository under the tag ``sha256-<hex>.sig``: an image manifest whose
layers are *simple signing* payloads (``application/vnd.dev.cosign.
simplesigning.v1+json``), each a small JSON document naming the signed
manifest digest under ``critical.image.docker-manifest-digest``, with the
signature of the payload's bytes, base64, in the layer annotation
``dev.cosignproject.cosign/signature``.

Verification here is the offline half of ``cosign verify --key``: the
payload's bytes are checked against each trusted public key with
``cryptography`` (ECDSA P-256/P-384 with SHA-256/384, as ``cosign
generate-key-pair`` makes; RSA PKCS#1 v1.5 and Ed25519 keys too), and a
payload that verifies must name the digest being verified, else it is a
signature of another image moved next to this one. No maintained Python
library verifies this format against a plain public key offline (sigstore-python
verifies Sigstore bundles, keyless), and the format is two JSON lookups and
one signature check, so it is done here. Keyless signatures (a Fulcio
certificate and a Rekor entry in the layer's annotations) are not accepted:
checking them needs the Sigstore trust root and transparency log inclusion
proofs (docs/security.md says so).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.oci.client import (MANIFEST_TYPES, MAX_OBJECT_BYTES, Reference, RegistryError, _check, _client,
                                   _container, _request,
                                   _small_blob, first_source, parse_reference, resolve, sources)

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
SIGNATURE_TYPE = "cosign container image signature"
MAX_SIGNATURES = 64


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
    key: PublicKey

    def __str__(self) -> str:
        return f"image {self.image} ({self.digest}) is signed by key {self.key}"


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


def verify_image(reference: str, keys: tuple[PublicKey, ...], digest: str | None = None) -> ImageVerdict:
    """The digest ``reference`` names (or ``digest``), verified: signed by one of ``keys`` for that digest."""
    from reconciler import network

    ref = parse_reference(reference)
    digest = digest or resolve(reference)
    if network.is_offline():
        raise network.refuse(f"checking the signature of {digest}", reference)
    where = Reference(ref.registry, ref.repository, signature_tag(digest))
    named = ", ".join(str(k) for k in keys)
    hint = (f"sign it with `cosign sign --key cosign.key {ref.registry}/{ref.repository}@{digest}` using a key whose "
            f"public half is one of {named}")
    # Through the digest's mirrors, as the image itself: a mirror of a disconnected cluster holds its signatures
    # beside it, and what they sign is checked against the digest of the source reference all the same.
    places = [Reference(p.registry, p.repository, where.tag) for p in sources(ref.with_digest(digest))]

    def look(place: Reference) -> list[dict[str, Any]] | None:
        found = _signature_layers(place)
        if found is None and place != places[-1]:
            raise RegistryError(f"there is no signature at {place}", obj=str(place))   # the next place may have it
        return found

    layers, where = first_source(where, "fetching the signatures", look, places)
    if layers is None:
        raise SignatureError(f"image {reference} ({digest}) is not signed: there is no signature at {where}",
                             obj=reference, hint=hint)
    client = _client(where)
    others: list[str] = []
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
        key = next((k for k in keys if k.verifies(signature, payload)), None)
        if key is None:
            continue
        signed = _signed_digest(payload)
        if signed == digest:
            return ImageVerdict(reference, digest, key)
        others.append(f"{signed or 'no digest'} (signed by key {key})")
    if others:
        raise SignatureError(f"image {reference} ({digest}) carries a signature of another image: "
                             f"{', '.join(others)}; a signature copied from another digest vouches for nothing here",
                             obj=reference, hint=hint)
    extra = "; its signatures are keyless (a Fulcio certificate), which are not verified" if keyless else ""
    raise SignatureError(f"image {reference} ({digest}) is signed, but by none of the trusted keys {named}{extra}",
                         obj=reference, hint=hint)


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
