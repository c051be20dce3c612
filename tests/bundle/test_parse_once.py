"""Converting a bundle parses each manifest file exactly once, and a second conversion parses nothing."""

from __future__ import annotations

import pytest

from reconciler import yamlio
from reconciler.yamlio import codec
from reconciler.bundle import render
from reconciler.model.declarations import InstallSettings
from tests.bundle.test_golden import _v1beta1_crd, _webhook_csv
from tests.unit.helpers import crd_doc, write_bundle


@pytest.fixture
def parses(monkeypatch, tmp_path):
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[str] = []
    real = codec.load_all

    def counting(text, source, **options):
        seen.append(source)
        return real(text, source, **options)

    monkeypatch.setattr(codec, "load_all", counting)   # what yamlio.read_all calls, and yamlio.load_all is
    monkeypatch.setattr(yamlio, "load_all", counting)
    return seen


def test_each_file_parsed_once_then_never_again(tmp_path, parses):
    ref = write_bundle(tmp_path, "bundles/demo", _webhook_csv(), crd_doc(), _v1beta1_crd())
    render(ref, tmp_path, InstallSettings("ns"), "operators")
    assert sorted(parses) == ["manifests/demo.clusterserviceversion.yaml", "manifests/extra-0.yaml",
                              "manifests/extra-1.yaml", "metadata/annotations.yaml"]
    parses.clear()
    again = render(ref, tmp_path, InstallSettings("ns"), "operators")
    assert parses == [] and len(again.objects) > 10


def test_changed_content_is_parsed_again(tmp_path, parses):
    ref = write_bundle(tmp_path, "bundles/demo", None, crd_doc())
    render(ref, tmp_path, InstallSettings("ns"), "operators")
    write_bundle(tmp_path, "bundles/demo", None, crd_doc(plural="gadgets"))
    parses.clear()
    out = render(ref, tmp_path, InstallSettings("ns"), "operators")
    assert "manifests/extra-0.yaml" in parses
    assert [o["metadata"]["name"] for o in out.objects][0] == "gadgets.demo.example.com"
