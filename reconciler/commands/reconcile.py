"""`reconciler reconcile`: resolve, convert, diff, apply and prune once."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from reconciler.commands.common import COMMANDS, EXIT_CODES, add_cluster_args, add_fleet_arg, add_trust_args, trust_from
from reconciler.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_PENDING_APPROVAL, EXIT_UNHEALTHY

if TYPE_CHECKING:
    from reconciler.pipeline import Outcome

_SYMBOL = {"created": "+", "configured": "~", "unchanged": "=", "deleted": "-", "skipped": "!"}


def register(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "reconcile", help=COMMANDS["reconcile"],
        description="Resolve the repository's Operator declarations against its catalogs, write olm.lock, "
                    "convert each bundle, then diff against the cluster and apply with server-side apply "
                    "(field manager 'reconciler'), pruning objects of earlier versions or removed "
                    "declarations that the reconciler created. An existing object is applied over or pruned "
                    "only when the Operator's inventory lists it and field manager 'reconciler' applied it "
                    "(labels alone prove nothing; annotate reconciler.dev/adopt=true to take one over). A "
                    "declaration `reconciler adopt` wrote from an OLM v0 install takes that install over: OLM's "
                    "Subscription and InstallPlans are deleted, the bundle is applied over what runs (pod "
                    "templates kept), then its CSV is deleted orphaning its objects, with OLM's other bookkeeping "
                    "for it; one adopted from an OLM v1 ClusterExtension has the ClusterExtension deleted orphaning "
                    "its objects, the bundle applied over what runs, then its Helm release Secrets deleted and "
                    "OLM v1's labels removed; one annotated reconciler.dev/handback (by `reconciler handback`) "
                    "is held and handed back to OLM v0, the reconciler letting go once OLM's CSV Succeeded over "
                    "the running Deployments; a dry run lists each step (docs/migration.md). "
                    "Inventories belong to this repository's reconciler instance ('instance:' in "
                    "reconciler.yaml, default 'default'): another instance's Operators are never pruned, "
                    "and a declaration named like one of them is refused (exit 2); so are Operators another "
                    "repository installed. A dry run shows each object created or changed as a unified YAML "
                    "diff (coloured on a terminal), or hands the live and proposed objects to "
                    "$RECONCILER_EXTERNAL_DIFF or $KUBECTL_EXTERNAL_DIFF as two directories, as kubectl diff does.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rec.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    rec.add_argument("--dry-run", action="store_true",
                     help="change nothing: server-side dry-run when a cluster is configured, else compare "
                          "against an empty cluster; olm.lock is not written (see --write-lock)")
    rec.add_argument("--write-lock", action="store_true",
                     help="with --dry-run, still write the resolution to olm.lock")
    rec.add_argument("--exit-code", action="store_true",
                     help="exit 1 when changes were applied (as `terraform plan -detailed-exitcode`), "
                          "so a script can tell a no-op from a change")
    rec.add_argument("--locked", action="store_true",
                     help="refuse to run when olm.lock is stale (the resolution differs from it, or a bundle's "
                          "content no longer matches its digest), like `npm ci`; never writes olm.lock")
    rec.add_argument("--wait", action=argparse.BooleanOptionalAction, default=True,
                     help="after applying, wait until every Operator's components are healthy (Deployments "
                          "available, CRDs established, ...; default); --no-wait judges them once and reports")
    rec.add_argument("--timeout", type=duration, default=300.0, metavar="DURATION",
                     help="how long --wait waits, e.g. 90s, 5m (default 5m); then exit 5 if an Operator is "
                          "not healthy")
    add_cluster_args(rec)
    add_fleet_arg(rec)
    rec.add_argument("--show-unchanged", action="store_true", help="also list objects that need no change")
    rec.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                     help="text for people; json or yaml for scripts: the change set as a ReconcileResult "
                          "document (schema in docs/output.md), including unchanged objects")
    add_trust_args(rec)
    rec.set_defaults(run=run)


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``5m`` or ``1h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text and text[-1] in units:
            value = float(text[:-1]) * units[text[-1]]
        else:
            value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 5m)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import pipeline
    from reconciler.report import progress
    from reconciler.kube.client import Kube, load_api_client
    from reconciler.errors import ClusterError, UsageError

    if args.write_lock and args.locked:
        raise UsageError("--write-lock and --locked are exclusive: --locked never writes olm.lock",
                         hint="drop one of them")
    if args.write_lock and not args.dry_run:
        raise UsageError("--write-lock goes with --dry-run: a reconcile that applies writes olm.lock anyway",
                         hint="add --dry-run, or drop --write-lock")
    from reconciler.repo.fleet import cluster_context

    api = load_api_client(args.kubeconfig, args.context, preferred=cluster_context(args.repo, args.cluster))
    if api is None and not args.dry_run:
        raise ClusterError("no cluster is configured",
                           hint="pass --kubeconfig, set $KUBECONFIG, run `reconciler cluster up` for a local "
                                "cluster, or use --dry-run")
    kube = Kube(api) if api else None
    # a dry run reports a revision that does not verify, and still shows the plan (``pipeline.prepare``)
    source = pipeline.Source(args.repo, cluster=args.cluster, trust=trust_from(args))
    try:
        with interrupted_by_sigterm():
            outcome = pipeline.reconcile(source, kube, dry_run=args.dry_run, locked=args.locked,
                                         write_lock=args.write_lock or not args.dry_run,
                                         wait=args.timeout if args.wait else 0.0, on_progress=progress.status)
    finally:
        progress.clear()   # the report, or the error, starts on a clean line of the terminal
    if args.output == "text":
        print_outcome(outcome, out, dry_run=args.dry_run, server=kube.server if kube else None,
                      show_unchanged=args.show_unchanged, colour=_tty(out), kube=kube)
        unhealthy = print_health(outcome, out, waited=args.wait)
    else:
        doc = as_document(outcome, dry_run=args.dry_run, server=kube.server if kube else None)
        from reconciler import yamlio

        out.write(yamlio.dump_json(doc) if args.output == "json" else yamlio.dump(doc))
        unhealthy = bool(_unhealthy(outcome, waited=args.wait))
    if outcome.sync.refused:   # held back alone; the others were applied (each says why above)
        return max(r.exit_code for r in outcome.sync.refused)
    if outcome.untrusted is not None or any(d.violations for d in outcome.pending):
        return EXIT_ERROR
    if unhealthy:
        return EXIT_UNHEALTHY
    if args.dry_run:   # the plan, including what approving a waiting Operator would change
        return EXIT_CHANGES if outcome.sync.changed else EXIT_PENDING_APPROVAL if outcome.pending else EXIT_OK
    if outcome.pending:
        return EXIT_PENDING_APPROVAL
    return EXIT_CHANGES if outcome.sync.changed and args.exit_code else EXIT_OK


@contextlib.contextmanager
def interrupted_by_sigterm() -> Iterator[None]:
    """SIGTERM (a cancelled CI job, a stopped pod) interrupts a run as Ctrl-C does, so that what the run undoes
    on its way out (a webhook relaxed while its server starts) is undone before the process ends."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def _unhealthy(outcome: "Outcome", *, waited: bool) -> list[str]:
    """Operators that failed, or were not healthy in time when waited for."""
    from reconciler.cluster.health.judge import Status

    return [name for name, h in sorted(outcome.sync.health.items()) if not h.healthy
            and (h.status == Status.FAILED or (waited and h.timed_out))]


def print_health(outcome: "Outcome", out: TextIO, *, waited: bool) -> bool:
    """Print each Operator's health; True when one is unhealthy (failed, or not healthy in time when waited for)."""
    from reconciler.cluster.health.judge import Status

    health = outcome.sync.health
    if not health:
        return False
    print("Health:", file=out)
    unhealthy = False
    for name, h in sorted(health.items()):
        if h.healthy:
            count = len(h.components)
            print(f"  {name}: healthy ({count} component{'' if count == 1 else 's'}, {h.elapsed:.0f}s)", file=out)
            continue
        bad = h.status == Status.FAILED or (waited and h.timed_out)
        unhealthy = unhealthy or bad
        state = "failed" if h.status == Status.FAILED else (
            f"not healthy after {h.elapsed:.0f}s" if h.timed_out else "in progress (not waited for)")
        print(f"  {name}: {state}", file=out)
        for c in h.unhealthy[:10]:
            print(f"    {c.ref}: {c.health.status.value}: {c.health.message}", file=out)
    return unhealthy


RESULT_API_VERSION = "reconciler.dev/v1alpha1"
RESULT_KIND = "ReconcileResult"
# target.mode and lockfile.state of the document, as docs/output.md lists them
MODE_APPLY, MODE_DRY_RUN, MODE_EMPTY = "apply", "server-side-dry-run", "empty-cluster"
LOCK_WRITTEN, LOCK_UNCHANGED, LOCK_STALE = "written", "unchanged", "stale"


def _lock_state(outcome: "Outcome") -> str:
    snap = outcome.snapshot
    if outcome.lock_written:
        return LOCK_WRITTEN
    if snap.lock_path.is_file() and snap.lock_path.read_text(encoding="utf-8") == outcome.lockfile.render():
        return LOCK_UNCHANGED
    return LOCK_STALE


def as_document(outcome: "Outcome", *, dry_run: bool, server: str | None) -> dict[str, Any]:
    """The run as a versioned document for scripts (documented in docs/output.md; fields are only added)."""
    from reconciler.cluster.apply import Action
    from reconciler.commands.approve import approval_document

    snap = outcome.snapshot
    resolution = outcome.resolution
    selections = resolution.selections if resolution else tuple(i.selection for i in outcome.installs)
    namespaces = {i.selection.owner: i.bundle.namespace for i in outcome.installs}
    operators = []
    for sel in selections:
        entry: dict[str, Any] = {
            "operator": sel.owner, "kind": sel.kind, "package": sel.package or "", "bundle": sel.bundle_name,
            "version": sel.version or "", "catalog": sel.catalog or "", "channel": sel.channel or "",
            "source": sel.image or "", "namespace": namespaces.get(sel.owner, ""), "applied": sel.apply,
            "requiredBy": list(sel.required_by),
        }
        operators.append(entry)
    changes = []
    for c in outcome.sync.changes:
        entry = {"action": c.action.value, "operator": c.operator, **c.ref.to_dict(), "detail": c.detail,
                 "diff": list(c.diff), "waitsForApproval": c.waiting}
        entry.setdefault("namespace", "")
        changes.append(entry)
    return {
        "apiVersion": RESULT_API_VERSION,
        "kind": RESULT_KIND,
        "repository": {"path": str(snap.root), "revision": snap.revision or ""},
        "target": {"server": server or "", "dryRun": dry_run,
                   "mode": (MODE_DRY_RUN if server else MODE_EMPTY) if dry_run else MODE_APPLY},
        "lockfile": {"path": str(snap.lock_path), "state": _lock_state(outcome)},
        "operators": operators,
        "updates": [{"operator": u.operator, "catalog": u.catalog, "package": u.package, "channel": u.channel,
                     "options": list(u.options)} for u in (resolution.updates if resolution else ())],
        "notes": list(outcome.sync.notes),
        "refused": [{"operator": r.operator, "reason": r.reason, "hint": r.hint} for r in outcome.sync.refused],
        "changes": changes,
        "bookkeeping": [{"action": c.action.value, "operator": c.operator, "namespace": "", **c.ref.to_dict(),
                         "detail": c.detail} for c in outcome.sync.bookkeeping],
        "summary": {**{a.value: outcome.sync.count(a) for a in Action}, "waitingForApproval": outcome.sync.waiting},
        "changed": outcome.sync.changed,
        "approvals": [approval_document(d) for _, d in sorted(outcome.decisions.items())],
        "deprecations": [{"operator": d.operator, "scope": d.scope, "name": d.name, "message": d.message}
                         for d in (resolution.deprecations if resolution else ())],
        "health": [{"operator": name, "healthy": h.healthy, "status": h.status.value,
                    "unhealthy": [{"object": str(c.ref), "status": c.health.status.value, "reason": c.health.reason,
                                   "message": c.health.message}
                                  for c in h.unhealthy]}
                   for name, h in sorted(outcome.sync.health.items())],
    }


_COLOURS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}


def _diff_lines(c, colour: bool, external: bool) -> list[str]:  # noqa: ANN001 - a Change
    """What explains one change: its unified YAML diff (coloured on a terminal), else its changed paths."""
    if external and c.sides is not None:
        return []   # the external diff program shows it
    if c.unified:
        lines = [ln for ln in c.unified if not ln.startswith(("--- ", "+++ "))]
        if colour:
            lines = [f"{_COLOURS[ln[0]]}{ln}\033[0m" if ln[:1] in _COLOURS else ln for ln in lines]
        return [f"      {ln}" for ln in lines]
    lines = [f"      {d}" for d in c.diff[:20]]
    if len(c.diff) > 20:
        lines.append(f"      ... and {len(c.diff) - 20} more changed fields")
    return lines


def external_diff_program() -> str:
    """$RECONCILER_EXTERNAL_DIFF, else $KUBECTL_EXTERNAL_DIFF (kubectl's convention), for a dry run's diff."""
    import os

    return (os.environ.get("RECONCILER_EXTERNAL_DIFF") or os.environ.get("KUBECTL_EXTERNAL_DIFF") or "").strip()


def run_external_diff(outcome: "Outcome", out: TextIO, program: str) -> None:
    """As `kubectl diff` does: the live and the proposed objects in two directories, one file each, handed to the
    program (split on spaces, so it may carry flags: "diff -u -N"); its output is printed."""
    import shlex
    import subprocess
    import tempfile
    from pathlib import Path

    changed = [c for c in outcome.sync.changes if c.sides is not None]
    if not changed:
        return
    with tempfile.TemporaryDirectory(prefix="reconciler-diff-") as tmp:
        live, merged = Path(tmp, "LIVE"), Path(tmp, "MERGED")
        live.mkdir()
        merged.mkdir()
        for c in changed:
            name = ".".join(p for p in (c.ref.group or "v1", c.ref.kind, c.ref.namespace, c.ref.name) if p)
            (live / name).write_text(c.sides[0])
            (merged / name).write_text(c.sides[1])
        out.flush()
        done = subprocess.run([*shlex.split(program), str(live), str(merged)], capture_output=True, text=True)
        out.write(done.stdout)
        if done.returncode > 1:
            import sys

            print(f"warning: {program} exited with {done.returncode}: {done.stderr.strip()[:500]}", file=sys.stderr)


def print_outcome(outcome: "Outcome", out: TextIO, *, dry_run: bool, server: str | None,
                  show_unchanged: bool = False, colour: bool = False, kube=None) -> None:  # noqa: ANN001 - a Kube
    """The run for people; ``kube``, the cluster read for what the report says about it (its OpenShift release)."""
    from reconciler.cluster.apply import Action  # the cluster layer is imported only when it is used

    snap = outcome.snapshot
    print(f"Repository {snap.root} at {snap.revision or 'an unversioned tree (not a git repository)'}", file=out)
    if outcome.untrusted is not None:   # docs/security.md: the verdict above the plan, a refusal first of all
        print(f"REFUSED: a real run refuses this revision: {outcome.untrusted.render()}", file=out)
    for verdict in outcome.verdicts:
        print(f"Verified: {verdict}", file=out)
    resolution = outcome.resolution
    selections = resolution.selections if resolution else tuple(i.selection for i in outcome.installs)
    if not selections:
        print("No Operators declared.", file=out)
    namespaces = {i.selection.owner: i.bundle.namespace for i in outcome.installs}
    for sel in selections:
        origin = f"catalog {sel.catalog}, channel {sel.channel}" if sel.catalog else f"bundle {sel.image}"
        line = (f"  {sel.kind} {sel.owner}: {sel.bundle_name} (package {sel.package or '?'}, "
                f"version {sel.version or '?'}) from {origin}")
        if sel.owner in namespaces:
            line += f" -> namespace {namespaces[sel.owner]}"
        if sel.required_by:
            line += f" [required by {', '.join(sel.required_by)}]"
        if not sel.apply:
            line += " [input class only reports: not applied]"
        print(line, file=out)
    for upd in resolution.updates if resolution else ():
        print(f"  update available for {upd.operator} outside its declaration: channel {upd.channel} of "
              f"{upd.catalog}: {', '.join(upd.options)}", file=out)
    for dep in resolution.deprecations if resolution else ():
        print(f"  deprecated: {dep.operator}: {dep.scope} {dep.name}: {dep.message}", file=out)
    for inst in outcome.installs:
        for warning in inst.bundle.warnings:
            print(f"  warning: {inst.selection.owner}: {warning}", file=out)
    if resolution is not None and not all(s.apply for s in resolution.selections):
        from reconciler.review.nextminor import next_minor_checks

        from reconciler.bundle.openshift import cluster_version

        for check in next_minor_checks(snap, resolution, cluster_version(kube)[0] if kube is not None else None):
            for line in check.describe():
                print(line, file=out)
    lock_state = _lock_state(outcome)
    if lock_state == LOCK_STALE:
        lock_state = "would change; not written (a dry run writes nothing: add --write-lock to write it)"
    print(f"Lockfile {snap.lock_file}: {lock_state}", file=out)
    print_approvals(outcome, out)
    target = f"server-side dry-run against {server}" if dry_run and server else (
        "dry-run against an empty cluster" if dry_run else f"applied to {server}")
    print(f"Changes ({target}):", file=out)
    external = external_diff_program() if dry_run else ""
    said = set(outcome.signature_notes)   # above
    for note in outcome.sync.notes:
        if note not in said:
            print(f"  note: {note}", file=out)
    shown = 0
    for c in outcome.sync.changes:
        if c.action == Action.UNCHANGED and not show_unchanged:
            continue
        shown += 1
        verb = c.action.value if not dry_run or c.action in (Action.UNCHANGED, Action.SKIPPED) else \
            f"would be {c.action.value}" + (" once approved" if c.waiting else "")
        line = f"  {_SYMBOL[c.action.value]} {c.ref}  {verb}  [{c.operator}]"
        if c.detail:
            line += f": {c.detail}"
        print(line, file=out)
        for diff_line in _diff_lines(c, colour, external):
            print(diff_line, file=out)
    if not shown:
        print("  none", file=out)
    if external:
        run_external_diff(outcome, out, external)
    counts = ", ".join(f"{outcome.sync.count(a)} {a.value}" for a in Action)
    waiting = outcome.sync.waiting
    if waiting:
        names = sorted({c.operator for c in outcome.sync.changes if c.waiting})
        counts += f" ({waiting} of these wait for approval of {', '.join(names)}: nothing of them is applied " \
                  f"until approved)"
    print(f"Summary: {counts}", file=out)
    for r in outcome.sync.refused:
        print(f"REFUSED {r.operator}: {'would be ' if dry_run else ''}held back, nothing of it "
              f"{'would be ' if dry_run else ''}written: {r.reason}" + (f"\n  to go on: {r.hint}" if r.hint else ""),
              file=out)


def print_approvals(outcome: "Outcome", out: TextIO) -> None:
    if outcome.decisions:
        from reconciler.commands.approve import print_decisions

        print_decisions(outcome.decisions, outcome.snapshot.root, out)
    used = {d.provisioner_class for d in outcome.decisions.values()}
    for name, pcls in sorted(outcome.snapshot.provisioner_classes.items()):
        if pcls.ignored_parameters and name in used:
            print(f"  note: ProvisionerClass {name} ({pcls.origin}): parameters "
                  f"{', '.join(pcls.ignored_parameters)} are kept but have no effect here", file=out)


