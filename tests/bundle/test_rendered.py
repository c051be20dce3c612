"""A rendering is reused across processes while its content, settings and certificates are the same."""

from __future__ import annotations

import datetime

import pytest

from reconciler.bundle import registry_v1, render
from reconciler.bundle.certs import SelfSignedProvider
from reconciler.model.declarations import InstallSettings
from reconciler.model.deployconfig import DeploymentConfig
from tests.bundle.test_golden import _webhook_csv
from tests.unit.helpers import crd_doc, csv_doc, write_bundle

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture
def conversions(monkeypatch, tmp_path) -> list[str]:
    """The bundles converted, in order; each test has its own cache directory."""
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[str] = []
    real = registry_v1.convert

    def counting(content, *args):
        seen.append(content.name)
        return real(content, *args)
    monkeypatch.setattr(registry_v1, "convert", counting)
    return seen


def test_an_unchanged_bundle_is_converted_once(tmp_path, conversions):
    ref = write_bundle(tmp_path, "bundles/demo", csv_doc(), crd_doc())
    first = render(ref, tmp_path, InstallSettings("demo-ns"), "operators")
    again = render(ref, tmp_path, InstallSettings("demo-ns"), "operators")
    assert again == first and len(conversions) == 1
    other = render(ref, tmp_path, InstallSettings("other-ns"), "operators")   # other settings: converted
    assert other.namespace == "other-ns" and len(conversions) == 2
    configured = render(ref, tmp_path, InstallSettings("other-ns", config=DeploymentConfig.of(
        {"nodeSelector": {"disk": "ssd"}})), "operators")                            # another spec.config: converted
    assert len(conversions) == 3 and configured.objects != other.objects
    conversions.pop()
    write_bundle(tmp_path, "bundles/demo", csv_doc(version="1.0.1"), crd_doc())   # other content: converted
    assert render(ref, tmp_path, InstallSettings("demo-ns"), "operators").digest != first.digest
    assert len(conversions) == 3


def test_a_webhook_bundle_is_reused_only_with_the_same_certificates(tmp_path, conversions):
    ref = write_bundle(tmp_path, "bundles/demo", _webhook_csv(), crd_doc())
    made = SelfSignedProvider(now=lambda: NOW)
    first = render(ref, tmp_path, InstallSettings("demo-ns"), "operators", made)
    secret = next(o for o in first.objects if o["kind"] == "Secret")

    def from_cluster(days: int) -> SelfSignedProvider:   # the Secret as the cluster holds it, days later
        return SelfSignedProvider(lookup=lambda ns, name: secret if name == secret["metadata"]["name"] else None,
                                  now=lambda: NOW + datetime.timedelta(days=days))
    assert render(ref, tmp_path, InstallSettings("demo-ns"), "operators", from_cluster(10)) == first
    assert len(conversions) == 1
    renewed = render(ref, tmp_path, InstallSettings("demo-ns"), "operators", from_cluster(720))   # near expiry
    assert len(conversions) == 2 and next(o for o in renewed.objects if o["kind"] == "Secret") != secret
    # without a provider, every render makes new certificates, as the converter alone does
    fresh = [render(ref, tmp_path, InstallSettings("demo-ns"), "operators") for _ in range(2)]
    assert len(conversions) == 4 and fresh[0] != fresh[1]
