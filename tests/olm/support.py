"""What the OLM tests share: the corpus bundle they install, when they can run, the catalog they serve."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.localcluster.olmv0 import olm_present

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
# A registry+v1 bundle with every install mode, no webhook and no dependency: OLM installs it alone.
BUNDLE = CORPUS / "operators" / "ecr-secret-operator" / "0.6.0"
OLM_BUILDS = olm_present() or shutil.which("go") is not None
needs_olm = pytest.mark.olm(missing=not OLM_BUILDS, reason="OLM v0 is not built and `go` is not on PATH to build it")
needs_corpus = pytest.mark.corpus(missing=not BUNDLE.is_dir(), reason="../shared/corpus is absent")


GROUP = "operators.coreos.com"
WAIT = 240.0


def olm_logs(plane) -> Callable[[], str]:
    """The end of OLM's logs on ``plane``: what a wait on OLM (``tests.support.wait``) shows when it runs out."""
    return lambda: "\n".join(f"--- {name}.log\n" + (plane.state_dir / f"{name}.log").read_text(errors="replace")[-3000:]
                             for name in ("catalog-operator", "olm-operator"))


# seconds between the full resyncs of both OLM controllers on the OLM tests' planes (their --interval): short,
# so that a test waits through whole resyncs of OLM after a takeover (``wait_resynced``)
INTERVAL = 10


def resynced(plane, since: float, namespaces: list[str]) -> bool:
    """Whether both OLM controllers of ``plane`` (run with ``olm_interval``) have resynced since ``since`` (a
    time): catalog-operator began a sync of each namespace (``resolving sources``, logged whether or not the
    namespace still has Subscriptions) two of its longest resync periods later (each informer resyncs every
    ``--interval`` give or take 20%); olm-operator takes the same interval, so it has resynced every CSV by then
    too."""
    import datetime as dt
    import re

    assert plane.olm_interval, "OLM runs with its default resync of minutes on this plane: give it olm_interval"
    late = since + 2 * 1.2 * plane.olm_interval
    seen = set()
    for line in (plane.state_dir / "catalog-operator.log").read_text(errors="replace").splitlines():
        found = re.match(r'time="([^"]+)".*msg="resolving sources".* namespace=(\S+)', line)
        if found and dt.datetime.fromisoformat(found.group(1).replace("Z", "+00:00")).timestamp() >= late:
            seen.add(found.group(2))
    return set(namespaces) <= seen


def wait_resynced(plane, namespaces: list[str], since: float | None = None) -> None:
    """Wait until both OLM controllers of ``plane`` have resynced ``namespaces`` fully since ``since`` (now, by
    default): what a takeover must survive is whatever OLM does on its next passes, not in the next seconds."""
    import time

    from tests.support.wait import wait_until

    since = time.time() if since is None else since
    wait_until(lambda: resynced(plane, since, namespaces), "a full resync of both OLM controllers",
               timeout=plane.olm_interval * 8, diagnose=olm_logs(plane))


def get(api, namespace: str, plural: str, name: str, version: str = "v1alpha1") -> dict | None:
    """An OLM object, or None when there is none."""
    import kubernetes.client
    from kubernetes.client.rest import ApiException

    try:
        return kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, version, namespace, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def uncaptured(request: pytest.FixtureRequest):
    """Output capture off for the block: it would hide the progress of a build that takes minutes."""
    return request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled()


def write_catalog(bundle_dir: Path, catalog_dir: Path, *, by_opm: bool = True) -> dict:
    """A file-based catalog of the bundle alone, in its default channel (``write_catalog_of``); the bundle's blob."""
    return write_catalog_of([bundle_dir], catalog_dir, by_opm=by_opm)[0]


def write_catalog_of(bundle_dirs: list[Path], catalog_dir: Path, image=lambda bundle_dir: "", *,
                     by_opm: bool = True) -> list[dict]:
    """A file-based catalog of the bundles, each alone in its package's default channel; their blobs.

    ``image(bundle_dir)`` is the image each blob records ("" for none: OLM installs from the inline objects).
    ``by_opm``: each blob as opm renders the bundle directory, as the catalog of an index image or a catalog
    OLM serves is made, so that what a peer is given owes nothing to the reconciler's own rendering (the image
    then set on the blob, as a catalog built from bundle images records it); ``by_opm=False`` for a repository's
    catalog, which ``reconciler catalog render`` writes.
    """
    from reconciler import yamlio

    docs, blobs = [], []
    for bundle_dir in bundle_dirs:
        ref = image(bundle_dir)
        if by_opm:
            from bench.peers import opm

            argv = [str(opm.opm_binary(log=print)), "render", str(bundle_dir), "-o", "json"]
        else:
            argv = [sys.executable, "-m", "reconciler", "catalog", "render", str(bundle_dir)] \
                + (["--image", ref] if ref else [])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        blob = json.loads(done.stdout)
        if by_opm and ref:
            blob["image"] = ref
        annotations = yamlio.read_all(bundle_dir / "metadata" / "annotations.yaml")[0]["annotations"]
        # a bundle that names no default channel is in its first channel, as opm defaults it
        channel = annotations.get("operators.operatorframework.io.bundle.channel.default.v1") or \
            str(annotations["operators.operatorframework.io.bundle.channels.v1"]).split(",")[0].strip()
        docs += [{"schema": "olm.package", "name": blob["package"], "defaultChannel": channel},
                 {"schema": "olm.channel", "package": blob["package"], "name": channel,
                  "entries": [{"name": blob["name"]}]}, blob]
        blobs.append(blob)
    catalog_dir.mkdir(parents=True)
    (catalog_dir / "catalog.json").write_text("\n".join(json.dumps(doc) for doc in docs) + "\n")
    return blobs


def write_bundle(bundle: Path, package: str, manifests: dict[str, dict], channel: str = "stable") -> Path:
    """A registry+v1 bundle directory of ``manifests`` (file name -> object) for ``package``, in ``channel``."""
    from reconciler import yamlio

    (bundle / "manifests").mkdir(parents=True)
    (bundle / "metadata").mkdir()
    for name, doc in manifests.items():
        (bundle / "manifests" / name).write_text(yamlio.dump(doc))
    (bundle / "metadata" / "annotations.yaml").write_text(yamlio.dump({"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": package,
        "operators.operatorframework.io.bundle.channels.v1": channel,
        "operators.operatorframework.io.bundle.channel.default.v1": channel}}))
    return bundle
