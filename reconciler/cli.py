"""Command-line interface: a thin shell over ``reconciler.pipeline``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Sequence, TextIO

from reconciler import __version__
from reconciler.cluster.apply import Action
from reconciler.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, ReconcilerError

if TYPE_CHECKING:
    from reconciler.pipeline import Outcome

EXIT_CODES = """\
exit codes (as kubectl diff):
  0  nothing to change: the cluster already matches the repository
  1  changes were found (--dry-run) or applied
  2  an error in the repository, a catalog, resolution, a bundle or the policy; nothing was applied
  3  the cluster could not be reached or refused a request
"""

_SYMBOL = {Action.CREATED: "+", Action.CONFIGURED: "~", Action.UNCHANGED: "=", Action.DELETED: "-",
           Action.SKIPPED: "!"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler",
        description="Keep a cluster's operators equal to what a GitOps repository declares: resolve "
                    "Operator declarations against file-based catalogs, convert bundles to plain manifests, "
                    "and apply them with server-side apply, pruning what is no longer declared.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"reconciler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rec = sub.add_parser(
        "reconcile", help="resolve, convert, diff, apply and prune once",
        description="Resolve the repository's Operator declarations against its catalogs, write olm.lock, "
                    "convert each bundle, then diff against the cluster and apply with server-side apply "
                    "(field manager 'reconciler'), pruning objects of earlier versions or removed "
                    "declarations that the reconciler created.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rec.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    rec.add_argument("--dry-run", action="store_true",
                     help="do everything except write to the cluster: server-side dry-run when a cluster is "
                          "configured, else compare against an empty cluster (olm.lock is still written)")
    _cluster_args(rec)
    rec.add_argument("--show-unchanged", action="store_true", help="also list objects that need no change")

    cl = sub.add_parser("cluster", help="a local kube-apiserver and etcd for users without a cluster",
                        description="Start, stop or locate a local Kubernetes control plane (kube-apiserver "
                                    "and etcd on loopback, built once from pinned sources and cached).")
    cl_sub = cl.add_subparsers(dest="action", required=True, metavar="ACTION")
    cl_sub.add_parser("up", help="build if needed, then start the control plane in the background")
    cl_sub.add_parser("down", help="stop the control plane and remove its state")
    cl_sub.add_parser("kubeconfig", help="print the path of the admin kubeconfig")
    return parser


def _cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context to use")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "reconcile":
            return _reconcile(args, out)
        if args.command == "cluster":
            return _cluster(args, out)
    except ReconcilerError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _reconcile(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import pipeline
    from reconciler.cluster.kube import Kube, load_api_client
    from reconciler.errors import ClusterError

    api = load_api_client(args.kubeconfig, args.context)
    if api is None and not args.dry_run:
        raise ClusterError("no cluster is configured",
                           hint="pass --kubeconfig, set $KUBECONFIG, run `reconciler cluster up` for a local "
                                "cluster, or use --dry-run")
    kube = Kube(api) if api else None
    outcome = pipeline.reconcile(args.repo, kube, dry_run=args.dry_run)
    print_outcome(outcome, out, dry_run=args.dry_run, server=kube.server if kube else None,
                  show_unchanged=args.show_unchanged)
    return EXIT_CHANGES if outcome.sync.changed else EXIT_OK


def print_outcome(outcome: "Outcome", out: TextIO, *, dry_run: bool, server: str | None,
                  show_unchanged: bool = False) -> None:
    snap = outcome.snapshot
    print(f"Repository {snap.root} at {snap.revision or 'an unversioned tree (not a git repository)'}", file=out)
    if not outcome.installs:
        print("No Operators declared.", file=out)
    for inst in outcome.installs:
        lock, sel = inst.lock, inst.selection
        origin = f"catalog {lock.catalog}, channel {lock.channel}" if lock.catalog else f"bundle {lock.source}"
        print(f"  Operator {sel.operator.name}: {lock.name} (package {lock.package}, version {lock.version}) "
              f"from {origin} -> namespace {inst.bundle.namespace}", file=out)
    print(f"Lockfile {snap.lock_path.name}: {'written' if outcome.lock_written else 'unchanged'}", file=out)
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
        line = f"  {_SYMBOL[c.action]} {c.ref}  {verb}  [{c.operator}]"
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


def _cluster(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.cluster import controlplane

    if args.action == "up":
        controlplane.cluster_up(log=lambda m: print(m, file=out))
        print(f"export KUBECONFIG={controlplane.cluster_kubeconfig()}", file=out)
        return EXIT_OK
    if args.action == "down":
        controlplane.cluster_down()
        print("local control plane stopped", file=out)
        return EXIT_OK
    print(controlplane.cluster_kubeconfig(), file=out)
    return EXIT_OK
