"""`reconciler update`: list the updates every Operator could take, and with --apply commit them."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from reconciler.commands.common import COMMANDS, add_fleet_arg
from reconciler.errors import EXIT_OK, InputError, UsageError

EXIT_CODES = """\
exit codes:
  0   updates listed (possibly none), or committed with --apply
  2   an error in the repository, a catalog, resolution or a bundle; or, with --apply, a working tree with
      uncommitted changes, a repository with no commit, or a --branch that exists (nothing is changed)
  64  a usage error, e.g. --only naming no Operator
"""

BRANCH_PREFIX = "reconciler/"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "update", help=COMMANDS["update"],
        description="Find every Operator with a newer bundle: within its declaration (what a resolution with "
                    "olm.lock as installed picks; only olm.lock changes) and, with --include-out-of-range, "
                    "outside it (another channel, beyond the version range, another catalog; the declaration "
                    "changes too: a pinned version moves to the new version, a range is widened). Without "
                    "--include-out-of-range the summary counts the Operators with a newer bundle beyond their "
                    "range. Only bundles newer than the locked one and reached by an upgrade edge from it are "
                    "proposed. --apply commits each update on a branch of its own made from HEAD, named "
                    f"{BRANCH_PREFIX}OPERATOR-VERSION as update bots name theirs (an existing one is left as it "
                    "is and said so), each commit message carrying the `reconciler diff` markdown of that "
                    "change, then checks out again the branch it started on; --branch B puts every update on "
                    "one branch B instead.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree")
    p.add_argument("--apply", action="store_true",
                   help=f"commit each update on a new branch {BRANCH_PREFIX}OPERATOR-VERSION (pygit2); the "
                        "working tree ends on the branch it started on")
    p.add_argument("--branch", metavar="BRANCH",
                   help="with --apply, commit every update on this one new branch instead, one commit each")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="only this Operator (repeatable)")
    p.add_argument("--allow", choices=("major", "minor", "patch"), default="major",
                   help="the largest semver step to propose (default: %(default)s)")
    p.add_argument("--include-out-of-range", action="store_true",
                   help="also propose updates that change the declaration (channel, version range, catalog)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_fleet_arg(p)
    p.set_defaults(run=run)


def find(root: Path, *, allow: str, include_outside: bool, only: tuple[str, ...], cluster: str | None = None):
    """The repository, the updates to propose, and the Operators with a newer update beyond their declaration
    that are not proposed (none when ``include_outside``)."""
    from reconciler import pipeline
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import select_cluster
    from reconciler.review.updates import proposals

    snapshot = select_cluster(read_repository(root), cluster)
    unknown = sorted(set(only) - {d.name for d in snapshot.operators})
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no such Operator in {root}",
                         hint="give the metadata.name of an Operator declaration: "
                              + (", ".join(sorted(d.name for d in snapshot.operators)) or "it declares none"))
    catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    resolution = pipeline.resolve(snapshot, None)
    installed = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    semver = frozenset(n for n, c in snapshot.settings.catalogs.items() if c.upgrade_graph == "semver")

    def propose(outside: bool):  # noqa: ANN202
        return proposals(snapshot, resolution, catalogs, installed, allow=allow, include_outside=outside,
                         only=only, semver_catalogs=semver)

    found = propose(include_outside)
    beyond: list[str] = []
    if not include_outside:
        shown = {(p.operator, p.target) for p in found}
        beyond = [p.operator for p in propose(True) if p.scope == "outside" and (p.operator, p.target) not in shown]
    return snapshot, found, beyond


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.commands.fleet import hold_document, holds_of, print_holds

    root = Path(args.repo)
    if args.branch is not None and not args.apply:
        raise UsageError("--branch names the branch --apply commits on", hint="add --apply, or drop --branch")
    snapshot, found, beyond = find(root, allow=args.allow, include_outside=args.include_out_of_range,
                                   only=tuple(args.only), cluster=args.cluster)
    applied = Applied()
    if args.apply and found:
        applied = apply(root, snapshot, found, args.branch, cluster=args.cluster)
    if args.output == "json":
        doc = {"updates": [p.to_dict() for p in found], "beyondRange": len(beyond)}
        if snapshot.cluster is not None:
            doc["held"] = [hold_document(h) for h in holds_of(snapshot)]
        if args.apply:
            doc["branch"] = args.branch
            doc["commits"] = [{"operator": op, "branch": b, "commit": c} for op, b, c in applied.commits]
            doc["skipped"] = [{"operator": op, "branch": b} for op, b in applied.skipped]
            doc["returnedTo"] = applied.returned_to
        out.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_OK
    more = f"{len(beyond)} more beyond your range: --include-out-of-range" if beyond else ""
    if not found:
        print("No updates available within the declarations." if more else "No updates available.", file=out)
        if more:
            print(more, file=out)
        print_holds(snapshot, out, args.repo)
        return EXIT_OK
    rows = [("OPERATOR", "INSTALLED", "UPDATE", "LEVEL", "SCOPE", "EDGE", "DECLARATION CHANGES")]
    for p in found:
        rows.append((p.operator, p.installed, p.target, p.level, p.scope, p.edge, "; ".join(p.changes) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    summary = f"{len(found)} update{'s' if len(found) != 1 else ''}"
    print(f"{summary}; {more}" if more else summary, file=out)
    for op, branch, commit in applied.commits:
        print(f"committed {op} as {commit[:12]} on branch {branch}", file=out)
    for op, branch in applied.skipped:
        print(f"skipped {op}: branch {branch} already exists (delete it to propose this update again)", file=out)
    if applied.returned_to:
        print(f"back on {applied.returned_to}", file=out)
    print_holds(snapshot, out, args.repo)
    return EXIT_OK


@dataclass
class Applied:
    commits: list[tuple[str, str, str]] = field(default_factory=list)   # (operator, branch, commit)
    skipped: list[tuple[str, str]] = field(default_factory=list)        # (operator, branch that exists)
    returned_to: str = ""                                                # the branch (or commit) started on


def branch_name(p, cluster: str | None = None) -> str:  # noqa: ANN001 - a review.updates.Proposal
    """One branch per update, named as update bots name theirs: the tool's prefix, where the change is (a fleet's
    cluster, as Dependabot names a directory), the dependency (here the Operator) and the version it moves to."""
    return f"{BRANCH_PREFIX}{f'{cluster}/' if cluster else ''}{p.operator}-{p.target_version}"


def apply(root: Path, snapshot, found, branch: str | None,  # noqa: ANN001
          cluster: str | None = None) -> Applied:
    """Commit the updates on new branches made from HEAD (one per Operator, or all on ``branch``), then check
    out again what HEAD was: on success and on failure the working tree is as it was found."""
    import pygit2

    from reconciler.review.collect import _dirty, open_git

    repo, rel = open_git(root)
    if repo.head_is_unborn:
        raise InputError("the repository has no commit to branch from", path=str(root),
                         hint="commit the repository first: --apply makes branches from HEAD")
    if _dirty(repo, rel):
        raise InputError("the working tree has uncommitted changes, and --apply switches branches", path=str(root),
                         hint="commit or stash them first (git stash), then run update --apply again")
    plan = [(branch, list(found))] if branch else [(branch_name(p, cluster), [p]) for p in found]
    done = Applied()
    for name, props in plan:
        if not pygit2.reference_is_valid_name(f"refs/heads/{name}"):
            raise InputError(f"{name!r} is not a valid branch name", hint="pass --branch NAME with a valid name")
        if f"refs/heads/{name}" in repo.references:
            if branch:
                raise InputError(f"branch {branch} already exists", path=str(root),
                                 hint="pass --branch with another name, or delete the branch")
            done.skipped += [(p.operator, name) for p in props]
    plan = [(name, props) for name, props in plan if f"refs/heads/{name}" not in repo.references]
    start = repo.head.peel(pygit2.Commit)
    home = None if repo.head_is_detached else repo.head.name
    done.returned_to = f"branch {repo.head.shorthand}" if home else f"commit {str(start.id)[:12]}"
    written: list[Path] = []
    current = None
    try:
        for name, props in plan:
            current = repo.references.create(f"refs/heads/{name}", start.id)
            repo.checkout(current)
            for p in props:
                written.clear()
                _commit_update(repo, root, p, written, cluster)
                done.commits.append((p.operator, name, str(repo.head.target)))
            _return(repo, start, home)
            current = None
    except BaseException:
        _return(repo, start, home, restore=written)
        if current is not None and current.target == start.id:
            current.delete()   # a branch that got no commit is no proposal
        raise
    return done


def _return(repo, start, home: str | None, restore: list[Path] = ()) -> None:  # noqa: ANN001
    """Check out again what HEAD was; ``restore``: files an interrupted update wrote, first put back as the
    branch it was written on has them (the tree was clean when --apply started, so they are ours alone)."""
    import pygit2

    if restore:
        workdir = Path(repo.workdir).resolve()
        paths = [p.resolve().relative_to(workdir).as_posix() for p in restore]
        repo.checkout_tree(repo.head.peel(pygit2.Commit).tree, strategy=pygit2.enums.CheckoutStrategy.FORCE,
                           paths=paths)
    if home is not None:
        repo.checkout(home)
    else:
        repo.checkout_tree(start.tree)
        repo.set_head(start.id)


def _commit_update(repo, root: Path, p, written: list[Path], cluster: str | None = None) -> str:  # noqa: ANN001
    """Write one update on the checked-out branch and commit it with its review in the message."""
    from reconciler.commands import diff
    from reconciler.repo.commit import commit_paths

    _write_update(root, p, written, cluster)
    review = diff.compute(root, base="HEAD", pin_after=True, cluster=cluster, offline=True)
    message = (f"Update {p.operator} to {p.target}\n\n{p.installed} -> {p.target} ({p.level}, {p.scope} the "
               f"declaration; {p.edge})\n\n" + diff.render(review, "markdown"))
    return commit_paths(repo, written, message)


def _write_update(root: Path, p, written: list[Path],  # noqa: ANN001 - a review.updates.Proposal
                  cluster: str | None = None) -> None:
    """Point the declaration at the update (when it must change) and lock it; each file is added to
    ``written`` before it is written."""
    from reconciler import pipeline, yamlio
    from reconciler.lock import write_lock
    from reconciler.model.lock import Lockfile
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import select_cluster
    from reconciler.review.updates import rewrite_declaration

    snapshot = select_cluster(read_repository(root), cluster)
    decl = next(d for d in snapshot.operators if d.name == p.operator)
    if p.changes:
        path = snapshot.root / decl.origin.path
        text = path.read_text(encoding="utf-8")
        try:
            rewritten = rewrite_declaration(text, p.operator, p, decl.catalog.name, decl.catalog.channel)
        except ValueError as exc:
            raise InputError(f"cannot point the declaration at {p.target}: {exc}", path=str(decl.origin.path),
                             obj=f"Operator {p.operator}",
                             hint=f"make the change by hand ({'; '.join(p.changes)}), or write each of "
                                  "spec.catalog.name, spec.catalog.channel and spec.version on a line of its "
                                  "own") from None
        written.append(path)
        yamlio.write_atomic(path, rewritten)
        snapshot = select_cluster(read_repository(root), cluster)
    resolution = pipeline.resolve(snapshot, None)
    converted = pipeline.convert(snapshot, resolution, pipeline.lock(snapshot, resolution))
    fresh = {e.operator: e for e in converted.lockfile.entries}
    moving = {o for o, e in fresh.items()
              if o == p.operator or p.operator in e.required_by.split(",")}
    old = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    entries = {o: e for o, e in old.items() if o not in moving
               and not (o not in fresh and p.operator in e.required_by.split(","))}
    entries.update({o: fresh[o] for o in moving})
    written.append(snapshot.lock_path)
    write_lock(snapshot, Lockfile(tuple(sorted(entries.values()))))
