"""Sync the Operators of one reconciler instance: the project's ownership policy around the apply engine.

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

The policy is a package of small modules: ``inventory`` (one repository's
and one cluster's Operators per instance, renames), ``record`` (status
objects and the inventory, written before anything is applied), ``prune``,
``webhooks`` (a webhook configuration written before its server is ready is
relaxed for the run's length) and ``sync``, the one entry the pipeline calls.
"""

from __future__ import annotations

from reconciler.cluster.ownership.sync import Refused, Request, SyncResult, sync

__all__ = ["Refused", "Request", "SyncResult", "sync"]
