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
from pathlib import Path

import kubernetes.client

from tests.olmv1.support import (BUNDLE, BUNDLE_NAME, CRD, PACKAGE, Setup, install_extension, marks, publish,
                                 serve_catalog)

pytestmark = marks


def test_a_cluster_extension_installs_a_corpus_bundle_from_a_catalog_on_loopback(
        olmv1_setup: Setup, tmp_path: Path) -> None:
    setup = olmv1_setup
    _, catalog_ref = publish(setup, BUNDLE, tmp_path)

    with setup.plane.admin_client() as api:
        catalog = serve_catalog(setup, api, "corpus", catalog_ref)
        assert catalog["status"]["urls"]["base"] == f"https://{setup.olm.catalog_address}/catalogs/corpus"
        assert catalog["status"]["resolvedSource"]["image"]["ref"].startswith(f"{setup.registry}/olmv1/catalog@sha256:")
        # catalogd's own webhook, registered on loopback, labelled it
        assert catalog["metadata"]["labels"]["olm.operatorframework.io/metadata.name"] == "corpus"

        extension, deployment = install_extension(setup, api, PACKAGE, {
            "namespace": "s3", "source": {"sourceType": "Catalog", "catalog": {"packageName": PACKAGE}}})
        assert extension["status"]["install"]["bundle"] == {"name": BUNDLE_NAME, "version": BUNDLE.name}
        assert [(o.kind, o.name) for o in deployment.metadata.owner_references] == [("ClusterExtension", PACKAGE)]
        core = kubernetes.client.CoreV1Api(api)
        pods = core.list_namespaced_pod("s3").items
        assert [p.status.phase for p in pods] == ["Running"] and pods[0].spec.node_name.startswith("kwok-")
        kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD)
        # operator-controller records the release in its system namespace (Helm storage)
        secrets = {s.metadata.name for s in core.list_namespaced_secret("olmv1-system").items}
        assert f"sh.helm.release.v1.{PACKAGE}.v1" in secrets, json.dumps(sorted(secrets))
