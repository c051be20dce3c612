"""Approval records as values: what was approved, kept in git, one file per Operator under ``approvals/``.

An approval is a commit. ``reconciler approve`` writes ``approvals/<name>.yaml``
listing, per approved bundle (name and content digest), the permissions that
were approved for it; the pull request that adds the entry is the approval.
The file is rendered deterministically (sorted, one layout), so a re-approval
of the same facts changes nothing and a review shows only what changed.
``repo/`` reads the files, ``approve/`` decides with them and writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reconciler import yamlio
from reconciler.errors import InputError
from reconciler.model.kube import API_GROUP
from reconciler.model.permissions import PermissionSet


APPROVALS_DIR = "approvals"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "Approval"
_HEADER = ("# Approved permissions, written by `reconciler approve`. Committing this file is the approval;\n"
           "# an entry applies only to the bundle with this exact name and content digest.\n")


@dataclass(frozen=True)
class ApprovedBundle:
    name: str
    digest: str
    permissions: PermissionSet
    waived_policies: tuple[str, ...] = ()
    # Taken over from what already ran (``reconciler adopt``): the evidence, e.g. the OLM v0 CSV and the
    # permissions it held. Not an escalation: the bundle ran with them before the repository knew of it.
    adopted: Any = field(default=None, hash=False)


@dataclass(frozen=True)
class ApprovalRecord:
    operator: str
    path: str
    bundles: tuple[ApprovedBundle, ...] = ()

    def find(self, name: str, digest: str) -> ApprovedBundle | None:
        return next((b for b in self.bundles if b.name == name and b.digest == digest), None)

    @property
    def union(self) -> PermissionSet:
        out = PermissionSet()
        for b in self.bundles:
            out = out | b.permissions
        return out


def is_record_file(name: str) -> bool:
    return not name.startswith(".") and name.endswith((".yaml", ".yml"))


def records_from(files: Iterable[tuple[str, str]]) -> dict[str, ApprovalRecord]:
    """Records from (repository-relative path, text) of each file of ``approvals/``, in name order."""
    out: dict[str, ApprovalRecord] = {}
    for rel, text in files:
        docs = yamlio.load_all(text, rel)
        if len(docs) != 1:
            raise InputError(f"an approval file holds exactly one Approval document, not {len(docs)}", path=rel)
        record = parse_record(docs[0], rel)
        if record.operator in out:
            raise InputError(f"two approval files name Operator {record.operator}", path=rel,
                             hint=f"the other is {out[record.operator].path}; keep one file per Operator")
        out[record.operator] = record
    return out


def parse_record(doc: Any, rel: str) -> ApprovalRecord:
    def fail(msg: str) -> InputError:
        return InputError(msg, path=rel, hint="approval files are written by `reconciler approve`; rerun it "
                                              "rather than editing by hand")
    if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise fail(f"not an approval record: expected apiVersion {API_VERSION}, kind {KIND}")
    meta, spec = doc.get("metadata"), doc.get("spec")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise fail("metadata.name must name the Operator")
    if not isinstance(spec, dict) or not isinstance(spec.get("bundles"), list):
        raise fail("spec.bundles must be a list")
    bundles = []
    for i, entry in enumerate(spec["bundles"]):
        where = f"spec.bundles[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("digest"), str) or not entry["digest"].startswith("sha256:"):
            raise fail(f"{where} needs a bundle name and a sha256: digest")
        unknown = sorted(set(entry) - {"name", "digest", "permissions", "waivedPolicies", "adopted"}, key=str)
        if unknown:
            raise fail(f"{where} has unknown field {unknown[0]!r}")
        try:
            perms = PermissionSet.from_list(entry.get("permissions") or [], f"{where}.permissions")
        except ValueError as exc:
            raise fail(str(exc)) from None
        waived = entry.get("waivedPolicies") or []
        if not isinstance(waived, list) or not all(isinstance(w, str) for w in waived):
            raise fail(f"{where}.waivedPolicies must be a list of policy names")
        adopted = entry.get("adopted")
        if adopted is not None and not (isinstance(adopted, dict) and (adopted.get("clusterServiceVersion")
                                                                       or adopted.get("clusterExtension"))):
            raise fail(f"{where}.adopted must name the clusterServiceVersion (OLM v0) or the clusterExtension "
                       f"(OLM v1) that ran with these permissions")
        bundles.append(ApprovedBundle(entry["name"], entry["digest"], perms, tuple(sorted(set(waived))), adopted))
    return ApprovalRecord(name, rel, tuple(bundles))


def render_record(record: ApprovalRecord) -> str:
    bundles = []
    for b in sorted(record.bundles, key=lambda b: (b.name, b.digest)):
        entry: dict[str, Any] = {"name": b.name, "digest": b.digest, "permissions": b.permissions.to_list()}
        if b.waived_policies:
            entry["waivedPolicies"] = list(b.waived_policies)
        if b.adopted:
            entry["adopted"] = b.adopted
        bundles.append(entry)
    doc = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": record.operator},
           "spec": {"bundles": bundles}}
    return _HEADER + yamlio.dump_record(doc)
