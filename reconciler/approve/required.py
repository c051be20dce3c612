"""The permissions a bundle needs, computed offline from its rendered objects.

Two parts, kept apart because a reviewer reads them differently:

* ``grants``: what the operator will hold. Every rule of every Role and
  ClusterRole the bundle creates, at the role's scope (install modes are
  already mapped: an AllNamespaces operator's rules arrive as ClusterRoles);
  a binding to a role the bundle does not ship needs ``bind`` on that role,
  which is what RBAC demands of whoever creates the binding. These are also
  exactly what RBAC's escalation check demands of the identity that creates
  the roles, so they are needed to install the bundle at all.
* ``manages``: what is needed to create and keep its objects: create,
  update, patch and delete on each kind, in each namespace it uses, or
  cluster-wide for cluster-scoped kinds. Names are not part of it, so a
  renamed Deployment is not an escalation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from reconciler.approve.permissions import CLUSTER, PermissionSet, Rule, compact
from reconciler.model.kube import Manifest

MANAGE_VERBS = ("create", "delete", "patch", "update")
RBAC = "rbac.authorization.k8s.io"

# kind -> (plural, namespaced) for built-in kinds a bundle can carry; CRDs of the bundle add theirs,
# and a cluster's discovery, when there is one, answers for everything else.
_BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "ConfigMap"): ("configmaps", True), ("", "Secret"): ("secrets", True),
    ("", "Service"): ("services", True), ("", "ServiceAccount"): ("serviceaccounts", True),
    ("", "Namespace"): ("namespaces", False), ("", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("", "PersistentVolume"): ("persistentvolumes", False), ("", "Pod"): ("pods", True),
    ("", "Endpoints"): ("endpoints", True), ("", "LimitRange"): ("limitranges", True),
    ("", "ResourceQuota"): ("resourcequotas", True),
    ("apps", "Deployment"): ("deployments", True), ("apps", "StatefulSet"): ("statefulsets", True),
    ("apps", "DaemonSet"): ("daemonsets", True), ("apps", "ReplicaSet"): ("replicasets", True),
    ("batch", "Job"): ("jobs", True), ("batch", "CronJob"): ("cronjobs", True),
    (RBAC, "Role"): ("roles", True), (RBAC, "RoleBinding"): ("rolebindings", True),
    (RBAC, "ClusterRole"): ("clusterroles", False), (RBAC, "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("apiregistration.k8s.io", "APIService"): ("apiservices", False),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): ("validatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): ("mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"):
        ("validatingadmissionpolicybindings", False),
    ("policy", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("scheduling.k8s.io", "PriorityClass"): ("priorityclasses", False),
    ("networking.k8s.io", "NetworkPolicy"): ("networkpolicies", True),
    ("networking.k8s.io", "Ingress"): ("ingresses", True),
    ("networking.k8s.io", "IngressClass"): ("ingressclasses", False),
    ("storage.k8s.io", "StorageClass"): ("storageclasses", False),
    ("storage.k8s.io", "CSIDriver"): ("csidrivers", False),
    ("node.k8s.io", "RuntimeClass"): ("runtimeclasses", False),
    ("autoscaling", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", True),
    ("coordination.k8s.io", "Lease"): ("leases", True),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): ("flowschemas", False),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): ("prioritylevelconfigurations", False),
    ("monitoring.coreos.com", "ServiceMonitor"): ("servicemonitors", True),
    ("monitoring.coreos.com", "PodMonitor"): ("podmonitors", True),
    ("monitoring.coreos.com", "PrometheusRule"): ("prometheusrules", True),
    ("console.openshift.io", "ConsoleYAMLSample"): ("consoleyamlsamples", False),
    ("console.openshift.io", "ConsoleQuickStart"): ("consolequickstarts", False),
    ("console.openshift.io", "ConsoleCLIDownload"): ("consoleclidownloads", False),
    ("console.openshift.io", "ConsoleLink"): ("consolelinks", False),
}

# The resource of a kind: (plural, namespaced), or None when unknown.
ResourceLookup = Callable[[str, str], "tuple[str, bool] | None"]


@dataclass(frozen=True)
class Requirements:
    grants: PermissionSet
    manages: PermissionSet
    # ``bind`` on the roles the bundle ships, by name. Not approved separately (their rules are in
    # ``grants``) and not compared across versions (the names change with each version), but the
    # installer needs it: a binding is checked against its role, which a dry run has not created yet.
    binds_own_roles: PermissionSet = PermissionSet()

    @property
    def all(self) -> PermissionSet:
        return self.grants | self.manages

    @property
    def installer(self) -> PermissionSet:
        """What the installer identity is bound to when applying."""
        return self.all | self.binds_own_roles


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def guess_plural(kind: str) -> str:
    """A kind's resource name when neither the bundle nor the cluster says (as kubectl's fallback guesses)."""
    low = kind.lower()
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return low[:-1] + "ies"
    if low.endswith(("s", "x", "ch", "sh")):
        return low + "es"
    return low + "s"


def resource_lookup(objects: Iterable[Manifest], cluster: ResourceLookup | None = None) -> ResourceLookup:
    """Built-in kinds, then the bundle's own CRDs, then the cluster; else a guess from the object itself."""
    from_crds: dict[tuple[str, str], tuple[str, bool]] = {}
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition":
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
            if isinstance(spec.get("group"), str) and isinstance(names.get("kind"), str):
                from_crds[(spec["group"], names["kind"])] = (
                    str(names.get("plural") or guess_plural(names["kind"])), spec.get("scope") != "Cluster")

    def lookup(api_version: str, kind: str) -> tuple[str, bool] | None:
        key = (_group(api_version), kind)
        found = _BUILTIN.get(key) or from_crds.get(key)
        if found is None and cluster is not None:
            found = cluster(api_version, kind)
        return found
    return lookup


def required_permissions(objects: Iterable[Manifest], lookup: ResourceLookup | None = None) -> Requirements:
    """What installing ``objects`` needs: the rules it grants and the kinds it manages, by scope."""
    objects = list(objects)
    lookup = lookup or resource_lookup(objects)
    shipped = {(o.get("kind"), (o.get("metadata") or {}).get("namespace") or "", (o.get("metadata") or {}).get("name"))
               for o in objects if o.get("kind") in ("Role", "ClusterRole")}
    grants: list[Rule] = []
    manages: list[Rule] = []
    own_binds: list[Rule] = []
    for obj in objects:
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        namespace = meta.get("namespace") or ""
        found = lookup(api_version, kind)
        plural, namespaced = found if found else (guess_plural(kind), bool(namespace))
        scope = namespace if namespaced and namespace else CLUSTER
        manages.append(Rule.make(scope, verbs=MANAGE_VERBS, api_groups=[_group(api_version)], resources=[plural]))
        group = _group(api_version)
        if group != RBAC:
            continue
        name = meta.get("name", "?")
        if kind in ("Role", "ClusterRole"):
            for i, rule in enumerate(obj.get("rules") or []):
                grants.append(Rule.from_rbac(rule, CLUSTER if kind == "ClusterRole" else scope,
                                             f"{kind} {name} rules[{i}]"))
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
            ref_kind, ref_name = ref.get("kind"), ref.get("name")
            ref_ns = namespace if ref_kind == "Role" else ""
            if isinstance(ref_name, str):
                bind = Rule.make(scope, verbs=["bind"], api_groups=[RBAC],
                                 resources=["roles" if ref_kind == "Role" else "clusterroles"],
                                 resource_names=[ref_name])
                (own_binds if (ref_kind, ref_ns, ref_name) in shipped else grants).append(bind)
    return Requirements(compact(PermissionSet.of(grants).atoms()), compact(PermissionSet.of(manages).atoms()),
                        compact(PermissionSet.of(own_binds).atoms()))
