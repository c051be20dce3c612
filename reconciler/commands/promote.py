"""`reconciler promote`: a later stage gets what the previous stage runs healthy, as a commit."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from reconciler.commands.common import COMMANDS, complete_stages
from reconciler.errors import EXIT_OK
from reconciler.report.words import counted

EXIT_NOT_READY = 6

EXIT_CODES = """\
exit codes:
  0   promoted: the lockfiles that change were written and committed (on --branch if given); or nothing to
      promote: every Operator that is ready is already pinned where it goes (a second run is a no-op)
  1   with --dry-run: the promotion would change lockfiles (the text is the commit it would make)
  2   refused: with --to, any cluster of the previous stage that is not healthy, not long enough, not in
      sync, waits for approval, or runs another bundle than the others; with --all, a stage whose clusters
      are Degraded or disagree (what was ready elsewhere is still promoted); or the repository cannot be read
  3   a cluster whose evidence is needed could not be read (unreachable clusters give no evidence)
  6   with --all: nothing is ready yet (rolling out, within the soak time, waiting for approval); try later
  64  a usage error: not a stage, the first stage, --force without --reason, --to with --all
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "promote", help=COMMANDS["promote"],
        description="Promote to STAGE (stages: in reconciler.yaml) the bundles that each Operator's previous "
                    "stage runs (the stage before STAGE among those it is placed on): read those clusters "
                    "through their kubeconfig contexts; require, for each Operator placed on STAGE, that they all "
                    "run the same bundle, Ready for at least --soak, in sync with their lockfiles and with "
                    "nothing waiting for approval; then write the lockfiles of STAGE's clusters held to those "
                    "bundles and commit them, every move (cluster, Operator, bundle from -> to) and the evidence in "
                    "the message. --all does so for every stage, moving what is ready and leaving the rest, as a "
                    "scheduled job. Review the commit and push it: each cluster's reconciler applies it.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the fleet repository working tree")
    p.add_argument("--to", metavar="STAGE",
                   help="the stage to promote to (all or nothing)").completer = complete_stages  # type: ignore
    p.add_argument("--all", action="store_true",
                   help="every stage after the first: each Operator that is ready moves one stage, the others are "
                        "reported and wait (one commit)")
    p.add_argument("--operator", action="append", default=[], metavar="NAME",
                   help="with --to, promote only this Operator (repeatable)")
    p.add_argument("--soak", type=_duration, default=3600.0, metavar="DURATION",
                   help="how long each cluster of the previous stage must have been healthy (default 1h; 30m, "
                        "90s, 0)")
    p.add_argument("--force", action="store_true",
                   help="with --to, promote although the evidence is missing; needs --reason, recorded in the "
                        "commit")
    p.add_argument("--reason", default="", help="why --force is right (recorded in the commit message)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commit message the promotion would make (moves and evidence); write nothing")
    p.add_argument("--no-commit", action="store_true", help="write the lockfiles but do not commit them")
    p.add_argument("--branch", metavar="NAME",
                   help="commit on this new branch (made from HEAD) for a pull request, leaving the working tree "
                        "and the current branch as they are")
    p.add_argument("--kubeconfig", help="kubeconfig with a context per cluster (default: $KUBECONFIG, as kubectl)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def _duration(text: str) -> float:
    from reconciler.commands.reconcile import duration

    return duration(text)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.errors import EXIT_CHANGES, EXIT_CLUSTER, EXIT_ERROR, UsageError
    from reconciler.fleet import promote
    from reconciler.fleet.promote import Outcome

    if args.force and not args.reason.strip():
        raise UsageError("--force needs --reason: the commit records why the evidence was overridden")
    if args.to and args.all:
        raise UsageError(f"--to {args.to} and --all are exclusive: --to promotes to one stage, all or nothing; "
                         "--all promotes to every stage what is ready", hint="give one of them")
    if not args.to and not args.all:
        raise UsageError("say where to promote: --to STAGE, or --all for every stage")
    if args.all and (args.force or args.operator):
        given = " and ".join(flag for flag, on in (("--force", args.force), ("--operator", args.operator)) if on)
        raise UsageError(f"{given} {'go' if ' and ' in given else 'goes'} with --to STAGE: --all moves only what "
                         "is ready", hint="name the stage with --to instead of --all")
    if args.branch and args.no_commit:
        raise UsageError("--branch commits on a new branch; --no-commit writes without committing: choose one")
    if args.all:
        promotions = promote.plan_all(args.repo, soak=args.soak, kubeconfig=args.kubeconfig)
    else:
        promotions = [promote.plan(args.repo, args.to, soak=args.soak, kubeconfig=args.kubeconfig,
                                   force_reason=args.reason.strip() if args.force else "",
                                   operators=tuple(args.operator))]
    outcomes = {p.outcome for p in promotions}
    blocked = any(p.blocked for p in promotions)
    commit = None
    if not blocked and not args.dry_run:
        commit = promote.write(args.repo, promotions, commit=not args.no_commit, branch=args.branch)
    if args.output == "json":
        out.write(json.dumps(_document(promotions, commit, args), indent=2) + "\n")
    else:
        _text(out, promotions, commit, args)
    if not args.all:   # all or nothing, as before --all existed
        only = promotions[0]
        if only.blocked:
            return EXIT_CLUSTER if any(f.kind.value == "unreachable" for f in only.refused) else EXIT_ERROR
        return EXIT_CHANGES if args.dry_run and only.outcome is Outcome.PROMOTED else EXIT_OK
    if Outcome.REFUSED in outcomes:
        return EXIT_ERROR
    if Outcome.PROMOTED in outcomes:
        return EXIT_CHANGES if args.dry_run else EXIT_OK
    if Outcome.UNREACHABLE in outcomes:
        return EXIT_CLUSTER
    return EXIT_NOT_READY if Outcome.NOT_READY in outcomes else EXIT_OK


def _text(out: TextIO, promotions: list, commit: str | None, args: argparse.Namespace) -> None:  # noqa: ANN001
    from reconciler.fleet.promote import Outcome, message

    moving = [p for p in promotions if p.outcome is Outcome.PROMOTED]
    if moving and not any(p.blocked for p in promotions):
        out.write(message(promotions))
    for p in promotions:
        if p not in moving:
            out.write(p.message())
    for p in promotions:
        if p.blocked:
            out.write(f"Refused: stage {p.source} does not show that these bundles work (above); fix that, wait "
                      f"out the soak time, or pass --force --reason TEXT.\n")
        elif p.outcome is not Outcome.PROMOTED and p.refused and not p.forced:
            out.write(f"{p.target}: nothing ready to promote ({counted(len(p.refused), 'finding')} above).\n")
    if args.dry_run:
        out.write("Dry run: nothing was written.\n")
    elif commit:
        where = f"on branch {args.branch}" if args.branch else ""
        stages = ", ".join(p.target for p in moving)
        out.write(f"Committed {commit[:12]}{' ' + where if where else ''}: review it and push it; each cluster of "
                  f"{stages} applies it.\n")
    elif moving and args.no_commit:
        out.write("Written, not committed (--no-commit).\n")
    elif not moving and all(p.outcome is Outcome.UP_TO_DATE for p in promotions):
        names = ", ".join(p.target for p in promotions) or "no stage"
        out.write(f"Nothing to promote: {names} already pin{'s' if len(promotions) == 1 else ''} what is ready.\n")


def _document(promotions: list, commit: str | None, args: argparse.Namespace) -> dict:  # noqa: ANN001
    """The promotion for scripts: per stage, the outcome, each move and the evidence per cluster."""
    return {
        "apiVersion": "reconciler.dev/v1alpha1", "kind": "Promotion",
        "stages": [{
            "to": p.target, "from": p.source, "outcome": p.outcome.value, "refused": p.blocked,
            "forced": p.forced,
            "moves": [{"cluster": m.cluster, "operator": m.operator, "from": m.before, "to": m.after}
                      for m in p.moves],
            "evidence": [{"operator": ev.operator, "from": ev.source, "bundle": ev.bundle, "clusters": ev.lines,
                          "findings": [{"cluster": f.cluster, "kind": f.kind.value, "message": f.text}
                                       for f in ev.problems],
                          "problems": [f.text for f in ev.problems]}
                         for ev in p.evidence],
            "changed": p.changed} for p in promotions],
        "commit": commit or "", "branch": args.branch or "", "dryRun": bool(args.dry_run),
    } | (_single(promotions[0]) if len(promotions) == 1 and not args.all else {})


def _single(p) -> dict:  # noqa: ANN001 - a Promotion
    """The keys a promotion to one stage has always had, beside ``stages``."""
    return {"from": p.source, "to": p.target, "refused": p.blocked, "forced": p.forced, "changed": p.changed,
            "evidence": [{"operator": ev.operator, "bundle": ev.bundle, "clusters": ev.lines,
                          "problems": [f.text for f in ev.problems]} for ev in p.evidence]}
