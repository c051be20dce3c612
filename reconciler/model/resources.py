"""Kinds as resources: each kind's plural name and whether it is namespaced, without asking a cluster.

Conversion places a bundle's namespace-less objects (namespaced kinds only),
the approval stage names the resources a bundle manages, and guardrails name
a kind's resource; all three read the same answer here: the built-in kinds,
then the bundle's own CRDs, then (given one) the cluster's discovery, else a
guess from the kind as kubectl guesses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from reconciler.model.kube import Manifest

RBAC = "rbac.authorization.k8s.io"

# kind -> (plural, namespaced) for built-in kinds a bundle can carry; CRDs of the bundle add theirs,
# and a cluster's discovery, when there is one, answers for everything else.
BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
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
    ("console.openshift.io", "ConsolePlugin"): ("consoleplugins", False),
}

# The resource of a kind: (plural, namespaced), or None when unknown.
ResourceLookup = Callable[[str, str], "tuple[str, bool] | None"]


def group_of(api_version: str) -> str:
    """The API group of an apiVersion ("" for the core group's v1)."""
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
        key = (group_of(api_version), kind)
        found = BUILTIN.get(key) or from_crds.get(key)
        if found is None and cluster is not None:
            found = cluster(api_version, kind)
        return found
    return lookup
