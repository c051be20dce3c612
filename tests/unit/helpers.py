"""Builders shared by the unit tests: files and documents written to a temporary directory, small registry+v1
bundles, and the design documents' examples (repositories: ``tests/support/repo.py``)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from reconciler import yamlio

ALL_MODES = ("OwnNamespace", "SingleNamespace", "AllNamespaces")


# The design document's v2alpha1 Operator example (the declaration tests parse it, the approval test
# installs it).
DESIGN_DOC_V2ALPHA1 = """\
apiVersion: operators.coreos.com/v2alpha1
kind: Operator
metadata:
  name: plumbus
spec:
  updates:
    type: CatalogSource
    catalogSource:
      package: plumbus
      channel: stable
      entrypoint: plumbus.v2.0.0
      approval: Automatic
      ref:
        name: community
        namespace: my-ns
"""


def write(root: Path, rel: str, text: str) -> Path:
    """Write dedented ``text`` to ``root/rel``, creating directories."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def write_docs(root: Path, rel: str, *docs: Any) -> Path:
    """Write objects as a multi-document YAML file."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yamlio.dump_all(list(docs)), encoding="utf-8")
    return path


def operator_doc(name: str = "plumbus", **spec: Any) -> dict[str, Any]:
    """A v1 Operator declaration; ``spec`` defaults to the example's catalog selection."""
    if not spec:
        spec = {"catalog": {"name": "community", "package": "plumbus", "channel": "stable"}}
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": name},
            "spec": spec}


def csv_doc(name: str = "demo.v0.1.0", *, version: str = "0.1.0", modes: tuple[str, ...] = ALL_MODES,
            permissions: list[Any] | None = None, cluster_permissions: list[Any] | None = None,
            deployments: list[Any] | None = None, annotations: dict[str, str] | None = None,
            **extra_spec: Any) -> dict[str, Any]:
    """A ClusterServiceVersion with one deployment run by service account ``demo-sa``."""
    if permissions is None:
        permissions = [{"serviceAccountName": "demo-sa",
                        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}]
    if cluster_permissions is None:
        cluster_permissions = [{"serviceAccountName": "demo-sa",
                                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}]
    if deployments is None:
        deployments = [deployment("demo-controller", "demo-sa")]
    all_modes = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": meta,
        "spec": {
            "version": version,
            "installModes": [{"type": m, "supported": m in modes} for m in all_modes],
            "install": {"strategy": "deployment", "spec": {
                "permissions": permissions,
                "clusterPermissions": cluster_permissions,
                "deployments": deployments,
            }},
            **extra_spec,
        },
    }


def deployment(name: str, service_account: str | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "manager", "image": "registry.example.com/demo:v0.1.0"}]}
    if service_account is not None:
        pod["serviceAccountName"] = service_account
    return {"name": name, "label": {"app": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}}


def crd_doc(plural: str = "widgets", group: str = "demo.example.com",
            api_version: str = "apiextensions.k8s.io/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": plural, "singular": plural.rstrip("s")},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


def write_bundle(repo: Path, rel: str, csv: dict[str, Any] | None = None, *extra: dict[str, Any],
                 package: str = "demo", annotations: dict[str, str] | None = None) -> str:
    """Write a registry+v1 bundle under ``repo/rel``; returns its ``file://`` reference."""
    root = repo / rel
    ann = {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": package,
    }
    ann.update(annotations or {})
    write_docs(root, "metadata/annotations.yaml", {"annotations": ann})
    write_docs(root, "manifests/demo.clusterserviceversion.yaml", csv if csv is not None else csv_doc())
    for i, obj in enumerate(extra):
        write_docs(root, f"manifests/extra-{i}.yaml", obj)
    return f"file://{rel}"


def by_kind(objects: Any, kind: str, group: str | None = None) -> list[dict[str, Any]]:
    """Objects of one kind (and API group, when given)."""
    out = []
    for o in objects:
        g = o["apiVersion"].rpartition("/")[0]
        if o["kind"] == kind and (group is None or g == group):
            out.append(o)
    return out


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No kubeconfig anywhere and not in a pod (a test module uses it with ``pytestmark``)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
