"""Whose Operators are these: the inventory this instance recorded in its status objects.

An instance acts only on its own Operators, of one repository and one
cluster; another instance's Operator is never taken by name; a renamed
declaration installing the same bundle is a move, and an old name whose
renamed declaration waits for approval keeps what it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.ownership.applyset import Instance
from reconciler.cluster.apply import DesiredOperator, PendingOperator
from reconciler.errors import PolicyError
from reconciler.model.kube import ANNOTATION_REPOSITORY


def check_repositories(mine: Mapping[str, status_objects.Recorded], declared: set[str],
                       instance: Instance) -> list[str]:
    """Refuse to act while this instance holds Operators that another repository declared; return the names of
    Operators recorded before repositories were, that this repository now records as its own.

    A status object names the repository that declared it. One recorded from another repository is never
    pruned, applied over or renamed from here: the two repositories share one instance (both left
    ``instance:`` unset, say), which cannot work, so nothing is done and both are named. A status object
    written before repositories were recorded is this repository's when its recorded revision is a commit of
    this repository, or when this repository declares it by name (it installed it, as an upgrade finds it);
    otherwise it is refused likewise. An explicit hand-over is an annotation (docs/ownership.md).
    """
    if not instance.repository:
        return []
    foreign: dict[str, list[str]] = {}
    unproven: list[str] = []
    claimed: list[str] = []
    for name, rec in sorted(mine.items()):
        if rec.repository == instance.repository:
            continue
        if rec.repository:
            foreign.setdefault(rec.repository, []).append(name)
        elif name in declared or instance.knows_revision(rec.status.get("revision")):
            claimed.append(name)
        else:
            unproven.append(name)
    if not foreign and not unproven:
        return claimed
    lines = [f"from repository {repo}: {', '.join(names)}" for repo, names in sorted(foreign.items())]
    if unproven:
        revisions = sorted({str(mine[n].status.get("revision") or "an unversioned tree")[:12] for n in unproven})
        lines.append(f"from a repository not recorded (installed before repositories were recorded, at "
                     f"{', '.join(revisions)}, which this repository does not have): "
                     f"{', '.join(unproven)}")
    first = ([n for _, names in sorted(foreign.items()) for n in names] + unproven)[0]
    owner = sorted(foreign)[0] if foreign else "<this repository>"
    raise PolicyError(
        f"reconciler instance {instance.name!r} in this cluster holds Operators that another repository "
        f"installed; this is repository {instance.repository}, and it neither prunes nor takes over another "
        f"repository's Operators, so nothing was applied or deleted:\n  " + "\n  ".join(lines),
        obj=f"instance {instance.name}",
        hint=f"each repository reconciled into one cluster needs its own instance: set 'instance: <name>' in this "
             f"repository's reconciler.yaml. To hand an Operator over to this repository instead, annotate it "
             f"(docs/ownership.md): kubectl annotate operators.reconciler.dev {first} "
             f"{ANNOTATION_REPOSITORY}={instance.repository} --overwrite"
             + (f"; if it is this repository's under another address ({owner}), set 'repository: {owner}' in "
                f"reconciler.yaml" if foreign else ""))


def check_cluster(mine: Mapping[str, status_objects.Recorded], instance: Instance) -> None:
    """Refuse to reconcile one cluster of a fleet into another: the status objects say which cluster they are.

    A kubeconfig context that points at the wrong cluster would otherwise install, upgrade and prune the
    Operators of one cluster's declarations in another. Status objects recorded without a cluster (written
    outside a fleet) are taken as this one's.
    """
    if not instance.cluster:
        return
    others = sorted({rec.cluster for rec in mine.values() if rec.cluster and rec.cluster != instance.cluster})
    if others:
        names = sorted(n for n, rec in mine.items() if rec.cluster in others)
        raise PolicyError(f"this is cluster {instance.cluster!r} of the fleet, but the cluster reached holds the "
                          f"Operators of cluster {others[0]!r} ({', '.join(names[:5])}"
                          f"{' ...' if len(names) > 5 else ''}); nothing was applied or deleted",
                          obj=f"cluster {instance.cluster}",
                          hint=f"check the kubeconfig context (--context, or spec.context of clusters/"
                               f"{instance.cluster}.yaml); the Operators' reconciler.dev/cluster annotation says "
                               f"which cluster they belong to")


def check_instances(everyone: dict[str, status_objects.Recorded], names: list[str], instance: Instance) -> None:
    """Refuse a declaration whose name another reconciler instance already uses for an Operator."""
    for name in sorted(set(names)):
        rec = everyone.get(name)
        if rec is not None and rec.instance != instance.name:
            raise PolicyError(f"Operator {name} is declared by reconciler instance {instance.name!r}, but Operator "
                              f"{name} in this cluster belongs to reconciler instance {rec.instance!r}; refusing "
                              f"to take it over", obj=f"Operator {name}",
                              hint=f"rename the declaration, or remove it from the repository of instance "
                                   f"{rec.instance!r} first (each repository reconciled into one cluster needs its "
                                   f"own 'instance' in reconciler.yaml)")


def _same_bundle(bundle: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    return bool(bundle.get("name")) and (bundle.get("package"), bundle.get("name")) == \
        (other.get("package"), other.get("name"))


def find_moves(desired: list[DesiredOperator], recorded: dict[str, status_objects.Recorded]) -> dict[str, str]:
    """Renamed declarations: new name -> old name, when the old one is gone and the new one installs the
    same bundle (package and bundle name) it had. Each old name moves to at most one new name."""
    names = {op.name for op in desired}
    gone = {name: rec for name, rec in recorded.items() if name not in names}
    out: dict[str, str] = {}
    for op in desired:
        if op.name in recorded:
            continue
        for name, rec in sorted(gone.items()):
            if name not in out.values() and _same_bundle(op.bundle, rec.status.get("bundle") or {}):
                out[op.name] = name
                break
    return out


def held_renames(mine: dict[str, status_objects.Recorded], pending: tuple[PendingOperator, ...],
                  declared: set[str]) -> set[str]:
    """An old name whose renamed declaration waits for approval keeps what it has until the new one may move in."""
    out = set()
    for p in pending:
        if p.name in mine:
            continue
        out |= {name for name, rec in mine.items()
                if name not in declared and _same_bundle(p.bundle, rec.status.get("bundle") or {})}
    return out
