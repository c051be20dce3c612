"""Which kind a resource that RBAC names stands for: the table a k8s+v1 bundle's required APIs are read with.

RBAC names resources (plurals); ``olm.gvk.required`` names kinds. The table
comes from CustomResourceDefinitions (a bundle's own, or those a catalog
keeps), and kinds are ordered by Kubernetes' version priority. The catalog
layer fills it from catalogs (``authoring.render.api_kinds``); the bundle layer
reads a bundle's requirements with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class APIKinds:
    """Which kind a resource name of an API group stands for, and the versions it is served in.

    RBAC names resources (plurals); ``olm.gvk.required`` names kinds. The
    mapping comes from CustomResourceDefinitions (a bundle's own, or those of
    the bundles in a catalog, kept as ``olm.bundle.object``), the owned
    ``crdDescriptions`` of ``olm.csv.metadata`` (named ``<plural>.<group>``),
    and, for a kind no such source names, the kind's guessed plural.
    """

    kinds: Mapping[tuple[str, str], Mapping[str, frozenset[str]]]   # (group, plural) -> kind -> versions

    def merged(self, other: APIKinds) -> APIKinds:
        out: dict[tuple[str, str], dict[str, frozenset[str]]] = {}
        for source in (self.kinds, other.kinds):
            for key, kinds in source.items():
                for kind, versions in kinds.items():
                    mine = out.setdefault(key, {})
                    mine[kind] = mine.get(kind, frozenset()) | versions
        return APIKinds(out)

    def lookup(self, group: str, resource: str) -> tuple[str, frozenset[str]] | None:
        """The one kind ``resource`` of ``group`` names, with its versions; None when unknown or ambiguous."""
        kinds = self.kinds.get((group, resource)) or {}
        return next(iter(kinds.items())) if len(kinds) == 1 else None


Table = dict[tuple[str, str], dict[str, set[str]]]   # (group, plural or "") -> kind -> versions


def collect(table: Table, group: str, plural: str, kind: str, version: str) -> None:
    if group and kind:
        table.setdefault((group, plural), {}).setdefault(kind, set()).update({version} if version else set())


def finish(exact: Table, guessed: Table) -> APIKinds:
    """Exact plurals, then the kinds only ``olm.gvk`` names, under the plural a CRD gives them or a guess."""
    from reconciler.model.resources import guess_plural

    out: Table = {key: {k: set(v) for k, v in kinds.items()} for key, kinds in exact.items()}
    plural_of = {(key[0], kind): key for key, kinds in exact.items() for kind in kinds}
    for (group, _), kinds in guessed.items():
        for kind, versions in kinds.items():
            key = plural_of.get((group, kind)) or (group, guess_plural(kind))
            out.setdefault(key, {}).setdefault(kind, set()).update(versions)
    return APIKinds({key: {k: frozenset(v) for k, v in kinds.items()} for key, kinds in out.items()})


def crd_names(exact: Table, obj: Any) -> None:
    if not isinstance(obj, dict) or obj.get("kind") != "CustomResourceDefinition":
        return
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(plural, str) and plural):
        return
    versions = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict)]
    versions += [spec.get("version")] if spec.get("version") else []
    for v in versions or [""]:
        collect(exact, group, plural, kind, str(v or ""))


def api_kinds_of_objects(objects: Iterable[Any]) -> APIKinds:
    """The plural -> kind mapping the CRDs among ``objects`` give."""
    exact: Table = {}
    for obj in objects:
        crd_names(exact, obj)
    return finish(exact, {})


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def kube_version_key(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version priority: GA over beta over alpha, then by number; other names last, by name."""
    m = _KUBE_VERSION.match(version)
    if not m:
        return (0, 0, 0, version)
    return ({None: 3, "beta": 2, "alpha": 1}[m.group(2)], int(m.group(1)), int(m.group(3) or 0), "")


def group_constraint(group: str, resource: str) -> dict[str, Any]:
    """The ``olm.constraint`` for a required resource whose kind nobody names: some bundle providing its group."""
    return {"failureMessage": f"requires {resource}.{group} (named by the operator's RBAC): no bundle provides an "
                              f"API of group {group}",
            "cel": {"rule": f"properties.exists(p, p.type == 'olm.gvk' && p.value.group == {json.dumps(group)})"}}
