"""Which of deploy/'s RBAC grants the requests of its ServiceAccount used, read from the API server's audit log.

A grant is one verb on one resource of one rule of a Role or ClusterRole that deploy/ binds to the
ServiceAccount. A request uses every grant that authorises it: its own verb, resource (with subresource),
group, namespace (a Role's binding's) and name (``resourceNames``; a POST has none). The checks the API server
makes without a request of their own are read off the requests that cause them: a server-side apply that
creates its object (201) is also authorised as ``create``; a request sent while impersonating an installer uses
``impersonate`` on that ServiceAccount; a write of a Role or ClusterRole uses ``escalate`` on it, and a write
of a binding ``bind`` on the kind of role it binds (the installers' permissions are never the reconciler's own,
so the API server checks both on every such write).

A grant is redundant when every request it authorised was authorised by another rule too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from reconciler import yamlio

RBAC = "rbac.authorization.k8s.io"
WRITES = ("create", "patch", "update")


@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Grant:
    role: str       # Kind/name (namespace) of the role holding the rule
    rule: int
    verb: str
    resource: str

    def __str__(self) -> str:
        return f"{self.role} rules[{self.rule}]: {self.verb} {self.resource}"


def grants(docs: Iterable[dict], user: str) -> list[tuple[Grant, dict, str | None]]:
    """Every grant bound to ``user`` (system:serviceaccount:NS:NAME), with its rule and the namespace it is
    limited to (None: cluster-wide)."""
    docs = list(docs)
    _, _, sa_ns, sa_name = user.split(":")
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in docs if d.get("kind") in ("Role", "ClusterRole")}
    out = []
    for b in docs:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and s.get("namespace") == sa_ns
                   for s in b.get("subjects") or []):
            continue
        scope = b["metadata"].get("namespace")
        ref = b["roleRef"]
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else None, ref["name"])]
        label = f"{ref['kind']} {ref['name']}" + (f" ({scope})" if scope else "")
        for i, rule in enumerate(role.get("rules") or []):
            for verb in rule["verbs"]:
                for resource in rule["resources"]:
                    out.append((Grant(label, i, verb, resource), rule, scope))
    return out


def allows(rule: dict, scope: str | None, req: Request) -> bool:
    return (req.verb in rule["verbs"] or "*" in rule["verbs"]) \
        and (req.group in rule["apiGroups"] or "*" in rule["apiGroups"]) \
        and (req.resource in rule["resources"] or "*" in rule["resources"]) \
        and (not rule.get("resourceNames") or req.name in rule["resourceNames"]) \
        and (scope is None or scope == req.namespace)


def requests(audit_log: Path, user: str, start: int = 0) -> Iterator[Request]:
    """The authorised requests of ``user`` in the audit log from byte ``start``, and the checks they caused."""
    with audit_log.open("rb") as f:
        f.seek(start)
        for line in f:
            event = json.loads(line)
            if event.get("user", {}).get("username") != user or event.get("stage") != "ResponseComplete":
                continue
            code = (event.get("responseStatus") or {}).get("code", 0)
            ref = event.get("objectRef")
            impersonated = (event.get("impersonatedUser") or {}).get("username", "")
            if impersonated.startswith("system:serviceaccount:"):
                if code != 403 or event.get("annotations", {}).get("authorization.k8s.io/decision") == "allow":
                    _, _, ns, name = impersonated.split(":")
                    yield Request("impersonate", "", "serviceaccounts", ns, name)
                continue
            if ref is None or event.get("annotations", {}).get("authorization.k8s.io/decision") != "allow":
                continue   # discovery (granted to every user), or refused
            resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            name = "" if event["verb"] == "create" else ref.get("name", "")   # a POST names no object
            req = Request(event["verb"], ref.get("apiGroup", ""), resource, ref.get("namespace", ""), name)
            yield req
            if req.verb == "patch" and code == 201:
                yield Request("create", req.group, req.resource, req.namespace, req.name)
            if req.group == RBAC and req.verb in WRITES and code < 300:
                if req.resource in ("roles", "clusterroles"):
                    yield Request("escalate", RBAC, req.resource, req.namespace, req.name)
                elif req.resource in ("rolebindings", "clusterrolebindings"):
                    yield Request("bind", RBAC, req.resource.replace("bindings", "s"), req.namespace, "")


def unused(rbac_docs: Iterable[dict], audit_log: Path, user: str,
           start: int = 0) -> tuple[list[Grant], list[Grant], int]:
    """The grants no request used, those only ever used beside another rule, and how many authorised requests
    and the checks they caused were read."""
    return unused_across([(list(rbac_docs), audit_log, start)], user)


def unused_across(runs: Iterable[tuple[list[dict], Path, int]], user: str) -> tuple[list[Grant], list[Grant], int]:
    """``unused`` over several clusters, each with the RBAC bound there and its audit log (from a byte offset):
    a grant is used, or used alone, if it is on any of them."""
    everything: dict[Grant, None] = {}
    used: set[Grant] = set()
    alone: set[Grant] = set()
    count = 0
    for rbac_docs, audit_log, start in runs:
        bound = grants(rbac_docs, user)
        everything.update((g, None) for g, _, _ in bound)
        for req in requests(audit_log, user, start):
            count += 1
            matching = {grant for grant, rule, scope in bound if grant.verb == req.verb
                        and grant.resource in (req.resource, "*") and allows(rule, scope, req)}
            used |= matching
            if len({(g.role, g.rule) for g in matching}) == 1:
                alone |= matching
    return [g for g in everything if g not in used], [g for g in everything if g in used - alone], count


def deploy_rbac(deploy: Path, *components: str) -> list[dict]:
    """deploy/base's RBAC, and that of the named components (deploy/olm-takeover)."""
    return [d for part in ("base", *components) for d in yamlio.read_all(deploy / part / "rbac.yaml") if d]
