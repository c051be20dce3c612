"""Review: what a change to the repository does, Operator by Operator, computed offline.

``compare`` compares the two sides of a change with pure functions, one per question a reviewer asks; ``collect``
reads, resolves and converts each side through the pipeline; ``apis`` and ``nextminor`` check the APIs the cluster's
next minor serves, ``updates`` lists what the catalogs offer, and ``render`` writes a review as text, JSON or
markdown."""

from __future__ import annotations

from reconciler.review.compare import (
    ApiFinding, Approval, BundleInfo, ObjectChange, OperatorChange, Owner, Review, SECRET_MASK, Side,
    catalog_deprecations, crd_changes, object_changes, rbac_delta, review, secret_lookup, upgrade_edge
)

__all__ = ["ApiFinding", "Approval", "BundleInfo", "ObjectChange", "OperatorChange", "Owner", "Review", "SECRET_MASK",
           "Side", "catalog_deprecations", "crd_changes", "object_changes", "rbac_delta", "review", "secret_lookup",
           "upgrade_edge"]
