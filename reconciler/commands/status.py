"""`reconciler status`: one line per installed Operator, read from the cluster's status objects."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_fleet_arg
from reconciler.errors import EXIT_OK

EXIT_CODES = """\
exit codes:
  0  the status was shown (whatever it says)
  2  the repository could not be read
  3  the cluster could not be reached, or none is configured
"""

COLUMNS = ("INSTANCE", "NAME", "NAMESPACE", "PACKAGE", "VERSION", "READY", "STATUS", "APPROVAL", "UPDATES",
           "REVISION", "LOCK")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help=COMMANDS["status"],
        description="List the Operators installed in the cluster (the operators.reconciler.dev status objects) "
                    "of every reconciler instance, each with its instance, install namespace, bundle and version, "
                    "whether its components are healthy (READY, and STATUS: the reason, e.g. Healthy, "
                    "HealthTimeout, PendingApproval; the message of each that is not ready follows the table), "
                    "whether an approval is pending, whether updates are available and the revision last "
                    "applied. With REPO, only the Operators of its instance, each compared with the "
                    "repository's olm.lock: in sync, out of date, not installed or not declared. Upgrade gates "
                    "follow the table: a bundle's olm.maxOpenShiftVersion, judged against the OpenShift release of "
                    "the cluster's ClusterVersion (else openshiftVersion in REPO's reconciler.yaml), and an "
                    "Upgradeable=False the operator's own OperatorCondition says.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", nargs="?",
                   help="a GitOps repository working tree to compare with (then only the Operators of its "
                        "reconciler instance are listed)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", metavar="NS",
                       help="only the Operators installed in namespace NS (as kubectl get -n)")
    where.add_argument("-A", "--all-namespaces", action="store_true",
                       help="Operators of every install namespace (the default)")
    p.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    add_cluster_args(p)
    add_fleet_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.cluster.status import objects as status_objects
    from reconciler.kube.client import Kube, load_api_client
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
    kube = Kube(api)
    records = status_objects.read_all(kube, instance)
    rows = summarize({name: rec.status for name, rec in records.items()}, locked,
                     instances={name: rec.instance for name, rec in records.items()})
    if any("maxOpenShiftVersion" in r for r in rows):
        from reconciler.bundle.openshift import blocks, cluster_version

        version, where = cluster_version(kube, snapshot.settings.openshift_version if args.repo is not None else None)
        for row in rows:
            if "maxOpenShiftVersion" in row:
                row["openshift"] = {"version": version, "from": where,
                                    "blocksNextMinor": blocks(row["maxOpenShiftVersion"], version) if version else ""}
    if args.repo is not None:   # not installed yet: the namespace its declaration names, when it names one
        declared = {op.name: op.install.namespace for op in snapshot.operators if op.install.namespace}
        for row in rows:
            if "namespace" not in row and row["name"] in declared:
                row["namespace"] = declared[row["name"]]
    if args.namespace is not None:
        rows = [r for r in rows if r.get("namespace") == args.namespace]
    if args.output == "table":
        print_table(rows, out, with_lock=locked is not None, with_instance=instance is None,
                    namespace=args.namespace)
    elif args.output == "json":
        out.write(json.dumps(document(rows), indent=2) + "\n")
    else:
        from reconciler import yamlio

        out.write(yamlio.dump(document(rows)))
    return EXIT_OK


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``status -o json|yaml``: the rows as a versioned document (docs/output.md; fields are only added)."""
    return {"apiVersion": "reconciler.dev/v1alpha1", "kind": "OperatorStatusList", "operators": rows}


def summarize(recorded: dict[str, dict[str, Any]], locked: dict[str, dict[str, str]] | None, *,
              instances: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per Operator from its status (and, given the lockfile's entries, how it compares), by instance
    (given ``instances``, each Operator's) and name."""
    rows = []
    for name in sorted(set(recorded) | set(locked or {}), key=lambda n: ((instances or {}).get(n, ""), n)):
        status = recorded.get(name)
        row: dict[str, Any] = {"name": name}
        if instances is not None and name in instances:
            row["instance"] = instances[name]
        if status is not None:
            bundle = status.get("bundle") or {}
            row["namespace"] = bundle.get("namespace", "")
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
            if status.get("rejected"):
                row["rejected"] = status["rejected"]
            gate = (status.get("metadata") or {}).get("maxOpenShiftVersion")
            if gate:
                row["maxOpenShiftVersion"] = gate
            if "Upgradeable" in conds:
                row["upgradeable"] = {k: conds["Upgradeable"].get(k, "") for k in ("status", "reason", "message")}
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


def print_table(rows: list[dict[str, Any]], out: TextIO, *, with_lock: bool, with_instance: bool = False,
                namespace: str | None = None) -> None:
    """The table, then the full Ready message of every installed Operator that is not ready.

    STATUS is the Ready condition's reason, one word as in kubectl's STATUS column; its message (which names
    the revision applied, or the component that is not healthy and for how long) is never cut to fit a cell.
    """
    if not rows:
        print(f"No Operators installed{f' in namespace {namespace}' if namespace is not None else ''}.", file=out)
        return
    columns = COLUMNS[0 if with_instance else 1:None if with_lock else -1]
    table = [columns]
    for r in rows:
        installed = "ready" in r
        cells = {
            "INSTANCE": r.get("instance") or "-", "NAME": r["name"], "NAMESPACE": r.get("namespace") or "-",
            "PACKAGE": r.get("package") or "-", "VERSION": r.get("version") or "-",
            "READY": r["ready"] if installed else "-", "STATUS": (r.get("reason") or "-") if installed else "-",
            "APPROVAL": "pending" if r.get("pendingApproval") else "-",
            "UPDATES": ", ".join(r.get("updatesAvailable") or []) or "-",
            "REVISION": (r.get("revision") or "-")[:12], "LOCK": r.get("lock", "-")}
        table.append(tuple(str(cells[c]) for c in columns))
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=out)
    unready = [r for r in rows if r.get("ready") not in (None, "True") and r.get("message")]
    if unready:
        print("", file=out)
    for r in unready:
        print(f"{r['name']}: {r['reason'] or 'NotReady'}: {r['message']}", file=out)
    gated = [r for r in rows if r.get("maxOpenShiftVersion") or (r.get("upgradeable") or {}).get("status") == "False"]
    if gated:
        print("\nUpgrade gates:", file=out)
    for r in gated:
        if r.get("maxOpenShiftVersion"):
            seen = r.get("openshift") or {}
            if seen.get("blocksNextMinor"):
                say = f"blocks the cluster's OpenShift upgrade: {seen['blocksNextMinor']} ({seen['from']})"
            elif seen.get("version"):
                say = f"allows the next OpenShift minor after {seen['version']} ({seen['from']})"
            else:
                say = ("the cluster's OpenShift version is unknown (no ClusterVersion; set openshiftVersion in "
                       "reconciler.yaml and pass REPO to check it)")
            print(f"  {r['name']}: olm.maxOpenShiftVersion {r['maxOpenShiftVersion']}: {say}", file=out)
        if (r.get("upgradeable") or {}).get("status") == "False":
            print(f"  {r['name']}: Upgradeable=False ({r['upgradeable']['reason']}): {r['upgradeable']['message']}",
                  file=out)
    rejections: dict[tuple[str, str], tuple[dict[str, str], list[str]]] = {}
    for r in rows:   # the loop refused a newer revision: one line per refusal, naming the Operators it holds back
        if r.get("rejected"):
            said = r["rejected"]
            rejections.setdefault((said.get("revision", ""), said.get("message", "")), (said, []))[1].append(r["name"])
    for said, names in rejections.values():
        print(f"\nRevision {said.get('revision', '')[:12] or '(working tree)'} was not applied "
              f"({said.get('reason') or 'Rejected'}, since {said.get('since') or '?'}): {said.get('message', '')}; "
              f"{said.get('applied', '')[:12] or 'the previous state'} stays applied for {', '.join(names)}", file=out)
