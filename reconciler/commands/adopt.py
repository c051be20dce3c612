"""`reconciler adopt`: write into the repository what OLM v0 and OLM v1 run (declarations, lock entries, approvals)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_trust_root_arg, trust_from
from reconciler.errors import EXIT_CHANGES, EXIT_OK
from reconciler.report.words import counted

if TYPE_CHECKING:
    from reconciler.kube.client import Kube

EXIT_CODES = """\
exit codes:
  0  every OLM v0 install and OLM v1 ClusterExtension was adopted (or there was none), and the files were written (--dry-run: shown);
     --operator: every object of the bundle runs as the bundle says (taking it over changes nothing)
  1  some installs could not be adopted: each is listed with its reason; the others were written;
     --operator: some objects differ from the bundle or are missing (each shown: a takeover would change them)
  2  an input error: the repository declares an adopted package differently, or its catalogs are invalid;
     --operator: an Operator the repository does not declare, or objects that cannot be taken over (each
     listed with why and what to do)
  3  the cluster: unreachable, or it runs neither OLM v0 nor OLM v1 (without --operator)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "adopt", help=COMMANDS["adopt"],
        description="Read every install OLM v0 made in the cluster (Subscriptions, their OperatorGroup, installed "
                    "ClusterServiceVersion, InstallPlans and CatalogSource) and write into the repository, for "
                    "each, an Operator declaration meaning what its Subscription meant (package, channel, "
                    "install namespace and target namespaces; Manual approval as approval: Manual; no "
                    "spec.version, so it follows its channel as the Subscription did), the olm.lock entry of "
                    "exactly the bundle that runs (found in the repository's catalogs by name and checked by "
                    "content), and an approval of its permissions marked adopted, with the CSV as evidence. "
                    "Every ClusterExtension OLM v1 installed is read the same way: its package, channel, "
                    "version range (spec.version) and namespace, the bundle of status.install, and the "
                    "ClusterExtension and its ServiceAccount as evidence. "
                    "The cluster is only read. Every install that cannot be adopted is listed with its reason. "
                    "Review and commit the files; the next `reconciler reconcile` takes the installs over from "
                    "OLM (docs/migration.md). "
                    "With --operator NAME, for an operator applied without OLM (by hand, Helm, kustomize) that "
                    "the repository declares as for a new install: compare each object of the bundle it resolves "
                    "with the live object of that kind, namespace and name, by a server-side dry-run as "
                    "reconcile plans it, and say whether it matches (applying it changes nothing but who manages "
                    "it), differs (with the diff, marked when a workload's pod template changes and its pods "
                    "would restart), is missing (it would be created) or is refused (and why); and list live "
                    "objects that look like the operator's but are not in the bundle, which a takeover leaves "
                    "alone. Nothing is written: the consent to take the objects over is the annotation "
                    "reconciler.dev/adopt: \"true\" on the declaration, committed.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--dry-run", action="store_true", help="show the files that would be written; write nothing")
    how.add_argument("--operator", metavar="NAME", action="append",
                     help="compare the bundle of this declared Operator with what runs, object by object; write "
                          "nothing (repeat for several)")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                   help="with --operator: the report as text, or as a versioned AdoptionReport document for "
                        "scripts (docs/output.md)")
    add_cluster_args(p)
    add_trust_root_arg(p)
    p.set_defaults(run=run)


def _cluster(args: argparse.Namespace) -> Kube:
    """The cluster adopt reads: one must be configured, as there is nothing to adopt from without it."""
    from reconciler.kube.client import Kube, load_api_client
    from reconciler.errors import ClusterError

    api = load_api_client(args.kubeconfig, args.context)
    if api is None:
        raise ClusterError("no cluster is configured: adopt reads what runs in one",
                           hint="pass --kubeconfig, set $KUBECONFIG, or run `reconciler cluster up`")
    return Kube(api)


def run(args: argparse.Namespace, out: TextIO) -> int:
    trust_from(args)   # the trust root of signed catalog and bundle images, when given
    if args.operator:
        return run_report(args, out)
    if args.output != "text":
        from reconciler.errors import UsageError

        raise UsageError(f"-o {args.output} is the form of --operator's report; adopting OLM installs prints text",
                         hint="add --operator NAME, or leave -o out")
    from reconciler.adopt import adopt

    kube = _cluster(args)
    result = adopt(args.repo, kube, dry_run=args.dry_run)
    for a in result.adopted:
        print(f"adopted {a.install.where}: Operator {a.operator} ({a.install.summary}), bundle {a.bundle} from "
              f"catalogs/{a.catalog}{a.install.note}", file=out)
    for u in result.unmapped:
        print(f"not adopted {u.what}: {u.reason}" + (f"\n    to adopt it: {u.hint}" if u.hint else ""), file=out)
    if not result.adopted and not result.unmapped:
        print("OLM runs no install in this cluster: nothing to adopt", file=out)
    verb = "would write" if args.dry_run else "wrote"
    for rel, text in result.files.items():
        print(f"{verb} {rel}", file=out)
        if args.dry_run:
            print("".join(f"    {line}\n" for line in text.splitlines()), end="", file=out)
    if result.adopted and not args.dry_run:
        files = " ".join(sorted(result.files)) or "(nothing new)"
        print(f"Review and commit: git add {files} && git commit; the next reconcile takes the installs over",
              file=out)
    return EXIT_CHANGES if result.unmapped else EXIT_OK


_MARK = {"matches": "=", "differs": "~", "missing": "+", "refused": "!", "ours": "="}


def run_report(args: argparse.Namespace, out: TextIO) -> int:
    """`adopt REPO --operator NAME`: each object of the bundle against the cluster, and how to consent."""
    from reconciler.adopt.matching import consent_lines, exit_code, report

    kube = _cluster(args)
    names = list(dict.fromkeys(args.operator))
    reports = report(args.repo, kube, names)
    if args.output != "text":
        from reconciler import yamlio

        doc = as_document(reports, kube.server)
        out.write(yamlio.dump_json(doc) if args.output == "json" else yamlio.dump(doc))
        return exit_code(reports)
    for rep in reports:
        waits = " (it waits for approval: `reconciler approve` it before the reconcile that takes over)" \
            if rep.waiting else ""
        print(f"Operator {rep.operator}: bundle {rep.bundle}, install namespace {rep.namespace}, against "
              f"{kube.server}{waits}", file=out)
        for note in rep.notes:
            print(f"  note: {note}", file=out)
        for e in rep.entries:
            line = f"  {_MARK[e.verdict]} {e.ref}  {e.verdict}"
            if e.restarts:
                line += "  POD TEMPLATE DIFFERS: applying it rolls its pods (new ReplicaSet, pods restart)"
            if e.detail:
                line += f": {e.detail}"
            print(line, file=out)
            if e.hint:
                print(f"      to adopt it: {e.hint}", file=out)
            body = [ln for ln in e.unified if not ln.startswith(("--- ", "+++ "))] or list(e.diff)
            for ln in body:
                print(f"      {ln}", file=out)
        if rep.related:
            print("  Live objects that look like the operator's but are not in its bundle (a takeover leaves them "
                  "alone: not adopted, never pruned):", file=out)
            for r in rep.related:
                print(f"    {r.ref}: {r.why}", file=out)
        counts = ", ".join(f"{rep.count(v)} {v}" for v in ("matches", "differs", "missing", "refused"))
        if rep.count("ours"):
            counts += f", {rep.count('ours')} already the Operator's"
        if rep.restarts:
            counts += f" ({rep.restarts} would restart pods)"
        print(f"  Summary: {counts}; {counted(len(rep.related), 'other object')} left alone", file=out)
        for line in consent_lines(rep):
            print(f"  {line}", file=out)
    return exit_code(reports)


def as_document(reports: list, server: str) -> dict:   # noqa: ANN001 - matching.Report
    """The report as a versioned document for scripts (documented in docs/output.md; fields are only added)."""
    verdicts = ("matches", "differs", "missing", "refused", "ours")
    return {"apiVersion": "reconciler.dev/v1alpha1", "kind": "AdoptionReport", "target": {"server": server},
            "operators": [{
                "operator": r.operator, "bundle": r.bundle, "namespace": r.namespace, "declaration": r.declaration,
                "consent": r.consent, "adopted": dict(r.adopted) if r.adopted is not None else None,
                "waitsForApproval": r.waiting,
                "objects": [{"verdict": e.verdict, **e.ref.to_dict(), "namespace": e.ref.namespace,
                             "detail": e.detail, "hint": e.hint, "diff": list(e.diff), "restartsPods": e.restarts}
                            for e in r.entries],
                "related": [{**x.ref.to_dict(), "namespace": x.ref.namespace, "why": x.why} for x in r.related],
                "notes": list(r.notes),
                "summary": {**{v: r.count(v) for v in verdicts}, "restartsPods": r.restarts,
                            "related": len(r.related)}} for r in reports]}
