"""The self-signed certificate provider: what it generates, when it reuses, when it rotates."""

from __future__ import annotations

import base64
import datetime
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.bundle import render
from reconciler.bundle.certs import CA_HASH_ANNOTATION, SelfSignedProvider
from reconciler.model.declarations import InstallSettings
from tests.bundle.test_golden import _webhook_csv
from tests.unit.helpers import by_kind, crd_doc, write_bundle

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


def _load(b64: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(b64))


def _secret(cert) -> dict:
    (secret,) = cert.objects
    return secret


def test_generated_certificate_is_signed_by_the_ca_bundle():
    made = SelfSignedProvider(now=lambda: NOW).service_cert("ns", "svc")
    secret = _secret(made)
    assert secret["metadata"] == {"name": "svc-cert", "namespace": "ns",
                                  "annotations": {"reconciler.dev/certificate-not-after": "2032-01-01T00:00:00Z"}}
    assert made.ca_bundle == secret["data"]["ca.crt"]
    leaf, ca = _load(secret["data"]["tls.crt"]), _load(made.ca_bundle)
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["svc.ns.svc", "svc.ns.svc.cluster.local"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.not_valid_after_utc == NOW + datetime.timedelta(days=730)
    assert isinstance(leaf.public_key(), ec.EllipticCurvePublicKey)


def test_one_certificate_per_service_per_render():
    provider = SelfSignedProvider()
    assert provider.service_cert("ns", "svc") is provider.service_cert("ns", "svc")
    assert provider.service_cert("ns", "svc").ca_bundle != provider.service_cert("ns", "other").ca_bundle


def test_live_certificate_reused_until_it_nears_expiry():
    first = SelfSignedProvider(now=lambda: NOW).service_cert("ns", "svc")
    live = _secret(first)
    lookups = []

    def lookup(ns, name):
        lookups.append((ns, name))
        return live

    later = NOW + datetime.timedelta(days=600)
    reused = SelfSignedProvider(lookup=lookup, now=lambda: later).service_cert("ns", "svc")
    assert lookups == [("ns", "svc-cert")]
    assert reused.ca_bundle == first.ca_bundle and _secret(reused)["data"] == live["data"]
    # 29 days before expiry (renewal starts 30 days before): a new pair
    near = NOW + datetime.timedelta(days=701)
    rotated = SelfSignedProvider(lookup=lambda ns, n: live, now=lambda: near).service_cert("ns", "svc")
    assert rotated.ca_bundle != first.ca_bundle
    assert _load(_secret(rotated)["data"]["tls.crt"]).not_valid_after_utc == near + datetime.timedelta(days=730)


def test_live_certificate_for_other_names_or_garbage_is_replaced():
    other = _secret(SelfSignedProvider(now=lambda: NOW).service_cert("other-ns", "svc"))
    fresh = SelfSignedProvider(lookup=lambda ns, n: other, now=lambda: NOW).service_cert("ns", "svc")
    assert fresh.ca_bundle != other["data"]["ca.crt"]
    garbage = {"data": {"tls.crt": "bm9wZQ==", "tls.key": "", "ca.crt": "bm9wZQ=="}}
    assert SelfSignedProvider(lookup=lambda ns, n: garbage).service_cert("ns", "svc").ca_bundle


def test_webhook_objects_carry_the_ca_of_the_mounted_secret(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo", _webhook_csv(), crd_doc())
    out = render(ref, tmp_path, InstallSettings("demo-ns"), "operators", SelfSignedProvider())
    (secret,) = [s for s in by_kind(out.objects, "Secret", "") if s["metadata"]["name"] == "demo-webhook-service-cert"]
    ca = secret["data"]["ca.crt"]
    (vwh,) = by_kind(out.objects, "ValidatingWebhookConfiguration", "admissionregistration.k8s.io")
    (mwh,) = by_kind(out.objects, "MutatingWebhookConfiguration", "admissionregistration.k8s.io")
    (crd,) = by_kind(out.objects, "CustomResourceDefinition", "apiextensions.k8s.io")
    assert vwh["webhooks"][0]["clientConfig"]["caBundle"] == ca
    assert mwh["webhooks"][0]["clientConfig"]["caBundle"] == ca
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == ca
    dep = next(d for d in by_kind(out.objects, "Deployment", "apps") if d["metadata"]["name"] == "demo-webhook")
    vols = {v["name"]: v["secret"]["secretName"] for v in dep["spec"]["template"]["spec"]["volumes"]}
    # the bundle's volume on the webhook path ("cert", secret "stale") is gone with its mount
    assert vols == {"webhook-cert": "demo-webhook-service-cert", "apiservice-cert": "demo-webhook-service-cert"}
    # OLM v0's annotation, made as OLM makes it: a new CA changes the pod template, which rolls the pods
    assert dep["spec"]["template"]["metadata"]["annotations"][CA_HASH_ANNOTATION] == \
        hashlib.sha256(base64.b64decode(ca)).hexdigest()
    mounts = dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    # the bundle's own mount on the webhook path is replaced by the managed certificate
    assert {m["mountPath"]: m["name"] for m in mounts} == {
        "/tmp/k8s-webhook-server/serving-certs": "webhook-cert",
        "/apiserver.local.config/certificates": "apiservice-cert"}


def test_cert_manager_certificate_asks_for_what_olm_serves():
    # OLM's serving certificate: CN <service>.<namespace>, that name and the .svc names, server auth only,
    # two years, renewed a day before expiry; a self-signed Issuer named after the certificate
    from reconciler.bundle.certs import CERT_MANAGER_INJECT, CertManagerProvider

    made = CertManagerProvider().service_cert("ns", "svc")
    issuer, certificate = made.objects
    assert issuer == {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                      "metadata": {"name": "svc-cert-selfsigned-issuer", "namespace": "ns"},
                      "spec": {"selfSigned": {}}}
    assert certificate["metadata"] == {"name": "svc-cert", "namespace": "ns"}
    assert certificate["spec"] == {
        "secretName": "svc-cert", "commonName": "svc.ns",
        "dnsNames": ["svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"], "usages": ["server auth"],
        "issuerRef": {"name": "svc-cert-selfsigned-issuer"}, "duration": "17520h0m0s", "renewBefore": "24h0m0s"}
    assert made.secret_name == "svc-cert" and made.annotations == {CERT_MANAGER_INJECT: "ns/svc-cert"}


def _olm_secret(namespace: str, service: str, signer=None) -> dict:
    """A serving Secret shaped as OLM v0 writes it: the CA's PEM under olmCAKey, three host names, an RSA key."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Red Hat, Inc."),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key, key = rsa.generate_private_key(65537, 2048), rsa.generate_private_key(65537, 2048)
    start, end = NOW - datetime.timedelta(days=1), NOW + datetime.timedelta(days=729)
    ca = (x509.CertificateBuilder().subject_name(name("olm-selfsigned")).issuer_name(name("olm-selfsigned"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    hosts = [f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
    leaf = (x509.CertificateBuilder().subject_name(name(hosts[0])).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(2).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
            .sign(signer or ca_key, hashes.SHA256()))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    pem = serialization.Encoding.PEM
    return {"metadata": {"name": f"{service}-cert", "namespace": namespace,
                         "annotations": {"olmcahash": hashlib.sha256(ca.public_bytes(pem)).hexdigest()}},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": b64(leaf.public_bytes(pem)),
                     "tls.key": b64(key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                                      serialization.NoEncryption())),
                     "olmCAKey": b64(ca.public_bytes(pem))}}


def test_olm_v0_certificate_is_taken_as_it_is():
    """A takeover keeps the pair OLM v0 made: same serving certificate and key, its CA as caBundle, and the
    pod-template hash OLM stamped (so the template does not change)."""
    olm = _olm_secret("ns", "svc")
    taken = SelfSignedProvider(lookup=lambda ns, n: olm, now=lambda: NOW).service_cert("ns", "svc")
    data = _secret(taken)["data"]
    assert (data["tls.crt"], data["tls.key"]) == (olm["data"]["tls.crt"], olm["data"]["tls.key"])
    assert taken.ca_bundle == data["ca.crt"] == olm["data"]["olmCAKey"]
    assert taken.pod_annotations == {CA_HASH_ANNOTATION: olm["metadata"]["annotations"]["olmcahash"]}
    # what the reconciler wrote back (ca.crt beside OLM's olmCAKey) is reused as its own on the next render
    written = {**olm, "data": {**olm["data"], **data}}
    again = SelfSignedProvider(lookup=lambda ns, n: written, now=lambda: NOW).service_cert("ns", "svc")
    assert again == taken
    # near expiry the reconciler renews it with a CA of its own: a new hash, so the pods roll onto it
    near = NOW + datetime.timedelta(days=710)
    renewed = SelfSignedProvider(lookup=lambda ns, n: written, now=lambda: near).service_cert("ns", "svc")
    assert renewed.ca_bundle != taken.ca_bundle
    assert renewed.pod_annotations[CA_HASH_ANNOTATION] == \
        hashlib.sha256(base64.b64decode(renewed.ca_bundle)).hexdigest() != taken.pod_annotations[CA_HASH_ANNOTATION]
    _load(_secret(renewed)["data"]["tls.crt"]).verify_directly_issued_by(_load(renewed.ca_bundle))


def test_olm_v0_certificate_not_signed_by_its_ca_is_replaced():
    from cryptography.hazmat.primitives.asymmetric import rsa

    forged = _olm_secret("ns", "svc", signer=rsa.generate_private_key(65537, 2048))
    made = SelfSignedProvider(lookup=lambda ns, n: forged, now=lambda: NOW).service_cert("ns", "svc")
    assert made.ca_bundle != forged["data"]["olmCAKey"]
    assert _secret(made)["data"]["tls.crt"] != forged["data"]["tls.crt"]
