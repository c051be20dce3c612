"""`reconciler handback`: write into the repository that the next reconcile returns an Operator to OLM v0."""

from __future__ import annotations

import argparse
from typing import TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_trust_root_arg, namespaced_arg, trust_from
from reconciler.errors import EXIT_ERROR, EXIT_OK

EXIT_CODES = """\
exit codes:
  0  the annotation was written (--dry-run: shown), or the declaration has it already
  2  an input error, or OLM v0 cannot take an Operator back as it runs: each reason is listed, nothing is written
  3  the cluster: unreachable, or it runs no OLM v0
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "handback", help=COMMANDS["handback"],
        description="Check that OLM v0 can take back an Operator the reconciler runs without restarting a pod or "
                    "deleting anything it does not replace, say what the next reconcile will do, step by step and "
                    "object by object, and annotate the Operator's declaration reconciler.dev/handback: "
                    "olm-v0/<namespace>/<catalogsource> (removing reconciler.dev/adopted-from). The cluster is only "
                    "read. Review and commit the change; the next `reconciler reconcile` then holds the Operator "
                    "(nothing of it applied or pruned), creates its OperatorGroup if the namespace has none and a "
                    "Subscription for its package pinned to the bundle that runs (startingCSV, Manual approval, its "
                    "channel and spec.config), approves OLM's first InstallPlan once it installs that bundle alone "
                    "with the running pod templates, and once OLM's CSV Succeeded over the same Deployments, "
                    "releases the objects (the reconciler's labels removed), deletes the RBAC it made from the CSV "
                    "(OLM's own replaces it) and the Operator's status object. Then remove the declaration: "
                    "nothing is pruned (docs/migration.md, \"The way back\"). Refused, with why: a bundle OLM v0 "
                    "does not install or with webhooks or APIServices, pod templates OLM would write differently, "
                    "a dependency OLM would install again, an OperatorGroup or Subscription that does not fit, a "
                    "CatalogSource that cannot be read.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("--operator", metavar="NAME", action="append", required=True,
                   help="the declared Operator to hand back (repeat for several)")
    p.add_argument("--source", metavar="NAMESPACE/NAME",
                   help="the CatalogSource OLM subscribes from (default: the one named like the declaration's "
                        "catalog, in the install namespace if several are)")
    p.add_argument("--dry-run", action="store_true", help="check and show what would be written; write nothing")
    add_cluster_args(p)
    add_trust_root_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.adopt.handback import handback
    from reconciler.errors import ClusterError
    from reconciler.kube.client import Kube, load_api_client

    if args.source:
        namespaced_arg("--source", args.source, "openshift-marketplace/community-operators",
                       "a CatalogSource; `kubectl get catalogsources -A` lists them")
    trust_from(args)
    api = load_api_client(args.kubeconfig, args.context)
    if api is None:
        raise ClusterError("no cluster is configured: handback checks what runs in one",
                           hint="pass --kubeconfig, set $KUBECONFIG, or run `reconciler cluster up`")
    reports = handback(args.repo, Kube(api), list(dict.fromkeys(args.operator)), source=args.source,
                       dry_run=args.dry_run)
    refused = False
    for rep in reports:
        if rep.refused:
            refused = True
            print(f"Operator {rep.operator} cannot be handed back to OLM v0 as it runs; nothing written:", file=out)
            for why in rep.refused:
                print(f"  - {why}", file=out)
            continue
        verb = "has" if rep.already else "would get" if args.dry_run else "got"
        print(f"Operator {rep.operator}: {rep.declaration} {verb} reconciler.dev/handback: {rep.value}", file=out)
        print("  The next reconcile:", file=out)
        for step in rep.steps:
            print(f"    {step}", file=out)
        for c in rep.changes:
            print(f"    {'-' if c.action.value == 'deleted' else '~'} {c.ref}  would be {c.action.value}: {c.detail}",
                  file=out)
    written = [r.declaration for r in reports if r.written]
    if written:
        print(f"Review and commit: git add {' '.join(written)} && git commit; the next reconcile hands it back",
              file=out)
    return EXIT_ERROR if refused else EXIT_OK
