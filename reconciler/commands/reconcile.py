"""`reconciler reconcile`: resolve, convert, diff, apply and prune once."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from reconciler.commands import EXIT_CODES, add_cluster_args
from reconciler.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_PENDING_APPROVAL

if TYPE_CHECKING:
    from reconciler.pipeline import Outcome

_SYMBOL = {"created": "+", "configured": "~", "unchanged": "=", "deleted": "-", "skipped": "!"}


def register(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "reconcile", help="resolve, convert, diff, apply and prune once",
        description="Resolve the repository's Operator declarations against its catalogs, write olm.lock, "
                    "convert each bundle, then diff against the cluster and apply with server-side apply "
                    "(field manager 'reconciler'), pruning objects of earlier versions or removed "
                    "declarations that the reconciler created.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rec.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    rec.add_argument("--dry-run", action="store_true",
                     help="change nothing: server-side dry-run when a cluster is configured, else compare "
                          "against an empty cluster; olm.lock is not written (see --write-lock)")
    rec.add_argument("--write-lock", action="store_true",
                     help="with --dry-run, still write the resolution to olm.lock")
    rec.add_argument("--exit-code", action="store_true",
                     help="exit 1 when changes were applied (as `terraform plan -detailed-exitcode`), "
                          "so a script can tell a no-op from a change")
    rec.add_argument("--locked", action="store_true",
                     help="refuse to run when olm.lock is stale (the resolution differs from it, or a bundle's "
                          "content no longer matches its digest), like `npm ci`; never writes olm.lock")
    add_cluster_args(rec)
    rec.add_argument("--show-unchanged", action="store_true", help="also list objects that need no change")
    rec.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import pipeline
    from reconciler.cluster.kube import Kube, load_api_client
    from reconciler.errors import ClusterError, UsageError

    if args.write_lock and (args.locked or not args.dry_run):
        raise UsageError("--write-lock only applies to --dry-run, and never with --locked")
    api = load_api_client(args.kubeconfig, args.context)
    if api is None and not args.dry_run:
        raise ClusterError("no cluster is configured",
                           hint="pass --kubeconfig, set $KUBECONFIG, run `reconciler cluster up` for a local "
                                "cluster, or use --dry-run")
    kube = Kube(api) if api else None
    outcome = pipeline.reconcile(args.repo, kube, dry_run=args.dry_run, locked=args.locked,
                                 write_lock=args.write_lock or not args.dry_run)
    print_outcome(outcome, out, dry_run=args.dry_run, server=kube.server if kube else None,
                  show_unchanged=args.show_unchanged)
    if any(d.violations for d in outcome.pending):
        return EXIT_ERROR
    if outcome.pending:
        return EXIT_PENDING_APPROVAL
    return EXIT_CHANGES if outcome.sync.changed and (args.dry_run or args.exit_code) else EXIT_OK


def print_outcome(outcome: "Outcome", out: TextIO, *, dry_run: bool, server: str | None,
                  show_unchanged: bool = False) -> None:
    from reconciler.cluster.apply import Action  # the cluster layer is imported only when it is used

    snap = outcome.snapshot
    print(f"Repository {snap.root} at {snap.revision or 'an unversioned tree (not a git repository)'}", file=out)
    resolution = outcome.resolution
    selections = resolution.selections if resolution else tuple(i.selection for i in outcome.installs)
    if not selections:
        print("No Operators declared.", file=out)
    namespaces = {i.selection.owner: i.bundle.namespace for i in outcome.installs}
    for sel in selections:
        origin = f"catalog {sel.catalog}, channel {sel.channel}" if sel.catalog else f"bundle {sel.image}"
        line = (f"  {sel.kind} {sel.owner}: {sel.bundle_name} (package {sel.package or '?'}, "
                f"version {sel.version or '?'}) from {origin}")
        if sel.owner in namespaces:
            line += f" -> namespace {namespaces[sel.owner]}"
        if sel.required_by:
            line += f" [required by {', '.join(sel.required_by)}]"
        if not sel.apply:
            line += " [input class only reports: not applied]"
        print(line, file=out)
    for upd in resolution.updates if resolution else ():
        print(f"  update available for {upd.operator} outside its declaration: channel {upd.channel}: "
              f"{', '.join(upd.options)}", file=out)
    if resolution is not None and not all(s.apply for s in resolution.selections):
        from reconciler.review.nextminor import next_minor_checks

        for check in next_minor_checks(snap, resolution):
            for line in check.describe():
                print(line, file=out)
    if outcome.lock_written:
        lock_state = "written"
    elif snap.lock_path.is_file() and snap.lock_path.read_text(encoding="utf-8") == outcome.lockfile.render():
        lock_state = "unchanged"
    else:
        lock_state = "would change; not written (a dry run writes nothing: add --write-lock to write it)"
    print(f"Lockfile {snap.lock_path.name}: {lock_state}", file=out)
    print_approvals(outcome, out)
    target = f"server-side dry-run against {server}" if dry_run and server else (
        "dry-run against an empty cluster" if dry_run else f"applied to {server}")
    print(f"Changes ({target}):", file=out)
    for note in outcome.sync.notes:
        print(f"  note: {note}", file=out)
    shown = 0
    for c in outcome.sync.changes:
        if c.action == Action.UNCHANGED and not show_unchanged:
            continue
        shown += 1
        verb = c.action.value if not dry_run or c.action in (Action.UNCHANGED, Action.SKIPPED) else \
            f"would be {c.action.value}"
        line = f"  {_SYMBOL[c.action.value]} {c.ref}  {verb}  [{c.operator}]"
        if c.detail:
            line += f": {c.detail}"
        print(line, file=out)
        for d in c.diff[:20]:
            print(f"      {d}", file=out)
        if len(c.diff) > 20:
            print(f"      ... and {len(c.diff) - 20} more changed fields", file=out)
    if not shown:
        print("  none", file=out)
    counts = ", ".join(f"{outcome.sync.count(a)} {a.value}" for a in Action)
    print(f"Summary: {counts}", file=out)




def print_approvals(outcome: "Outcome", out: TextIO) -> None:
    if outcome.decisions:
        print_decisions(outcome.decisions, outcome.snapshot.root, out)
    used = {d.provisioner_class for d in outcome.decisions.values()}
    for name, pcls in sorted(outcome.snapshot.provisioner_classes.items()):
        if pcls.ignored_parameters and name in used:
            print(f"  note: ProvisionerClass {name} ({pcls.origin}): parameters "
                  f"{', '.join(pcls.ignored_parameters)} are kept but have no effect here", file=out)


def print_decisions(decisions, repo, out: TextIO) -> None:
    """Each Operator's approval: approved and why, or what waits and the command that approves it."""
    from reconciler.commands.approve import describe_pending

    print("Approval:", file=out)
    for name, d in sorted(decisions.items()):
        if d.approved:
            print(f"  {name}: {d.bundle} approved ({d.provisioner_class}, {d.policy}): {d.message}", file=out)
            continue
        print(f"  {name}: {d.bundle} WAITS FOR APPROVAL ({d.provisioner_class}, {d.policy}): {d.message}", file=out)
        for line in describe_pending(d):
            print(line, file=out)
        if d.reason != "DependencyPendingApproval":
            print(f"    approve with: reconciler approve {repo} {name}   (then commit approvals/{name}.yaml)",
                  file=out)
