"""Serving certificates for the webhooks and APIServices a bundle declares, behind one interface.

A webhook Service needs a TLS certificate, and the object that calls it (a
webhook configuration, a CRD's conversion webhook, an APIService) needs the
CA that signed it. ``CertificateProvider`` hides who makes them:

* ``SelfSignedProvider``: the reconciler generates a CA and a serving
  certificate itself and ships them as a Secret, with the CA inlined as
  ``caBundle``. To keep rendering stable it first asks ``lookup`` for the
  Secret already in the cluster and reuses it while it is valid for more
  than ``renew_before``; closer to expiry (or when the DNS names changed) it
  generates a new pair, so a reconcile loop rotates certificates before
  they expire.
* ``CertManagerProvider``: cert-manager objects (a self-signed ``Issuer`` and
  a ``Certificate`` per Service), with the CA injected by cert-manager's
  cainjector through the ``cert-manager.io/inject-ca-from`` annotation.

Both write the Secret ``<service>-cert`` with ``tls.crt``/``tls.key``, the
name and keys OLM uses, which the deployments mount.

OLM v0 keeps the CA of the same Secret under ``olmCAKey`` (not ``ca.crt``),
names one more host in its certificates (``<service>.<namespace>``) and
stamps the SHA-256 of the CA's PEM on the Secret and on the pod template
(``olmcahash``). The self-signed provider takes such a Secret as its own
while it is valid, and stamps the same hash on the pod templates of every
pair it hands out: a takeover then changes neither the certificate the pods
serve, nor the ``caBundle`` that trusts it, nor the pod template; a later
renewal changes the hash, so the pods roll onto the new certificate, as OLM
rolls them.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field
from typing import Callable, Protocol

from reconciler.model.kube import Manifest

CERT_MANAGER_INJECT = "cert-manager.io/inject-ca-from"
SELF_SIGNED_ANNOTATION = "reconciler.dev/certificate-not-after"
CA_HASH_ANNOTATION = "olmcahash"   # OLM v0's pod-template annotation: the SHA-256 of the CA's PEM, in hex
OLM_CA_KEY = "olmCAKey"            # where OLM v0 keeps the CA's PEM in a serving certificate's Secret

Lookup = Callable[[str, str], "Manifest | None"]  # (namespace, name) -> the live Secret, or None


@dataclass(frozen=True)
class ServiceCert:
    """What a provider returns for one Service: objects to apply and how callers trust it."""

    secret_name: str
    objects: tuple[Manifest, ...]
    ca_bundle: str | None = None                       # base64 PEM, set in caBundle fields
    annotations: dict[str, str] = field(default_factory=dict)  # set on the objects that call the Service
    pod_annotations: dict[str, str] = field(default_factory=dict)  # set on the pod templates that serve it


class CertificateProvider(Protocol):
    name: str

    def service_cert(self, namespace: str, service: str) -> ServiceCert: ...


def secret_name(service: str) -> str:
    return f"{service}-cert"


def dns_names(namespace: str, service: str) -> list[str]:
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


@dataclass
class SelfSignedProvider:
    """Certificates the reconciler generates, reused from the cluster until they near expiry."""

    lookup: Lookup | None = None
    validity: datetime.timedelta = datetime.timedelta(days=730)
    renew_before: datetime.timedelta = datetime.timedelta(days=30)
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc)
    name: str = "self-signed"
    _made: dict[tuple[str, str], ServiceCert] = field(default_factory=dict, repr=False)

    def service_cert(self, namespace: str, service: str) -> ServiceCert:
        key = (namespace, service)
        if key not in self._made:  # one pair per Service per render, even if several callers ask
            self._made[key] = self._reuse(namespace, service) or self._generate(namespace, service)
        return self._made[key]

    def _reuse(self, namespace: str, service: str) -> ServiceCert | None:
        if self.lookup is None:
            return None
        live = self.lookup(namespace, secret_name(service))
        data = (live or {}).get("data") or {}
        ca = data.get("ca.crt") or data.get(OLM_CA_KEY)   # ours, or the one OLM v0 made
        if not (ca and "tls.crt" in data and "tls.key" in data):
            return None
        from cryptography import x509
        from cryptography.exceptions import InvalidSignature

        try:
            cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
            authority = x509.load_pem_x509_certificate(base64.b64decode(ca))
            cert.verify_directly_issued_by(authority)
        except (ValueError, TypeError, InvalidSignature):
            return None
        if cert.not_valid_after_utc - self.renew_before <= self.now():
            return None
        try:
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return None
        if not set(dns_names(namespace, service)) <= set(names.get_values_for_type(x509.DNSName)):
            return None   # (OLM v0's certificates name <service>.<namespace> too, which does no harm)
        return self._result(namespace, service, data["tls.crt"], data["tls.key"], ca, cert.not_valid_after_utc)

    def _generate(self, namespace: str, service: str) -> ServiceCert:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = self.now()
        not_after = now + self.validity
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service[:50]} CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(not_after)
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False, encipher_only=False,
                                           decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        names = dns_names(namespace, service)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(not_after)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return self._result(
            namespace, service, b64(cert.public_bytes(serialization.Encoding.PEM)),
            b64(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())),
            b64(ca.public_bytes(serialization.Encoding.PEM)), not_after)

    def _result(self, namespace: str, service: str, crt: str, key: str, ca: str,
                not_after: datetime.datetime) -> ServiceCert:
        secret: Manifest = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret_name(service), "namespace": namespace,
                         "annotations": {SELF_SIGNED_ANNOTATION: not_after.strftime("%Y-%m-%dT%H:%M:%SZ")}},
            "data": {"tls.crt": crt, "tls.key": key, "ca.crt": ca},
        }
        return ServiceCert(secret_name(service), (secret,), ca_bundle=ca,
                           pod_annotations={CA_HASH_ANNOTATION: ca_hash(ca)})


@dataclass(frozen=True)
class CertManagerProvider:
    """cert-manager ``Issuer`` + ``Certificate`` objects; cert-manager must run in the cluster.

    The Certificate asks for what OLM's own serving certificates are (and what
    operator-controller's cert-manager provider asks for): common name
    ``<service>.<namespace>``, that name and the two ``.svc`` names, server
    auth only, valid two years and renewed a day before expiry.
    """

    name: str = "cert-manager"

    def service_cert(self, namespace: str, service: str) -> ServiceCert:
        from reconciler.model.kube import bounded_name

        certificate = bounded_name(service, "cert")
        issuer = bounded_name(certificate, "selfsigned-issuer")
        objects: tuple[Manifest, ...] = (
            {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
             "metadata": {"name": issuer, "namespace": namespace}, "spec": {"selfSigned": {}}},
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
             "metadata": {"name": certificate, "namespace": namespace},
             "spec": {"secretName": secret_name(service), "commonName": f"{service}.{namespace}",
                      "dnsNames": [f"{service}.{namespace}", *dns_names(namespace, service)],
                      "usages": ["server auth"], "issuerRef": {"name": issuer},
                      "duration": "17520h0m0s", "renewBefore": "24h0m0s"}},
        )
        return ServiceCert(secret_name(service), objects,
                           annotations={CERT_MANAGER_INJECT: f"{namespace}/{certificate}"})


def ca_hash(ca_bundle: str) -> str:
    """OLM v0's ``olmcahash`` of a CA given base64-encoded, as a Secret and a ``caBundle`` hold it."""
    import hashlib

    return hashlib.sha256(base64.b64decode(ca_bundle)).hexdigest()


def cluster_lookup(kube: object) -> Lookup:
    """A ``Lookup`` reading Secrets from a cluster (``reconciler.kube.client.Kube``); errors mean "none"."""

    def lookup(namespace: str, name: str) -> Manifest | None:
        from reconciler.errors import ClusterError

        try:
            info = kube.resource("v1", "Secret")  # type: ignore[attr-defined]
            return kube.get(info, namespace, name) if info else None  # type: ignore[attr-defined]
        except ClusterError:
            return None

    return lookup


__all__ = ["ca_hash", "cluster_lookup", "CA_HASH_ANNOTATION", "CERT_MANAGER_INJECT", "OLM_CA_KEY", "CertManagerProvider", "CertificateProvider", "SelfSignedProvider", "ServiceCert",
           "dns_names", "secret_name"]
