"""Each Operator is applied as a ServiceAccount of its own, bound to exactly its approved permissions.

The reconciler creates, in its installer namespace, a ServiceAccount
``install-<operator>`` and binds it to the permissions approved for the
Operator's bundle: a ClusterRole and ClusterRoleBinding for the cluster-wide
rules, a Role and RoleBinding in each namespace for the namespaced ones. The
bundle's objects are then applied while impersonating that ServiceAccount,
so an object beyond the approval is refused by the API server itself (403),
not only by the reconciler's own check. RBAC changes reach the authoriser
asynchronously; after changing them, a SubjectAccessReview is polled until
the new rules are in force.
"""

from __future__ import annotations

import time

from reconciler.approve.permissions import CLUSTER, PermissionSet
from reconciler.cluster.kube import Kube
from reconciler.errors import ClusterError
from reconciler.model.kube import API_GROUP, FIELD_MANAGER, Manifest, ownership_labels

RBAC_V1 = "rbac.authorization.k8s.io/v1"
LABEL_INSTALLER = f"{API_GROUP}/installer-for"
_PROPAGATION_TIMEOUT = 15.0


def account_name(operator: str) -> str:
    return f"install-{operator}"


def role_name(operator: str) -> str:
    return f"{API_GROUP}:install:{operator}"


def username(namespace: str, operator: str) -> str:
    return f"system:serviceaccount:{namespace}:{account_name(operator)}"


def installer_objects(namespace: str, operator: str, permissions: PermissionSet) -> list[Manifest]:
    """The ServiceAccount and the RBAC that binds it to ``permissions``; deterministic."""
    labels = {"app.kubernetes.io/managed-by": "reconciler", LABEL_INSTALLER: operator}
    subject = [{"kind": "ServiceAccount", "name": account_name(operator), "namespace": namespace}]
    name = role_name(operator)
    out: list[Manifest] = [{"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": account_name(operator), "namespace": namespace, "labels": labels}}]
    for scope, rules in permissions.scopes().items():
        body = [{k: v for k, v in r.to_dict().items() if k != "namespaces"} for r in rules]
        if scope == CLUSTER:
            out.append({"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
                        "rules": body})
            out.append({"apiVersion": RBAC_V1, "kind": "ClusterRoleBinding",
                        "metadata": {"name": name, "labels": labels},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                        "subjects": subject})
        else:
            meta = {"name": name, "namespace": scope, "labels": labels}
            out.append({"apiVersion": RBAC_V1, "kind": "Role", "metadata": meta, "rules": body})
            out.append({"apiVersion": RBAC_V1, "kind": "RoleBinding", "metadata": dict(meta),
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                        "subjects": subject})
    return out


def ensure(kube: Kube, namespace: str, operator: str, permissions: PermissionSet, *,
           shipped_namespaces: set[str] = frozenset()) -> Kube:
    """Bind the Operator's installer to ``permissions`` (dropping what it no longer needs); a client acting as it.

    Its Roles need their namespaces first. One the bundle ships as an object is created here labelled as
    the Operator's, so that the bundle's own Namespace object then applies to it as to its own.
    """
    ns_info = kube.resource("v1", "Namespace")
    for ns in [namespace, *(s for s in permissions.scopes() if s != CLUSTER)]:
        if kube.get(ns_info, "", ns) is None:
            meta: dict = {"name": ns}
            if ns in shipped_namespaces:
                meta["labels"] = ownership_labels(operator)
            kube.apply(ns_info, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
                       field_manager=FIELD_MANAGER, dry_run=False)
    wanted = installer_objects(namespace, operator, permissions)
    changed = False
    for obj in wanted:
        info = kube.require_resource(obj)
        meta = obj["metadata"]
        live = kube.get(info, meta.get("namespace", ""), meta["name"])
        if live is None or _rbac_body(live) != _rbac_body(obj):
            kube.apply(info, obj, field_manager=FIELD_MANAGER, dry_run=False)
            changed = True
    changed |= _drop_stale(kube, operator, {(o["kind"], o["metadata"].get("namespace", "")) for o in wanted})
    user = username(namespace, operator)
    if changed:
        _wait_in_force(kube, user, permissions)
    return kube.impersonating(user)


def remove(kube: Kube, namespace: str, operator: str) -> None:
    """Delete an uninstalled Operator's installer and its RBAC."""
    _drop_stale(kube, operator, set())
    info = kube.resource("v1", "ServiceAccount")
    kube.delete(info, namespace, account_name(operator))


def _rbac_body(obj: Manifest) -> tuple:
    return (obj.get("rules"), obj.get("roleRef"), obj.get("subjects"),
            ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTALLER))


def _drop_stale(kube: Kube, operator: str, keep: set[tuple[str, str]]) -> bool:
    """Delete this installer's Roles/Bindings in scopes it no longer needs."""
    dropped = False
    for kind in ("RoleBinding", "Role", "ClusterRoleBinding", "ClusterRole"):
        info = kube.resource(RBAC_V1, kind)
        for item in kube.list(info, label_selector=f"{LABEL_INSTALLER}={operator}"):
            meta = item.get("metadata") or {}
            if (kind, meta.get("namespace", "")) not in keep:
                kube.delete(info, meta.get("namespace", ""), meta["name"])
                dropped = True
    return dropped


def _wait_in_force(kube: Kube, user: str, permissions: PermissionSet) -> None:
    """Poll SubjectAccessReviews for one request per scope until RBAC grants them."""
    from reconciler.approve import access_check
    from reconciler.model.provisioner import Identity

    namespace = user.split(":")[2]
    identity = Identity(user, ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                               "system:authenticated"))
    probes = []
    for rules in permissions.scopes().values():
        probes.extend(next(iter(PermissionSet.of([r]).atoms()), None) for r in rules[:1])
    deadline = time.monotonic() + _PROPAGATION_TIMEOUT
    while True:
        check = access_check(kube)  # a fresh cache each round
        if all(check(identity, a) for a in probes if a is not None):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"the RBAC bound to {user} did not take effect within {_PROPAGATION_TIMEOUT:.0f}s",
                               hint="check the API server's RBAC authoriser; rerun to retry")
        time.sleep(0.1)
