"""`reconciler resolve`: decide the bundles, explain the decision, write olm.lock; touch no cluster object."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_fleet_arg, add_offline_arg, offline_aware
from reconciler.errors import EXIT_OK
from reconciler.report.words import counted

EXIT_CODES = """\
exit codes:
  0  resolved (olm.lock written or already up to date)
  2  the declarations cannot be satisfied (the explanation is printed), or an input error
  3  the cluster (read for what is installed) could not be reached
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "resolve", help=COMMANDS["resolve"],
        description="Resolve the repository's Operator and Input declarations against its catalogs with a "
                    "SAT solver and write olm.lock. What is installed comes from the cluster's status objects "
                    "(read only) when a cluster is configured, and then olm.lock is preferred for Operators "
                    "the cluster does not have while it still satisfies their declarations; without a "
                    "cluster, from olm.lock. Nothing is applied. In a fleet repository, --cluster resolves one "
                    "cluster into clusters/<name>/olm.lock; without it, every cluster is resolved offline, once "
                    "per distinct set of facts (docs/fleet.md). A declaration of input class dry-run-next is "
                    "also rendered, checked for APIs the next Kubernetes minor deprecates or removes, and "
                    "compared object by object with the bundle its lockfile records for it (what would change).",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    p.add_argument("--graph", action="store_true",
                   help="print the resolution as a Mermaid graph (Operators, chosen bundles, dependencies with "
                        "the constraint that linked them, the installed bundle each replaces) instead of a table")
    p.add_argument("--explain", action="store_true",
                   help="say why each bundle was chosen and why more preferred ones were not")
    p.add_argument("--no-write", action="store_true", help="do not write olm.lock")
    add_offline_arg(p)
    add_cluster_args(p)
    add_fleet_arg(p)
    p.set_defaults(run=run)


@offline_aware
def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import pipeline, yamlio
    from reconciler.lock import repin_moved_tags, write_lock
    from reconciler.approve import stage
    from reconciler.repo import read_repository
    from reconciler.resolve import Unsatisfiable

    from reconciler.commands.fleet import hold_document, holds_of, print_holds
    from reconciler.repo.fleet import select_cluster

    if args.graph and args.output != "table":
        from reconciler.errors import UsageError

        raise UsageError(f"--graph prints a Mermaid graph and -o {args.output} a document: choose one",
                         hint="the document (-o json|yaml) has every bundle, its dependencies and what it satisfies")
    snapshot = read_repository(args.repo)
    if snapshot.is_fleet and args.cluster is None:
        return _resolve_fleet(args, snapshot, out)
    snapshot = select_cluster(snapshot, args.cluster)
    if not snapshot.operators and not snapshot.settings.allow_empty:
        from reconciler.errors import InputError

        raise InputError(f"nothing is declared: no Operator, Input, Install, Instance or BundleDeployment; "
                         f"{snapshot.lock_file} was not written", path=args.repo,
                         hint="declare an Operator (examples/gitops-repo/operators/ has one; docs/declarations.md "
                              "lists every kind), or, to record that nothing is installed, set allowEmpty: true "
                              "in reconciler.yaml")
    kube = None
    if not args.offline:  # the Kubernetes client is imported only when a cluster is asked
        from reconciler.kube.client import Kube, load_api_client
        api = load_api_client(args.kubeconfig, args.context,
                              preferred=snapshot.cluster.kube_context if snapshot.cluster else None)
        kube = Kube(api) if api else None
    try:
        resolution = pipeline.resolve(snapshot, pipeline.ClusterFacts(kube) if kube is not None else None)
    except Unsatisfiable as exc:
        if args.output == "table":
            raise
        doc = {"resolved": False, "conflict": exc.facts, "bundles": []}
        out.write(json.dumps(doc, indent=2) + "\n" if args.output == "json" else yamlio.dump(doc))
        return exc.exit_code
    lockfile, repinned = pipeline.lock(snapshot, resolution), ()
    if not args.offline:   # a moved tag is found by asking its registry
        lockfile, repinned = repin_moved_tags(lockfile)
    written = False if args.no_write else write_lock(snapshot, lockfile)
    for note in repinned:
        print(f"note: {note}", file=sys.stderr)
    decisions, not_evaluated = _approvals(snapshot, resolution, lockfile, kube)
    from reconciler.review.nextminor import next_minor_checks

    from reconciler.bundle.openshift import cluster_version

    checks = next_minor_checks(snapshot, resolution, cluster_version(kube)[0] if kube is not None else None)
    if args.graph:
        from reconciler.review.render import resolution_mermaid

        out.write(resolution_mermaid(resolution, {e.operator: e for e in snapshot.lock.entries}
                                     if snapshot.lock else {}))
    elif args.output == "table":
        _table(resolution, out, explain=args.explain)
        if args.explain:
            print_holds(snapshot, out, args.repo)
        if checks:
            print("", file=out)
            for check in checks:
                for line in check.describe():
                    print(line.removeprefix("  "), file=out)
        if not_evaluated:
            print(f"\nApproval: not evaluated: {not_evaluated}", file=out)
        elif decisions:
            from reconciler.commands.approve import print_decisions

            print("", file=out)
            print_decisions(decisions, snapshot.root, out)
            for note in stage.approval_notes(snapshot, counted=False):
                print(f"  note: {note}", file=out)
        print(f"Lockfile {snapshot.lock_file}: "
              f"{'not written (--no-write)' if args.no_write else 'written' if written else 'unchanged'}",
              file=out)
    else:
        doc = as_document(resolution, lockfile, explain=args.explain)
        if snapshot.cluster is not None:
            doc["held"] = [hold_document(h) for h in holds_of(snapshot)]
        from reconciler.commands.approve import approval_document

        doc["approvals"] = [approval_document(d) for _, d in sorted(decisions.items())]
        if checks:
            doc["nextMinorChecks"] = [c.to_dict() for c in checks]
        if not_evaluated:
            doc["approvalsNotEvaluated"] = not_evaluated
        out.write(json.dumps(doc, indent=2, sort_keys=False) + "\n" if args.output == "json"
                  else yamlio.dump(doc))
    return EXIT_OK


def _resolve_fleet(args: argparse.Namespace, snapshot: Any, out: TextIO) -> int:
    """Every cluster of a fleet, offline: one resolution per shape, each cluster's lockfile written."""
    from reconciler import yamlio
    from reconciler.errors import UsageError
    from reconciler.fleet.resolve import resolve_fleet

    if args.explain or args.graph:
        given = " and ".join(f for f, on in (("--explain", args.explain), ("--graph", args.graph)) if on)
        raise UsageError(f"{given} {'explain' if ' and ' in given else 'explains'} one cluster: add --cluster NAME",
                         hint=f"clusters: {', '.join(sorted(snapshot.clusters))}")
    result = resolve_fleet(args.repo, write=not args.no_write, snapshot=snapshot)
    rows = []
    for name, lockfile in sorted(result.lockfiles.items()):
        rows.append({"cluster": name, "stage": snapshot.clusters[name].stage or "",
                     "bundles": [f"{e.operator}={e.name}" for e in lockfile.entries],
                     "written": name in result.written})
    if args.output == "table":
        width = max([len("CLUSTER"), *(len(r["cluster"]) for r in rows)])
        print(f"{'CLUSTER':<{width}}  {'STAGE':<10}  BUNDLES", file=out)
        for r in rows:
            print(f"{r['cluster']:<{width}}  {r['stage'] or '-':<10}  {', '.join(r['bundles']) or '(none)'}",
                  file=out)
        state = "not written (--no-write)" if args.no_write else f"{len(result.written)} written"
        print(f"{counted(len(rows), 'cluster')} resolved in {counted(result.shapes, 'resolution')}; lockfiles: {state}", file=out)
    else:
        doc = {"clusters": rows, "resolutions": result.shapes}
        out.write(json.dumps(doc, indent=2) + "\n" if args.output == "json" else yamlio.dump(doc))
    return EXIT_OK


def _approvals(snapshot: Any, resolution: Any, lockfile: Any, kube: Any) -> tuple[dict, str]:
    """The approval stage needs the bundles' content; if it cannot be fetched here, say so instead."""
    from reconciler import pipeline
    from reconciler.approve import stage
    from reconciler.errors import ReconcilerError

    try:
        installs = pipeline.convert(snapshot, resolution, lockfile, kube).installs
        return stage.approvals(snapshot, installs, kube), ""
    except ReconcilerError as exc:
        return {}, exc.message.splitlines()[0]


def as_document(resolution: Any, lockfile: Any, *, explain: bool) -> dict[str, Any]:
    digests = {e.operator: e.digest for e in lockfile.entries}
    bundles = []
    for s in resolution.selections:
        entry: dict[str, Any] = {
            "operator": s.owner, "kind": s.kind, "package": s.package, "name": s.bundle_name,
            "version": s.version, "catalog": s.catalog, "channel": s.channel, "source": s.image,
            "digest": digests.get(s.owner, ""), "applied": s.apply,
        }
        if s.required_by:
            entry["requiredBy"] = list(s.required_by)
        if s.dependencies:
            entry["dependencies"] = [{"meets": need, "bundle": b} for need, b in s.dependencies]
        if s.satisfies:
            entry["satisfies"] = [{"bundle": b, "meets": need} for b, need in s.satisfies]
        if explain:
            entry["reasons"] = list(s.reasons)
        bundles.append(entry)
    return {
        "resolved": True,
        "kubernetesVersion": resolution.kube_version,
        "bundles": bundles,
        "updates": [{"operator": u.operator, "catalog": u.catalog, "package": u.package, "channel": u.channel,
                     "options": list(u.options)} for u in resolution.updates],
        "deprecations": [{"operator": d.operator, "scope": d.scope, "name": d.name, "message": d.message}
                         for d in resolution.deprecations],
    }


def _table(resolution: Any, out: TextIO, *, explain: bool) -> None:
    rows = [("OPERATOR", "KIND", "PACKAGE", "BUNDLE", "VERSION", "CATALOG", "CHANNEL")]
    for s in resolution.selections:
        rows.append((s.owner, s.kind if s.apply else f"{s.kind} (report only)", s.package or "-", s.bundle_name,
                     s.version or "-", s.catalog or "-", s.channel or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    for s in resolution.selections:
        if s.required_by:
            print(f"\n{s.owner}: required by {', '.join(s.required_by)}", file=out)
            for b, need in s.satisfies:
                print(f"  {b} needs {need}", file=out)
    if explain:
        for s in resolution.selections:
            print(f"\nwhy {s.bundle_name} for {s.owner}:", file=out)
            for r in s.reasons:
                print(f"  - {r}", file=out)
            for need, b in s.dependencies:
                print(f"  - depends on {b} for {need}", file=out)
    for u in resolution.updates:
        print(f"\nupdate available for {u.operator} (needs a change to its declaration): channel {u.channel} "
              f"of {u.catalog}: {', '.join(u.options)}", file=out)
    for d in resolution.deprecations:
        print(f"\ndeprecated: {d.operator}: {d.scope} {d.name}: {d.message}", file=out)
