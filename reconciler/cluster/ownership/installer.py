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

An installer exists only while its Operator is desired and approved, or
still being uninstalled (its objects are pruned as the installer): every
reconcile deletes the installers of its instance that no Operator needs any
more, whichever way the Operator ended (declaration withdrawn, first install
refused, approval pending, renamed, handed to another instance), so no
identity bound to approved permissions outlives what it was approved for.
Installer objects carry their instance's label for that.
"""

from __future__ import annotations

import dataclasses
import time

from reconciler.model.permissions import CLUSTER, PermissionSet, Rule
from reconciler.kube.client import Kube
from reconciler.errors import ClusterError
from reconciler.model.kube import (
    ANNOTATION_ADOPT, API_GROUP, DEFAULT_INSTANCE, FIELD_MANAGER, LABEL_INSTALLER, LABEL_INSTANCE, LABEL_MANAGED_BY,
    MANAGED_BY, Manifest, ownership_labels,
)

RBAC_V1 = "rbac.authorization.k8s.io/v1"
_PROPAGATION_TIMEOUT = 15.0


def account_name(operator: str) -> str:
    return f"install-{operator}"


def role_name(operator: str) -> str:
    return f"{API_GROUP}:install:{operator}"


def username(namespace: str, operator: str) -> str:
    return f"system:serviceaccount:{namespace}:{account_name(operator)}"


def installer_objects(namespace: str, operator: str, permissions: PermissionSet,
                      instance: str = DEFAULT_INSTANCE) -> list[Manifest]:
    """The ServiceAccount and the RBAC that binds it to ``permissions``; deterministic."""
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_INSTALLER: operator, LABEL_INSTANCE: instance}
    subject = [{"kind": "ServiceAccount", "name": account_name(operator), "namespace": namespace}]
    name = role_name(operator)
    out: list[Manifest] = [{"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": account_name(operator), "namespace": namespace, "labels": labels}}]
    for scope, rules in permissions.scopes().items():
        body = [{k: v for k, v in r.to_dict().items() if k != "namespaces"} for r in merged_rules(rules)]
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


_DIMENSIONS = ("api_groups", "resources", "verbs", "resource_names", "non_resource_urls")


def merged_rules(rules: list[Rule]) -> list[Rule]:
    """The same permissions in as few rules as merging allows: what the installer's Role is made of.

    A rule allows every combination of its groups, resources, verbs and names, so two rules of one scope that
    differ in a single one of those lists allow together exactly what one rule with both lists does (a rule
    without names allows every name, so it only merges with another without names). Merged until no pair
    differs in one list. Fewer rules make the API server's RBAC checks of each request (the authoriser's walk
    and the escalation check of every Role and binding the installer writes) shorter; what is allowed is
    unchanged (``tests/unit/model/test_permissions.py``).
    """
    current = sorted(set(rules))
    while True:
        merged = _merge_once(current)
        if merged == current:
            return current
        current = merged


def _merge_once(rules: list[Rule]) -> list[Rule]:
    for dim in _DIMENSIONS:
        groups: dict[tuple, list[Rule]] = {}
        for r in rules:
            key = tuple((d, getattr(r, d)) for d in _DIMENSIONS if d != dim) + (
                (r.scope, bool(r.resource_names), bool(r.non_resource_urls)))
            groups.setdefault(key, []).append(r)
        if any(len(g) > 1 for g in groups.values()):
            out = []
            for g in groups.values():
                union: set[str] = set().union(*(getattr(r, dim) for r in g))
                out.append(dataclasses.replace(g[0], **{dim: tuple(sorted(union))}))
            return sorted(set(out))
    return rules


def ensure_all(kube: Kube, namespace: str, wanted: dict[str, tuple[PermissionSet, set[str]]], *,
               instance: str = DEFAULT_INSTANCE, keep: frozenset[str] = frozenset(),
               elsewhere: frozenset[str] = frozenset(), collect: bool = True) -> dict[str, Kube]:
    """Bind each Operator's installer to its permissions; a client acting as each. Delete the rest of the
    instance's installers, but those of ``keep`` (Operators still being uninstalled).

    ``wanted`` maps an Operator to its approved permissions and the namespaces its bundle ships as objects.
    Roles need their namespaces first; one the bundle ships is created here labelled as the Operator's, so
    that the bundle's own Namespace object then applies to it as to its own. What is in place is read with
    one LIST per kind for all Operators (a no-op reconcile costs the same for one Operator or fifty); only
    what differs is written, and RBAC that an Operator's installer no longer needs is deleted. An installer
    written before installers carried their instance is this instance's unless ``elsewhere`` (the Operators
    of other instances) names its Operator. With nothing wanted and nothing to ``collect`` (no Operator of
    the instance has ended), one labelled LIST of the namespace's ServiceAccounts says whether any installer
    of the instance is left over (an Operator handed to another instance, say) before anything more is read.
    """
    if not wanted and not collect and not _any_left(kube, namespace, instance):
        return {}
    ns_info = kube.resource("v1", "Namespace")
    live, names = _live(kube, namespaces=bool(wanted))
    existing = names or set()
    for operator, (permissions, shipped) in sorted(wanted.items()):
        for ns in [namespace, *(s for s in permissions.scopes() if s != CLUSTER)]:
            if ns in existing:
                continue
            meta: dict = {"name": ns}
            if ns in shipped:  # the bundle's own Namespace object then applies to it as its own
                meta["labels"] = ownership_labels(operator)
                meta["annotations"] = {ANNOTATION_ADOPT: "true"}
            kube.apply(ns_info, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
                       field_manager=FIELD_MANAGER, dry_run=False)
            existing.add(ns)
    changed: set[str] = set()
    for operator, (permissions, _) in sorted(wanted.items()):
        objects = installer_objects(namespace, operator, permissions, instance)
        for obj in objects:
            meta = obj["metadata"]
            current = live.pop((obj["kind"], meta.get("namespace", ""), meta["name"]), None)
            if current is None or _rbac_body(current) != _rbac_body(obj):
                kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=False)
                changed.add(operator)
    for (kind, ns, name), item in sorted(live.items()):
        labels = (item.get("metadata") or {}).get("labels") or {}
        operator, owner = labels.get(LABEL_INSTALLER), labels.get(LABEL_INSTANCE)
        if operator in wanted:
            if kind != "ServiceAccount":  # a scope this installer no longer needs
                kube.delete(kube.resource(item["apiVersion"], kind), ns, name)
                changed.add(operator)
        elif operator not in keep and (owner == instance or (owner is None and operator not in elsewhere)):
            _delete(kube, item["apiVersion"], kind, ns, name)   # an installer no Operator needs any more
    for operator in sorted(changed):
        _wait_in_force(kube, username(namespace, operator), wanted[operator][0])
    return {operator: kube.impersonating(username(namespace, operator)) for operator in wanted}


def in_place(kube: Kube, namespace: str, wanted: dict[str, tuple[PermissionSet, set[str]]], *,
             instance: str = DEFAULT_INSTANCE) -> dict[str, Kube]:
    """A client acting as each Operator's installer that is in place exactly as ``ensure_all`` would leave it
    (its ServiceAccount, and RBAC granting the approved permissions and nothing else), writing nothing. An
    Operator whose installer is missing, or bound to other permissions (a first install, an approval that
    changed), is left out: only a real run binds it.
    """
    writers, rebinding = for_dry_run(kube, namespace, wanted, instance=instance)
    return {operator: client for operator, client in writers.items() if operator not in rebinding}


def for_dry_run(kube: Kube, namespace: str, wanted: dict[str, tuple[PermissionSet, set[str]]], *,
                instance: str = DEFAULT_INSTANCE) -> tuple[dict[str, Kube], frozenset[str]]:
    """The identities a dry run plans with, writing nothing: the real run's own.

    A client acting as each Operator's installer whose ServiceAccount exists (the one the real run applies
    as), and the Operators among them whose installer the real run binds to other permissions first (an
    approval that changed): planned as bound now, what only the new permissions allow cannot be checked. An
    Operator with no installer yet (a first install) is left out.
    """
    live = _live(kube)[0]
    mine: dict[str, set[tuple[str, str, str]]] = {}
    for key, item in live.items():
        labels = (item.get("metadata") or {}).get("labels") or {}
        operator = labels.get(LABEL_INSTALLER)
        if operator and labels.get(LABEL_INSTANCE) in (None, instance):
            mine.setdefault(operator, set()).add(key)
    writers, rebinding = {}, set()
    for operator, (permissions, _) in sorted(wanted.items()):
        if ("ServiceAccount", namespace, account_name(operator)) not in mine.get(operator, set()):
            continue
        objects = installer_objects(namespace, operator, permissions, instance)
        keys = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects}
        if keys != mine[operator] or any(_rbac_body(live[(o["kind"], o["metadata"].get("namespace", ""),
                                                                o["metadata"]["name"])]) != _rbac_body(o)
                                         for o in objects):
            rebinding.add(operator)
        writers[operator] = kube.impersonating(username(namespace, operator))
    return writers, frozenset(rebinding)


def _any_left(kube: Kube, namespace: str, instance: str) -> bool:
    """Whether an installer ServiceAccount of ``instance`` (or of none: from before instances) exists."""
    info = kube.resource("v1", "ServiceAccount")
    if info is None:
        return False
    for item in kube.list(info, namespace=namespace, label_selector=LABEL_INSTALLER, metadata_only=True):
        owner = ((item.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE)
        if owner in (None, instance):
            return True
    return False


def remove(kube: Kube, namespace: str, operator: str) -> None:
    """Delete an uninstalled Operator's installer and its RBAC."""
    for (kind, ns, name), item in sorted(_live(kube, operator)[0].items()):
        _delete(kube, item["apiVersion"], kind, ns, name)


def _delete(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> None:
    info = kube.resource(api_version, kind)
    if info is not None:
        kube.delete(info, namespace, name)


def _rbac_body(obj: Manifest) -> tuple:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return (obj.get("rules"), obj.get("roleRef"), obj.get("subjects"), labels.get(LABEL_INSTALLER),
            labels.get(LABEL_INSTANCE))


_INSTALLER_KINDS = (("v1", "ServiceAccount"), (RBAC_V1, "ClusterRole"), (RBAC_V1, "ClusterRoleBinding"),
                    (RBAC_V1, "Role"), (RBAC_V1, "RoleBinding"))


def _live(kube: Kube, operator: str | None = None, *, namespaces: bool = False
          ) -> tuple[dict[tuple[str, str, str], Manifest], set[str] | None]:
    """Every installer object in the cluster (of one Operator, if given), by kind, namespace and name; and with
    ``namespaces`` the names of the cluster's namespaces. The lists are independent: sent at once."""
    from reconciler.kube.concurrent import concurrently

    selector = LABEL_INSTALLER if operator is None else f"{LABEL_INSTALLER}={operator}"

    def listing(kind: tuple[str, str] | None) -> list[Manifest]:
        if kind is None:
            return kube.list(kube.resource("v1", "Namespace"), metadata_only=True)
        return kube.list(kube.resource(*kind), label_selector=selector)

    lists = concurrently(listing, [*_INSTALLER_KINDS, *([None] if namespaces else [])])
    out = {}
    for (_, kind), items in zip(_INSTALLER_KINDS, lists):
        for item in items:
            meta = item.get("metadata") or {}
            out[(kind, meta.get("namespace", ""), meta.get("name", ""))] = item
    return out, {(o.get("metadata") or {}).get("name") for o in lists[-1]} if namespaces else None


def _wait_in_force(kube: Kube, user: str, permissions: PermissionSet) -> None:
    """Poll SubjectAccessReviews for one request per scope until RBAC grants them."""
    from reconciler.kube.access import access_check
    from reconciler.model.provisioner import Identity

    _, _, namespace, name = user.split(":")
    identity = Identity.service_account(namespace, name)
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
