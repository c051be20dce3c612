"""A fleet: the clusters one repository drives, and where each Operator goes.

``clusters/<name>.yaml`` declares a ``Cluster`` (labels, Kubernetes version,
stage, kubeconfig context). An Operator or Input places itself with
``spec.placement.clusterSelector``, a Kubernetes LabelSelector (absent: every
cluster), and may carry ``spec.placement.overrides``: the few values that
must differ per cluster (install namespace, version range, approval policy),
each given to the clusters a selector matches, later entries winning. That is
the whole override mechanism: values, not templates, so a reviewer sees each
cluster's declaration by reading two lists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from reconciler.errors import DeclarationError
from reconciler.model.kube import is_dns1123_label, is_dns1123_subdomain
from reconciler.model.shape import kind_of

CLUSTER_API_VERSION = "reconciler.dev/v1alpha1"
CLUSTER_KIND = "Cluster"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes LabelSelector: every matchLabels pair and every requirement must hold (empty: all)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for r in self.requirements:
            parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})" if r.values else
                         (r.key if r.operator == "Exists" else f"!{r.key}"))
        return ",".join(parts) or "(every cluster)"


@dataclass(frozen=True)
class Override:
    """Values for the clusters ``selector`` matches; None leaves the declaration's own."""

    selector: LabelSelector
    install_namespace: str | None = None
    version: str | None = None
    provisioner_class: str | None = None


@dataclass(frozen=True)
class Placement:
    selector: LabelSelector | None = None          # None: every cluster
    overrides: tuple[Override, ...] = ()

    def places(self, labels: dict[str, str]) -> bool:
        return self.selector is None or self.selector.matches(labels)


@dataclass(frozen=True)
class ClusterDecl:
    name: str
    origin: str
    labels: tuple[tuple[str, str], ...] = ()
    kubernetes_version: str | None = None
    stage: str | None = None
    context: str | None = None

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def kube_context(self) -> str:
        return self.context or self.name


def _fail(message: str, origin: str, obj: str, hint: str | None = None) -> DeclarationError:
    return DeclarationError(message, path=origin, obj=obj, hint=hint)


def _known(data: dict[str, Any], known: tuple[str, ...], where: str, origin: str, obj: str) -> None:
    extra = sorted(set(data) - set(known), key=str)
    if extra:
        raise _fail(f"unknown field {where}.{extra[0]}" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""),
                    origin, obj, hint=f"known fields of {where}: {', '.join(known)}")


def _labels(raw: Any, where: str, origin: str, obj: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise _fail(f"{where} must be a mapping of label names to values, not {kind_of(raw)}", origin, obj)
    out = []
    for k, v in raw.items():
        if not isinstance(k, str) or not _label_key(k):
            raise _fail(f"{where}: {k!r} is not a label name", origin, obj,
                        hint="a label name is an optional DNS prefix and '/', then at most 63 letters, digits, "
                             "'-', '_' or '.'")
        if not isinstance(v, str) or not _label_value(v):
            raise _fail(f"{where}.{k}: {v!r} is not a label value (a string of at most 63 letters, digits, "
                        f"'-', '_' or '.')", origin, obj, hint='quote values YAML reads otherwise: "true", "1.36"')
        out.append((k, v))
    return tuple(sorted(out))


def _label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or is_dns1123_subdomain(prefix)) and _label_value(name) and bool(name)


def _label_value(value: str) -> bool:
    return len(value) <= 63 and (not value or (value[0].isalnum() and value[-1].isalnum() and all(
        c.isalnum() or c in "-_." for c in value) and value.isascii()))


def parse_selector(raw: Any, where: str, origin: str, obj: str) -> LabelSelector:
    """A LabelSelector as Kubernetes writes it (matchLabels, matchExpressions), checked as the API server does."""
    if not isinstance(raw, dict):
        raise _fail(f"{where} must be a LabelSelector mapping (matchLabels, matchExpressions), not {kind_of(raw)}",
                    origin, obj)
    _known(raw, ("matchLabels", "matchExpressions"), where, origin, obj)
    labels = _labels(raw.get("matchLabels"), f"{where}.matchLabels", origin, obj)
    reqs = []
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise _fail(f"{where}.matchExpressions must be a list", origin, obj)
    for i, expr in enumerate(exprs):
        at = f"{where}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            raise _fail(f"{at} must be a mapping with key, operator and values", origin, obj)
        _known(expr, ("key", "operator", "values"), at, origin, obj)
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values")
        if not isinstance(key, str) or not _label_key(key):
            raise _fail(f"{at}.key must be a label name", origin, obj)
        if op not in _OPERATORS:
            raise _fail(f"{at}.operator must be one of {', '.join(_OPERATORS)}, not {op!r}", origin, obj)
        if op in ("In", "NotIn"):
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise _fail(f"{at}.values must be a non-empty list of strings for {op}", origin, obj)
        elif values:
            raise _fail(f"{at}.values must be empty for {op}", origin, obj)
        reqs.append(Requirement(key, op, tuple(values or ())))
    return LabelSelector(labels, tuple(reqs))


def parse_placement(raw: Any, origin: str, obj: str) -> Placement:
    """``spec.placement``: ``clusterSelector`` and ``overrides``."""
    where = "spec.placement"
    if not isinstance(raw, dict):
        raise _fail(f"{where} must be a mapping, not {kind_of(raw)}", origin, obj)
    _known(raw, ("clusterSelector", "overrides"), where, origin, obj)
    selector = None
    if raw.get("clusterSelector") is not None:
        selector = parse_selector(raw["clusterSelector"], f"{where}.clusterSelector", origin, obj)
    overrides = []
    items = raw.get("overrides") or []
    if not isinstance(items, list):
        raise _fail(f"{where}.overrides must be a list", origin, obj)
    for i, item in enumerate(items):
        at = f"{where}.overrides[{i}]"
        if not isinstance(item, dict):
            raise _fail(f"{at} must be a mapping", origin, obj)
        _known(item, ("clusterSelector", "installNamespace", "version", "provisionerClassName"), at, origin, obj)
        if item.get("clusterSelector") is None:
            raise _fail(f"{at}.clusterSelector is required: it says which clusters the values are for", origin, obj)
        ns = item.get("installNamespace")
        if ns is not None and (not isinstance(ns, str) or not is_dns1123_label(ns)):
            raise _fail(f"{at}.installNamespace {ns!r} is not a namespace name", origin, obj)
        version = item.get("version")
        if version is not None:
            if isinstance(version, float):
                raise _fail(f"{at}.version {version!r} was read as a number", origin, obj, hint='quote it: "1.10"')
            from reconciler.model.semver_range import VersionRange

            try:
                VersionRange.parse(str(version))
            except Exception as exc:   # noqa: BLE001 - the range parser's own message says what is wrong
                raise _fail(f"{at}.version: {getattr(exc, 'message', exc)}", origin, obj) from None
        pcls = item.get("provisionerClassName")
        if pcls is not None and (not isinstance(pcls, str) or not pcls):
            raise _fail(f"{at}.provisionerClassName must name a ProvisionerClass", origin, obj)
        if ns is None and version is None and pcls is None:
            raise _fail(f"{at} overrides nothing", origin, obj,
                        hint="give installNamespace, version or provisionerClassName")
        overrides.append(Override(parse_selector(item["clusterSelector"], f"{at}.clusterSelector", origin, obj),
                                  ns, None if version is None else str(version), pcls))
    return Placement(selector, tuple(overrides))


def parse_cluster(doc: dict[str, Any], origin: str) -> ClusterDecl:
    """A ``Cluster`` declaration from ``clusters/<name>.yaml``; unknown fields are errors."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise _fail("Cluster needs metadata with a name", origin, "Cluster")
    name = meta.get("name")
    if not isinstance(name, str) or not is_dns1123_label(name):
        raise _fail(f"Cluster metadata.name {name!r} must be a DNS-1123 label (lowercase letters, digits, '-')",
                    origin, "Cluster")
    obj = f"Cluster {name}"
    _known(doc, ("apiVersion", "kind", "metadata", "spec"), "Cluster", origin, obj)
    _known(meta, ("name", "labels", "annotations"), "metadata", origin, obj)
    labels = _labels(meta.get("labels"), "metadata.labels", origin, obj)
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise _fail(f"spec must be a mapping, not {kind_of(spec)}", origin, obj)
    _known(spec, ("kubernetesVersion", "stage", "context"), "spec", origin, obj)
    version = spec.get("kubernetesVersion")
    if version is not None:
        if isinstance(version, float):
            raise _fail(f"spec.kubernetesVersion {version!r} was read as a number", origin, obj,
                        hint='quote it: kubernetesVersion: "1.36"')
        from reconciler.model.semver_range import parse_version

        version = str(version).lstrip("v")
        if version.count(".") == 1:   # a Kubernetes minor, as people write it: 1.36 is 1.36.0
            version += ".0"
        try:
            parse_version(version)
        except Exception as exc:   # noqa: BLE001
            raise _fail(f"spec.kubernetesVersion: {getattr(exc, 'message', exc)}", origin, obj) from None
    stage, context = spec.get("stage"), spec.get("context")
    if stage is not None and (not isinstance(stage, str) or not is_dns1123_label(stage)):
        raise _fail(f"spec.stage {stage!r} must be a stage name of reconciler.yaml's stages", origin, obj)
    if context is not None and (not isinstance(context, str) or not context):
        raise _fail("spec.context must name a kubeconfig context", origin, obj)
    return ClusterDecl(name, origin, labels, None if version is None else str(version), stage, context)


def for_cluster(decl: Any, cluster: ClusterDecl) -> Any:
    """The declaration as ``cluster`` gets it (overrides applied), or None when it is not placed there."""
    placement: Placement | None = getattr(decl, "placement", None)
    if placement is None:
        return decl
    labels = cluster.label_map
    if not placement.places(labels):
        return None
    changes: dict[str, Any] = {}
    for o in placement.overrides:
        if not o.selector.matches(labels):
            continue
        if o.install_namespace is not None:
            changes["install"] = dataclasses.replace(changes.get("install", decl.install),
                                                     namespace=o.install_namespace)
        if o.version is not None:
            from reconciler.model.semver_range import VersionRange

            changes["version"] = VersionRange.parse(o.version)
        if o.provisioner_class is not None:
            changes["provisioner_class"] = o.provisioner_class
    return dataclasses.replace(decl, **changes) if changes else decl
