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
  0  every OLM v0 install and OLM v1 ClusterExtension asked for was adopted (or there was none), and the files were
     written (--dry-run: shown); OLM's own components (its packageserver) and installs left out by --namespace or
     --package are listed and stay with OLM;
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
                    "The cluster is only read (but for --freeze). -n/--namespace and --package adopt a chosen part; the "
                    "rest stays with OLM, untouched, and so does what OLM itself runs (its packageserver). Every "
                    "install that cannot be adopted is listed with its reason, and what an install left with OLM "
                    "still needs stays with it. "
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
    p.add_argument("-n", "--namespace", metavar="NS", action="append", dest="namespaces",
                   help="adopt only the installs in this namespace (repeatable); the others stay with OLM, untouched")
    p.add_argument("--package", metavar="NAME", action="append", dest="packages",
                   help="adopt only the installs of this package (repeatable); the others stay with OLM, untouched")
    p.add_argument("--freeze", action="store_true",
                   help="set each adopted Subscription to Manual approval, so OLM installs no upgrade of it while "
                        "the adoption is reviewed (OLM then holds every Subscription of its namespace: each is "
                        "named); the only write to the cluster adopt makes")
    p.add_argument("--import-catalogs", action="store_true",
                   help="first import, as `reconciler catalog import --catalog-source` does, the catalog of every "
                        "CatalogSource the cluster's Subscriptions use (the packages they use), so that their "
                        "installs are found in the repository")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                   help="the adoption as text, or as a versioned document for scripts: OLMAdoption, or with "
                        "--operator AdoptionReport (docs/output.md)")
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
    from reconciler.errors import UsageError

    chosen = [flag for flag, given in (("-n/--namespace", args.namespaces), ("--package", args.packages),
                                       ("--freeze", args.freeze), ("--import-catalogs", args.import_catalogs)) if given]
    if args.operator and chosen:
        raise UsageError(f"{' '.join(chosen)} with --operator: -n/--namespace, --package and --freeze choose OLM "
                         "installs to adopt, and --operator compares one declared Operator with what already runs",
                         hint="run one of them: `reconciler adopt REPO --dry-run` for OLM's installs, or "
                              "`reconciler adopt REPO --operator NAME` for objects applied some other way")
    if args.freeze and args.dry_run:
        raise UsageError("--freeze changes the adopted Subscriptions, and --dry-run changes nothing: choose one",
                         hint="review with --dry-run first, then adopt with --freeze")
    if args.import_catalogs and args.dry_run:
        raise UsageError("--import-catalogs writes the catalogs before adopting, and --dry-run writes nothing",
                         hint="preview an import with `reconciler catalog import REPO --catalog-source NS/NAME "
                              "--dry-run`")
    trust_from(args)   # the trust root of signed catalog and bundle images, when given
    if args.operator:
        return run_report(args, out)
    from reconciler.adopt import Selection, adopt

    kube = _cluster(args)
    if args.import_catalogs:
        import_catalogs(args, kube, out)
    from reconciler.oci.mirrors import using
    from reconciler.repo import read_repository

    select = Selection(frozenset(args.namespaces or ()), frozenset(args.packages or ()))
    with using(read_repository(args.repo).settings.mirrors):   # the bundles it converts come through the mirrors
        result = adopt(args.repo, kube, dry_run=args.dry_run, select=select, freeze=args.freeze)
    code = EXIT_CHANGES if result.unmapped else EXIT_OK
    if args.output != "text":
        from reconciler import yamlio

        doc = olm_document(result, kube.server, dry_run=args.dry_run)
        out.write(yamlio.dump_json(doc) if args.output == "json" else yamlio.dump(doc))
        return code
    for a in result.adopted:
        print(f"adopted {a.install.where}: Operator {a.operator} ({a.install.summary}), bundle {a.bundle} from "
              f"catalogs/{a.catalog}{a.install.note}", file=out)
    for u in result.unmapped:
        print(f"not adopted {u.what}: {u.reason}" + (f"\n    to adopt it: {u.hint}" if u.hint else ""), file=out)
    for u in result.platform:
        print(f"left to OLM {u.what}: {u.reason}", file=out)
    for inst in result.unselected:
        print(f"left to OLM {_what(inst)}: not asked for (--namespace, --package)", file=out)
    if not result.adopted and not result.unmapped and not result.unselected:
        print("OLM runs no install in this cluster: nothing to adopt", file=out)
    verb = "would write" if args.dry_run else "wrote"
    for rel, text in result.files.items():
        print(f"{verb} {rel}", file=out)
        if args.dry_run:
            print("".join(f"    {line}\n" for line in text.splitlines()), end="", file=out)
    for line in result.frozen:
        print(line, file=out)
    counts = result.counts()
    reasons = ", ".join(f"{n} {code}" for code, n in counts["notAdoptedByReason"].items())
    print(f"Summary: {counts['adopted']} adopted, {counts['notAdopted']} left with a reason"
          + (f" ({reasons})" if reasons else "") + f", {counts['platform']} OLM's own, {counts['notSelected']} not "
          "asked for", file=out)
    if result.adopted and not args.dry_run:
        files = " ".join(sorted(result.files)) or "(nothing new)"
        print(f"Review and commit: git add {files} && git commit; the next reconcile takes the installs over",
              file=out)
    return code


def olm_document(result, server: str, *, dry_run: bool) -> dict:  # noqa: ANN001 - an adopt.Adoption
    """The adoption of OLM installs as a versioned document for scripts (docs/output.md; fields are only added)."""
    def left(u) -> dict:  # noqa: ANN001 - an olmv0.Unmapped
        return {"what": u.what, "reason": u.code, "message": u.reason, "hint": u.hint, "namespace": u.namespace,
                "package": u.package}

    return {"apiVersion": "reconciler.dev/v1alpha1", "kind": "OLMAdoption", "target": {"server": server},
            "dryRun": dry_run,
            "adopted": [{"what": a.install.where, "operator": a.operator, "bundle": a.bundle, "catalog": a.catalog,
                         "namespace": a.install.namespace, "package": a.install.package, "files": list(a.files)}
                        for a in result.adopted],
            "notAdopted": [left(u) for u in result.unmapped],
            "platform": [left(u) for u in result.platform],
            "notSelected": [{"what": _what(i), "namespace": i.namespace, "package": i.package}
                            for i in result.unselected],
            "files": sorted(result.files), "frozen": list(result.frozen), "summary": result.counts()}


def _what(left) -> str:  # noqa: ANN001 - an install (``where``) or an olmv0.Unmapped (``what``)
    return getattr(left, "where", None) or left.what


def import_catalogs(args: argparse.Namespace, kube: Kube, out: TextIO) -> None:
    """`catalog import` of each CatalogSource a Subscription names; one that cannot be imported is said, and its
    installs are then listed by the adoption with their reason."""
    from reconciler.commands.catalog import import_catalog
    from reconciler.errors import ReconcilerError

    info = kube.resource("operators.coreos.com/v1alpha1", "Subscription")
    sources = sorted({((s.get("spec") or {}).get("sourceNamespace") or s["metadata"].get("namespace"),
                       (s.get("spec") or {}).get("source")) for s in (kube.list(info) if info else [])
                      if (s.get("spec") or {}).get("source")})
    for namespace, name in sources:
        try:
            import_catalog(args.repo, kube, out, catalog_source=f"{namespace}/{name}")
        except ReconcilerError as exc:
            print(f"could not import CatalogSource {namespace}/{name}: {exc.render()}", file=out)


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
