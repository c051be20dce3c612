"""Permissions as comparable values: RBAC rules with a scope, and whether one set covers another.

A ``Rule`` is an RBAC policy rule plus where it applies: cluster-wide
(``CLUSTER``) or in one namespace. A ``PermissionSet`` covers another when
every request the other allows is allowed by it, decided the way the RBAC
authoriser and its escalation check decide it: the other set is split into
atoms (one verb, group, resource, name and scope each) and each atom must be
matched by some rule. ``*`` in a rule matches anything; ``*`` in an atom is
itself a request for everything, matched only by ``*``. ``*/scale`` matches
the ``scale`` subresource of every resource; non-resource URLs match exactly,
by ``*``, or by a trailing-``*`` prefix. A cluster-wide rule covers every
namespace; a namespaced one covers only its namespace.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

CLUSTER = "*"   # the scope of a rule granted cluster-wide (a ClusterRole bound by a ClusterRoleBinding)
_WILDCARD = "*"


@dataclass(frozen=True, order=True)
class Rule:
    """One RBAC rule at one scope; every field sorted and without duplicates."""

    scope: str
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @staticmethod
    def make(scope: str, *, verbs: Iterable[str], api_groups: Iterable[str] = (), resources: Iterable[str] = (),
             resource_names: Iterable[str] = (), non_resource_urls: Iterable[str] = ()) -> Rule:
        return Rule(scope, _norm(api_groups), _norm(resources), _norm(verbs), _norm(resource_names),
                    _norm(non_resource_urls))

    @staticmethod
    def from_rbac(rule: Any, scope: str, where: str = "rule") -> Rule:
        """An RBAC ``PolicyRule`` mapping (as in a Role or ClusterRole) at ``scope``."""
        if not isinstance(rule, dict):
            raise ValueError(f"{where} must be a mapping with verbs, apiGroups and resources")
        fields = {}
        for key in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"):
            value = rule.get(key) or []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}.{key} must be a list of strings")
            fields[key] = value
        return Rule.make(scope, verbs=fields["verbs"], api_groups=fields["apiGroups"],
                         resources=fields["resources"], resource_names=fields["resourceNames"],
                         non_resource_urls=fields["nonResourceURLs"])

    def to_dict(self) -> dict[str, Any]:
        """The rule in RBAC's shape plus ``namespaces`` (seed 001's pending permissions); cluster-wide has none."""
        out: dict[str, Any] = {}
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        else:
            out["apiGroups"] = list(self.api_groups)
            out["resources"] = list(self.resources)
            if self.resource_names:
                out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        if self.scope != CLUSTER:
            out["namespaces"] = [self.scope]
        return out

    @staticmethod
    def from_dict(data: Any, where: str = "permission") -> list[Rule]:
        """The inverse of ``to_dict``: one rule per namespace listed, or one cluster-wide rule."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a mapping")
        unknown = set(data) - {"apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs", "namespaces"}
        if unknown:
            raise ValueError(f"{where} has unknown field {sorted(unknown)[0]!r}")
        namespaces = data.get("namespaces")
        if namespaces is None:
            scopes = [CLUSTER]
        elif isinstance(namespaces, list) and namespaces and all(isinstance(n, str) and n for n in namespaces):
            scopes = namespaces
        else:
            raise ValueError(f"{where}.namespaces must be a non-empty list of namespace names")
        return [Rule.from_rbac(data, scope, where) for scope in scopes]

    def describe(self) -> str:
        verbs = ",".join(self.verbs)
        if self.non_resource_urls:
            return f"{verbs}  {', '.join(self.non_resource_urls)}"
        groups = "/".join(g or "core" for g in self.api_groups)
        what = ", ".join(self.resources)
        names = f" named {', '.join(self.resource_names)}" if self.resource_names else ""
        return f"{verbs}  {what} ({groups}){names}"


@dataclass(frozen=True, order=True)
class Atom:
    """The smallest request a rule can allow: one verb on one resource (or URL) at one scope."""

    scope: str
    verb: str
    api_group: str = ""
    resource: str = ""
    name: str = ""
    url: str = ""


def _norm(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(values)))


def _atoms(rule: Rule) -> Iterator[Atom]:
    if rule.non_resource_urls:
        for verb in rule.verbs:
            for url in rule.non_resource_urls:
                yield Atom(CLUSTER, verb, url=url)
        return
    for verb in rule.verbs:
        for group in rule.api_groups:
            for resource in rule.resources:
                for name in rule.resource_names or ("",):
                    yield Atom(rule.scope, verb, group, resource, name)


def _resource_matches(have: str, want: str) -> bool:
    if have == _WILDCARD or have == want:
        return True
    # "*/scale" grants the scale subresource of every resource.
    return have.startswith("*/") and "/" in want and want.split("/", 1)[1] == have[2:]


def _url_matches(have: str, want: str) -> bool:
    return have == _WILDCARD or have == want or (have.endswith("*") and want.startswith(have[:-1]))


def _allows(rule: Rule, atom: Atom) -> bool:
    if _WILDCARD not in rule.verbs and atom.verb not in rule.verbs:
        return False
    if atom.url:
        return rule.scope == CLUSTER and any(_url_matches(u, atom.url) for u in rule.non_resource_urls)
    if rule.non_resource_urls or (rule.scope != CLUSTER and rule.scope != atom.scope):
        return False
    if _WILDCARD not in rule.api_groups and atom.api_group not in rule.api_groups:
        return False
    if not any(_resource_matches(r, atom.resource) for r in rule.resources):
        return False
    return not rule.resource_names or (bool(atom.name) and atom.name in rule.resource_names)


@dataclass(frozen=True)
class PermissionSet:
    """A normalised set of rules: comparable, printable, and the unit an approval records."""

    rules: tuple[Rule, ...] = ()

    @staticmethod
    def of(rules: Iterable[Rule]) -> PermissionSet:
        return PermissionSet(tuple(sorted(set(r for r in rules if r.verbs))))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __or__(self, other: PermissionSet) -> PermissionSet:
        return PermissionSet.of(self.rules + other.rules)

    def atoms(self) -> Iterator[Atom]:
        for rule in self.rules:
            yield from _atoms(rule)

    def allows(self, atom: Atom) -> bool:
        return any(_allows(rule, atom) for rule in self.rules)

    def covers(self, other: PermissionSet) -> bool:
        return all(self.allows(a) for a in other.atoms())

    def missing(self, other: PermissionSet) -> PermissionSet:
        """The part of ``other`` this set does not allow, regrouped into few readable rules."""
        return compact(a for a in other.atoms() if not self.allows(a))

    def scopes(self) -> dict[str, list[Rule]]:
        """Rules by scope, cluster-wide first."""
        out: dict[str, list[Rule]] = defaultdict(list)
        for rule in self.rules:
            out[rule.scope].append(rule)
        return dict(sorted(out.items(), key=lambda kv: (kv[0] != CLUSTER, kv[0])))

    def to_list(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rules]

    @staticmethod
    def from_list(items: Any, where: str = "permissions") -> PermissionSet:
        if not isinstance(items, list):
            raise ValueError(f"{where} must be a list")
        rules: list[Rule] = []
        for i, item in enumerate(items):
            rules.extend(Rule.from_dict(item, f"{where}[{i}]"))
        return PermissionSet.of(rules)

    def describe(self, indent: str = "  ") -> list[str]:
        """Lines grouped by scope, for the terminal and pull requests."""
        lines = []
        for scope, rules in self.scopes().items():
            lines.append(f"{indent}{'cluster-wide' if scope == CLUSTER else f'in namespace {scope}'}:")
            lines.extend(f"{indent}  {r.describe()}" for r in rules)
        return lines


def compact(atoms: Iterable[Atom]) -> PermissionSet:
    """Atoms grouped back into rules: verbs of one resource together, then resources sharing those verbs."""
    verbs: dict[tuple[str, str, str, str, str], set[str]] = defaultdict(set)
    for a in atoms:
        verbs[(a.scope, a.api_group, a.resource, a.name, a.url)].add(a.verb)
    merged: dict[tuple, set[str]] = defaultdict(set)
    for (scope, group, resource, name, url), vs in verbs.items():
        merged[(scope, group, name, url, tuple(sorted(vs)))].add(resource)
    rules = []
    for (scope, group, name, url, vs), resources in merged.items():
        if url:
            rules.append(Rule.make(scope, verbs=vs, non_resource_urls=[url]))
        else:
            rules.append(Rule.make(scope, verbs=vs, api_groups=[group], resources=resources,
                                   resource_names=[name] if name else []))
    return PermissionSet.of(rules)
