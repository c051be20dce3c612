"""OLM v1 (catalogd and operator-controller, the pinned build) on a control plane of its own.

The whole path a user of OLM v1 takes, with nothing of OLM v1 written by hand: a
ClusterCatalog whose image (a file-based catalog the project renders) is in an HTTPS
registry on loopback, unpacked and served by catalogd over HTTPS on 127.0.0.1; a
ClusterExtension resolved by operator-controller against that catalog, its bundle
image pulled from the same registry, converted and installed, and its Deployment
rolled out on kwok. This is what an adoption of OLM v1 installs would start from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes.client
import pytest
from kubernetes.client.rest import ApiException

from reconciler import yamlio
from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.errors import ControlPlaneError
from reconciler.localcluster.olmv1 import GROUP, Olmv1, ensure_olmv1, olmv1_present
from reconciler.localcluster.pki import create_loopback_tls
from tests.olm.support import CORPUS, uncaptured, write_catalog_of

# AllNamespaces, no webhook, no dependency, no custom resource among its manifests (OLM v1 applies a bundle
# as one release, so a sample custom resource beside its CRD fails the release's dry run).
BUNDLE = CORPUS / "operators" / "ack-s3-controller" / "1.10.0"
PACKAGE, BUNDLE_NAME, DEPLOYMENT, CRD = ("ack-s3-controller", "ack-s3-controller.v1.10.0", "ack-s3-controller",
                                         "buckets.s3.services.k8s.aws")
WAIT = 180.0
# What `go` prints when the module proxy refuses a module (a host outside a restricted proxy's allowlist)
REFUSED_BY_PROXY = re.compile(r"\S+@\S+: reading https?://\S+: (403 Forbidden|410 Gone)")

pytestmark = [
    pytest.mark.cluster, pytest.mark.olmv1, pytest.mark.corpus,
    pytest.mark.skipif(not (olmv1_present() or shutil.which("go")),
                       reason="OLM v1 is not built and `go` is not on PATH to build it"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="`unshare` (util-linux) is not on PATH"),
    pytest.mark.skipif(not BUNDLE.is_dir(), reason="../shared/corpus is absent"),
]


class Setup:
    def __init__(self, plane: ControlPlane, olm: Olmv1, registry: str, crane: Callable[..., str]) -> None:
        self.plane, self.olm, self.registry, self.crane = plane, olm, registry, crane


@pytest.fixture(scope="module")
def olmv1_setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from bench.peers import stop
    from bench.peers.crane import crane_binary
    from bench.peers.registry import registry_binary
    from tests.bundle.oci_registry import start_registry

    with uncaptured(request):
        binaries = ensure_binaries(log=print)
        try:
            olm_binaries = ensure_olmv1(log=print)
        except ControlPlaneError as exc:   # a module proxy that refuses one of its modules (Makefile: olmv1)
            if not REFUSED_BY_PROXY.search(exc.message):
                raise
            pytest.skip(f"OLM v1 cannot be built here: the Go module proxy refuses a module it needs: "
                        f"{REFUSED_BY_PROXY.search(exc.message).group(0)}")
        registry, crane = registry_binary(log=print), crane_binary(log=print)
    work = tmp_path_factory.mktemp("olmv1")
    tls = create_loopback_tls(work / "tls")
    reg_proc, reg = start_registry(registry, work / "registry", tls=(tls.cert, tls.key, tls.ca_cert))
    plane = ControlPlane(work / "plane", binaries)
    try:
        plane.start(timeout=240)
        env = {**os.environ, "SSL_CERT_FILE": str(tls.ca_cert)}

        def run_crane(*args: str) -> str:
            done = subprocess.run([str(crane), *args], capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            return done.stdout.strip()

        with Olmv1(olm_binaries, plane.kubeconfig_path, work / "olmv1", tls) as olm:
            yield Setup(plane, olm, reg.host, run_crane)
    finally:
        plane.stop()
        stop(reg_proc)


def push_image(setup: Setup, ref: str, layer_dir: Path, labels: dict[str, str], work: Path) -> None:
    """An image of one layer holding ``layer_dir``'s entries at the root, with ``labels``."""
    layer = work / f"{layer_dir.name}.tar"
    with tarfile.open(layer, "w") as tar:
        for entry in sorted(layer_dir.iterdir()):
            tar.add(entry, arcname=entry.name)
    setup.crane("append", "-f", str(layer), "-t", ref)
    setup.crane("mutate", ref, "--set-platform", "linux/amd64",
                *[arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")], "-t", ref)


def wait_for(what: str, probe: Callable[[], object], setup: Setup, timeout: float = WAIT) -> object:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except ApiException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {name}:\n{setup.olm.log_path(name).read_text(errors='replace')[-3000:]}"
                             for name in ("catalogd", "operator-controller"))
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.5)


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def test_a_cluster_extension_installs_a_corpus_bundle_from_a_catalog_on_loopback(
        olmv1_setup: Setup, tmp_path: Path) -> None:
    setup = olmv1_setup
    bundle_ref = f"{setup.registry}/olmv1/{PACKAGE}-bundle:{BUNDLE.name}"
    layout = tmp_path / "bundle"
    shutil.copytree(BUNDLE, layout)
    annotations = yamlio.read_all(BUNDLE / "metadata" / "annotations.yaml")[0]["annotations"]
    push_image(setup, bundle_ref, layout, annotations, tmp_path)
    write_catalog_of([BUNDLE], tmp_path / "catalog" / "configs", image=lambda _: bundle_ref)
    catalog_ref = f"{setup.registry}/olmv1/catalog:1"
    push_image(setup, catalog_ref, tmp_path / "catalog",
               {"operators.operatorframework.io.index.configs.v1": "/configs"}, tmp_path)

    with setup.plane.admin_client() as api:
        custom = kubernetes.client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(GROUP, "v1", "clustercatalogs", {
            "apiVersion": f"{GROUP}/v1", "kind": "ClusterCatalog", "metadata": {"name": "corpus"},
            "spec": {"source": {"type": "Image", "image": {"ref": catalog_ref}}}})
        catalog = wait_for("the ClusterCatalog to serve", lambda: (
            c := custom.get_cluster_custom_object(GROUP, "v1", "clustercatalogs", "corpus"),
            condition(c, "Serving").get("status") == "True" and c)[1], setup)
        assert catalog["status"]["urls"]["base"] == f"https://{setup.olm.catalog_address}/catalogs/corpus"
        assert catalog["status"]["resolvedSource"]["image"]["ref"].startswith(f"{setup.registry}/olmv1/catalog@sha256:")
        # catalogd's own webhook, registered on loopback, labelled it
        assert catalog["metadata"]["labels"]["olm.operatorframework.io/metadata.name"] == "corpus"

        core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
        core.create_namespace({"metadata": {"name": "s3"}})
        custom.create_cluster_custom_object(GROUP, "v1", "clusterextensions", {
            "apiVersion": f"{GROUP}/v1", "kind": "ClusterExtension", "metadata": {"name": PACKAGE},
            "spec": {"namespace": "s3", "source": {"sourceType": "Catalog", "catalog": {"packageName": PACKAGE}}}})
        extension = wait_for("the ClusterExtension to be installed", lambda: (
            e := custom.get_cluster_custom_object(GROUP, "v1", "clusterextensions", PACKAGE),
            condition(e, "Installed").get("status") == "True" and e)[1], setup)
        assert extension["status"]["install"]["bundle"] == {"name": BUNDLE_NAME, "version": BUNDLE.name}

        deployment = wait_for("the Deployment to roll out on kwok", lambda: (
            d := apps.read_namespaced_deployment(DEPLOYMENT, "s3"),
            (d.status.available_replicas or 0) >= 1 and d.status.observed_generation == d.metadata.generation
            and d)[1], setup)
        assert [(o.kind, o.name) for o in deployment.metadata.owner_references] == [("ClusterExtension", PACKAGE)]
        pods = core.list_namespaced_pod("s3").items
        assert [p.status.phase for p in pods] == ["Running"] and pods[0].spec.node_name.startswith("kwok-")
        kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD)
        # operator-controller records the release in its system namespace (Helm storage)
        secrets = {s.metadata.name for s in core.list_namespaced_secret("olmv1-system").items}
        assert f"sh.helm.release.v1.{PACKAGE}.v1" in secrets, json.dumps(sorted(secrets))
