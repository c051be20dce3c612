"""ProvisionerClasses (seed 004): which approval policy an Operator's bundles go through.

A class is written as in the design document (``apiVersion: rukpak.io/v1``,
``provisioner``, free-form ``parameters``). Of the parameters, ``approval``
chooses the policy and ``approver`` names the identity UserPermission checks;
every other parameter is kept and reported as having no effect here. Two
classes exist without being declared, as in the document: ``olm.resolveset``
(Android) and ``olm.bundle`` (UserPermission); a repository may redeclare
them to change their policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DeclarationError

API_VERSIONS = ("rukpak.io/v1", "core.rukpak.io/v1alpha1")
POLICIES = ("AllowAll", "DenyAll", "Android", "UserPermission")
DEFAULT_CLASS = "olm.resolveset"
_KNOWN_PARAMETERS = {"approval", "approver"}


@dataclass(frozen=True)
class Identity:
    """A user or ServiceAccount that UserPermission asks SubjectAccessReviews about."""

    user: str
    groups: tuple[str, ...] = ()

    @staticmethod
    def parse(raw: Any, where: str, path: str) -> Identity:
        def fail(msg: str) -> DeclarationError:
            return DeclarationError(f"{where} {msg}", path=path,
                                    hint="write {user: NAME, groups: [...]} or "
                                         "{serviceAccount: {namespace: NS, name: NAME}}")
        if not isinstance(raw, dict):
            raise fail("must be a mapping")
        if "serviceAccount" in raw:
            sa = raw["serviceAccount"]
            if set(raw) != {"serviceAccount"} or not isinstance(sa, dict) or set(sa) != {"namespace", "name"} \
                    or not all(isinstance(v, str) and v for v in sa.values()):
                raise fail("serviceAccount must be exactly {namespace: NS, name: NAME}")
            return Identity.service_account(sa["namespace"], sa["name"])
        user, groups = raw.get("user"), raw.get("groups", [])
        if set(raw) - {"user", "groups"} or not isinstance(user, str) or not user \
                or not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise fail("must name a user (and optionally groups) or a serviceAccount")
        return Identity(user, tuple(groups))

    @staticmethod
    def service_account(namespace: str, name: str) -> Identity:
        """A ServiceAccount as the API server authenticates it: its user name and its groups."""
        return Identity(f"system:serviceaccount:{namespace}:{name}",
                        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))

    def describe(self) -> str:
        return self.user + (f" (groups {', '.join(self.groups)})" if self.groups and
                            not self.user.startswith("system:serviceaccount:") else "")


@dataclass(frozen=True)
class ProvisionerClass:
    name: str
    approval: str
    provisioner: str = ""
    approver: Identity | None = None
    ignored_parameters: tuple[str, ...] = ()
    origin: str = "(built in)"
    parameters: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


BUILTIN_CLASSES = {
    "olm.resolveset": ProvisionerClass("olm.resolveset", "Android", "operators.coreos.com/olm"),
    "olm.bundle": ProvisionerClass("olm.bundle", "UserPermission", "operators.coreos.com/operators"),
}


def parse_provisioner_class(doc: dict[str, Any], origin: str) -> ProvisionerClass:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise DeclarationError("ProvisionerClass has no metadata.name", path=origin)
    obj = f"ProvisionerClass {name}"
    unknown = sorted(set(doc) - {"apiVersion", "kind", "metadata", "provisioner", "parameters", "spec"}, key=str)
    if unknown:
        raise DeclarationError(f"unknown field {unknown[0]}", path=origin, obj=obj,
                               hint="a ProvisionerClass has provisioner and parameters (seed 004)")
    body = doc
    if "spec" in doc:  # core.rukpak.io/v1alpha1 nests the same fields under spec
        if not isinstance(doc["spec"], dict):
            raise DeclarationError("spec must be a mapping", path=origin, obj=obj)
        body = doc["spec"]
    provisioner = body.get("provisioner", "")
    if not isinstance(provisioner, str):
        raise DeclarationError("provisioner must be a string", path=origin, obj=obj)
    params = body.get("parameters") or {}
    if not isinstance(params, dict):
        raise DeclarationError("parameters must be a mapping", path=origin, obj=obj)
    approval = params.get("approval", "Android")
    if approval not in POLICIES:
        raise DeclarationError(f"parameters.approval must be one of {', '.join(POLICIES)}, not {approval!r}",
                               path=origin, obj=obj,
                               hint="the design document's 'AllowAll | DenyAll | Android' lists the choices; "
                                    "pick one")
    approver = Identity.parse(params["approver"], "parameters.approver", origin) if "approver" in params else None
    return ProvisionerClass(name, approval, provisioner, approver,
                            tuple(sorted(set(params) - _KNOWN_PARAMETERS, key=str)), origin, dict(params))
