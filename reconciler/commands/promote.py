"""`reconciler promote`: a later stage gets what the previous stage runs healthy, as a commit."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from reconciler.commands import COMMANDS
from reconciler.errors import EXIT_OK

EXIT_CODES = """\
exit codes:
  0   promoted: the target stage's lockfiles were written and committed (or nothing had to change)
  1   with --dry-run: the promotion would change lockfiles
  2   refused: a cluster of the previous stage is not healthy, not long enough, not in sync, waits for approval,
      or runs another bundle than the others; or the repository cannot be read
  3   a cluster of the previous stage could not be read (unreachable clusters give no evidence)
  64  a usage error: not a stage, the first stage, --force without --reason
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "promote", help=COMMANDS["promote"],
        description="Promote to STAGE (stages: in reconciler.yaml) the bundles that the previous stage runs: "
                    "read every cluster of the previous stage through its kubeconfig context; require, for each "
                    "Operator placed on STAGE, that they all run the same bundle, Ready for at least --soak, "
                    "in sync with their lockfiles and with nothing waiting for approval; then write the lockfiles "
                    "of STAGE's clusters held to those bundles and commit them, the evidence in the message. "
                    "Review the commit and push it: each cluster's reconciler applies it.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the fleet repository working tree")
    p.add_argument("--to", required=True, metavar="STAGE", help="the stage to promote to")
    p.add_argument("--soak", type=_duration, default=3600.0, metavar="DURATION",
                   help="how long each cluster of the previous stage must have been healthy (default 1h; 30m, "
                        "90s, 0)")
    p.add_argument("--force", action="store_true",
                   help="promote although the evidence is missing; needs --reason, recorded in the commit")
    p.add_argument("--reason", default="", help="why --force is right (recorded in the commit message)")
    p.add_argument("--dry-run", action="store_true", help="print the evidence and what would change; write nothing")
    p.add_argument("--no-commit", action="store_true", help="write the lockfiles but do not commit them")
    p.add_argument("--kubeconfig", help="kubeconfig with a context per cluster (default: $KUBECONFIG, as kubectl)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def _duration(text: str) -> float:
    from reconciler.commands.reconcile import duration

    return duration(text)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.errors import EXIT_CHANGES, EXIT_CLUSTER, EXIT_ERROR, UsageError
    from reconciler.fleet import promote

    if args.force and not args.reason.strip():
        raise UsageError("--force needs --reason: the commit records why the evidence was overridden")
    promotion = promote.plan(args.repo, args.to, soak=args.soak, kubeconfig=args.kubeconfig,
                             force_reason=args.reason.strip() if args.force else "")
    refused = bool(promotion.refused) and not promotion.forced
    commit = None
    if not refused and not args.dry_run:
        commit = promote.write(args.repo, promotion, commit=not args.no_commit)
    if args.output == "json":
        doc = {"from": promotion.source, "to": promotion.target, "refused": refused, "forced": promotion.forced,
               "evidence": [{"operator": ev.operator, "bundle": ev.bundle, "clusters": ev.lines,
                             "problems": ev.problems} for ev in promotion.evidence],
               "changed": promotion.changed, "commit": commit or ""}
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.write(promotion.message())
        if refused:
            out.write(f"Refused: stage {promotion.source} does not show that these bundles work (above); fix "
                      f"that, wait out the soak time, or pass --force --reason TEXT.\n")
        elif args.dry_run:
            out.write("Dry run: nothing was written.\n")
        elif commit:
            out.write(f"Committed {commit[:12]}: review it and push it; each cluster of {promotion.target} "
                      f"applies it.\n")
        elif promotion.changed:
            out.write("Written, not committed (--no-commit).\n")
        else:
            out.write(f"Nothing to promote: {promotion.target} already pins these bundles.\n")
    if refused:
        unreachable = any("unreachable" in p for p in promotion.refused)
        return EXIT_CLUSTER if unreachable else EXIT_ERROR
    if args.dry_run and promotion.changed:
        return EXIT_CHANGES
    return EXIT_OK
