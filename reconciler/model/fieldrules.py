"""Rules for fields that other managers own, and for objects that are only created.

``ignoreDifferences`` has Argo CD's shape, in ``reconciler.yaml`` (the whole
repository) and in an Operator's ``spec.ignoreDifferences``:

```yaml
ignoreDifferences:
- group: apps                   # "" for the core group
  kind: Deployment
  name: plumbus-controller-manager    # optional; so is namespace
  jsonPointers: [/spec/replicas]
  managedFieldsManagers: [kube-controller-manager]
```

A field a rule names is neither reported as drift nor written once the object
exists: its owner (an autoscaler, an injector, the operator itself) keeps it.
``createOnly`` lists objects (group, kind, name, namespace) that are created
once and never overwritten; the annotation ``reconciler.dev/create-only:
"true"`` in a bundle says the same of one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.errors import InputError
from reconciler.model.kube import API_GROUP, ObjectRef

ANNOTATION_CREATE_ONLY = f"{API_GROUP}/create-only"
# Managers of client-side writes that server-side apply cannot take fields from by itself: their fields stay
# co-owned, so a field a bundle drops would stay on the object. They are taken over before the dry-run.
STALE_MANAGERS = ("kubectl-client-side-apply", "before-first-apply", "kubectl", "kubectl-edit", "kubectl-patch")


@dataclass(frozen=True)
class ObjectSelector:
    group: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""

    def matches(self, ref: ObjectRef) -> bool:
        return (self.group == ref.group and self.kind == ref.kind and self.name in ("", ref.name)
                and self.namespace in ("", ref.namespace))

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}{'.' + self.group if self.group else ''}{' ' + where + self.name if self.name else ''}"


@dataclass(frozen=True)
class IgnoreRule:
    target: ObjectSelector
    json_pointers: tuple[tuple[str, ...], ...] = ()   # each pointer split into its reference tokens
    managers: tuple[str, ...] = ()
    origin: str = ""            # where it is written, for the warning when it matches nothing
    default: bool = False       # one of the reconciler's own defaults (no warning when it matches nothing)

    def matches(self, ref: ObjectRef) -> bool:
        return self.target.matches(ref)


# Defaults: cert-manager's cainjector writes caBundle into webhooks, CRD conversions and APIServices of bundles
# that use its provider; the reconciler leaves the field to it.
DEFAULT_RULES = tuple(
    IgnoreRule(ObjectSelector(group, kind), managers=("cainjector",), origin="(default)", default=True)
    for group, kind in (("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
                        ("apiextensions.k8s.io", "CustomResourceDefinition"),
                        ("apiregistration.k8s.io", "APIService")))


def parse_pointer(text: str, where: str, path: str, obj: str | None) -> tuple[str, ...]:
    """An RFC 6901 JSON pointer as its reference tokens (``~1`` is ``/``, ``~0`` is ``~``)."""
    if not isinstance(text, str) or not text.startswith("/") or text == "/":
        raise InputError(f"{where}: {text!r} is not a JSON pointer to a field", path=path, obj=obj,
                         hint="for example /spec/replicas, /metadata/annotations/example.com~1key")
    tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/"))
    if tokens[0] in ("apiVersion", "kind") or tokens[:2] in (("metadata", "name"), ("metadata", "namespace")):
        raise InputError(f"{where}: {text} names what identifies the object; it cannot be ignored", path=path, obj=obj)
    return tokens


def _selector(raw: dict[str, Any], where: str, path: str, obj: str | None,
              extra: tuple[str, ...]) -> ObjectSelector:
    known = ("group", "kind", "name", "namespace", *extra)
    unknown = sorted(set(raw) - set(known), key=str)
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r}", path=path, obj=obj,
                         hint=f"known fields: {', '.join(known)}")
    values = {}
    for key in ("group", "kind", "name", "namespace"):
        value = raw.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise InputError(f"{where}.{key} must be a string", path=path, obj=obj)
        values[key] = value
    if not values["kind"]:
        raise InputError(f"{where}.kind is required", path=path, obj=obj,
                         hint="name the kind (and its group: apps for a Deployment, \"\" for the core group)")
    return ObjectSelector(**values)


def parse_ignore_rules(raw: Any, where: str, path: str, obj: str | None = None) -> tuple[IgnoreRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{where} must be a list of rules", path=path, obj=obj)
    rules = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{at} must be a mapping (group, kind, name, jsonPointers, managedFieldsManagers)",
                             path=path, obj=obj)
        target = _selector(item, at, path, obj, ("jsonPointers", "managedFieldsManagers"))
        pointers = item.get("jsonPointers") or []
        managers = item.get("managedFieldsManagers") or []
        if not isinstance(pointers, list) or not isinstance(managers, list) \
                or not all(isinstance(m, str) and m for m in managers):
            raise InputError(f"{at}: jsonPointers and managedFieldsManagers are lists of strings", path=path, obj=obj)
        if not pointers and not managers:
            raise InputError(f"{at} ignores nothing", path=path, obj=obj,
                             hint="give jsonPointers, managedFieldsManagers or both")
        rules.append(IgnoreRule(target, tuple(parse_pointer(p, f"{at}.jsonPointers", path, obj) for p in pointers),
                                tuple(managers), origin=f"{path}: {at}"))
    return tuple(rules)


def parse_create_only(raw: Any, where: str, path: str, obj: str | None = None) -> tuple[ObjectSelector, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{where} must be a list of objects (group, kind, name, namespace)", path=path, obj=obj)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InputError(f"{where}[{i}] must be a mapping (group, kind, name, namespace)", path=path, obj=obj)
        out.append(_selector(item, f"{where}[{i}]", path, obj, ()))
    return tuple(out)
