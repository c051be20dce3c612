"""Whose object is it: provenance, never labels.

An existing object is applied over, or pruned, only when an inventory of
this instance lists it and our field manager applied it. Anything else is
foreign, whatever labels it carries, and is taken over only when annotated
for adoption. Also here: two Operators may not claim one object. Which
inventories an instance holds is the ownership policy's (``cluster/ownership/``).
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.cluster.apply.changes import DesiredOperator
from reconciler.errors import PolicyError
from reconciler.model.kube import (
    ANNOTATION_ADOPT, API_GROUP, FIELD_MANAGER, LABEL_OPERATOR, Manifest, ObjectRef,
)


def applied_by_us(live: Manifest) -> bool:
    """Whether our field manager applied the object: an Apply entry of ``reconciler`` in its managedFields."""
    return any(m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply"
               for m in (live.get("metadata") or {}).get("managedFields") or [])


_SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default"})


def never_adopted(ref: ObjectRef, live: Manifest) -> str:
    """Why an existing object must never be adopted by a bundle (empty when it may be, once annotated).

    The cluster's own objects and the reconciler's: RBAC named ``system:``, the built-in namespaces, an
    APIService the API server serves itself (no service behind it), and the reconciler's own API group.
    """
    if ref.group == API_GROUP or (ref.kind == "CustomResourceDefinition" and ref.name.endswith("." + API_GROUP)):
        return "is the reconciler's own"
    if ref.group == "rbac.authorization.k8s.io" and ref.name.startswith("system:"):
        return "is Kubernetes' own RBAC (named system:)"
    if ref.group == "" and ref.kind == "Namespace" and ref.name in _SYSTEM_NAMESPACES:
        return "is a namespace of Kubernetes itself"
    if ref.group == "apiregistration.k8s.io" and ref.kind == "APIService" \
            and not (live.get("spec") or {}).get("service"):
        return "is an API the API server serves itself (a built-in group version)"
    return ""


def check_owner(operator: str, ref: ObjectRef, live: Manifest, owned: Mapping[str, set[tuple[str, str, str, str]]],
                 moves: Mapping[str, str], instance: str = "default",
                 adopting: frozenset[tuple[str, str, str, str]] = frozenset()) -> None:
    """Refuse to apply over an object that is not provably ``operator``'s.

    Provenance, not labels: the object is ours when an inventory of this
    instance lists it and our field manager applied it. It is then
    ``operator``'s own, or the Operator it was renamed from, or another
    Operator's (refused). Anything else is foreign, whatever its labels say,
    and is taken over only when annotated for adoption, or when the Operator
    takes it over from the installer it replaces (``adopting``).
    """
    meta = live.get("metadata") or {}
    holders = sorted(name for name, keys in owned.items() if ref.key in keys)
    ours = applied_by_us(live)
    if ours and (operator in holders or moves.get(operator) in holders):
        return
    if ours and holders:
        raise PolicyError(f"{ref} already exists and belongs to Operator {holders[0]}",
                          hint="two Operators cannot own the same object")
    reserved = never_adopted(ref, live)
    if reserved:
        raise PolicyError(f"{ref} already exists and {reserved}; Operator {operator} cannot take it over, "
                          f"whatever its annotations", obj=str(ref),
                          hint="a bundle that ships this object cannot be installed here; remove the object from "
                               "the bundle, or install another version")
    if (meta.get("annotations") or {}).get(ANNOTATION_ADOPT) == "true" or ref.key in adopting:
        return
    label = (meta.get("labels") or {}).get(LABEL_OPERATOR)
    if label:
        why = (f"no Operator of reconciler instance {instance!r} recorded it in its inventory" if not holders else
               f"field manager {FIELD_MANAGER!r} did not apply it (it was replaced since)")
        raise PolicyError(f"{ref} already exists and carries the label {LABEL_OPERATOR}={label}, but {why}; "
                          f"labels do not make an object the reconciler's, refusing to take it over",
                          obj=str(ref),
                          hint=f"delete it, or annotate it with {ANNOTATION_ADOPT}=true to let Operator {operator} "
                               f"adopt it (it will then be pruned with the Operator)")
    raise PolicyError(f"{ref} already exists and was not created by the reconciler; refusing to take it over",
                      hint=f"delete it, or annotate it with {ANNOTATION_ADOPT}=true to let Operator "
                           f"{operator} adopt it (it will then be pruned with the Operator)")


def check_unique(desired: list[DesiredOperator]) -> None:
    owner: dict[tuple[str, str, str, str], str] = {}
    for op in desired:
        for obj in op.objects:
            ref = ObjectRef.of(obj)
            other = owner.setdefault(ref.key, op.name)
            if other != op.name:
                raise PolicyError(f"{ref} would be installed by both Operator {other} and Operator {op.name}",
                                  hint="two Operators cannot own the same object; install the package once, "
                                       "or in different namespaces if its objects are namespaced")


