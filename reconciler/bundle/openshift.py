"""OpenShift's upgrade gate a bundle carries: ``olm.maxOpenShiftVersion``, read as OLM v0 reads it.

A bundle says the newest OpenShift minor it supports with the property
``olm.maxOpenShiftVersion``, in the CSV's ``olm.properties`` annotation or in
``metadata/properties.yaml`` (``opm render`` puts both into the catalog's
``olm.bundle`` properties, and catalog-operator into the CSV's
``operatorframework.io/properties``). On OpenShift, OLM's ClusterOperator
reports ``Upgradeable=False`` while a CSV's maximum is below the cluster's next
minor, so the cluster is not upgraded past what the operator supports. The
reconciler records the value on the Operator's status (``metadata``) and
judges it the same way (``blocks``) where a user looks before an upgrade
(``reconciler status``, ``diff``'s next-minor check), since taking an install
over from OLM must not make that gate vanish.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

PROPERTY = "olm.maxOpenShiftVersion"
CSV_PROPERTIES_ANNOTATION = "olm.properties"


def declared(csv_annotations: dict[str, Any], bundle_properties: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """Every ``olm.maxOpenShiftVersion`` value the bundle declares, as written: those of ``metadata/``'s
    properties (``BundleContent.properties``: the first file that has some, as opm reads them), then those of the
    CSV's annotation."""
    values = [_text(p.get("value")) for p in bundle_properties if p.get("type") == PROPERTY]
    raw = csv_annotations.get(CSV_PROPERTIES_ANNOTATION)
    if isinstance(raw, str) and raw.strip():
        try:
            listed = json.loads(raw)
        except ValueError:
            listed = []
        values += [_text(p.get("value")) for p in listed if isinstance(p, dict) and p.get("type") == PROPERTY]
    return values


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def parse(values: list[str]) -> tuple[tuple[int, int] | None, str]:
    """The maximum as (major, minor), or why it is invalid, as OLM judges it: one property at most, its value (quotes
    stripped) a version of major and minor alone. (None, "") when the bundle declares none."""
    if not values:
        return None, ""
    if len(values) > 1:
        return None, f'defining more than one "{PROPERTY}" property is not allowed'
    value = values[0].strip().strip('"').strip()
    if not value:
        return None, 'value cannot be "" (an empty string)'
    parts = value.lstrip("v").split(".")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None, f'failed to parse "{value}" as a version'
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    if numbers[2]:
        return None, f"{PROPERTY} must specify only <major>.<minor>, got {value}"
    return (numbers[0], numbers[1]), ""


def next_minor(version: str) -> tuple[int, int] | None:
    """The OpenShift minor after ``version`` (4.23 is followed by 5.1, as OLM counts: 4.23 and 5.0 are one release)."""
    parts = version.strip().lstrip("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    major, minor = _normal((int(parts[0]), int(parts[1])))
    return major, minor + 1


def _normal(v: tuple[int, int]) -> tuple[int, int]:
    return (5, 0) if v == (4, 23) else v


def blocks(value: str, cluster: str) -> str:
    """Why an Operator whose bundle declares the maximum ``value`` keeps an OpenShift cluster at ``cluster`` from
    its next minor ("" when it does not), as OLM's ClusterOperator says it."""
    maximum, invalid = parse([value])
    if invalid:
        return f"its {PROPERTY} is invalid ({invalid}): OLM blocks every minor upgrade of OpenShift for it"
    nxt = next_minor(cluster)
    if maximum is None or nxt is None or _normal(maximum) >= nxt:
        return ""
    return (f"it supports OpenShift up to {maximum[0]}.{maximum[1]} ({PROPERTY}): the cluster, at {cluster}, cannot "
            f"be upgraded to {nxt[0]}.{nxt[1]} while it runs")


def recorded(csv_annotations: dict[str, Any], bundle_properties: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """What the Operator's status ``metadata`` records: ``maxOpenShiftVersion`` as declared (several values
    joined by commas, which OLM refuses too); nothing when the bundle declares none."""
    values = declared(csv_annotations, bundle_properties)
    return {"maxOpenShiftVersion": ",".join(values)} if values else {}


def cluster_version(kube, configured: str | None = None) -> tuple[str | None, str]:  # noqa: ANN001 - a Kube
    """The OpenShift release a cluster runs, and where that was read: its ``ClusterVersion`` ``version`` (the
    release it is at or moving to, ``status.desired.version``) when it serves one, else ``configured``
    (``openshiftVersion`` in reconciler.yaml). (None, "") when neither says."""
    info = kube.resource("config.openshift.io/v1", "ClusterVersion") if kube is not None else None
    if info is not None:
        found = kube.get(info, "", "version")
        version = (((found or {}).get("status") or {}).get("desired") or {}).get("version")
        if isinstance(version, str) and version:
            return version, "the cluster's ClusterVersion"
    if configured:
        return configured, "openshiftVersion in reconciler.yaml"
    return None, ""
