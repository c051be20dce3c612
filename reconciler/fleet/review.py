"""A change reviewed across a fleet: every cluster's review, clusters with the same outcome grouped.

Each cluster is reviewed as ``diff --cluster`` would (its base view against
its working-tree view, with what it runs at the base as installed), but a
side is resolved and converted once per distinct set of facts, so a
thousand clusters of five shapes cost ten sides. Reviews that read the same
are one group: "prod-eu, prod-us (2 clusters): plumbus 1.0.0 -> 1.1.0". The
markdown form stays under ``MARKDOWN_LIMIT`` characters whatever the fleet's
size: groups first, then each group's detail while room remains, then counts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import hold_details, select_cluster
from reconciler.report.words import agree, counted
from reconciler.review import Review, Side, review

MARKDOWN_LIMIT = 60_000   # GitHub refuses a comment over 65,536 characters
NAMES_SHOWN = 12          # cluster names listed per group before "and N more"


@dataclass(frozen=True)
class Group:
    clusters: tuple[str, ...]
    review: Review

    @property
    def changed(self) -> bool:
        return self.review.changed


@dataclass(frozen=True)
class FleetReview:
    before: str
    after: str
    groups: tuple[Group, ...]
    held: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (what a stage holds, the clusters it holds so)
    refusals: tuple[str, ...] = ()   # what a reconcile of a cluster would refuse after this change

    @property
    def changed(self) -> bool:
        return any(g.changed for g in self.groups)

    @property
    def clusters(self) -> int:
        return sum(len(g.clusters) for g in self.groups)


def _key(view: RepoSnapshot | None, installed: Any = None, holds: list | None = None) -> str:
    from reconciler.fleet.resolve import facts_digest

    if view is None:
        return "-"
    extra = repr(installed.entries) if installed is not None else ""
    held = None if holds is None else {h.package: h.bundles for h in holds}
    return hashlib.sha256((facts_digest(view, held) + extra).encode()).hexdigest()


def compute_fleet(root: Path, base: str | None = None, *, snapshot: RepoSnapshot | None = None) -> FleetReview:
    from reconciler.review.collect import approvals_of, base_commit, checkout, open_git, resolve_side

    snapshot = snapshot or read_repository(root)
    repo, rel = open_git(root)
    commit, label = base_commit(repo, rel, base)
    reviews: dict[str, Review] = {}
    cluster_holds: dict[str, list] = {}
    refusals: list[str] = []
    with checkout(repo, commit, rel) as base_root:
        from reconciler import pipeline

        before_all = read_repository(base_root) if base_root is not None else None
        base_catalogs = pipeline.load_catalogs(before_all, before_all.operators) if before_all else None
        catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
        names = sorted(set(snapshot.clusters) | set(before_all.clusters if before_all else ()))
        sides: dict[tuple[str, str], Any] = {}
        done: dict[tuple, Review] = {}
        for name in names:
            base_view = None
            if before_all is not None:
                base_view = select_cluster(before_all, name) if before_all.is_fleet else before_all
                if before_all.is_fleet and name not in before_all.clusters:
                    base_view = None
            bkey = ("before", _key(base_view))
            if bkey not in sides:
                sides[bkey] = resolve_side(base_root, f"base {label}", revision=commit, snapshot=base_view,
                                           catalogs=base_catalogs) if base_view is not None else None
            before = sides[bkey]
            after_view = select_cluster(snapshot, name) if name in snapshot.clusters else None
            if after_view is not None and base_view is not None:
                refusals += _refused(name, base_view, after_view)
            holds = hold_details(after_view) if after_view is not None else []
            cluster_holds[name] = holds
            installed = before.lockfile if before else None
            akey = ("after", _key(after_view, installed, holds))
            if akey not in sides:
                sides[akey] = resolve_side(root, "working tree", installed=installed,
                                           reuse=before.side if before else None, snapshot=after_view,
                                           catalogs=catalogs) if after_view is not None else None
            after = sides[akey]
            version = (after_view or base_view).settings.kubernetes_version if (after_view or base_view) else None
            rkey = (bkey, akey, version)
            if rkey not in done:   # clusters of one shape on both sides have one review
                empty_before, empty_after = Side(f"base {label}", {}), Side("working tree", {})
                done[rkey] = review(before.side if before else empty_before, after.side if after else empty_after,
                                    approvals=approvals_of(after) if after else {}, kube_version=version,
                                    approvals_before=approvals_of(before) if before else None)
            reviews[name] = done[rkey]
    held = _held_back(cluster_holds, reviews, str(root))
    by_outcome: dict[str, list[str]] = {}
    first: dict[str, Review] = {}
    signatures: dict[int, str] = {}
    for name, rev in reviews.items():
        sig = signatures.get(id(rev)) or signatures.setdefault(id(rev), _signature(rev))
        by_outcome.setdefault(sig, []).append(name)
        first.setdefault(sig, rev)
    groups = sorted((Group(tuple(sorted(members)), first[sig]) for sig, members in by_outcome.items()),
                    key=lambda g: (not g.changed, -len(g.clusters), g.clusters))
    return FleetReview(f"base {label}", "working tree", tuple(groups),
                       tuple((line, tuple(sorted(c))) for line, c in sorted(held.items())), tuple(refusals))


def _held_back(holds: dict[str, list], reviews: dict[str, Review], repo: str) -> dict[str, list[str]]:
    """What the stages hold back that this change does not move: each hold's sentence -> the clusters it holds
    so. A hold on an Operator that the cluster's review changes is the move the change makes (a promotion writes
    the pin it then holds to), not something held back."""
    out: dict[str, list[str]] = {}
    for name, found in holds.items():
        moved = {op.operator for op in reviews[name].operators} if name in reviews else set()
        for hold in found:
            if hold.operator not in moved:
                out.setdefault(hold.describe(repo), []).append(name)
    return out


def _refused(name: str, before: RepoSnapshot, after: RepoSnapshot) -> list[str]:
    """What `reconcile --cluster NAME` would refuse once the change lands (it never acts on an empty desired
    state unless reconciler.yaml says allowEmpty)."""
    if before.operators and not after.operators and not after.settings.allow_empty:
        gone = ", ".join(sorted(op.name for op in before.operators))
        return [f"{name}: the change places nothing on it, so its reconcile would refuse to remove {gone} "
                f"(an empty desired state is applied only with allowEmpty: true in reconciler.yaml)"]
    return []


def _signature(rev: Review) -> str:
    from reconciler.review.render import as_document

    return json.dumps(as_document(rev), sort_keys=True, default=str)


def summary(rev: Review) -> str:
    """One line for a group: each Operator's change, objects and RBAC counts; or 'unchanged'."""
    if not rev.operators:
        return "unchanged"
    parts = []
    for op in rev.operators:
        before = op.before.version or op.before.name if op.before else "-"
        after = op.after.version or op.after.name if op.after else "-"
        text = {"added": f"{op.operator} {after} added", "removed": f"{op.operator} {before} removed",
                "changed": f"{op.operator} changed",
                "approval": f"{op.operator} {after} " + ("approved" if op.approval and op.approval.approved else
                                                        "no longer approved")}.get(
            op.change, f"{op.operator} {before} -> {after}")
        counts = {a: sum(1 for o in op.objects if o.action == a) for a in ("created", "changed", "deleted")}
        if any(counts.values()):
            text += f", objects +{counts['created']} ~{counts['changed']} -{counts['deleted']}"
        if op.rbac_gained or op.rbac_lost:
            text += f", RBAC rules +{len(op.rbac_gained.rules)} -{len(op.rbac_lost.rules)}"
        if op.approval is not None and not op.approval.approved:
            text += ", waits for approval"
        if any("UNSAFE" in c for c in op.crds):
            text += ", UNSAFE CRD change"
        parts.append(text)
    return "; ".join(parts)


def names(clusters: tuple[str, ...], limit: int = NAMES_SHOWN) -> str:
    shown = ", ".join(clusters[:limit])
    more = f" and {len(clusters) - limit} more" if len(clusters) > limit else ""
    return f"{shown}{more} ({len(clusters)} cluster{'s' if len(clusters) != 1 else ''})"


def render_fleet(fleet: FleetReview, output: str, colour: bool = False) -> str:
    from reconciler.review import render as fmt

    if output == "json":
        doc = {"schemaVersion": fmt.SCHEMA_VERSION, "before": fleet.before, "after": fleet.after,
               "changed": fleet.changed, "clusters": fleet.clusters,
               "held": [{"clusters": list(c), "hold": line} for line, c in fleet.held],
               "refusals": list(fleet.refusals),
               "groups": [{"clusters": list(g.clusters), "changed": g.changed, "summary": summary(g.review),
                           "review": fmt.as_document(g.review)} for g in fleet.groups]}
        return json.dumps(doc, indent=2) + "\n"
    if output == "markdown":
        return _markdown(fleet)
    out = [f"Diff {fleet.before} -> {fleet.after} across {counted(fleet.clusters, 'cluster')}"]
    reads: dict[str, list[str]] = {}   # groups whose outcome reads the same (e.g. only a namespace differs): one line
    for g in fleet.groups:
        reads.setdefault(summary(g.review), []).extend(g.clusters)
    out += [f"  {names(tuple(sorted(c)))}: {line}" for line, c in reads.items()]
    if fleet.refusals:
        out.append("A reconcile would refuse:")
        out += [f"  {line}" for line in fleet.refusals]
    if fleet.held:
        out.append("Held back by the stages (not moved by this change):")
        out += [f"  {names(c)}: {line}" for line, c in fleet.held]
    for g in fleet.groups:
        if g.changed:
            out.append("")
            out.append(f"== {names(g.clusters)} ==")
            out.append(fmt.as_text(g.review, colour=colour).rstrip("\n"))
    return "\n".join(out) + "\n"


def _markdown(fleet: FleetReview) -> str:
    """The table of groups (every changed cluster named while it fits, then the rest of them named in one
    line, then counts), then each changed group's detail while room remains."""
    from reconciler.review import render as fmt

    budget = MARKDOWN_LIMIT - 400
    changed = [g for g in fleet.groups if g.changed]
    unchanged = [c for g in fleet.groups if not g.changed for c in g.clusters]
    text = (f"## Operator changes across {counted(fleet.clusters, 'cluster')}: {fleet.before} → {fleet.after}\n\n"
            f"{counted(sum(len(g.clusters) for g in changed), 'cluster')} "
            f"{agree(sum(len(g.clusters) for g in changed), 'changes', 'change')}, in {counted(len(changed), 'group')} of identical "
            f"outcome; {len(unchanged)} unchanged.\n\n")
    if fleet.refusals:   # first: what would stop a cluster matters more than any detail
        text += "**A reconcile would refuse:**\n\n" + "".join(f"- {fmt._cell(r)}\n" for r in fleet.refusals[:20])
        text += (f"- and {len(fleet.refusals) - 20} more\n" if len(fleet.refusals) > 20 else "") + "\n"
    text += "| clusters | outcome |\n| --- | --- |\n"
    listed = 0
    for g in changed:
        row = f"| {fmt._cell(names(g.clusters, limit=len(g.clusters)))} | {fmt._cell(summary(g.review))} |\n"
        if len(text) + len(row) > budget // 2:
            break
        text += row
        listed += 1
    if unchanged:
        text += f"| {fmt._cell(names(tuple(unchanged)))} | unchanged |\n"
    rest = [c for g in changed[listed:] for c in g.clusters]
    if rest:
        line = f"\n{counted(len(changed) - listed, 'more group')}, {counted(len(rest), 'cluster')}: "
        room = budget - len(text) - len(line) - 200
        shown = []
        for c in rest:
            if sum(len(x) + 2 for x in shown) + len(c) > room:
                break
            shown.append(c)
        text += line + ", ".join(shown) + (f" and {len(rest) - len(shown)} more" if len(shown) < len(rest) else "") \
            + "\n"
    details = 0
    for g in changed:
        detail = (f"\n<details><summary>{fmt._cell(names(g.clusters))}</summary>\n\n"
                  + fmt.as_markdown(g.review).replace("## Operator changes", "### Operator changes", 1)
                  + "\n</details>\n")
        if len(text) + len(detail) > budget:
            break
        text += detail
        details += 1
    if details < len(changed):
        text += (f"\n{counted(len(changed) - details, 'more group')} of changed clusters are not detailed here (the comment "
                 f"would be too long); `reconciler diff --cluster NAME` shows one cluster.\n")
    return text
