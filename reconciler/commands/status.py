"""`reconciler status`: one line per installed Operator, read from the cluster's status objects."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from reconciler.commands import COMMANDS, add_cluster_args, add_fleet_arg
from reconciler.errors import EXIT_OK

EXIT_CODES = """\
exit codes:
  0  the status was shown (whatever it says)
  2  the repository could not be read
  3  the cluster could not be reached, or none is configured
"""

COLUMNS = ("NAME", "PACKAGE", "VERSION", "READY", "STATUS", "APPROVAL", "UPDATES", "REVISION", "LOCK")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help=COMMANDS["status"],
        description="List the Operators installed in the cluster (the operators.reconciler.dev status objects): "
                    "bundle and version, whether their components are healthy, whether an approval is pending, "
                    "whether updates are available and the revision last applied. With REPO, also compare each "
                    "with the repository's olm.lock: in sync, out of date, not installed or not declared.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", nargs="?",
                   help="a GitOps repository working tree to compare with (then only the Operators of its "
                        "reconciler instance are listed)")
    p.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    add_cluster_args(p)
    add_fleet_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.cluster import status as status_objects
    from reconciler.cluster.kube import Kube, load_api_client
    from reconciler.errors import ClusterError

    preferred = None
    if args.repo is not None:
        from reconciler.repo.fleet import cluster_context

        preferred = cluster_context(args.repo, args.cluster)
    api = load_api_client(args.kubeconfig, args.context, preferred=preferred)
    if api is None:
        raise ClusterError("no cluster is configured",
                           hint="pass --kubeconfig, set $KUBECONFIG, or run `reconciler cluster up`")
    locked = None
    instance = None
    if args.repo is not None:
        from reconciler.repo import read_repository
        from reconciler.repo.fleet import select_cluster

        snapshot = select_cluster(read_repository(args.repo), args.cluster)
        instance = snapshot.settings.instance   # only the Operators of the repository's own instance
        locked = {e.operator: {"name": e.name, "version": e.version, "digest": e.digest}
                  for e in (snapshot.lock.entries if snapshot.lock else ())}
    recorded = {name: rec.status for name, rec in status_objects.read_all(Kube(api), instance).items()}
    rows = summarize(recorded, locked)
    if args.output == "table":
        print_table(rows, out, with_lock=locked is not None)
    elif args.output == "json":
        out.write(json.dumps({"operators": rows}, indent=2) + "\n")
    else:
        from reconciler import yamlio

        out.write(yamlio.dump({"operators": rows}))
    return EXIT_OK


def summarize(recorded: dict[str, dict[str, Any]], locked: dict[str, dict[str, str]] | None) -> list[dict[str, Any]]:
    """One row per Operator from its status (and, given the lockfile's entries, how it compares)."""
    rows = []
    for name in sorted(set(recorded) | set(locked or {})):
        status = recorded.get(name)
        row: dict[str, Any] = {"name": name}
        if status is not None:
            bundle = status.get("bundle") or {}
            conds = {c.get("type"): c for c in status.get("conditions") or []}
            ready = conds.get("Ready", {})
            updates = [o for u in status.get("updates") or [] for o in u.get("options") or []]
            row.update({
                "package": bundle.get("package", ""), "bundle": bundle.get("name", ""),
                "version": bundle.get("version", ""),
                "ready": ready.get("status", "Unknown"), "reason": ready.get("reason", ""),
                "message": ready.get("message", ""),
                "pendingApproval": conds.get("InstallPendingApproval", {}).get("status") == "True",
                "updatesAvailable": updates, "revision": status.get("revision") or "",
            })
        if locked is not None:
            row["lock"] = _compare(status, locked.get(name))
        rows.append(row)
    return rows


def _compare(status: dict[str, Any] | None, entry: dict[str, str] | None) -> str:
    if status is None:
        return "not installed"
    if entry is None:
        return "not declared"
    bundle = status.get("bundle") or {}
    if bundle.get("name") != entry["name"] or (entry["digest"] and bundle.get("digest")
                                               and bundle["digest"] != entry["digest"]):
        return f"out of date (locked {entry['name']})"
    return "in sync"


def print_table(rows: list[dict[str, Any]], out: TextIO, *, with_lock: bool) -> None:
    if not rows:
        print("No Operators installed.", file=out)
        return
    columns = COLUMNS if with_lock else COLUMNS[:-1]
    table = [columns]
    for r in rows:
        installed = "ready" in r
        status = f"{r['reason']}: {r['message']}" if r.get("reason") else r.get("message", "")
        table.append(tuple(str(v) for v in (
            r["name"], r.get("package", "-") or "-", r.get("version", "-") or "-",
            r.get("ready", "-") if installed else "-", _short(status) if installed else "-",
            ("pending" if r.get("pendingApproval") else "-") if installed else "-",
            ", ".join(r.get("updatesAvailable") or []) or "-",
            (r.get("revision") or "-")[:12] if installed else "-",
            *((r["lock"],) if with_lock else ()))))
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=out)


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
