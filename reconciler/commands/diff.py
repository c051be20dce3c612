"""`reconciler diff`: what a change to the repository does, Operator by Operator, without a cluster."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_fleet_arg, add_trust_args, trust_from
from reconciler.errors import EXIT_CHANGES, EXIT_OK

EXIT_CODES = """\
exit codes: (as kubectl diff)
  0   no Operator changes
  1   Operators change (the report says how)
  2   an error in the repository, a catalog, resolution or a bundle, on either side
  3   the cluster (read only for its Kubernetes version) could not be reached
  64  a usage error, e.g. a --base that names no commit
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff", help=COMMANDS["diff"],
        description="Compare the repository at a base revision with the working tree. Both sides are resolved "
                    "and converted offline (the working tree with the base's olm.lock as what is installed); "
                    "for every Operator that changes the report gives the bundle before and after with the "
                    "upgrade edge taken, dependencies added and dropped, the objects created, changed and "
                    "deleted (Secret data masked), the RBAC gained and lost, CRD changes, catalog "
                    "deprecations and whether approval will be needed; and, for every Operator, the objects "
                    "whose apiVersion is deprecated or removed at the cluster's Kubernetes minor and the next "
                    "one. The cluster (--kubeconfig, else $KUBECONFIG, ~/.kube/config or the pod's service "
                    "account) is read for its version only; without one, or with --offline, kubernetesVersion "
                    "in reconciler.yaml says it. A fleet repository without --cluster is reviewed cluster by "
                    "cluster, each at the kubernetesVersion its settings give, reading no cluster.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", metavar="REPO", help="path to the GitOps repository working tree (in a git checkout)")
    p.add_argument("--base", metavar="REV",
                   help="the revision to compare with (default: HEAD when the working tree has uncommitted "
                        "changes, else HEAD's first parent)")
    p.add_argument("-o", "--output", choices=("text", "json", "markdown"), default="text",
                   help="text (coloured on a terminal), json (stable schema) or markdown (a PR comment)")
    p.add_argument("--offline", action="store_true",
                   help="do not read the cluster's version even if one is configured (kubernetesVersion in "
                        "reconciler.yaml says it)")
    add_cluster_args(p)
    add_fleet_arg(p)
    add_trust_args(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.cluster is None:
        from reconciler.repo.fleet import cluster_names

        if cluster_names(args.repo):   # a fleet: the change across every cluster, grouped by outcome
            from reconciler.fleet.review import compute_fleet, render_fleet

            fleet = compute_fleet(Path(args.repo), args.base)
            out.write(render_fleet(fleet, args.output, colour=_tty(out)))
            return EXIT_CHANGES if fleet.changed else EXIT_OK
    else:
        from reconciler.repo.fleet import cluster_context

        cluster_context(args.repo, args.cluster)   # a cluster the repository declares, or a usage error
    verdict = signature_verdict(Path(args.repo), trust_from(args))
    rev = compute(Path(args.repo), args.base, args.kubeconfig, args.context, cluster=args.cluster,
                  offline=args.offline)
    text = render(rev, args.output, colour=_tty(out))
    if verdict is not None:
        if args.output == "json":
            doc = json.loads(text)
            doc["signature"] = {"verified": verdict[0], "message": verdict[1]}
            text = json.dumps(doc, indent=2) + "\n"
        else:
            text = f"signature: {verdict[1]}\n\n" + text
    out.write(text)
    if args.cluster is not None and args.output == "text":
        from reconciler.commands.fleet import print_holds
        from reconciler.repo import read_repository
        from reconciler.repo.fleet import select_cluster

        print_holds(select_cluster(read_repository(args.repo), args.cluster), out, args.repo)
    return EXIT_CHANGES if rev.changed else EXIT_OK


def signature_verdict(root: Path, trust) -> tuple[bool, str] | None:  # noqa: ANN001 - a repo.verify.Trust
    """Whether the commit under the working tree is signed by a trusted key (what a reconcile of it would say).

    A review is of uncommitted changes as often as not, so the commit is judged, and uncommitted changes are
    said beside the verdict rather than refused.
    """
    if trust is None:
        return None
    from reconciler.repo import git_revision
    from reconciler.repo.identity import git_dir
    from reconciler.repo.verify import UntrustedRevision, verify_revision

    revision = git_revision(root.resolve())
    commit = revision.removesuffix("-dirty") if revision else None
    try:
        verdicts = verify_revision(git_dir(root.resolve()), commit, trust)
    except UntrustedRevision as exc:
        return False, f"not verified, a reconcile refuses it: {exc.message}"
    said = "; ".join(str(v) for v in verdicts)
    if revision and revision.endswith("-dirty"):
        said += " (the working tree's uncommitted changes are not signed: commit them signed before reconciling)"
    return True, f"verified: {said}"


def _tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def render(rev, output: str, colour: bool = False) -> str:  # noqa: ANN001 - a review.Review
    from reconciler.review import render as fmt

    if output == "json":
        return json.dumps(fmt.as_document(rev), indent=2) + "\n"
    if output == "markdown":
        return fmt.as_markdown(rev)
    return fmt.as_text(rev, colour=colour)


def compute(root: Path, base: str | None = None, kubeconfig: str | None = None, context: str | None = None,
            *, pin_after: bool = False, cluster: str | None = None, offline: bool = False):
    """The review of ``root``'s working tree against ``base``; the cluster configured (as for every command:
    ``kubeconfig``, else $KUBECONFIG, ...) is read for its version, unless ``offline``.

    ``pin_after`` keeps the working tree's locked owners on their locked bundles (for a change that is
    exactly a lock edit, as `update` makes), instead of what a resolution would move them to.
    """
    import dataclasses

    from reconciler import pipeline
    from reconciler.model.lock import Lockfile
    from reconciler.resolve import UPGRADE_EDGES, Unsatisfiable
    from reconciler.review import Side, review
    from reconciler.review.collect import approvals_of, base_commit, checkout, open_git, resolve_side

    kube = None
    if not offline:
        from reconciler.kube.client import Kube, load_api_client
        from reconciler.repo.fleet import cluster_context

        api = load_api_client(kubeconfig, context, preferred=cluster_context(root, cluster) if cluster else None)
        kube = Kube(api) if api else None
    repo, rel = open_git(root)
    commit, label = base_commit(repo, rel, base)
    with checkout(repo, commit, rel) as base_root:
        before = resolve_side(base_root, f"base {label}", revision=commit, cluster=cluster)
    unreachable = False
    try:
        after = resolve_side(root, "working tree", installed=before.lockfile if before else None, pin=pin_after,
                             reuse=before.side if before else None, cluster=cluster)
    except Unsatisfiable as exc:
        if before is None or not any(UPGRADE_EDGES in fact for fact in exc.facts):
            raise
        # A change no upgrade edge reaches from the base (a lower version pinned): still reviewed, resolved as if
        # nothing were installed, and its edge says that a reconcile refuses it.
        unreachable = True
        after = resolve_side(root, "working tree", installed=Lockfile(()), pin=pin_after,
                             reuse=before.side, cluster=cluster)
    assert after is not None
    empty = Side(f"base {label}", {})
    rev = review(before.side if before else empty, after.side, approvals=approvals_of(after),
                 approvals_before=approvals_of(before) if before else None,
                 kube_version=pipeline.kubernetes_version(
                     after.snapshot, pipeline.ClusterFacts(kube) if kube is not None else None))
    if unreachable:
        ops = tuple(dataclasses.replace(op, edge=f"{op.edge}: a reconcile refuses it (upgrades follow the "
                                                 f"catalog's upgrade edges; inputClass: force moves it anywhere)")
                    if op.edge == "no upgrade edge" else op for op in rev.operators)
        rev = dataclasses.replace(rev, operators=ops)
    return rev
