"""registry+v1 bundles (a ClusterServiceVersion plus manifests) -> plain Kubernetes objects.

The conversion is a list of small generators, one per kind of object, each a
pure function of the bundle and the install plan (namespace and target
namespaces). OLM's runtime behaviour that the objects rely on is reproduced
here: one Role/RoleBinding per target namespace from ``permissions``
(promoted to cluster scope in AllNamespaces mode), ClusterRole/Binding from
``clusterPermissions``, and the ``olm.targetNamespaces`` /
``olm.operatorNamespace`` annotations on the deployments' pod templates.

Objects are matched by API group and kind, never by kind alone.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from reconciler.bundle.content import BundleContent, ParsedManifest
from reconciler.errors import UnsupportedBundleError
from reconciler.model.kube import Manifest, bounded_name, split_api_version

CSV_GROUP_KIND = ("operators.coreos.com", "ClusterServiceVersion")
CRD_GROUP_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")
SUGGESTED_NAMESPACE = "operatorframework.io/suggested-namespace"

ALL, OWN, SINGLE, MULTI = "AllNamespaces", "OwnNamespace", "SingleNamespace", "MultiNamespace"

# Objects a registry+v1 bundle may carry beside the CSV and CRDs, and whether
# they are namespaced (seed: "optional objects" of the bundle format).
OPTIONAL_KINDS: dict[tuple[str, str], bool] = {
    ("", "Secret"): True,
    ("", "ConfigMap"): True,
    ("", "Service"): True,
    ("", "ServiceAccount"): True,
    ("rbac.authorization.k8s.io", "Role"): True,
    ("rbac.authorization.k8s.io", "RoleBinding"): True,
    ("rbac.authorization.k8s.io", "ClusterRole"): False,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): False,
    ("monitoring.coreos.com", "PrometheusRule"): True,
    ("monitoring.coreos.com", "ServiceMonitor"): True,
    ("policy", "PodDisruptionBudget"): True,
    ("scheduling.k8s.io", "PriorityClass"): False,
    ("autoscaling.k8s.io", "VerticalPodAutoscaler"): True,
    ("console.openshift.io", "ConsoleYAMLSample"): False,
    ("console.openshift.io", "ConsoleQuickStart"): False,
    ("console.openshift.io", "ConsoleCLIDownload"): False,
    ("console.openshift.io", "ConsoleLink"): False,
}


@dataclass(frozen=True)
class InstallPlan:
    """Where one bundle is installed: the operator's namespace and the namespaces it watches."""

    namespace: str
    target_namespaces: tuple[str, ...]  # () means all namespaces

    @property
    def mode(self) -> str:
        if not self.target_namespaces:
            return ALL
        if self.target_namespaces == (self.namespace,):
            return OWN
        return SINGLE if len(self.target_namespaces) == 1 else MULTI


@dataclass(frozen=True)
class Csv:
    """A typed view over the ClusterServiceVersion dict (not a copy)."""

    obj: Manifest
    file: str

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    @property
    def spec(self) -> dict[str, Any]:
        return self.obj.get("spec") or {}

    @property
    def version(self) -> str:
        return str(self.spec.get("version") or "")

    @property
    def annotations(self) -> dict[str, str]:
        return (self.obj.get("metadata") or {}).get("annotations") or {}

    @property
    def install_spec(self) -> dict[str, Any]:
        install = self.spec.get("install") or {}
        if install.get("strategy") != "deployment":
            raise UnsupportedBundleError(
                f"install strategy {install.get('strategy')!r} is not supported (only 'deployment')",
                path=self.file, obj=f"ClusterServiceVersion {self.name}")
        return install.get("spec") or {}

    @property
    def supported_modes(self) -> set[str]:
        return {m.get("type") for m in self.spec.get("installModes") or [] if m.get("supported") is True}


def find_csv(content: BundleContent) -> Csv:
    csvs = [m for m in content.manifests if _group_kind(m.obj) == CSV_GROUP_KIND]
    if len(csvs) != 1:
        raise UnsupportedBundleError(f"a registry+v1 bundle needs exactly one ClusterServiceVersion, "
                                     f"found {len(csvs)}", obj=content.name)
    obj, file = csvs[0].obj, csvs[0].file
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        raise UnsupportedBundleError("the ClusterServiceVersion has no metadata.name", path=file, obj=content.name)
    if not isinstance(obj.get("spec") or {}, dict):
        raise UnsupportedBundleError("the ClusterServiceVersion's spec is not a mapping", path=file,
                                     obj=content.name)
    return Csv(obj, file)


def plan_install(csv: Csv, namespace: str, requested: tuple[str, ...] | None) -> InstallPlan:
    """Choose target namespaces: the request, else AllNamespaces if supported, else OwnNamespace."""
    supported = csv.supported_modes
    where = f"ClusterServiceVersion {csv.name}"
    if requested is None:
        if ALL in supported:
            return InstallPlan(namespace, ())
        if OWN in supported:
            return InstallPlan(namespace, (namespace,))
        raise UnsupportedBundleError(
            f"the bundle supports only {', '.join(sorted(supported)) or 'no install mode'}; "
            f"the target namespaces must be chosen", path=csv.file, obj=where,
            hint="set spec.install.targetNamespaces in the Operator declaration")
    targets = tuple(sorted(set(t for t in requested if t)))
    plan = InstallPlan(namespace, targets)
    if plan.mode not in supported:
        raise UnsupportedBundleError(
            f"install mode {plan.mode} (target namespaces {list(targets) or 'all'}) is not supported by "
            f"the bundle, which supports {', '.join(sorted(supported)) or 'none'}", path=csv.file, obj=where,
            hint="change spec.install.targetNamespaces to a supported mode")
    return plan


def convert(content: BundleContent, plan: InstallPlan) -> list[Manifest]:
    """All objects of the bundle, in generator order; each generator is a pure function."""
    csv = find_csv(content)
    _reject_unsupported(csv)
    objects: list[Manifest] = []
    for generate in GENERATORS:
        objects.extend(generate(csv, content, plan))
    return objects


def _reject_unsupported(csv: Csv) -> None:
    where = f"ClusterServiceVersion {csv.name}"
    if csv.spec.get("webhookdefinitions"):
        raise UnsupportedBundleError("webhooks (spec.webhookdefinitions) are not supported yet",
                                     path=csv.file, obj=where)
    if (csv.spec.get("apiservicedefinitions") or {}).get("owned"):
        raise UnsupportedBundleError("owned APIServices (spec.apiservicedefinitions.owned) are not supported yet",
                                     path=csv.file, obj=where)


def _group_kind(obj: Manifest) -> tuple[str, str]:
    return split_api_version(obj.get("apiVersion", ""))[0], obj.get("kind", "")


def _crds(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    for m in content.manifests:
        if _group_kind(m.obj) != CRD_GROUP_KIND:
            continue
        if m.obj["apiVersion"] != "apiextensions.k8s.io/v1":
            raise UnsupportedBundleError(f"CustomResourceDefinition in {m.obj['apiVersion']} is not "
                                         f"supported yet (only apiextensions.k8s.io/v1)",
                                         path=m.file, obj=content.name)
        yield copy.deepcopy(m.obj)


def _service_accounts(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    spec = csv.install_spec
    names = {p.get("serviceAccountName") for key in ("permissions", "clusterPermissions")
             for p in spec.get(key) or []}
    names |= {((d.get("spec") or {}).get("template", {}).get("spec") or {}).get("serviceAccountName")
              for d in spec.get("deployments") or []}
    shipped = {(m.obj.get("metadata") or {}).get("name") for m in content.manifests
               if _group_kind(m.obj) == ("", "ServiceAccount")}
    for name in sorted(n for n in names if n and n != "default" and n not in shipped):
        yield {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": plan.namespace}}


def _rule_sets(csv: Csv, key: str) -> list[tuple[str, str, list[Any]]]:
    """(object name, service account, rules) for each entry of permissions/clusterPermissions.

    The name ends in a hash of (key, service account, position), so entries of
    the two lists, or two entries for one account, can never share a name.
    """
    out = []
    for i, entry in enumerate(csv.install_spec.get(key) or []):
        sa = entry.get("serviceAccountName") or "default"
        suffix = hashlib.sha256(f"{key}/{sa}/{i}".encode()).hexdigest()[:8]
        out.append((bounded_name(csv.name, sa, suffix), sa, entry.get("rules") or []))
    return out


def _permissions(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    for name, sa, rules in _rule_sets(csv, "permissions"):
        subject = [{"kind": "ServiceAccount", "name": sa, "namespace": plan.namespace}]
        if plan.mode == ALL:
            yield _cluster_role(name, rules)
            yield _cluster_role_binding(name, subject)
            continue
        for ns in sorted(set(plan.target_namespaces) | {plan.namespace}):
            yield {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": name, "namespace": ns}, "rules": copy.deepcopy(rules)}
            yield {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": name, "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": subject}


def _cluster_permissions(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    for name, sa, rules in _rule_sets(csv, "clusterPermissions"):
        yield _cluster_role(name, rules)
        yield _cluster_role_binding(name, [{"kind": "ServiceAccount", "name": sa, "namespace": plan.namespace}])


def _cluster_role(name: str, rules: list[Any]) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": copy.deepcopy(rules)}


def _cluster_role_binding(name: str, subjects: list[dict[str, str]]) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects}


def _deployments(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    for d in csv.install_spec.get("deployments") or []:
        name = d.get("name")
        if not name:
            raise UnsupportedBundleError("a deployment in the install strategy has no name",
                                         path=csv.file, obj=f"ClusterServiceVersion {csv.name}")
        spec = copy.deepcopy(d.get("spec") or {})
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        annotations = tmeta.setdefault("annotations", {})
        annotations["olm.targetNamespaces"] = ",".join(plan.target_namespaces)
        annotations["olm.operatorNamespace"] = plan.namespace
        yield {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": plan.namespace,
                            "labels": dict(d.get("label") or {})},
               "spec": spec}


def _optional_objects(csv: Csv, content: BundleContent, plan: InstallPlan) -> Iterator[Manifest]:
    for m in content.manifests:
        gk = _group_kind(m.obj)
        if gk in (CSV_GROUP_KIND, CRD_GROUP_KIND):
            continue
        if gk not in OPTIONAL_KINDS:
            raise UnsupportedBundleError(
                f"{gk[1]} in API group {gk[0] or 'core'} is not an object a registry+v1 bundle may carry",
                path=m.file, obj=content.name,
                hint="the bundle format allows CRDs, the CSV and: "
                     + ", ".join(sorted(k for _, k in OPTIONAL_KINDS)))
        obj = copy.deepcopy(m.obj)
        if OPTIONAL_KINDS[gk]:
            obj.setdefault("metadata", {})["namespace"] = plan.namespace
        yield obj


GENERATORS: tuple[Callable[[Csv, BundleContent, InstallPlan], Iterator[Manifest]], ...] = (
    _crds, _service_accounts, _permissions, _cluster_permissions, _optional_objects, _deployments,
)

__all__ = ["ALL", "OWN", "SINGLE", "MULTI", "Csv", "InstallPlan", "ParsedManifest", "convert", "find_csv",
           "plan_install", "SUGGESTED_NAMESPACE"]
