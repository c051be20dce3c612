"""Kubernetes labels and LabelSelectors, as the API server checks and matches them.

A ``LabelSelector`` (``matchLabels`` and ``matchExpressions``) is a value any
stage may use: the fleet places declarations on clusters with one, and an
``Instance``'s ``spec.selector`` is checked as one. The shapes here
(``LABELS``, ``SELECTOR``) are declared for ``model.shape``'s checker, so a
document is checked once where it enters; only the rule that ties one field to
another (``In`` needs values, ``Exists`` takes none) is written out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.errors import DeclarationError
from reconciler.model.kube import is_dns1123_subdomain
from reconciler.model.shape import STR, ListOf, MapOf, Obj, OneOf, Valid, check

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and (not value or (value[0].isalnum() and value[-1].isalnum() and all(
        c.isalnum() or c in "-_." for c in value) and value.isascii()))


def is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or is_dns1123_subdomain(prefix)) and bool(name) and is_label_value(name)


LABEL_KEY = Valid(STR, is_label_key, "a label name (an optional DNS prefix and '/', then at most 63 letters, "
                                     "digits, '-', '_' or '.')")
LABEL_VALUE = Valid(STR, is_label_value, "a label value (a string of at most 63 letters, digits, '-', '_' or '.')")
LABELS = MapOf(LABEL_VALUE, key=LABEL_KEY)
SELECTOR = Obj({
    "matchLabels": LABELS,
    "matchExpressions": ListOf(Obj({"key": LABEL_KEY, "operator": OneOf(OPERATORS), "values": ListOf(STR)},
                                   required=("key", "operator"), closed=True)),
}, closed=True)
LABELS_HINT = 'quote values YAML reads otherwise: "true", "1.36"'


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


def parse_labels(raw: Any, where: str, origin: str, obj: str) -> tuple[tuple[str, str], ...]:
    """``metadata.labels``-like mapping, checked; sorted pairs."""
    if raw is None:
        return ()
    check(raw, LABELS, where=where, path=origin, obj=obj, error=DeclarationError, hint=LABELS_HINT)
    return tuple(sorted(raw.items()))


def parse_selector(raw: Any, where: str, origin: str, obj: str) -> LabelSelector:
    """A LabelSelector as Kubernetes writes it (matchLabels, matchExpressions), checked as the API server does."""
    if not isinstance(raw, dict):   # said in a selector's words, not a generic mapping's
        from reconciler.model.shape import kind_of

        raise DeclarationError(f"{where} must be a LabelSelector mapping (matchLabels, matchExpressions), not "
                               f"{kind_of(raw)}", path=origin, obj=obj)
    check(raw, SELECTOR, where=where, path=origin, obj=obj, error=DeclarationError)
    reqs = []
    for i, expr in enumerate(raw.get("matchExpressions") or []):
        op, values = expr["operator"], expr.get("values")
        at = f"{where}.matchExpressions[{i}]"
        if op in ("In", "NotIn") and not values:
            raise DeclarationError(f"{at}.values must be a non-empty list of strings for {op}", path=origin, obj=obj)
        if op not in ("In", "NotIn") and values:
            raise DeclarationError(f"{at}.values must be empty for {op}", path=origin, obj=obj)
        reqs.append(Requirement(expr["key"], op, tuple(values or ())))
    return LabelSelector(parse_labels(raw.get("matchLabels"), f"{where}.matchLabels", origin, obj), tuple(reqs))
