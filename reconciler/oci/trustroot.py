"""Trust roots for certificate-based signatures, given from outside the repository they judge.

A key kept in the repository is as trusted as the signed commit that holds
it; a certificate authority is not something a repository should be able to
name for itself, so the roots come from whoever runs the reconciler:
``--trust-root FILE`` (repeatable) or ``$RECONCILER_TRUST_ROOT`` (files
separated by ``:``), in the cluster a Secret or ConfigMap mounted as a file.

Two kinds of file are read, told apart by their first byte:

* a Sigstore ``trusted_root.json`` (``application/vnd.dev.sigstore.trustedroot
  +json``, the file ``cosign trusted-root create`` writes and the public
  instance publishes through TUF): its certificate authorities (Fulcio), its
  transparency logs (Rekor, the keys of inclusion proofs, checkpoints and
  signed entry timestamps) and its timestamp authorities (RFC 3161), each with
  the period it is valid for;
* a PEM bundle of CA certificates, for a private PKI acting as Fulcio: each
  certificate is a root, valid as its own dates say; no log, no TSA.

The JSON is the protobuf-specs mapping of ``TrustedRoot``; it is read here
field by field (see ``sigstore.py`` for why no library parses it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reconciler.errors import ReconcilerError

ENV = "RECONCILER_TRUST_ROOT"
TRUSTED_ROOT_TYPES = ("application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                      "application/vnd.dev.sigstore.trustedroot.v0.2+json")
MAX_FILE_BYTES = 4 * 1024 * 1024


class TrustRootError(ReconcilerError):
    """A trust root file cannot be read, or none was given where a policy needs one."""


@dataclass(frozen=True)
class Validity:
    """When a root or key may be used: ``start`` to ``end`` (open when None)."""

    start: datetime | None = None
    end: datetime | None = None

    def covers(self, when: datetime) -> bool:
        return (self.start is None or self.start <= when) and (self.end is None or when <= self.end)


@dataclass(frozen=True)
class Authority:
    """A certificate authority (or a timestamp authority): its chain, root last, and its validity."""

    name: str
    chain: tuple[Any, ...]          # cryptography x509.Certificate, the root last
    valid: Validity = Validity()

    @property
    def root(self) -> Any:
        return self.chain[-1]

    @property
    def intermediates(self) -> tuple[Any, ...]:
        return self.chain[:-1]


@dataclass(frozen=True)
class LogKey:
    """A transparency log's public key, named by its log id (the SHA-256 of the key's DER form)."""

    url: str
    log_id: bytes
    key: Any
    valid: Validity = Validity()


@dataclass(frozen=True)
class TrustRoot:
    """Everything the files given trust: certificate authorities, logs and timestamp authorities."""

    files: tuple[str, ...] = ()
    authorities: tuple[Authority, ...] = ()
    logs: tuple[LogKey, ...] = ()
    timestamp_authorities: tuple[Authority, ...] = ()

    def log(self, log_id: bytes) -> LogKey | None:
        return next((log for log in self.logs if log.log_id == log_id), None)

    def __str__(self) -> str:
        return ", ".join(self.files) if self.files else "no trust root"


_explicit: tuple[str, ...] | None = None
_loaded: dict[tuple[str, ...], TrustRoot] = {}


def use(paths: list[str] | tuple[str, ...] | None) -> None:
    """The trust root files of this run (``--trust-root``); None falls back to ``$RECONCILER_TRUST_ROOT``."""
    global _explicit
    _explicit = tuple(paths) if paths else None


def configured() -> tuple[str, ...]:
    if _explicit is not None:
        return _explicit
    return tuple(p for p in os.environ.get(ENV, "").split(os.pathsep) if p)


def current() -> TrustRoot:
    """The trust root of this run, read once per set of files (an empty one when none is given)."""
    paths = configured()
    if paths not in _loaded:
        _loaded[paths] = load(paths)
    return _loaded[paths]


def load(paths: tuple[str, ...]) -> TrustRoot:
    authorities: list[Authority] = []
    logs: list[LogKey] = []
    tsas: list[Authority] = []
    for path in paths:
        try:
            data = Path(path).read_bytes()[:MAX_FILE_BYTES + 1]
        except OSError as exc:
            raise TrustRootError(f"cannot read the trust root: {exc.strerror}", path=path,
                                 hint=f"give a Sigstore trusted_root.json or a PEM bundle of CA certificates "
                                      f"(--trust-root, ${ENV})") from None
        if len(data) > MAX_FILE_BYTES:
            raise TrustRootError(f"the trust root is over {MAX_FILE_BYTES} bytes", path=path)
        if data.lstrip()[:1] == b"{":
            a, lg, t = _trusted_root_json(data, path)
            authorities += a
            logs += lg
            tsas += t
        else:
            authorities += _pem_bundle(data, path)
    return TrustRoot(tuple(paths), tuple(authorities), tuple(logs), tuple(tsas))


def _pem_bundle(data: bytes, path: str) -> list[Authority]:
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TrustRootError("the file is neither a Sigstore trusted_root.json nor PEM certificates", path=path,
                             hint="a private PKI's root is given as its CA certificates in PEM "
                                  "(-----BEGIN CERTIFICATE-----)") from None
    return [Authority(f"{path}: {cert.subject.rfc4514_string()}", (cert,)) for cert in certs]


def _trusted_root_json(data: bytes, path: str) -> tuple[list[Authority], list[LogKey], list[Authority]]:
    try:
        doc = json.loads(data)
    except ValueError:
        raise TrustRootError("the trust root is not valid JSON", path=path) from None
    if not isinstance(doc, dict) or doc.get("mediaType") not in TRUSTED_ROOT_TYPES:
        media = doc.get("mediaType") if isinstance(doc, dict) else None
        raise TrustRootError(f"not a Sigstore trusted root (mediaType {media!r})", path=path,
                             hint=f"expected one of {', '.join(TRUSTED_ROOT_TYPES)}, as `cosign trusted-root "
                                  f"create` writes")
    try:
        authorities = [_authority(ca, path, "certificateAuthorities") for ca in doc.get("certificateAuthorities") or []]
        tsas = [_authority(ca, path, "timestampAuthorities") for ca in doc.get("timestampAuthorities") or []]
        logs = [_log(t, path) for t in doc.get("tlogs") or []]
    except TrustRootError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        detail = f"it has no field {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else \
            "a field has the wrong type or encoding"
        raise TrustRootError(f"the trusted root is malformed ({detail})", path=path,
                             hint="give the file as the Sigstore instance publishes it, or as `cosign trusted-root "
                                  "create` writes it") from None
    return authorities, logs, tsas


def _authority(doc: dict, path: str, kind: str) -> Authority:
    from cryptography import x509

    certs = tuple(x509.load_der_x509_certificate(b64(c["rawBytes"])) for c in doc["certChain"]["certificates"])
    if not certs:
        raise TrustRootError(f"{kind}: an authority lists no certificates", path=path)
    subject = doc.get("subject") or {}
    name = doc.get("uri") or subject.get("commonName") or certs[-1].subject.rfc4514_string()
    return Authority(f"{path}: {name}", certs, _validity(doc.get("validFor")))


def _log(doc: dict, path: str) -> LogKey:
    from cryptography.hazmat.primitives import serialization

    raw = b64(doc["publicKey"]["rawBytes"])
    key = serialization.load_der_public_key(raw)
    log_id = b64(doc["logId"]["keyId"])
    return LogKey(str(doc.get("baseUrl") or path), log_id, key, _validity(doc["publicKey"].get("validFor")))


def _validity(doc: Any) -> Validity:
    if not isinstance(doc, dict):
        return Validity()
    return Validity(_time(doc.get("start")), _time(doc.get("end")))


def _time(text: Any) -> datetime | None:
    """An RFC 3339 time as protobuf JSON writes it (``Z``, up to nanoseconds)."""
    if not text:
        return None
    value = str(text).replace("Z", "+00:00")
    if "." in value:   # fromisoformat takes at most microseconds
        head, _, rest = value.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        value = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits):]}"
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def b64(text: Any) -> bytes:
    """protobuf JSON ``bytes``: standard or URL-safe base64, padding optional."""
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    s = text.strip().replace("-", "+").replace("_", "/")
    return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)


def key_id(key: Any) -> bytes:
    """The SHA-256 of a public key's DER SubjectPublicKeyInfo: how Sigstore names a log's key."""
    from cryptography.hazmat.primitives import serialization

    return hashlib.sha256(key.public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)).digest()
