"""The registry gRPC API as ``opm serve`` answers it, read back into file-based catalog blobs: the same package,
channels and bundle properties as ``opm render`` gives of the directory opm serves."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import registry_api
from reconciler.errors import CatalogError
from tests.olm.support import CORPUS, write_catalog_of

BUNDLES = ["ack-s3-controller/1.10.0", "odoo-operator/0.0.2", "move2kube-operator/0.3.15-rc.0"]
pytestmark = pytest.mark.corpus(missing=not all((CORPUS / "operators" / b).is_dir() for b in BUNDLES),
                                reason="../shared/corpus is absent")


@pytest.fixture(scope="module")
def served(request, tmp_path_factory):
    from bench.peers import opm

    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binary = opm.opm_binary(log=print)
    work = tmp_path_factory.mktemp("grpc")
    write_catalog_of([CORPUS / "operators" / b for b in BUNDLES], work / "catalog",
                     image=lambda d: f"quay.io/corpus/{d.parent.name}-bundle:v{d.name}")
    deprecated = {"schema": "olm.deprecations", "package": "odoo-operator",
                  "entries": [{"reference": {"schema": "olm.package"}, "message": "use something else"}]}
    with open(work / "catalog" / "catalog.json", "a") as f:
        f.write(json.dumps(deprecated) + "\n")
    rendered = subprocess.run([str(binary), "render", str(work / "catalog"), "-o", "json"], capture_output=True,
                              text=True, check=True).stdout
    decoder, blobs, i = json.JSONDecoder(), [], 0
    while i < len(rendered):
        if rendered[i].isspace():
            i += 1
            continue
        blob, i = decoder.raw_decode(rendered, i)
        blobs.append(blob)
    with opm.serve(work / "catalog", work / "serve") as address:
        yield address, blobs


def _props(blob: dict) -> list[tuple[str, str]]:
    return sorted((p["type"], json.dumps(p["value"], sort_keys=True)) for p in blob.get("properties") or [])


def test_what_the_api_serves_is_what_opm_renders_of_the_served_catalog(served):
    address, expected = served
    packages, names = registry_api.read(address, "opm serve", None)
    assert names == tuple(sorted({b["name"] for b in expected if b["schema"] == "olm.package"}))
    for name, blobs in packages.items():
        theirs = [b for b in expected if (b.get("package") or b.get("name")) == name]
        by_schema = lambda bs, s: sorted((b for b in bs if b["schema"] == s), key=lambda b: b.get("name", ""))  # noqa: E731
        (pkg,), (their_pkg,) = by_schema(blobs, "olm.package"), by_schema(theirs, "olm.package")
        assert pkg["defaultChannel"] == their_pkg["defaultChannel"]
        assert [(c["name"], sorted(json.dumps(e, sort_keys=True) for e in c["entries"]))
                for c in by_schema(blobs, "olm.channel")] == \
               [(c["name"], sorted(json.dumps(e, sort_keys=True) for e in c["entries"]))
                for c in by_schema(theirs, "olm.channel")]
        ours, opms = by_schema(blobs, "olm.bundle"), by_schema(theirs, "olm.bundle")
        assert [(b["name"], b["package"], b["image"]) for b in ours] == [(b["name"], b["package"], b["image"])
                                                                         for b in opms]
        for mine, their in zip(ours, opms):
            assert _props(mine) == _props(their), mine["name"]
    assert by_schema(packages["odoo-operator"], "olm.deprecations")[0]["entries"] == [
        {"reference": {"schema": "olm.package"}, "message": "use something else"}]


def test_only_the_packages_asked_for_are_read(served):
    address, _ = served
    packages, names = registry_api.read(address, "opm serve", frozenset({"odoo-operator"}))
    assert list(packages) == ["odoo-operator"] and len(names) == 3


def test_an_address_where_nothing_serves_is_said_so():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(CatalogError, match=f"cannot reach the registry server at 127.0.0.1:{port}: nothing answers"):
        registry_api.read(f"127.0.0.1:{port}", "CatalogSource ns/x", None)
