"""Certificates and keys for a throwaway local control plane.

Two separate CAs, as in a kubeadm cluster: one signs the apiserver's serving
certificate, the other signs client certificates (the apiserver trusts any
certificate from it, reading the user from CN and the groups from O). Keys are
ECDSA P-256: generating them takes microseconds, so every cluster start gets a
fresh PKI instead of a shared, long-lived one.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
# Tolerate a host clock that is slightly behind the one that issued the certificate.
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files one control plane uses."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def client_ca_cert(self) -> Path:
        return self.directory / "client-ca.crt"

    @property
    def client_ca_key(self) -> Path:
        return self.directory / "client-ca.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    def client_cert(self, user: str) -> Path:
        return self.directory / f"user-{slug(user)}.crt"

    def client_key(self, user: str) -> Path:
        return self.directory / f"user-{slug(user)}.key"


def create_pki(directory: Path) -> Pki:
    """Write a fresh CA, serving certificate, client CA and service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)

    ca_key = _new_key()
    ca = _ca_certificate("reconciler-local-ca", ca_key)
    _write_cert(pki.ca_cert, ca)

    serving_key = _new_key()
    serving = _issue(
        "kube-apiserver", [], serving_key, ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH,
        san=x509.SubjectAlternativeName([
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]))
    _write_cert(pki.serving_cert, serving)
    _write_key(pki.serving_key, serving_key)

    client_ca_key = _new_key()
    _write_cert(pki.client_ca_cert, _ca_certificate("reconciler-local-client-ca", client_ca_key))
    _write_key(pki.client_ca_key, client_ca_key)

    sa_key = _new_key()
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki


def issue_client_cert(pki: Pki, user: str, groups: list[str]) -> tuple[Path, Path]:
    """Sign a client certificate for ``user`` in ``groups``; return (cert, key) paths."""
    ca_key = serialization.load_pem_private_key(pki.client_ca_key.read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(pki.client_ca_cert.read_bytes())
    key = _new_key()
    cert = _issue(user, groups, key, ca, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH)
    _write_cert(pki.client_cert(user), cert)
    _write_key(pki.client_key(user), key)
    return pki.client_cert(user), pki.client_key(user)


def slug(text: str) -> str:
    """``text`` made safe as part of a file name (user names may contain ':' or '/')."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca_certificate(common_name: str, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _issue(common_name: str, organizations: list[str], key: ec.EllipticCurvePrivateKey,
           ca: x509.Certificate, ca_key, usage: x509.ObjectIdentifier,
           san: x509.SubjectAlternativeName | None = None) -> x509.Certificate:
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _builder(subject, ca.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=False, key_cert_sign=False, crl_sign=False,
            content_commitment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
    )


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.touch(mode=0o600)
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))


@dataclass(frozen=True)
class LoopbackTls:
    """A CA (alone in its directory, as cert-pool directories want it) and a serving certificate for 127.0.0.1."""

    ca_dir: Path
    cert: Path
    key: Path

    @property
    def ca_cert(self) -> Path:
        return self.ca_dir / "ca.crt"


def create_loopback_tls(directory: Path) -> LoopbackTls:
    """A fresh CA and a serving certificate for 127.0.0.1 and localhost, for servers a plane's peers run on loopback
    (OLM v1's catalog server and webhook, an HTTPS registry)."""
    tls = LoopbackTls(directory / "ca", directory / "serving.crt", directory / "serving.key")
    tls.ca_dir.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key()
    ca = _ca_certificate("reconciler-loopback-ca", ca_key)
    _write_cert(tls.ca_cert, ca)
    key = _new_key()
    _write_cert(tls.cert, _issue("127.0.0.1", [], key, ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH,
                                 san=x509.SubjectAlternativeName([
                                     x509.DNSName("localhost"),
                                     x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])))
    _write_key(tls.key, key)
    return tls
