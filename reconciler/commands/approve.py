"""`reconciler approve`: record in the repository the permissions that wait for approval; commit to approve."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from reconciler.commands import COMMANDS, add_cluster_args
from reconciler.errors import EXIT_OK

if TYPE_CHECKING:
    from reconciler.approve import Decision

EXIT_CODES = """\
exit codes:
  0   the approvals were written (or nothing waited)
  2   an error in the repository, or an Operator that is not declared
  3   the cluster (read for what is installed) could not be reached
  64  neither an Operator nor --all was given
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "approve", help=COMMANDS["approve"],
        description="Resolve and convert as reconcile does, then write, for each named Operator whose bundle "
                    "waits for approval, an entry in approvals/<name>.yaml binding its exact bundle (name and "
                    "content digest) to the permissions it needs. Nothing is applied: committing the file is "
                    "the approval, and the next reconcile applies the bundle.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("operators", metavar="OPERATOR", nargs="*", help="Operators (or Inputs, dependencies) to approve")
    p.add_argument("--all", action="store_true", help="approve everything that waits")
    p.add_argument("--waive", metavar="POLICY", action="append", default=[],
                   help="also record an exception to this guardrail policy for the approved bundle (repeatable); "
                        "without it, a bundle that violates a policy is not approved. 'crd-upgrade-safety' "
                        "accepts CRD replacements that could break custom resources")
    p.add_argument("--offline", action="store_true",
                   help="do not read the cluster even if one is configured (what is installed comes from olm.lock)")
    add_cluster_args(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import pipeline
    from reconciler.approve.records import ApprovedBundle, add_approval
    from reconciler.cluster.kube import Kube, load_api_client
    from reconciler.errors import DeclarationError, PolicyError, UsageError

    if bool(args.operators) == args.all:
        raise UsageError("name the Operators to approve, or pass --all (not both)")
    api = None if args.offline else load_api_client(args.kubeconfig, args.context)
    prepared = pipeline.prepare(args.repo, kube=Kube(api) if api else None)
    decisions = prepared.decisions
    names = sorted(decisions) if args.all else args.operators
    unknown = [n for n in names if n not in decisions]
    if unknown:
        known = ", ".join(sorted(decisions)) or "none"
        raise DeclarationError(f"no bundle to apply for {', '.join(unknown)}",
                               hint=f"Operators, Inputs and dependencies with a bundle to apply: {known}")
    root = prepared.snapshot.root
    records = dict(prepared.snapshot.approvals)
    for name in names:
        d = decisions[name]
        if (d.approved or d.reason == "DependencyPendingApproval") and not args.waive:
            print(f"{name}: nothing of its own waits for approval ({d.bundle}: {d.message})", file=out)
            continue
        unwaived = sorted({v.policy for v in d.violations} - set(args.waive))
        if unwaived:
            raise PolicyError(f"{name}: {d.bundle} violates guardrail {', '.join(unwaived)}: "
                              + "; ".join(v.describe() for v in d.violations if v.policy in unwaived),
                              hint="fix the bundle or the declaration, or record a reviewed exception with "
                                   + " ".join(f"--waive {p}" for p in unwaived))
        entry = ApprovedBundle(d.bundle, d.digest, d.required.all,
                               tuple(sorted({v.policy for v in d.violations} | set(args.waive) | set(d.waived))))
        path = add_approval(root, records.get(name), name, entry)
        print(f"{name}: approved {d.bundle} ({d.digest[:19]}), recorded in {path.relative_to(root)}", file=out)
        for line in describe_pending(d):
            print(line, file=out)
    written = [n for n in names if args.waive or (not decisions[n].approved
                                                   and decisions[n].reason != "DependencyPendingApproval")]
    if written:
        files = " ".join(f"approvals/{n}.yaml" for n in written)
        print(f"Commit to approve: git add {files} && git commit", file=out)
    return EXIT_OK


def describe_pending(d: "Decision", indent: str = "    ") -> list[str]:
    """The permissions that wait, split into what the operator gains and what creating its objects needs."""
    from reconciler.approve.permissions import compact

    pending = d.pending
    gains = compact(a for a in pending.atoms() if d.required.grants.allows(a))
    creates = compact(a for a in pending.atoms() if not d.required.grants.allows(a))
    lines = []
    if gains:
        lines.append(f"{indent}permissions the operator gains:")
        lines.extend(gains.describe(indent + "  "))
    if creates:
        lines.append(f"{indent}permissions to create and update its objects:")
        lines.extend(creates.describe(indent + "  "))
    if not pending and d.policy == "DenyAll" and not d.violations and d.reason != "DependencyPendingApproval":
        lines.append(f"{indent}no new permissions: {d.provisioner_class} ({d.policy}) approves no bundle by itself")
    for check in d.denied:
        lines.append(f"{indent}denied: {check}")
    for v in d.violations:
        lines.append(f"{indent}violates: {v.describe()}")
    return lines
