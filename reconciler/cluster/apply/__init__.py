"""Sync desired objects to the cluster: plan, apply in stages, prune, record.

The change set says, per object, Created / Configured / Unchanged / Deleted /
Skipped. Everything is planned before anything is written: live objects are
read with one labelled LIST per kind, every object that may change is
server-side dry-run applied and compared with the live object, and ownership
conflicts are detected, so an invalid object or a conflict stops the run with
nothing applied. A first install is no exception for what reaches beyond the
namespace the run creates for it (its CRDs, APIServices, webhooks and cluster
RBAC act on the whole cluster the moment they exist); its objects inside that
namespace are validated as they are created, and a refusal there removes the
first install whole. Then objects are applied with server-side apply under one
field manager, stage by stage (namespaces, CRDs — waited for until
Established —, RBAC, ..., deployments), concurrently within a stage, and
finally objects that left the desired state are pruned.

An unchanged object costs no request beyond its kind's LIST. Each object we
apply carries ``reconciler.dev/applied-digest``, a digest of the
configuration sent; when the live digest matches the desired one and every
field of that configuration is still owned by our field manager (the API
server moves a field to whoever changes it), the object is what we would
apply and is skipped. Anything else is dry-run, and the difference is
described by a bounded, linear walk of both objects.

Ownership is proven by provenance, never by labels (anyone can write a
label): an existing object is applied over, or pruned, only when its
Operator's recorded inventory lists it and our field manager applied it
(an Apply entry of ``reconciler`` in managedFields). Anything else is
foreign and never taken over unless annotated ``reconciler.dev/adopt:
"true"``, even when it carries our labels. Inventories belong to one
reconciler instance (``applyset.py``): an instance never reads, applies over
or prunes another's.

Pruning is conservative. Only objects that are provably ours and still
carry the owner's label are deleted; an object annotated
``reconciler.dev/prune: disabled`` is kept and released (our labels are
removed, so a later install does not silently re-adopt it); a CRD that still
has custom resources is kept (deleting it would delete them) and stays in
the inventory until it can go, unless the declaration opted in with
``reconciler.dev/delete-custom-resources: "true"``. A declaration renamed
with its bundle unchanged is a move: the new name takes over the old one's
objects in place.

The engine is a package of small modules, one job each, imported in this
order (none reaches back): ``changes`` (the change set, the one value every
output is built from), ``order`` (stages and concurrency), ``digest`` (the
request-free "unchanged"), ``diff`` (explaining a change), ``ownership``
(provenance, instances, renames), ``crds``, ``plan``, ``write``, ``prune``,
``record`` (status objects and the inventory) and ``sync``, the one entry
the pipeline calls.
"""

from __future__ import annotations

from reconciler.cluster.apply.changes import Action, Change, DesiredOperator, PendingOperator, SyncResult
from reconciler.cluster.apply.diff import describe_diff
from reconciler.cluster.apply.digest import ANNOTATION_DIGEST, is_current, with_digest
from reconciler.cluster.apply.sync import sync

__all__ = ["ANNOTATION_DIGEST", "Action", "Change", "DesiredOperator", "PendingOperator", "SyncResult",
           "describe_diff", "is_current", "sync", "with_digest"]
