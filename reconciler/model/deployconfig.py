"""``spec.config`` of an Operator: overrides of the Deployments a registry+v1 bundle installs (OLM v0's
Subscription ``spec.config``). Its shape is checked where the declaration is read; ``bundle.overrides`` merges it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.model.shape import ANY, INT_OR_STR, STR, ListOf, MapOf, Obj, Scalar, Valid

QUANTITY = Scalar((str, int, float), "a quantity (a string such as 100m or 64Mi, or a number)")
_REF = Obj({"name": STR, "optional": ANY}, required=("name",))
AFFINITY_PARTS = ("nodeAffinity", "podAffinity", "podAntiAffinity")
CLEARED_BY_EMPTY = ("resources", "nodeSelector", "affinity")   # written as {}, they clear the bundle's

#: The shape of ``spec.config``: the fields OLM v0 applies, each as Kubernetes spells it.
CONFIG_SHAPE = Obj({
    "env": ListOf(Obj({"name": Valid(STR, bool, "a non-empty name"), "value": STR, "valueFrom": Obj()},
                      required=("name",))),
    "envFrom": ListOf(Obj({"prefix": STR, "configMapRef": _REF, "secretRef": _REF})),
    "volumes": ListOf(Obj({"name": Valid(STR, bool, "a non-empty name")}, required=("name",))),
    "volumeMounts": ListOf(Obj({"name": Valid(STR, bool, "a non-empty name"), "mountPath": STR, "subPath": STR,
                                "readOnly": ANY}, required=("name", "mountPath"))),
    "tolerations": ListOf(Obj({"key": STR, "operator": STR, "value": STR, "effect": STR,
                               "tolerationSeconds": INT_OR_STR})),
    "resources": Obj({"limits": MapOf(QUANTITY), "requests": MapOf(QUANTITY), "claims": ListOf(Obj())},
                     closed=True),
    "nodeSelector": MapOf(STR),
    "affinity": Obj({k: Obj() for k in AFFINITY_PARTS}, closed=True),
    "annotations": MapOf(STR),
}, closed=True)


@dataclass(frozen=True)
class DeploymentConfig:
    """``spec.config`` as written (canonical JSON, so the settings stay hashable and comparable)."""

    text: str = ""

    @classmethod
    def of(cls, value: dict[str, Any] | None) -> DeploymentConfig:
        """Only the fields that say something: OLM v0 treats an absent, null or empty field alike, but for the
        three where ``{}`` clears what the bundle says (``resources``, ``nodeSelector``, ``affinity``)."""
        kept = {k: v for k, v in (value or {}).items()
                if v is not None and (k in CLEARED_BY_EMPTY or v not in ([], {}, ""))}
        return cls(json.dumps(kept, sort_keys=True) if kept else "")

    @property
    def value(self) -> dict[str, Any]:
        return json.loads(self.text) if self.text else {}

    def __bool__(self) -> bool:
        return bool(self.text)


__all__ = ["AFFINITY_PARTS", "CONFIG_SHAPE", "DeploymentConfig"]
