"""The registry+v1 converter gives the objects operator-controller's own converter gives, on real bundles.

A handful of corpus bundles, chosen to cover what the converters do (plain
operators in every install mode, admission and conversion-free webhooks on
two deployments, long generated names, v1beta1 CRDs, retired RBAC versions, a
manifest without apiVersion, a missing webhook containerPort,
metadata/properties.yaml), rendered by both in every install mode the CSV
supports and compared object by object by ``bench.convert_parity``, which
also says which differences are deliberate (docs/bundles.md, "Parity with
operator-controller"). The whole corpus: ``python -m bench.convert_parity``.

Skipped when the corpus is absent or ocrender is not built (``make peers``
builds it; a cold build takes minutes, so tests never start one).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import convert_parity as cp
from bench.bundle_corpus import DEFAULT_CORPUS, MODES
from reconciler.bundle import read_content, registry_v1, render_content
from reconciler.bundle.certs import CertManagerProvider
from reconciler.bundle.source import fetch
from reconciler.model.declarations import InstallSettings
from tests.support.parts import not_tested

pytestmark = pytest.mark.corpus

BUNDLES = ("3scale-community-operator/0.10.1", "3scale-community-operator/0.3.0", "alloydb-omni-operator/1.3.0",
           "argocd-operator/0.10.0", "azure-service-operator/1.0.24492", "nfs-provisioner-operator/0.0.2",
           "dbaas-operator/0.5.0")


def _ocrender() -> Path | None:
    from bench.peers.operator_controller import TOOL

    return TOOL.paths()["ocrender"] if TOOL.present() else None


_OCRENDER = _ocrender()  # at import, like opm: a test's private cache directory is not where it was built


def _cases() -> list[tuple[str, str]]:
    if not DEFAULT_CORPUS.is_dir():
        return []
    cases = []
    for name in BUNDLES:
        supported = registry_v1.find_csv(read_content(fetch(f"file://{name}", DEFAULT_CORPUS))).supported_modes
        cases += [(name, mode) for mode in MODES if mode in supported]
    return cases


@pytest.mark.corpus(missing=not _cases(), reason=f"no corpus at {DEFAULT_CORPUS}")
@pytest.mark.parametrize("name, mode", _cases(), ids=lambda v: v)
def test_same_objects_as_operator_controller(name: str, mode: str):
    if _OCRENDER is None:
        not_tested("ocrender", "ocrender is not built (run `make peers` or `python -m bench.convert_parity` once)")
    content = read_content(fetch(f"file://{name}", DEFAULT_CORPUS))
    namespace, targets = cp.targets_for(name.split("/")[0])
    result = cp.compare_one(content, DEFAULT_CORPUS / name, name, mode, namespace, targets[mode], _OCRENDER)
    assert result.status == "identical", "\n".join(result.details)


def test_a_difference_is_found_and_named():
    # the comparison itself: a changed field, an object one side lacks, and generated RBAC matched by rules
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "csv-sa-1a2b"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "csv-sa-1a2b"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csv-sa-1a2b"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
           "spec": {"ports": [{"port": 443}]}}

    def renamed(obj, name):
        out = {**obj, "metadata": {**obj["metadata"], "name": name}}
        if obj["kind"] == "ClusterRoleBinding":
            out["roleRef"] = {**obj["roleRef"], "name": name}
        return out

    peer = [renamed(role, "csv-sa-zzzz"), renamed(binding, "csv-sa-zzzz"), svc]
    assert cp.compare([role, binding, svc], peer) == ([], [])
    changed = {**svc, "spec": {"ports": [{"port": 8443}]}}
    classes, details = cp.compare([role, binding, changed], peer)
    assert classes == ["Service .spec.ports[].port"] and details == ["Service ns/s: .spec.ports[0].port"]
    classes, _ = cp.compare([role, binding], peer)
    assert classes == ["object only in peer's: Service"]


# A bundle shipping the console's plugin and a NetworkPolicy as manifests of their own, as recent Red Hat operators
# do, which OLM v0 installs since v0.46: built from a real one that carries its ConsolePlugin inside a ConfigMap.
CONSOLE_PLUGIN_BUNDLE = DEFAULT_CORPUS / "file-integrity-console-plugin" / "0.4.1"


def console_plugin_bundle(root: Path) -> Path:
    """``CONSOLE_PLUGIN_BUNDLE`` copied under ``root``, its ConsolePlugin taken out of its ConfigMap into a manifest of
    its own, and a NetworkPolicy letting the console reach the plugin's port."""
    import shutil

    from reconciler import yamlio

    bundle = root / "file-integrity-console-plugin" / "0.4.1"
    shutil.copytree(CONSOLE_PLUGIN_BUNDLE, bundle)
    (config_map,) = yamlio.read_all(bundle / "manifests" / "file-integrity-console-plugin-consoleplugin_core_v1_configmap.yaml")
    plugin = yamlio.load_one(config_map["data"]["consoleplugin.yaml"], "consoleplugin.yaml")
    assert plugin["kind"] == "ConsolePlugin"
    (bundle / "manifests" / "file-integrity-console-plugin_console.openshift.io_v1_consoleplugin.yaml").write_text(
        yamlio.dump(plugin))
    port = plugin["spec"]["backend"]["service"]["port"]
    (bundle / "manifests" / "file-integrity-console-plugin_networking.k8s.io_v1_networkpolicy.yaml").write_text(
        yamlio.dump({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                     "metadata": {"name": "file-integrity-console-plugin"},
                     "spec": {"podSelector": {"matchLabels": {"app": "file-integrity-console-plugin"}},
                              "policyTypes": ["Ingress"],
                              "ingress": [{"ports": [{"port": port, "protocol": "TCP"}],
                                           "from": [{"namespaceSelector": {"matchLabels": {
                                               "kubernetes.io/metadata.name": "openshift-console"}}}]}]}}))
    return bundle


@pytest.mark.corpus(missing=not CONSOLE_PLUGIN_BUNDLE.is_dir(), reason="../shared/corpus is absent")
def test_console_plugin_and_network_policy_as_operator_controller_converts_them(tmp_path: Path):
    bundle = console_plugin_bundle(tmp_path)
    content = read_content(fetch("file://file-integrity-console-plugin/0.4.1", tmp_path))
    namespace, targets = cp.targets_for("file-integrity-console-plugin")
    rendered = render_content(content, InstallSettings(namespace, targets["OwnNamespace"]), namespace,
                              CertManagerProvider())
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendered.objects}
    plugin = objects[("ConsolePlugin", "file-integrity-console-plugin")]
    assert "namespace" not in plugin["metadata"] and plugin["spec"]["backend"]["service"]["port"] == 9443
    assert objects[("NetworkPolicy", "file-integrity-console-plugin")]["metadata"]["namespace"] == namespace
    if _OCRENDER is None:
        not_tested("ocrender", "ocrender is not built (run `make peers` or `python -m bench.convert_parity` once)")
    result = cp.compare_one(content, bundle, "file-integrity-console-plugin/0.4.1", "OwnNamespace", namespace,
                            targets["OwnNamespace"], _OCRENDER)
    assert result.status == "identical", "\n".join(result.details)
