"""`reconciler approve`: record in the repository the permissions that wait for approval; commit to approve.

In a git working tree only committed approvals count for a reconcile (``approve.stage.counted_approvals``); this
command counts the working tree's own, so running it again after an uncommitted approval finds nothing new to
write, and it says which files still need a commit.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_fleet_arg, add_offline_arg, offline_aware
from reconciler.approve.records import add_approval
from reconciler.model.approvals import ApprovedBundle
from reconciler.repo import read_records
from reconciler.errors import EXIT_OK
from reconciler.report.words import agree

if TYPE_CHECKING:
    from reconciler.approve import Decision

EXIT_CODES = """\
exit codes:
  0   the approvals were written (or nothing waited)
  2   an error in the repository, or an Operator that is not declared
  3   the cluster (read for what is installed) could not be reached
  64  neither an Operator nor --all was given
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "approve", help=COMMANDS["approve"],
        description="Resolve and convert as reconcile does, then write, for each named Operator whose bundle "
                    "waits for approval, an entry in approvals/<name>.yaml binding its exact bundle (name and "
                    "content digest) to the permissions it needs. Nothing is applied: committing the file is "
                    "the approval, and the next reconcile applies the bundle (in a git repository a reconcile "
                    "counts only committed approvals; `reconcile --dry-run` previews uncommitted ones, saying "
                    "so; outside git a written approval counts at once). In a fleet repository, without "
                    "--cluster, each Operator is approved for every cluster it is placed on (offline): one entry "
                    "per bundle, with the permissions every placement needs; approvals are shared by the fleet.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("operators", metavar="OPERATOR", nargs="*", help="Operators (or Inputs, dependencies) to approve")
    p.add_argument("--all", action="store_true", help="approve everything that waits")
    p.add_argument("--waive", metavar="POLICY", action="append", default=[],
                   help="also record an exception to this guardrail policy for the approved bundle (repeatable); "
                        "without it, a bundle that violates a policy is not approved. 'crd-upgrade-safety' "
                        "accepts CRD replacements that could break custom resources")
    add_offline_arg(p)
    add_cluster_args(p)
    add_fleet_arg(p)
    p.set_defaults(run=run)


@offline_aware
def run(args: argparse.Namespace, out: TextIO) -> int:
    import dataclasses

    from reconciler import pipeline
    from reconciler.approve import stage
    from reconciler.kube.client import Kube, load_api_client
    from reconciler.errors import DeclarationError, UsageError
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import cluster_context

    if args.operators and args.all:
        raise UsageError(f"{' '.join(args.operators)} and --all are exclusive: --all approves every Operator that "
                         "waits", hint="drop --all to approve only those named, or drop the names")
    if not args.operators and not args.all:
        raise UsageError("name the Operators to approve, or pass --all")
    clusters = read_repository(args.repo).clusters if args.cluster is None else {args.cluster: None}
    fleet = bool(clusters)
    if fleet and args.cluster is None:   # every cluster the Operators are placed on, offline
        views = [pipeline.prepare(pipeline.Source(args.repo, cluster=name), preview=True) for name in sorted(clusters)]
    else:
        context = cluster_context(args.repo, args.cluster)
        api = None if args.offline else load_api_client(args.kubeconfig, args.context, preferred=context)
        views = [pipeline.prepare(pipeline.Source(args.repo, cluster=args.cluster), Kube(api) if api else None,
                                  preview=True)]
    decided = {name for view in views for name in view.decisions}
    names = sorted(decided) if args.all else args.operators
    unknown = [n for n in names if n not in decided]
    if unknown:
        known = ", ".join(sorted(decided)) or "none"
        raise DeclarationError(f"no bundle to apply for {', '.join(unknown)}",
                               hint=f"Operators, Inputs and dependencies with a bundle to apply: {known}")
    root = views[0].snapshot.root
    records = dict(views[0].snapshot.approvals)
    written: list[str] = []
    for name in names:
        entries = _entries(args, name, [(view.snapshot.cluster, view.decisions[name]) for view in views
                                        if name in view.decisions], out)
        for entry, where in entries:
            old = records.get(name)
            if fleet and old is not None and (same := old.find(entry.name, entry.digest)) is not None:
                # one approval serves every cluster the bundle is placed on: what another needed stays approved
                entry = ApprovedBundle(entry.name, entry.digest, same.permissions | entry.permissions,
                                       tuple(sorted(set(same.waived_policies) | set(entry.waived_policies))))
            path = add_approval(root, old, name, entry)
            records = dict(read_records(root))
            print(f"{name}: approved {entry.name} ({entry.digest[:19]}){where}, recorded in "
                  f"{path.relative_to(root)}", file=out)
        if entries:
            written.append(name)
    snapshot = dataclasses.replace(views[0].snapshot, approvals=records)
    if snapshot.committed_approvals is None:
        if written:
            print("Outside a git repository an approval counts as soon as it is written.", file=out)
    elif files := stage.uncommitted_approval_files(snapshot):   # written now, or before and not committed
        print(f"Commit to approve (a reconcile counts only committed approvals): git add {' '.join(files)} && "
              f"git commit", file=out)
    return EXIT_OK


def _entries(args: argparse.Namespace, name: str, decisions: list, out: TextIO) -> list:
    """The approval entries for ``name``: one per distinct bundle that waits, its permissions the union of what
    each cluster it is placed on needs; and where, for the report."""
    from reconciler.model.permissions import PermissionSet
    from reconciler.errors import PolicyError

    merged: dict[tuple[str, str], tuple[PermissionSet, set[str], list[str]]] = {}
    for cluster, d in decisions:
        if (d.approved or d.reason == "DependencyPendingApproval") and not args.waive:
            print(f"{name}: nothing of its own waits for approval ({d.bundle}: {d.message})"
                  + (f" on cluster {cluster.name}" if cluster is not None else ""), file=out)
            continue
        stored = [v for v in d.violations if v.policy == "crd-stored-version"]
        if stored:
            raise PolicyError(f"{name}: {d.bundle} removes a version its CRD still stores objects in: "
                              + "; ".join(v.describe() for v in stored),
                              hint="no approval can accept it (the API server refuses it): migrate the stored "
                                   "objects to a version the bundle keeps and remove the old one from the CRD's "
                                   "status.storedVersions, or install a bundle that keeps the version")
        unwaived = sorted({v.policy for v in d.violations} - set(args.waive))
        if unwaived:
            raise PolicyError(f"{name}: {d.bundle} violates guardrail {', '.join(unwaived)}: "
                              + "; ".join(v.describe() for v in d.violations if v.policy in unwaived),
                              hint="fix the bundle or the declaration, or record a reviewed exception with "
                                   + " ".join(f"--waive {p}" for p in unwaived)
                                   + f": reconciler approve {args.repo} {name} "
                                   + " ".join(f"--waive {p}" for p in unwaived))
        perms, waived, where = merged.get((d.bundle, d.digest), (PermissionSet(), set(), []))
        merged[(d.bundle, d.digest)] = (perms | d.required.all,
                                        waived | {v.policy for v in d.violations} | set(args.waive) | set(d.waived),
                                        where + ([cluster.name] if cluster is not None else []))
        for line in describe_pending(d):
            print(line, file=out)
    return [(ApprovedBundle(bundle, digest, perms, tuple(sorted(waived))),
             f" for {agree(len(where), 'cluster', 'clusters')} {', '.join(where)}" if where else "")
            for (bundle, digest), (perms, waived, where) in sorted(merged.items())]


def describe_pending(d: "Decision", indent: str = "    ") -> list[str]:
    """The permissions that wait, split into what the operator gains and what creating its objects needs."""
    from reconciler.model.permissions import compact

    pending = d.pending
    gains = compact(a for a in pending.atoms() if d.required.grants.allows(a))
    creates = compact(a for a in pending.atoms() if not d.required.grants.allows(a))
    lines = []
    if gains:
        lines.append(f"{indent}permissions the operator gains:")
        lines.extend(gains.describe(indent + "  "))
    if creates:
        lines.append(f"{indent}permissions to create and update its objects:")
        lines.extend(creates.describe(indent + "  "))
    if not pending and d.policy == "DenyAll" and not d.violations and d.reason != "DependencyPendingApproval":
        lines.append(f"{indent}no new permissions: {d.provisioner_class} ({d.policy}) approves no bundle by itself")
    for check in d.denied:
        lines.append(f"{indent}denied: {check}")
    for v in d.violations:
        lines.append(f"{indent}violates: {v.describe()}")
    return lines


def print_decisions(decisions, repo, out: TextIO) -> None:
    """Each Operator's approval: approved and why, or what waits and the command that approves it."""
    from reconciler.approve.policy import approve_command

    print("Approval:", file=out)
    for name, d in sorted(decisions.items()):
        if d.approved:
            print(f"  {name}: {d.bundle} approved ({d.provisioner_class}, {d.policy}): {d.message}", file=out)
            continue
        print(f"  {name}: {d.bundle} WAITS FOR APPROVAL ({d.provisioner_class}, {d.policy}): {d.message}", file=out)
        for line in describe_pending(d):
            print(line, file=out)
        if any(v.policy == "crd-stored-version" for v in d.violations):
            print("    no approval can accept this bundle: the API server refuses to drop a stored version "
                  "(see above)", file=out)
        elif d.reason != "DependencyPendingApproval":
            print(f"    approve with: {approve_command(repo, name, d)}   (then commit approvals/{name}.yaml)",
                  file=out)


def approval_document(d: Any) -> dict[str, Any]:
    """One approval decision in the stable output schema."""
    doc: dict[str, Any] = {"operator": d.operator, "bundle": d.bundle, "digest": d.digest,
                           "provisionerClass": d.provisioner_class, "policy": d.policy, "approved": d.approved,
                           "reason": d.reason, "message": d.message, "pending": d.pending.to_list()}
    if d.denied:
        doc["denied"] = list(d.denied)
    if d.violations:
        doc["violations"] = [{"policy": v.policy, "file": v.path, "object": v.subject, "message": v.message}
                             for v in d.violations]
    return doc
