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

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.model.permissions import CLUSTER, PermissionSet, Rule, compact
from reconciler.model.kube import Manifest
from reconciler.model.resources import ResourceLookup, group_of, guess_plural, resource_lookup

MANAGE_VERBS = ("create", "delete", "patch", "update")
RBAC = "rbac.authorization.k8s.io"


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
        manages.append(Rule.make(scope, verbs=MANAGE_VERBS, api_groups=[group_of(api_version)], resources=[plural]))
        group = group_of(api_version)
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
