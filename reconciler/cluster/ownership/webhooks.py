"""Webhooks written before their server is ready: relaxed while the run lasts, never after it.

A webhook configuration applied before the Deployment that serves it is
available refuses (failurePolicy Fail) every request it intercepts, the
bundle's own Pods included: a bundle could lock itself out. So a configuration
this run writes whose Service has no ready endpoint goes out with
``failurePolicy: Ignore``, and on every way out of the run (healthy, degraded,
refused, an error, an interrupt) the bundle's own configuration is applied
again. A configuration the run does not write is never touched, whatever its
Service's state: a run changes nothing of an Operator it does not change.

The relaxed configuration carries the digest of what was sent, not the
bundle's: a run killed while one is relaxed leaves it looking changed, and
the next run writes the bundle's policy back. Restoring applies only what is
live in its relaxed form, so an Operator stopped before its webhooks were
written gets nothing written for it here.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.cluster.apply import Applier, Planned, digest_of, with_digest
from reconciler.kube.client import ApiError, Kube
from reconciler.cluster.health.wait import OperatorHealth, WEBHOOK_KINDS, soften_webhooks
from reconciler.model.kube import Manifest


@dataclass
class Relaxed:
    """One webhook configuration this run writes relaxed: what is sent, and the bundle's own to restore."""

    planned: Planned
    original: Manifest


def relax(kube: Kube, planned: list[Planned]) -> list[Relaxed]:
    """Relax, in place, the webhook configurations to be written whose Service has no ready endpoint."""
    candidates = [p for p in planned if p.write and (p.ref.group, p.ref.kind) in WEBHOOK_KINDS]
    if not candidates:
        return []
    objects, refs = soften_webhooks(kube, [p.obj for p in candidates])
    out = []
    for p, obj in zip(candidates, objects):
        if p.ref in refs:
            out.append(Relaxed(p, p.obj))
            p.obj = with_digest(obj)
    return out


def restore(applier: Applier, relaxed: list[Relaxed], health: dict[str, OperatorHealth]) -> list[str]:
    """Apply, through ``applier``, the bundle's own configuration over every one still live in its relaxed form;
    notes per Operator, for the change set."""
    kube = applier.kube
    restored: dict[str, list[str]] = {}
    notes = []
    for r in relaxed:
        p = r.planned
        try:
            info = p.info or kube.require_resource(r.original)
            live = kube.get(info, p.ref.namespace, p.ref.name)
            if live is None or digest_of(live) != digest_of(p.obj):
                continue   # never written this run (its Operator stopped earlier), or changed since: not ours to undo
            applier.write(p.operator, info, r.original)
        except ApiError as exc:
            notes.append(f"{p.operator}: {p.ref} is left with failurePolicy Ignore: applying the bundle's policy "
                         f"failed ({exc.message}); the next reconcile applies it")
            continue
        p.obj = r.original
        restored.setdefault(p.operator, []).append(str(p.ref))
    for name, refs in sorted(restored.items()):
        which = ", ".join(refs)
        verdict = health.get(name)
        if verdict is not None and verdict.healthy:
            notes.append(f"{name}: {which} got its failure policy once its Service had a ready endpoint")
        else:
            notes.append(f"{name}: {which} was applied with failurePolicy Ignore while its Service had no ready "
                         f"endpoint; the bundle's policy was applied again as the run ended, though the Service "
                         f"has no ready endpoint yet")
    return notes
