"""The order objects are written in, and running requests concurrently within one step.

Objects are written in stages (namespaces, CRDs, RBAC, ..., Deployments, then
the webhooks and APIServices that route requests to them); objects of one
stage do not depend on each other, so they go out concurrently.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from reconciler.cluster.kube import WORKERS
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


_POOL: ThreadPoolExecutor | None = None


_POOL_LOCK = threading.Lock()


_POOL_PREFIX = "reconciler-requests"


def concurrently(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` over ``items`` with up to ``WORKERS`` requests in flight; results in the order of ``items``.

    The worker threads live as long as the process (a loop reconciles every few minutes; starting eight
    threads several times per run costs more than the run's own work on a busy machine). A call made from a
    worker runs in that worker, so nesting cannot wait for itself.
    """
    global _POOL
    if len(items) <= 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [fn(i) for i in items]
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=_POOL_PREFIX)
    return list(_POOL.map(fn, items))
