"""What the OLM tests share: the corpus bundle they install, when they can run, the catalog they serve."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.localcluster.olmv0 import olm_present

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
# A registry+v1 bundle with every install mode, no webhook and no dependency: OLM installs it alone.
BUNDLE = CORPUS / "operators" / "ecr-secret-operator" / "0.6.0"
OLM_BUILDS = olm_present() or shutil.which("go") is not None
needs_olm = pytest.mark.skipif(not OLM_BUILDS, reason="OLM v0 is not built and `go` is not on PATH to build it")
needs_corpus = pytest.mark.skipif(not BUNDLE.is_dir(), reason="../shared/corpus is absent")


def uncaptured(request: pytest.FixtureRequest):
    """Output capture off for the block: it would hide the progress of a build that takes minutes."""
    return request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled()


def write_catalog(bundle_dir: Path, catalog_dir: Path) -> dict:
    """A file-based catalog of the bundle alone, in its default channel; returns the bundle's blob."""
    from reconciler import yamlio

    done = subprocess.run([sys.executable, "-m", "reconciler", "catalog", "render", str(bundle_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    blob = json.loads(done.stdout)
    annotations = yamlio.read_all(bundle_dir / "metadata" / "annotations.yaml")[0]["annotations"]
    channel = annotations["operators.operatorframework.io.bundle.channel.default.v1"]
    catalog_dir.mkdir(parents=True)
    (catalog_dir / "catalog.json").write_text("\n".join(json.dumps(doc) for doc in (
        {"schema": "olm.package", "name": blob["package"], "defaultChannel": channel},
        {"schema": "olm.channel", "package": blob["package"], "name": channel, "entries": [{"name": blob["name"]}]},
        blob)) + "\n")
    return blob
