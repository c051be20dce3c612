"""ProvisionerClasses (seed 004): which approval policy an Operator's bundles go through.

A class is written as in the design document (``apiVersion: rukpak.io/v1``,
``provisioner``, free-form ``parameters``). Of the parameters, ``approval``
chooses the policy and ``approver`` names the identity UserPermission checks;
every other parameter is kept and reported as having no effect here. The
classes the documents name exist without being declared: ``olm.resolveset``
and ``deppy.resolveset`` (Android), ``olm.bundle`` (UserPermission), and
RukPak's ``core-rukpak-io-plain`` and ``core-rukpak-io-registry`` (also
written as their provisioner ids, ``core.rukpak.io/plain`` and
``core.rukpak.io/registry``, as seed 002 does; ``registry.v1`` as seed 004's
RukPak Bundle does) (Android, this tool's default: a first install waits for
approval); a repository may
redeclare any of them to change its policy. A name or provisioner id that
is not one (the document's ``<good name>``, ``<unique id>``) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DeclarationError
from reconciler.model.kube import is_dns1123_subdomain

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
    # seed 004 also calls the resolve set's class deppy.resolveset; seed 003's Bundles name RukPak's classes
    "deppy.resolveset": ProvisionerClass("deppy.resolveset", "Android", "deppy.io/resolver"),
    "core-rukpak-io-plain": ProvisionerClass("core-rukpak-io-plain", "Android", "core.rukpak.io/plain"),
    "core-rukpak-io-registry": ProvisionerClass("core-rukpak-io-registry", "Android", "core.rukpak.io/registry"),
    # seed 004's RukPak Bundle names its class after the bundle format
    "registry.v1": ProvisionerClass("registry.v1", "Android", "core.rukpak.io/registry"),
}
# Seed 002 names RukPak's classes by their provisioner ids (not valid class names, so never a declared class).
PROVISIONER_ID_CLASSES = {
    "core.rukpak.io/plain": "core-rukpak-io-plain",
    "core.rukpak.io/registry": "core-rukpak-io-registry",
    "core.rukpak.io/converter": "core-rukpak-io-registry",   # converts registry+v1 to plain manifests, as here
}
# Classes the documents name for content this tool does not install: what to write instead.
UNSUPPORTED_CLASSES = {
    "helm.bundle": "Helm charts are not installed by the reconciler (seed 004 names helm.bundle for a Helm "
                   "provisioner); render the chart (helm template) into a plain+v0 bundle and use class "
                   "core-rukpak-io-plain",
}


def class_name(written: str) -> str:
    """The class a declaration means: a RukPak provisioner id stands for RukPak's class of that provisioner."""
    return PROVISIONER_ID_CLASSES.get(written, written)
# A provisioner's unique id (seed 004: "operators.coreos.com/operators"): a DNS subdomain, '/', a name.
_PROVISIONER_ID = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
                             r"/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def parse_provisioner_class(doc: dict[str, Any], origin: str) -> ProvisionerClass:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise DeclarationError("ProvisionerClass has no metadata.name", path=origin,
                               hint="name the class (metadata.name) that declarations and Bundles refer to; the "
                                    "design document prints a class's parameters alone only to show them")
    obj = f"ProvisionerClass {name}"
    if not is_dns1123_subdomain(name):
        raise DeclarationError(f"metadata.name {name!r} is not a valid name (lowercase letters, digits, '-' and "
                               f"'.')", path=origin, obj=obj,
                               hint="the design document's <good name> stands for a name to choose, such as "
                                    "olm.bundle or careful")
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
    if provisioner and not _PROVISIONER_ID.match(provisioner):
        raise DeclarationError(f"provisioner {provisioner!r} is not a provisioner id (a domain, '/', a name)",
                               path=origin, obj=obj,
                               hint="for example operators.coreos.com/operators; the design document's "
                                    "<unique id> stands for one")
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
