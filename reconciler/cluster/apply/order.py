"""The order objects are written in.

Objects are written in stages (namespaces, CRDs, RBAC, ..., Deployments, then
the webhooks and APIServices that route requests to them); objects of one
stage do not depend on each other, so they go out concurrently
(``kube/concurrent.py``).
"""

from __future__ import annotations

from reconciler.model.kube import ObjectRef


CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")


_ORDER = {
    ("", "Namespace"): 0, CRD: 1, ("rbac.authorization.k8s.io", "ClusterRole"): 2,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): 3, ("", "ServiceAccount"): 4,
    ("rbac.authorization.k8s.io", "Role"): 5, ("rbac.authorization.k8s.io", "RoleBinding"): 6,
    ("", "Secret"): 7, ("", "ConfigMap"): 7, ("", "Service"): 8, ("apps", "Deployment"): 10,
    # Last: they route API requests to the Deployments applied just before.
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): 11,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): 11,
    ("apiregistration.k8s.io", "APIService"): 11,
}


def order_key(ref: ObjectRef) -> tuple[int, str, str, str, str]:
    return (_ORDER.get((ref.group, ref.kind), 9), ref.group, ref.kind, ref.namespace, ref.name)
