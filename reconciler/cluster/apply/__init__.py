"""The apply engine: plan, apply in stages, and the change set that says what was done.

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

Ownership is proven by provenance, never by labels (``provenance``): an
existing object is applied over only when the inventory it is given lists it
and our field manager applied it, or when it is annotated for adoption. Which
inventories those are, what is pruned, and the status objects that record
both are the ownership policy's, in ``cluster/ownership/``, which calls the
engine.

The engine is a package of small modules, one job each, imported in this
order (none reaches back): ``changes`` (the change set, the one value every
output is built from), ``order`` (stages and concurrency), ``digest`` (the
request-free "unchanged"), ``diff`` (explaining a change), ``provenance``
(whose object it is), ``fields``, ``crds``, ``target`` (the run's state:
client, mode, writers, change set), ``plan``, ``write`` and ``applier``, the
``Applier`` whose verbs (namespaces, plan, preview, apply, write, delete,
record, wait) are what the ownership policy calls. This face is the one door
into the engine: what a caller needs is named here, and no module outside the
engine imports one of its submodules (``tests/unit/project/test_imports.py``).
"""

from __future__ import annotations

from reconciler.cluster.apply.applier import Applier, Claims, PlanOptions, preview_empty
from reconciler.cluster.apply.changes import Action, Change, ChangeSet, DesiredOperator, PendingOperator
from reconciler.cluster.apply.crds import CRD, wait_established
from reconciler.cluster.apply.diff import describe_diff, label_of, unified
from reconciler.cluster.apply.digest import ANNOTATION_DIGEST, digest_of, is_current, with_digest
from reconciler.cluster.apply.fields import unmatched
from reconciler.cluster.apply.order import order_key
from reconciler.cluster.apply.plan import Plan, Planned
from reconciler.cluster.apply.provenance import applied_by_us, check_unique, never_adopted
from reconciler.cluster.apply.write import refused_on_write

__all__ = ["ANNOTATION_DIGEST", "CRD", "Action", "Applier", "Change", "ChangeSet", "Claims", "DesiredOperator",
           "PendingOperator", "Plan", "PlanOptions", "Planned", "applied_by_us", "check_unique", "describe_diff", "digest_of",
           "is_current", "label_of", "never_adopted", "order_key", "preview_empty", "refused_on_write", "unified",
           "unmatched", "wait_established", "with_digest"]
