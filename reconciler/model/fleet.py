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
from reconciler.model.kube import is_dns1123_label
from reconciler.model.labels import LABELS, LabelSelector, parse_labels, parse_selector
from reconciler.model.shape import SCALAR, STR, ListOf, MapOf, Obj, Valid, check

CLUSTER_API_VERSION = "reconciler.dev/v1alpha1"
CLUSTER_KIND = "Cluster"

_NAME = Valid(STR, is_dns1123_label, "a DNS-1123 label (lowercase letters, digits, '-')")
_NONEMPTY = Valid(STR, bool, "a name")
# The fleet's declarations as model.shape checks them: closed (an unknown field is an error), each value of its
# type and form; the selectors' own rules are in model.labels.
CLUSTER = Obj({
    "apiVersion": STR, "kind": STR,
    "metadata": Obj({"name": _NAME, "labels": LABELS, "annotations": MapOf(STR)}, required=("name",),
                    closed=True),
    "spec": Obj({"kubernetesVersion": SCALAR, "stage": _NAME, "context": _NONEMPTY}, closed=True),
}, required=("metadata",), closed=True)
PLACEMENT = Obj({
    "clusterSelector": Obj(),   # a LabelSelector: model.labels.SELECTOR, checked by parse_selector
    "overrides": ListOf(Obj({"clusterSelector": Obj(), "installNamespace": _NAME, "version": SCALAR,
                             "provisionerClassName": _NONEMPTY}, required=("clusterSelector",), closed=True)),
}, closed=True)


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


def _version_text(value: Any, where: str, origin: str, obj: str, hint: str) -> str:
    """A version written in YAML: a float is what ``1.10`` becomes unquoted, so it is refused with the fix."""
    if isinstance(value, float):
        raise _fail(f"{where} {value!r} was read as a number", origin, obj, hint=hint)
    return str(value)


def parse_placement(raw: Any, origin: str, obj: str) -> Placement:
    """``spec.placement``: ``clusterSelector`` and ``overrides``."""
    where = "spec.placement"
    check(raw, PLACEMENT, where=where, path=origin, obj=obj, error=DeclarationError)
    selector = None
    if raw.get("clusterSelector") is not None:
        selector = parse_selector(raw["clusterSelector"], f"{where}.clusterSelector", origin, obj)
    overrides = []
    for i, item in enumerate(raw.get("overrides") or []):
        at = f"{where}.overrides[{i}]"
        version = item.get("version")
        if version is not None:
            from reconciler.model.semver_range import VersionRange

            version = _version_text(version, f"{at}.version", origin, obj, 'quote it: "1.10"')
            try:
                VersionRange.parse(version)
            except Exception as exc:   # noqa: BLE001 - the range parser's own message says what is wrong
                raise _fail(f"{at}.version: {getattr(exc, 'message', exc)}", origin, obj) from None
        ns, pcls = item.get("installNamespace"), item.get("provisionerClassName")
        if ns is None and version is None and pcls is None:
            raise _fail(f"{at} overrides nothing", origin, obj,
                        hint="give installNamespace, version or provisionerClassName")
        overrides.append(Override(parse_selector(item["clusterSelector"], f"{at}.clusterSelector", origin, obj),
                                  ns, version, pcls))
    return Placement(selector, tuple(overrides))


def parse_cluster(doc: dict[str, Any], origin: str) -> ClusterDecl:
    """A ``Cluster`` declaration from ``clusters/<name>.yaml``; unknown fields are errors."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    obj = f"Cluster {name}" if isinstance(name, str) and is_dns1123_label(name) else "Cluster"
    check(doc, CLUSTER, path=origin, obj=obj, error=DeclarationError,
          hint="a Cluster has metadata (name, labels) and spec (kubernetesVersion, stage, context); "
               "docs/fleet.md shows one")
    labels = parse_labels(meta.get("labels"), "metadata.labels", origin, obj)
    spec = doc.get("spec") or {}
    version = spec.get("kubernetesVersion")
    if version is not None:
        from reconciler.model.semver_range import parse_version

        version = _version_text(version, "spec.kubernetesVersion", origin, obj,
                                'quote it: kubernetesVersion: "1.36"').lstrip("v")
        if version.count(".") == 1:   # a Kubernetes minor, as people write it: 1.36 is 1.36.0
            version += ".0"
        try:
            parse_version(version)
        except Exception as exc:   # noqa: BLE001
            raise _fail(f"spec.kubernetesVersion: {getattr(exc, 'message', exc)}", origin, obj) from None
    return ClusterDecl(name, origin, labels, version, spec.get("stage"), spec.get("context"))


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
