"""Writing approval records (``reconciler approve``); the records themselves are ``model/approvals.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from reconciler import yamlio
from reconciler.model.approvals import APPROVALS_DIR, ApprovalRecord, ApprovedBundle, render_record


def add_approval(root: Path, existing: ApprovalRecord | None, operator: str, bundle: ApprovedBundle) -> Path:
    """Record ``bundle`` as approved for ``operator`` (replacing an entry for the same name and digest; the
    evidence of an adopted entry is kept, since approving again does not make what ran before unknown)."""
    rel = existing.path if existing else f"{APPROVALS_DIR}/{operator}.yaml"
    same = existing.find(bundle.name, bundle.digest) if existing else None
    if same is not None and same.adopted and not bundle.adopted:
        bundle = replace(bundle, adopted=same.adopted)
    kept = tuple(b for b in (existing.bundles if existing else ()) if (b.name, b.digest) != (bundle.name, bundle.digest))
    record = ApprovalRecord(operator, rel, kept + (bundle,))
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    yamlio.write_atomic(path, render_record(record))
    return path
