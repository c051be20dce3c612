"""`reconciler adopt`: write into the repository what OLM v0 runs (declarations, lock entries, approvals)."""

from __future__ import annotations

import argparse
from typing import TextIO

from reconciler.commands import COMMANDS, add_cluster_args
from reconciler.errors import EXIT_CHANGES, EXIT_OK

EXIT_CODES = """\
exit codes:
  0  every OLM v0 install was adopted (or there was none), and the files were written (--dry-run: shown)
  1  some installs could not be adopted: each is listed with its reason; the others were written
  2  an input error: the repository declares an adopted package differently, or its catalogs are invalid
  3  the cluster: unreachable, or it runs no OLM v0
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
                    "The cluster is only read. Every install that cannot be adopted is listed with its reason. "
                    "Review and commit the files; the next `reconciler reconcile` takes the installs over from "
                    "OLM (docs/migration.md).",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("--dry-run", action="store_true", help="show the files that would be written; write nothing")
    add_cluster_args(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.adopt import adopt
    from reconciler.adopt.olmv0 import install_mode
    from reconciler.cluster.kube import Kube, load_api_client

    kube = Kube(load_api_client(args.kubeconfig, args.context))
    result = adopt(args.repo, kube, dry_run=args.dry_run)
    for a in result.adopted:
        i = a.install
        print(f"adopted {i.where}: Operator {a.operator} ({i.package}, channel {i.channel or 'default'}, "
              f"{install_mode(i.namespace, i.target_namespaces)}, {'Manual' if i.manual else 'Automatic'} "
              f"approval), bundle {a.bundle} from catalogs/{a.catalog}", file=out)
    for u in result.unmapped:
        print(f"not adopted {u.what}: {u.reason}" + (f"\n    to adopt it: {u.hint}" if u.hint else ""), file=out)
    if not result.adopted and not result.unmapped:
        print("OLM v0 runs no install in this cluster: nothing to adopt", file=out)
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
