"""What the OLM v1 tests share: the pinned catalogd and operator-controller beside a control plane of their own,
an HTTPS registry on loopback, and the way a corpus bundle is published to it and installed by a ClusterExtension.

The plane is the tests' own (module-scoped, through ``conftest.olmv1_setup``): OLM v1's CRDs are cluster-scoped
and its controllers act on the whole cluster.
"""

from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import kubernetes.client
import pytest
from kubernetes.client.rest import ApiException

from reconciler import yamlio
from reconciler.localcluster import ControlPlane
from reconciler.localcluster.olmv1 import GROUP, Olmv1, olmv1_present
from tests.olm.support import CORPUS, write_catalog_of
from tests.support.wait import wait_until

# AllNamespaces, no webhook, no dependency, no custom resource among its manifests (OLM v1 applies a bundle
# as one release, so a sample custom resource beside its CRD fails the release's dry run).
BUNDLE = CORPUS / "operators" / "ack-s3-controller" / "1.10.0"
PACKAGE, BUNDLE_NAME, DEPLOYMENT, CRD = ("ack-s3-controller", "ack-s3-controller.v1.10.0", "ack-s3-controller",
                                         "buckets.s3.services.k8s.aws")
WAIT = 180.0
# What `go` prints when the module proxy refuses a module (a host outside a restricted proxy's allowlist)
REFUSED_BY_PROXY = re.compile(r"\S+@\S+: reading https?://\S+: (403 Forbidden|410 Gone)")

marks = [
    pytest.mark.cluster,
    pytest.mark.olmv1(missing=not (olmv1_present() or shutil.which("go")),
                      reason="OLM v1 is not built and `go` is not on PATH to build it"),
    pytest.mark.olmv1(missing=shutil.which("unshare") is None, reason="`unshare` (util-linux) is not on PATH"),
    pytest.mark.corpus(missing=not BUNDLE.is_dir(), reason="../shared/corpus is absent"),
]


class Setup:
    def __init__(self, plane: ControlPlane, olm: Olmv1, registry: str, crane: Callable[..., str]) -> None:
        self.plane, self.olm, self.registry, self.crane = plane, olm, registry, crane


def push_image(setup: Setup, ref: str, layer_dir: Path, labels: dict[str, str], work: Path) -> None:
    """An image of one layer holding ``layer_dir``'s entries at the root, with ``labels``."""
    layer = work / f"{layer_dir.name}.tar"
    with tarfile.open(layer, "w") as tar:
        for entry in sorted(layer_dir.iterdir()):
            tar.add(entry, arcname=entry.name)
    setup.crane("append", "-f", str(layer), "-t", ref)
    setup.crane("mutate", ref, "--set-platform", "linux/amd64",
                *[arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")], "-t", ref)


def publish(setup: Setup, bundle: Path, work: Path) -> tuple[str, str]:
    """``bundle`` pushed as a bundle image and a catalog of it as a catalog image; their references."""
    bundle_ref = f"{setup.registry}/olmv1/{bundle.parent.name}-bundle:{bundle.name}"
    layout = work / "bundle"
    shutil.copytree(bundle, layout)
    annotations = yamlio.read_all(bundle / "metadata" / "annotations.yaml")[0]["annotations"]
    push_image(setup, bundle_ref, layout, annotations, work)
    write_catalog_of([bundle], work / "catalog" / "configs", image=lambda _: bundle_ref)
    catalog_ref = f"{setup.registry}/olmv1/catalog:1"
    push_image(setup, catalog_ref, work / "catalog",
               {"operators.operatorframework.io.index.configs.v1": "/configs"}, work)
    return bundle_ref, catalog_ref


def olmv1_logs(setup: Setup) -> Callable[[], str]:
    """The end of catalogd's and operator-controller's logs: what a wait on OLM v1 (``tests.support.wait``) shows
    when it runs out."""
    return lambda: "\n".join(f"--- {name}:\n{setup.olm.log_path(name).read_text(errors='replace')[-3000:]}"
                             for name in ("catalogd", "operator-controller"))


def serve_catalog(setup: Setup, api, name: str, ref: str) -> dict:
    """A ClusterCatalog of the image ``ref``, once catalogd serves it."""
    custom = kubernetes.client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(GROUP, "v1", "clustercatalogs", {
        "apiVersion": f"{GROUP}/v1", "kind": "ClusterCatalog", "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": ref}}}})
    return wait_until(lambda: (
        c := custom.get_cluster_custom_object(GROUP, "v1", "clustercatalogs", name),
        condition(c, "Serving").get("status") == "True" and c)[1], "the ClusterCatalog to serve",
        timeout=WAIT, every=0.5, ignoring=ApiException, diagnose=olmv1_logs(setup))


def install_extension(setup: Setup, api, name: str, spec: dict) -> tuple[dict, kubernetes.client.V1Deployment]:
    """A ClusterExtension of ``spec`` (its namespace made first unless there), once installed and its Deployment
    rolled out."""
    custom = kubernetes.client.CustomObjectsApi(api)
    try:
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": spec["namespace"]}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    custom.create_cluster_custom_object(GROUP, "v1", "clusterextensions", {
        "apiVersion": f"{GROUP}/v1", "kind": "ClusterExtension", "metadata": {"name": name}, "spec": spec})
    extension = wait_until(lambda: (
        e := custom.get_cluster_custom_object(GROUP, "v1", "clusterextensions", name),
        condition(e, "Installed").get("status") == "True" and e)[1], "the ClusterExtension to be installed",
        timeout=WAIT, every=0.5, ignoring=ApiException, diagnose=olmv1_logs(setup))
    apps = kubernetes.client.AppsV1Api(api)
    deployment = wait_until(lambda: (
        d := apps.read_namespaced_deployment(DEPLOYMENT, spec["namespace"]),
        (d.status.available_replicas or 0) >= 1 and d.status.observed_generation == d.metadata.generation
        and d)[1], "the Deployment to roll out on kwok",
        timeout=WAIT, every=0.5, ignoring=ApiException, diagnose=olmv1_logs(setup))
    return extension, deployment


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), {})


__all__ = ["BUNDLE", "CRD", "DEPLOYMENT", "GROUP", "PACKAGE", "BUNDLE_NAME", "Setup", "condition", "install_extension",
           "marks", "publish", "push_image", "serve_catalog", "olmv1_logs", "REFUSED_BY_PROXY"]
