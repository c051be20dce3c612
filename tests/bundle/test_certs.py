"""The self-signed certificate provider: what it generates, when it reuses, when it rotates."""

from __future__ import annotations

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.bundle import render
from reconciler.bundle.certs import SelfSignedProvider
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
