"""`catalog import` of the three kinds of CatalogSource a real OLM v0 installs from, then `adopt` with no
catalog made by hand: docs/migration.md's "Import the catalogs the cluster uses", run as printed.

* ``olm/community-operators``: an index image in a registry on loopback that requires a login, with the pull
  Secret in ``spec.secrets``; its bundles are images of a registry that is gone, which the repository's
  ``mirrors:`` pull from a mirror on loopback (the lock still names the source);
* ``olm/team-catalog``: ``spec.address``, a catalog served by opm on loopback;
* ``olm/legacy-catalog``: ``sourceType: configmap``, the old ConfigMap catalog.

kwok runs no container, so no registry pod serves: the image and ConfigMap sources carry an ``spec.address``
too, which catalog-operator dials instead of its pod's Service (``CatalogSource.Address()``), served by opm from
the same content, its bundles inline and without an image (what OLM installs here without an unpack job). The
import reads the image and the ConfigMap themselves.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import kubernetes.client
import pytest

from reconciler import oci, yamlio
from reconciler.oci import auth
from reconciler.catalog.source import CONFIGS_LABEL
from tests.bundle.oci_registry import LOGIN, oci_registry, oci_registry_with_login  # noqa: F401
from tests.olm.adoption import GROUP, Case, custom, settle, shell
from tests.olm.support import CORPUS, needs_corpus, needs_olm, uncaptured, write_bundle, write_catalog_of
from tests.support.repo import commit_all, git, init

pytestmark = [pytest.mark.cluster, pytest.mark.olm, pytest.mark.corpus, needs_olm, needs_corpus]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "migration.md"
NS = "olm"   # the plane's global catalog namespace: a Subscription of any namespace may use its CatalogSources

BY_IMAGE = Case("move2kube-operator/0.3.15-rc.0", "move2kube-operator.v0.3.15-rc.0", "AllNamespaces")
BY_ADDRESS = Case("ack-s3-controller/1.10.0", "ack-s3-controller.v1.10.0", "OwnNamespace")
BY_CONFIGMAP = Case("odoo-operator/0.0.2", "odoo-operator.v0.0.2", "Own-configmap")   # OwnNamespace
SOURCES = {"community-operators": BY_IMAGE, "team-catalog": BY_ADDRESS, "legacy-catalog": BY_CONFIGMAP}


def documented_block() -> list[str]:
    text = DOCS.read_text()
    section = text.split("### Import the catalogs the cluster uses", 1)[1]
    lines = section.split("\n\n    ", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in lines.splitlines()]


def config_map_of(bundle: Path, package: str, channel: str) -> dict:
    """The old ConfigMap catalog of one bundle: its CSV and CRDs, and a package manifest."""
    docs = [d for f in sorted((bundle / "manifests").iterdir()) for d in yamlio.read_all(f) if isinstance(d, dict)]
    csv = next(d for d in docs if d.get("kind") == "ClusterServiceVersion")
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy-catalog", "namespace": NS},
            "data": {"customResourceDefinitions": yamlio.dump(crds), "clusterServiceVersions": yamlio.dump([csv]),
                     "packages": yamlio.dump([{"packageName": package, "defaultChannel": channel, "channels": [
                         {"name": channel, "currentCSV": csv["metadata"]["name"]}]}])}}


def subscribe(api, case: Case, source: str) -> None:
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": case.namespace}})
    group: dict = {"apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "group"}, "spec": {}}
    if case.targets is not None:
        group["spec"]["targetNamespaces"] = case.targets
    custom(api).create_namespaced_custom_object(GROUP, "v1", case.namespace, "operatorgroups", group)
    custom(api).create_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "subscriptions", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription", "metadata": {"name": case.package},
        "spec": {"name": case.package, "source": source, "sourceNamespace": NS, "installPlanApproval": "Automatic"}})


def catalog_source(api, name: str, spec: dict) -> None:
    custom(api).create_namespaced_custom_object(GROUP, "v1alpha1", NS, "catalogsources", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": name}, "spec": spec})


def test_import_each_kind_of_catalog_source_then_adopt(request, olm_plane, tmp_path, oci_registry,
                                                       oci_registry_with_login):
    from bench.peers import opm

    with uncaptured(request):
        opm.opm_binary(log=print)
    work = tmp_path / "work"
    corpus = {name: CORPUS / "operators" / case.bundle for name, case in SOURCES.items()}

    # community-operators: the index image in a registry that wants a login; its bundle images name a registry
    # that is gone (a disconnected cluster's view of the public one), and a mirror on loopback holds them
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{s.getsockname()[1]}"
    images = {corpus["community-operators"]: f"{gone}/corpus/{BY_IMAGE.package}-bundle:v0.3.15-rc.0"}
    layout = oci.build_layout(corpus["community-operators"], work / "bundle-layout", {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1"})
    oci.push_layout(layout.path, oci_registry.ref(f"mirrored/corpus/{BY_IMAGE.package}-bundle", "v0.3.15-rc.0"))
    mirrors = yamlio.dump({"mirrors": [{"source": gone, "mirrors": [f"{oci_registry.host}/mirrored"]}]})
    write_catalog_of([corpus["community-operators"]], work / "index" / "configs" / BY_IMAGE.package,
                     image=lambda d: images[d])
    token = base64.b64encode(f"{LOGIN[0]}:{LOGIN[1]}".encode()).decode()
    pull = {"auths": {oci_registry_with_login.host: {"auth": token}}}
    index = oci_registry_with_login.ref("catalogs/community-operators", "v4.20")
    with auth.pull_secrets([("the test's login", pull)]):
        oci.push_layout(oci.build_layout(work / "index", work / "index-layout", {CONFIGS_LABEL: "/configs"}).path,
                        index)

    # legacy-catalog: the ConfigMap, and the same bundle (CSV and CRDs) as OLM serves it
    package, channel = BY_CONFIGMAP.package, "alpha"
    cm = config_map_of(corpus["legacy-catalog"], package, channel)
    legacy = write_bundle(work / "legacy-bundle", package, {
        f.name: doc for f in sorted((corpus["legacy-catalog"] / "manifests").iterdir())
        if (doc := yamlio.read_all(f)[0]).get("kind") in ("ClusterServiceVersion", "CustomResourceDefinition")},
        channel)

    served = {"community-operators": corpus["community-operators"], "team-catalog": corpus["team-catalog"],
              "legacy-catalog": legacy}
    for name, bundle in served.items():   # what OLM installs from: the same bundles, inline and without an image
        write_catalog_of([bundle], work / "served" / name)
    with opm.serve(work / "served" / "community-operators", work / "s1") as a1, \
            opm.serve(work / "served" / "team-catalog", work / "s2") as a2, \
            opm.serve(work / "served" / "legacy-catalog", work / "s3") as a3, olm_plane.admin_client() as api:
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespaced_secret(NS, {
            "metadata": {"name": "community-pull"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(pull).encode()).decode()}})
        core.create_namespaced_config_map(NS, cm)
        catalog_source(api, "community-operators", {"sourceType": "grpc", "image": index, "address": a1,
                                                    "secrets": ["community-pull"]})
        catalog_source(api, "team-catalog", {"sourceType": "grpc", "address": a2})
        catalog_source(api, "legacy-catalog", {"sourceType": "configmap", "configMap": "legacy-catalog",
                                               "address": a3})
        for name, case in SOURCES.items():
            subscribe(api, case, name)
        for case in SOURCES.values():
            settle(api, case, olm_plane)

        repo = tmp_path / "platform-repo"
        repo.mkdir()
        (repo / "README.md").write_text("platform\n")
        (repo / "reconciler.yaml").write_text(mirrors)
        commit_all(repo, "start")
        run = shell(olm_plane.kubeconfig_path, tmp_path)
        run.env["HOME"] = str(tmp_path / "home")          # no registry login of this machine's user
        run.env.pop("DOCKER_CONFIG", None)
        run.env.pop("REGISTRY_AUTH_FILE", None)
        outputs = [run(line) for line in documented_block()]
        commit_all(repo, "adopt")
        again = run(f"reconciler catalog import platform-repo --catalog-source {NS}/team-catalog")
        resolved = run("reconciler resolve platform-repo")
        # Without the catalogs, adopt names the command that imports each; --import-catalogs runs it first.
        for name in ("bare", "at-once"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "reconciler.yaml").write_text(mirrors)
            init(tmp_path / name)
        bare = run("reconciler adopt bare", 1)
        at_once = run("reconciler adopt at-once --import-catalogs")

    imports = outputs[:3]
    assert f"catalogs/community-operators from CatalogSource {NS}/community-operators: {index} (sha256:" in imports[0]
    assert "+ package move2kube-operator: 1 bundle" in imports[0]
    assert f"catalogs/team-catalog from CatalogSource {NS}/team-catalog: {a2}" in imports[1]
    assert f"catalogs/legacy-catalog from CatalogSource {NS}/legacy-catalog: ConfigMap {NS}/legacy-catalog" \
        in imports[2]
    adopted = outputs[-1]
    for name, case in SOURCES.items():
        assert f"adopted Subscription {case.namespace}/{case.package}: Operator {case.package}" in adopted, adopted
        assert f"from catalogs/{name}" in adopted
    assert "not adopted" not in adopted, adopted
    lock = {e["operator"]: e for e in yamlio.read_all(repo / "olm.lock")[0]["bundles"]}
    # the bundle image was pulled through the mirror (adopt converts it), and the lock names its source
    assert lock[BY_IMAGE.package]["source"] == images[corpus["community-operators"]]
    assert "mirrored" not in (repo / "olm.lock").read_text()
    assert lock[BY_ADDRESS.package]["source"] == "file://bundles/ack-s3-controller/1.10.0"   # served inline: vendored
    assert lock[BY_CONFIGMAP.package]["source"] == "file://bundles/odoo-operator/0.0.2"
    record = yamlio.load_one((repo / "catalogs/community-operators/import.yaml").read_text(), "import.yaml")
    assert record["source"]["image"] == index and record["source"]["digest"].startswith("sha256:")

    assert "Summary: 0 packages added, 0 changed, 0 removed, 1 unchanged" in again
    assert "catalogs/team-catalog is as the source has it: nothing written" in again
    assert resolved is not None and git(repo, "status", "--porcelain") == ""   # the adopted lock is what resolve writes
    for name, case in SOURCES.items():
        assert (f"not adopted Subscription {case.namespace}/{case.package}: no catalog of the repository has bundle "
                f"{case.csv}") in bare, bare
        assert f"`reconciler catalog import . --catalog-source {NS}/{name}` at the repository's root" in bare, bare
        assert f"adopted Subscription {case.namespace}/{case.package}: Operator {case.package}" in at_once, at_once
    assert "not adopted" not in at_once and "could not import" not in at_once, at_once
    assert (tmp_path / "at-once" / "catalogs" / "legacy-catalog" / "import.yaml").is_file()
