"""`reconciler update`: list the updates every Operator could take, and with --apply commit them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from reconciler.commands import COMMANDS, add_fleet_arg
from reconciler.errors import EXIT_OK, UsageError

EXIT_CODES = """\
exit codes:
  0   updates listed (possibly none), or committed with --apply
  2   an error in the repository, a catalog, resolution or a bundle
  64  a usage error, e.g. --apply on a working tree with uncommitted changes, or a branch that exists
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "update", help=COMMANDS["update"],
        description="Find every Operator with a newer bundle: within its declaration (what a resolution with "
                    "olm.lock as installed picks; only olm.lock changes) and, with --include-out-of-range, "
                    "outside it (another channel, beyond the version range, another catalog; the declaration "
                    "changes too). Only bundles newer than the locked one and reached by an upgrade edge from "
                    "it are proposed. --apply writes the changes on a new branch, one commit per Operator, "
                    "each commit message carrying the `reconciler diff` markdown of that change.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("--apply", action="store_true", help="commit the updates on a new branch (pygit2)")
    p.add_argument("--branch", default="reconciler/updates", help="the branch --apply creates (default: %(default)s)")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="only this Operator (repeatable)")
    p.add_argument("--allow", choices=("major", "minor", "patch"), default="major",
                   help="the largest semver step to propose (default: %(default)s)")
    p.add_argument("--include-out-of-range", action="store_true",
                   help="also propose updates that change the declaration (channel, version range, catalog)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_fleet_arg(p)
    p.set_defaults(run=run)


def find(root: Path, *, allow: str, include_outside: bool, only: tuple[str, ...], cluster: str | None = None):
    from reconciler import pipeline
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import select_cluster
    from reconciler.review.updates import proposals

    snapshot = select_cluster(read_repository(root), cluster)
    unknown = sorted(set(only) - {d.name for d in snapshot.operators})
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no such Operator in {root}",
                         hint="give the metadata.name of an Operator declaration")
    catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    resolution = pipeline.resolve(snapshot, None)
    installed = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    semver = frozenset(n for n, c in snapshot.settings.catalogs.items() if c.upgrade_graph == "semver")
    return snapshot, proposals(snapshot, resolution, catalogs, installed, allow=allow,
                               include_outside=include_outside, only=only, semver_catalogs=semver)


def run(args: argparse.Namespace, out: TextIO) -> int:
    root = Path(args.repo)
    snapshot, found = find(root, allow=args.allow, include_outside=args.include_out_of_range,
                           only=tuple(args.only), cluster=args.cluster)
    commits: list[tuple[str, str]] = []
    if args.apply and found:
        commits = apply(root, snapshot, found, args.branch, cluster=args.cluster)
    if args.output == "json":
        doc = {"updates": [p.to_dict() for p in found]}
        if args.apply:
            doc["branch"] = args.branch
            doc["commits"] = [{"operator": op, "commit": c} for op, c in commits]
        out.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_OK
    if not found:
        print("No updates available.", file=out)
        return EXIT_OK
    rows = [("OPERATOR", "INSTALLED", "UPDATE", "LEVEL", "SCOPE", "EDGE", "DECLARATION CHANGES")]
    for p in found:
        rows.append((p.operator, p.installed, p.target, p.level, p.scope, p.edge, "; ".join(p.changes) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    for op, commit in commits:
        print(f"committed {op} as {commit[:12]} on branch {args.branch}", file=out)
    return EXIT_OK


def apply(root: Path, snapshot, found, branch: str,  # noqa: ANN001
          cluster: str | None = None) -> list[tuple[str, str]]:
    """One commit per proposal on a new branch made from HEAD; the working tree ends on that branch."""
    import pygit2

    from reconciler.commands import diff
    from reconciler.review.collect import _dirty, open_git

    repo, rel = open_git(root)
    if repo.head_is_unborn:
        raise UsageError("the repository has no commit to branch from", path=str(root))
    if _dirty(repo, rel):
        raise UsageError("the working tree has uncommitted changes", path=str(root),
                         hint="commit or stash them first: --apply commits on a new branch")
    if f"refs/heads/{branch}" in repo.references:
        raise UsageError(f"branch {branch} already exists", hint="pass --branch NAME, or delete the branch")
    head = repo.head.peel(pygit2.Commit)
    ref = repo.references.create(f"refs/heads/{branch}", head.id)
    repo.checkout(ref)
    commits = []
    for p in found:
        changed = _write_update(root, p, cluster)
        review = diff.compute(root, base="HEAD", pin_after=True, cluster=cluster, offline=True)
        message = (f"Update {p.operator} to {p.target}\n\n{p.installed} -> {p.target} ({p.level}, {p.scope} the "
                   f"declaration; {p.edge})\n\n" + diff.render(review, "markdown"))
        index = repo.index
        index.read()
        workdir = Path(repo.workdir).resolve()
        for path in changed:
            index.add(path.resolve().relative_to(workdir).as_posix())
        index.write()
        tree = index.write_tree()
        try:
            sig = repo.default_signature
        except (KeyError, pygit2.GitError):
            sig = pygit2.Signature("reconciler", "reconciler@localhost")
        commit = repo.create_commit("HEAD", sig, sig, message, tree, [repo.head.target])
        commits.append((p.operator, str(commit)))
    return commits


def _write_update(root: Path, p, cluster: str | None = None) -> list[Path]:  # noqa: ANN001 - a review.updates.Proposal
    """Point the declaration at the update (when it must change) and lock it; the files written."""
    from reconciler import pipeline, yamlio
    from reconciler.model.lock import Lockfile
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import select_cluster
    from reconciler.review.updates import rewrite_declaration

    snapshot = select_cluster(read_repository(root), cluster)
    written = []
    decl = next(d for d in snapshot.operators if d.name == p.operator)
    if p.changes:
        path = snapshot.root / decl.origin.path
        text = path.read_text(encoding="utf-8")
        yamlio.write_atomic(path, rewrite_declaration(text, p.operator, p, decl.catalog.name,
                                                      decl.catalog.channel))
        written.append(path)
        snapshot = select_cluster(read_repository(root), cluster)
    resolution = pipeline.resolve(snapshot, None)
    planned = pipeline.plan_lock(snapshot, resolution)
    installs = pipeline.convert(snapshot, resolution, planned, None)
    converted = {i.lock.operator: i.lock for i in installs}
    fresh = {e.operator: converted.get(e.operator, e) for e in planned.entries}
    moving = {o for o, e in fresh.items()
              if o == p.operator or p.operator in e.required_by.split(",")}
    old = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    entries = {o: e for o, e in old.items() if o not in moving
               and not (o not in fresh and p.operator in e.required_by.split(","))}
    entries.update({o: fresh[o] for o in moving})
    pipeline.write_lock(snapshot, Lockfile(tuple(sorted(entries.values()))))
    written.append(snapshot.lock_path)
    return written
