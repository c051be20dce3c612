"""`reconciler fleet status`: what runs where, read from every cluster of a fleet repository."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from reconciler.commands.common import COMMANDS
from reconciler.errors import EXIT_OK

EXIT_CODES = """\
exit codes:
  0   every cluster was read (the page or table says how each Operator is)
  2   the repository cannot be read, or declares no clusters
  3   a cluster could not be read (it is still a row, saying why: unreachable, no such context)
  64  a usage error
"""


def register(sub: argparse._SubParsersAction) -> None:
    fl = sub.add_parser("fleet", help=COMMANDS["fleet"],
                        description="Commands across every cluster of a fleet repository (clusters/<name>.yaml). "
                                    "See docs/fleet.md.", epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fl_sub = fl.add_subparsers(dest="action", required=True, metavar="ACTION")
    st = fl_sub.add_parser(
        "status", help="read every cluster concurrently and show the cluster x Operator matrix",
        description="Read every cluster's Operator status objects through its kubeconfig context (spec.context, "
                    "else its name), concurrently and bounded, and show per cluster and Operator: the bundle, its "
                    "health, an approval that waits, whether it runs what the cluster's lockfile pins, drift "
                    "corrected and the revision last applied; then one summary line per Operator. An unreachable "
                    "cluster is a row that says so. -o html writes one self-contained page.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    st.add_argument("repo", metavar="REPO", help="path to the fleet repository working tree")
    st.add_argument("--kubeconfig", help="kubeconfig with a context per cluster (default: $KUBECONFIG, as kubectl)")
    st.add_argument("-o", "--output", choices=("table", "json", "yaml", "html"), default="table",
                    help="table for a terminal; json or yaml for scripts; html: one page to open in a browser")
    st.add_argument("--workers", type=int, default=16, help="clusters read at once (default 16)")
    fl.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.errors import EXIT_CLUSTER, InputError
    from reconciler.fleet.status import as_html, as_table, gather
    from reconciler.repo import read_repository

    snapshot = read_repository(args.repo)
    if not snapshot.is_fleet:
        raise InputError("this repository declares no clusters", path=str(args.repo),
                         hint="a fleet repository declares each cluster in clusters/<name>.yaml (docs/fleet.md)")
    fleet = gather(args.repo, args.kubeconfig, workers=max(1, args.workers), snapshot=snapshot)
    if args.output == "table":
        out.write(as_table(fleet))
    elif args.output == "html":
        out.write(as_html(fleet, args.repo))
    elif args.output == "json":
        out.write(json.dumps(fleet.to_dict(), indent=2) + "\n")
    else:
        from reconciler import yamlio

        out.write(yamlio.dump(fleet.to_dict()))
    return EXIT_CLUSTER if any(not c.reachable for c in fleet.clusters) else EXIT_OK


def holds_of(snapshot) -> list:  # noqa: ANN001 - a RepoSnapshot (one cluster's view)
    """The packages a cluster of a later stage is held on (``repo.fleet.StageHold``), empty outside a fleet."""
    from reconciler.repo.fleet import hold_details

    return hold_details(snapshot) if snapshot.cluster is not None else []


def print_holds(snapshot, out: TextIO, repo: str = "REPO") -> None:  # noqa: ANN001 - a RepoSnapshot (one cluster's view)
    """Say what the cluster's stage holds back, and the command that moves it (resolve, update, diff)."""
    holds = holds_of(snapshot)
    if holds:
        print(f"\nHeld (cluster {snapshot.cluster.name}, stage {snapshot.cluster.stage}):", file=out)
        for hold in holds:
            print(f"  {hold.describe(repo)}", file=out)


def hold_document(hold) -> dict:  # noqa: ANN001 - a StageHold
    return {"operator": hold.operator, "package": hold.package, "bundles": sorted(hold.bundles),
            "stage": hold.stage, "heldBy": hold.by, "previousStage": hold.previous, "command": hold.command()}

