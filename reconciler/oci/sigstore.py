"""Sigstore bundles (v0.1 to v0.3) verified offline: who signed them, for which digest, and when.

cosign v3 stores an image's signature as a Sigstore bundle: a DSSE envelope
over an in-toto Statement whose subject is the image's digest (predicate
``https://sigstore.dev/cosign/sign/v1`` for a signature, the attested type for
``cosign attest``), or a message signature over the digest itself. The bundle
carries its verification material: the signer's public key hint (a key pair),
or its certificate (keyless, from Fulcio, or from a private PKI), and, when
signed online, transparency log entries (Rekor: inclusion proof, signed
checkpoint, signed entry timestamp) and RFC 3161 signed timestamps.

``verify_bundle`` is the offline half of ``cosign verify``:

1. the signature is checked against each trusted key, or against the
   certificate's key once the certificate chains to the trust root (the time
   of the chain check is each verified time: a log entry's integrated time
   when the policy asks for the log, a TSA's time when it asks for a signed
   timestamp, else now) and its identity (SAN, and the Fulcio OIDC issuer
   extension) matches a declared one;
2. the statement's subject (or the message digest) must be the digest being
   verified, else it is a signature of another image moved next to this one;
3. with ``transparencyLog``: an entry of a log the trust root lists, whose
   body names this signature and content, included in the tree its signed
   checkpoint commits to (RFC 6962 proof), with a valid signed entry
   timestamp; with ``signedTimestamp``: an RFC 3161 token over the signature
   from a timestamp authority of the trust root (``rfc3161-client``).

Why the format is read here and not by a library: sigstore-python 4.x
verifies bundles only with a Fulcio certificate, exactly one log entry and a
certificate transparency SCT, so it refuses what cosign signs with a key or
offline (``--tlog-upload=false``) and what a private PKI issues, and it
brings some 30 packages (tuf, rich, pyjwt, ...); sigstore-models (its pydantic
models) refuses a bundle without log entries, a v0.1 entry without inclusion
proof, and a trusted root without logs; sigstore-protobuf-specs pins a beta
of betterproto whose messages could not be read with the locked pydantic.
The JSON is a handful of fields of the protobuf-specs mapping; the
cryptography (X.509 path validation, ECDSA/RSA/Ed25519) is ``cryptography``'s,
the timestamp tokens ``rfc3161-client``'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from reconciler.oci.trustroot import TrustRoot, b64

BUNDLE_TYPES = ("application/vnd.dev.sigstore.bundle+json;version=0.1",
                "application/vnd.dev.sigstore.bundle+json;version=0.2",
                "application/vnd.dev.sigstore.bundle+json;version=0.3",
                "application/vnd.dev.sigstore.bundle.v0.3+json")
BUNDLE_ARTIFACT = "application/vnd.dev.sigstore.bundle.v0.3+json"
IN_TOTO = "application/vnd.in-toto+json"
STATEMENTS = ("https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1")
SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"
ISSUER_OID = "1.3.6.1.4.1.57264.1.8"          # Fulcio: OIDC issuer (DER UTF8String)
ISSUER_OID_V1 = "1.3.6.1.4.1.57264.1.1"       # Fulcio: OIDC issuer (raw), deprecated
USERNAME_OID = "1.3.6.1.4.1.57264.1.7"        # Fulcio: otherName SAN (a username)


class Mismatch(Exception):
    """What about one bundle does not meet the policy, in words for the user."""


@dataclass(frozen=True)
class Bundle:
    """The fields of a Sigstore bundle verification reads."""

    media_type: str
    public_key_hint: str | None
    certificates: tuple[Any, ...]          # cryptography x509.Certificate, the signer's first
    tlog_entries: tuple[dict, ...]
    timestamps: tuple[bytes, ...]          # DER TimeStampResponses
    signature: bytes
    payload_type: str | None = None        # DSSE
    payload: bytes | None = None
    message_digest: tuple[str, bytes] | None = None   # message signature: (algorithm, digest)

    @property
    def version(self) -> str:
        return self.media_type.rsplit("version=", 1)[-1] if "version=" in self.media_type else "0.3"


@dataclass(frozen=True)
class Verified:
    """A bundle that met the policy: who signed it, and the statement it carries (None for a message)."""

    signer: str
    statement: dict | None
    times: tuple[str, ...] = ()

    @property
    def predicate_type(self) -> str | None:
        return str(self.statement.get("predicateType")) if self.statement else None


def parse_bundle(data: bytes) -> Bundle:
    """A Sigstore bundle from its JSON; ``Mismatch`` saying what is wrong when it is not one."""
    try:
        doc = json.loads(data)
    except ValueError:
        raise Mismatch("its bundle is not JSON") from None
    if not isinstance(doc, dict) or doc.get("mediaType") not in BUNDLE_TYPES:
        media = doc.get("mediaType") if isinstance(doc, dict) else None
        raise Mismatch(f"its bundle has media type {media!r}, not a Sigstore bundle v0.1 to v0.3")
    try:
        material = doc["verificationMaterial"]
        hint = None
        if "publicKey" in material:
            hint = str((material["publicKey"] or {}).get("hint") or "")
            certs: tuple = ()
        else:   # X.509 is read only for a bundle that carries certificates
            from cryptography import x509

            raw = [c["rawBytes"] for c in material["x509CertificateChain"]["certificates"]] \
                if "x509CertificateChain" in material else [material["certificate"]["rawBytes"]]
            certs = tuple(x509.load_der_x509_certificate(b64(r)) for r in raw)
        if hint is None and not certs:
            raise Mismatch("its bundle names no key and no certificate")
        entries = tuple(e for e in material.get("tlogEntries") or [] if isinstance(e, dict))
        stamps = tuple(b64(t["signedTimestamp"]) for t in
                       ((material.get("timestampVerificationData") or {}).get("rfc3161Timestamps") or []))
        if "dsseEnvelope" in doc:
            env = doc["dsseEnvelope"]
            sigs = env["signatures"]
            if not isinstance(sigs, list) or len(sigs) != 1:
                raise Mismatch(f"its DSSE envelope has {len(sigs) if isinstance(sigs, list) else 'no'} signatures, "
                               f"not one")
            return Bundle(doc["mediaType"], hint, certs, entries, stamps, b64(sigs[0]["sig"]),
                          payload_type=str(env["payloadType"]), payload=b64(env["payload"]))
        message = doc["messageSignature"]
        digest = message.get("messageDigest") or {}
        algorithm = {"SHA2_256": "sha256", "SHA2_384": "sha384", "SHA2_512": "sha512"}.get(digest.get("algorithm"))
        if algorithm is None:
            raise Mismatch(f"its message signature digests with {digest.get('algorithm')!r}, not SHA-2")
        return Bundle(doc["mediaType"], hint, certs, entries, stamps, b64(message["signature"]),
                      message_digest=(algorithm, b64(digest["digest"])))
    except Mismatch:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Mismatch(f"its bundle is malformed ({malformed(exc)})") from None


def malformed(exc: Exception) -> str:
    """What is wrong with a JSON document whose reading raised ``exc``, in our words."""
    if isinstance(exc, KeyError) and exc.args:
        return f"it has no field {exc.args[0]!r}"
    return "a field has the wrong type or encoding"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the envelope's signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def verify_bundle(bundle: Bundle, digest: str, policy: Any, keys: tuple, roots: TrustRoot,
                  now: datetime | None = None) -> Verified:
    """``bundle`` verified for ``digest`` (``sha256:<hex>``) under ``policy`` (``model.imagepolicy.ImagePolicy``),
    with ``keys`` (``signature.PublicKey``, the policy's keys loaded) and the trust root; else ``Mismatch``."""
    now = now or datetime.now(timezone.utc)
    signed = pae(bundle.payload_type or "", bundle.payload or b"") if bundle.payload is not None else None
    times: list[tuple[str, datetime]] = []
    if policy.transparency_log:
        times.append(("log entry", _verify_log(bundle, roots)))
    if policy.signed_timestamp:
        times.append(("signed timestamp", _verify_timestamps(bundle, roots)))
    signer = _signer(bundle, signed, policy, keys, roots, [t for _, t in times] or [now])
    statement = None
    if bundle.payload is not None:
        if bundle.payload_type != IN_TOTO:
            raise Mismatch(f"signed by {signer}, but its DSSE payload is {bundle.payload_type!r}, not an in-toto "
                           f"statement")
        statement = _statement(bundle.payload, signer)
        named = _subject_digests(statement)
        if digest not in named:
            raise _Other(f"signed by {signer}, but for {', '.join(named) or 'no digest'}", named)
    else:
        algorithm, value = bundle.message_digest or ("", b"")
        named = [f"{algorithm}:{value.hex()}"]
        if named[0] != digest:
            raise _Other(f"signed by {signer}, but for {named[0]}", named)
    return Verified(signer, statement, tuple(f"{what} {when.isoformat()}" for what, when in times))


class _Other(Mismatch):
    """A good signature by a trusted signer, of another digest."""

    def __init__(self, message: str, digests: list[str]) -> None:
        super().__init__(message)
        self.digests = digests


def _statement(payload: bytes, signer: str) -> dict:
    try:
        doc = json.loads(payload)
    except ValueError:
        raise Mismatch(f"signed by {signer}, but its in-toto statement is not JSON") from None
    if not isinstance(doc, dict) or doc.get("_type") not in STATEMENTS or not isinstance(doc.get("subject"), list):
        raise Mismatch(f"signed by {signer}, but its payload is not an in-toto statement")
    return doc


def _subject_digests(statement: dict) -> list[str]:
    out = []
    for subject in statement.get("subject") or []:
        for algorithm, value in ((subject or {}).get("digest") or {}).items() if isinstance(subject, dict) else ():
            out.append(f"{algorithm}:{value}")
    return out


# --- who signed ----------------------------------------------------------------------------------------------


def _signer(bundle: Bundle, signed: bytes | None, policy: Any, keys: tuple, roots: TrustRoot,
            times: list[datetime]) -> str:
    if not bundle.certificates:
        key = next((k for k in keys if _checks(k.key, bundle, signed)), None)
        if key is not None:
            return f"key {key}"
        trusted = ", ".join(str(k) for k in keys) or "none (reconciler.yaml lists no keys)"
        raise Mismatch(f"signed by a key that is none of the trusted keys ({trusted})")
    leaf = bundle.certificates[0]
    key = next((k for k in keys if _same_key(k.key, leaf.public_key())), None)
    if key is not None:   # a key pair's signature with its certificate attached: the key decides
        if not _checks(key.key, bundle, signed):
            raise Mismatch(f"its signature does not verify with key {key}")
        return f"key {key}"
    issuer, subjects = certificate_identity(leaf)
    who = f"certificate of {', '.join(subjects) or 'no subject'} (issuer {issuer or 'not named'})"
    if not policy.identities:
        raise Mismatch(f"signed with a {who}, and only keys are trusted ({', '.join(str(k) for k in keys)})")
    _chain(leaf, bundle.certificates[1:], roots, times, who)
    if not _checks(leaf.public_key(), bundle, signed):
        raise Mismatch(f"its signature does not verify with the key of its {who}")
    if not any(i.matches(issuer, subjects) for i in policy.identities):
        raise Mismatch(f"signed with a {who}, which is none of the identities "
                       f"{'; '.join(str(i) for i in policy.identities)}")
    return who


def certificate_identity(cert: Any) -> tuple[str | None, tuple[str, ...]]:
    """A signing certificate's OIDC issuer (Fulcio's extension) and its subjects (SAN emails, URIs, usernames)."""
    from cryptography import x509

    issuer = None
    for ext in cert.extensions:
        oid = ext.oid.dotted_string
        if oid in (ISSUER_OID, ISSUER_OID_V1) and isinstance(ext.value, x509.UnrecognizedExtension):
            raw = ext.value.value
            value = _der_utf8(raw) if oid == ISSUER_OID else raw.decode("utf-8", "replace")
            if value is not None and (issuer is None or oid == ISSUER_OID):
                issuer = value
    subjects: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return issuer, ()
    subjects += san.get_values_for_type(x509.RFC822Name)
    subjects += san.get_values_for_type(x509.UniformResourceIdentifier)
    for other in san.get_values_for_type(x509.OtherName):
        if other.type_id.dotted_string == USERNAME_OID and (name := _der_utf8(other.value)) is not None:
            subjects.append(name)
    return issuer, tuple(subjects)


def _der_utf8(raw: bytes) -> str | None:
    """A DER UTF8String (tag 12, short or long length) as text; None when it is not one."""
    if len(raw) < 2 or raw[0] != 0x0C:
        return None
    length, start = raw[1], 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(raw[2:2 + count], "big"), 2 + count
    body = raw[start:start + length]
    return body.decode("utf-8", "replace") if len(body) == length else None


def _chain(leaf: Any, extra: tuple, roots: TrustRoot, times: list[datetime], who: str) -> None:
    """The certificate chains to an authority of the trust root, valid at every one of ``times``."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID
    from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store, \
        VerificationError

    if not roots.authorities:
        raise Mismatch(f"signed with a {who}, and no trust root is given to check it against (--trust-root)")
    try:
        usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usage = ()
    if ExtendedKeyUsageOID.CODE_SIGNING not in usage:
        raise Mismatch(f"signed with a {who} that is not for code signing (no extended key usage codeSigning)")
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(x509.ExtendedKeyUsage, Criticality.NON_CRITICAL,
                                                                    None)
    ee_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(x509.ExtendedKeyUsage, Criticality.NON_CRITICAL,
                                                                    None)
    for when in times:
        ok = False
        for authority in roots.authorities:
            if not authority.valid.covers(when):
                continue
            verifier = (PolicyBuilder().store(Store([authority.root])).time(when)
                        .extension_policies(ca_policy=ca_policy, ee_policy=ee_policy).build_client_verifier())
            try:
                verifier.verify(leaf, [*authority.intermediates, *extra])
                ok = True
                break
            except (VerificationError, ValueError):
                continue
        if not ok:
            if not leaf.not_valid_before_utc <= when <= leaf.not_valid_after_utc:
                raise Mismatch(f"signed with a {who} that was not valid at {when.isoformat()} (valid "
                               f"{leaf.not_valid_before_utc.isoformat()} to {leaf.not_valid_after_utc.isoformat()})"
                               + ("" if len(times) > 1 or when != times[-1] else
                                  "; a short-lived certificate is checked at the time a log entry or a signed "
                                  "timestamp proves (transparencyLog, signedTimestamp)"))
            raise Mismatch(f"signed with a {who} issued by {leaf.issuer.rfc4514_string()}, which does not chain "
                           f"to the trust root ({roots})")


def _same_key(a: Any, b: Any) -> bool:
    from cryptography.hazmat.primitives import serialization

    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        return a.public_bytes(*fmt) == b.public_bytes(*fmt)
    except (AttributeError, ValueError):
        return False


def _checks(key: Any, bundle: Bundle, signed: bytes | None) -> bool:
    """The bundle's signature verifies with ``key``: over the DSSE encoding, or over the message digest."""
    if signed is not None:
        return verify_signature(key, bundle.signature, signed)
    algorithm, value = bundle.message_digest or ("sha256", b"")
    return verify_signature(key, bundle.signature, value, prehashed=algorithm)


def verify_signature(key: Any, signature: bytes, data: bytes, prehashed: str | None = None) -> bool:
    """``signature`` over ``data`` (or over the digest ``data`` of algorithm ``prehashed``) by ``key``: ECDSA
    (SHA-256 for P-256, SHA-384 for P-384, SHA-512 for P-521), RSA PKCS#1 v1.5 and PSS with SHA-256, Ed25519."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

    by_name = {"sha256": hashes.SHA256(), "sha384": hashes.SHA384(), "sha512": hashes.SHA512()}
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            size = key.curve.key_size
            algorithm = hashes.SHA512() if size > 384 else hashes.SHA384() if size > 256 else hashes.SHA256()
            if prehashed:
                algorithm = utils.Prehashed(by_name[prehashed])
            key.verify(signature, data, ec.ECDSA(algorithm))
        elif isinstance(key, rsa.RSAPublicKey):
            algorithm = utils.Prehashed(by_name[prehashed]) if prehashed else hashes.SHA256()
            try:
                key.verify(signature, data, padding.PKCS1v15(), algorithm)
            except InvalidSignature:
                key.verify(signature, data, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.AUTO), algorithm)
        elif isinstance(key, ed25519.Ed25519PublicKey) and not prehashed:
            key.verify(signature, data)
        else:
            return False
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    return True


# --- when: the transparency log, signed timestamps ----------------------------------------------------------------


def _verify_log(bundle: Bundle, roots: TrustRoot) -> datetime:
    """A log entry of the bundle verified (body, inclusion proof and checkpoint, signed entry timestamp): the time
    the log integrated it."""
    if not bundle.tlog_entries:
        raise Mismatch("it has no transparency log entry, and reconciler.yaml asks for one (transparencyLog)")
    if not roots.logs:
        raise Mismatch(f"it has a transparency log entry, and the trust root ({roots}) lists no log to check it "
                       f"against")
    reasons = []
    for entry in bundle.tlog_entries:
        try:
            return _verify_entry(entry, bundle, roots)
        except Mismatch as exc:
            reasons.append(str(exc))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            reasons.append(f"its log entry is malformed ({malformed(exc)})")
    raise Mismatch("; ".join(reasons))


def _verify_entry(entry: dict, bundle: Bundle, roots: TrustRoot) -> datetime:
    log_id = b64(entry["logId"]["keyId"])
    log = roots.log(log_id)
    if log is None:
        raise Mismatch(f"its log entry is in a log the trust root does not list (log id {log_id.hex()[:16]}…)")
    body = b64(entry["canonicalizedBody"])
    kind = entry.get("kindVersion") or {}
    _consistent(json.loads(body), f"{kind.get('kind')}/{kind.get('version')}", bundle)
    index = int(entry["logIndex"])
    proof, promise = entry.get("inclusionProof"), entry.get("inclusionPromise")
    if proof:
        _inclusion(proof, body, log)
    elif bundle.version != "0.1":
        raise Mismatch(f"its log entry {index} has no inclusion proof (a v{bundle.version} bundle needs one)")
    if not promise:
        raise Mismatch(f"its log entry {index} has no signed entry timestamp, so the time it was logged is unproven")
    integrated = int(entry["integratedTime"])
    canonical = json.dumps({"body": entry["canonicalizedBody"], "integratedTime": integrated,
                            "logID": log_id.hex(), "logIndex": index}, sort_keys=True, separators=(",", ":"))
    if not verify_signature(log.key, b64(promise["signedEntryTimestamp"]), canonical.encode()):
        raise Mismatch(f"the signed entry timestamp of its log entry {index} does not verify with the key of "
                       f"{log.url}")
    when = datetime.fromtimestamp(integrated, tz=timezone.utc)
    if not log.valid.covers(when):
        raise Mismatch(f"its log entry {index} is dated {when.isoformat()}, outside the validity of {log.url}'s key")
    return when


def _consistent(body: dict, kind: str, bundle: Bundle) -> None:
    """The log entry is of this bundle: the same signature over the same content."""
    spec = body.get("spec") or {}
    sig = bundle.signature
    if kind == "hashedrekord/0.0.1":
        hashed = (spec.get("data") or {}).get("hash") or {}
        content = b64((spec.get("signature") or {}).get("content") or "")
        expect = bundle.message_digest[1].hex() if bundle.message_digest else \
            hashlib.sha256(pae(bundle.payload_type or "", bundle.payload or b"")).hexdigest()
        ok = content == sig and hashed.get("value") == expect
    elif kind == "dsse/0.0.1":
        payload_hash = (spec.get("payloadHash") or {}).get("value")
        sigs = [b64(s.get("signature") or "") for s in spec.get("signatures") or []]
        ok = bundle.payload is not None and payload_hash == hashlib.sha256(bundle.payload).hexdigest() and sig in sigs
    elif kind == "intoto/0.0.2":
        content = spec.get("content") or {}
        payload_hash = (content.get("payloadHash") or {}).get("value")
        sigs = [b64(s.get("sig") or "") for s in (content.get("envelope") or {}).get("signatures") or []]
        ok = bundle.payload is not None and payload_hash == hashlib.sha256(bundle.payload).hexdigest() and \
            any(s == sig or _maybe_b64(s) == sig for s in sigs)
    else:
        raise Mismatch(f"its log entry is of kind {kind}, which is not checked (hashedrekord/0.0.1, dsse/0.0.1 and "
                       f"intoto/0.0.2 are)")
    if not ok:
        raise Mismatch(f"its log entry ({kind}) records another signature or content than the bundle's")


def _maybe_b64(data: bytes) -> bytes | None:
    try:
        return b64(data.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None


def _inclusion(proof: dict, body: bytes, log: Any) -> None:
    """RFC 6962 inclusion of the entry in the tree of ``proof``, whose root the signed checkpoint commits to."""
    index, size = int(proof["logIndex"]), int(proof["treeSize"])
    root = b64(proof["rootHash"])
    computed = merkle_root(index, size, hashlib.sha256(b"\x00" + body).digest(),
                           [b64(h) for h in proof.get("hashes") or []])
    if computed != root:
        raise Mismatch(f"the inclusion proof of its log entry (index {index} of {size}) does not lead to the root "
                       f"it names")
    checkpoint = ((proof.get("checkpoint") or {}).get("envelope")) or ""
    if not checkpoint:
        raise Mismatch(f"the inclusion proof of its log entry (index {index}) has no signed checkpoint")
    note, _, signatures = checkpoint.partition("\n\n")
    lines = note.split("\n")
    if len(lines) < 3 or lines[1] != str(size) or b64(lines[2]) != root:
        raise Mismatch(f"the checkpoint of its log entry does not commit to the proof's tree (size {size})")
    for line in signatures.splitlines():
        if not line.startswith("\u2014 "):
            continue
        raw = b64(line.rsplit(" ", 1)[-1])
        if len(raw) > 4 and verify_signature(log.key, raw[4:], (note + "\n").encode()):
            return
    raise Mismatch(f"the checkpoint of its log entry is not signed by {log.url}")


def merkle_root(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes | None:
    """The root an RFC 9162 (2.1.3.2) inclusion path leads to from ``leaf`` at ``index`` of ``size``; None
    when the path does not fit the tree."""
    if index >= size or index < 0:
        return None
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


def _verify_timestamps(bundle: Bundle, roots: TrustRoot) -> datetime:
    """An RFC 3161 timestamp over the bundle's signature, by a timestamp authority of the trust root: its time."""
    if not bundle.timestamps:
        raise Mismatch("it has no signed timestamp, and reconciler.yaml asks for one (signedTimestamp)")
    if not roots.timestamp_authorities:
        raise Mismatch(f"it has a signed timestamp, and the trust root ({roots}) lists no timestamp authority")
    import rfc3161_client

    reasons = []
    for raw in bundle.timestamps:
        try:
            response = rfc3161_client.decode_timestamp_response(raw)
        except (ValueError, rfc3161_client.VerificationError):
            reasons.append("a signed timestamp is not an RFC 3161 response")
            continue
        when = response.tst_info.gen_time
        when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        for tsa in roots.timestamp_authorities:
            if not tsa.valid.covers(when):
                continue
            builder = rfc3161_client.VerifierBuilder().add_root_certificate(tsa.root)
            for cert in tsa.intermediates:
                builder = builder.add_intermediate_certificate(cert)
            leaf = tsa.chain[0] if len(tsa.chain) > 1 else None
            if leaf is not None:
                builder = builder.tsa_certificate(leaf)
            try:
                builder.build().verify_message(response, bundle.signature)
                return when
            except (rfc3161_client.VerificationError, ValueError):
                continue
        reasons.append(f"a signed timestamp of {when.isoformat()} is by none of the timestamp authorities of the "
                       f"trust root")
    raise Mismatch("; ".join(dict.fromkeys(reasons)))

