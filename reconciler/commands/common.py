"""What the commands share: their order, and the arguments several of them take.

Each command group's module exposes ``register(subparsers)`` and sets ``run`` as its handler.

``COMMANDS`` is the order they appear in ``--help``. Handlers take the parsed
arguments and an output stream and return an exit code; errors are raised as
``ReconcilerError`` and mapped to exit codes by ``reconciler.cli.parser``.
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ContextManager, TextIO

EXIT_CODES = """\
exit codes: (they say whose move it is; see docs/hardening.md)
  0   success: nothing to change, or every change was applied
  1   changes were found by --dry-run or `diff` (as kubectl diff), or applied with --exit-code; a dry
      run counts the changes of an Operator that waits for approval (shown marked as waiting)
  2   the input is wrong and nothing was applied (a first install refused while written is removed again
      whole): a declaration, reconciler.yaml or olm.lock of the wrong
      shape or with a duplicate key; a catalog; resolution; a bundle (a field of the wrong type, or an
      object the API server refuses as invalid); a policy; a symbolic link out of the repository; a file
      that is not a regular file, is nested too deeply or expands aliases too far; or a guardrail policy
      violation or a refused takeover of an OLM install (moved since its adoption, applied by another
      tool, needed by an install OLM keeps), each of which holds back only the Operator concerned (the
      others are applied, and its status says why); a commit not signed by a --trusted-keys key (a dry
      run reports it and exits 2)
  3   the cluster: unreachable, a kubeconfig that cannot be loaded, or a request refused for any reason
      other than an invalid object (authorization, conflicts, server errors)
  4   an Operator waits for approval; everything else was applied (see `reconciler approve`); a
      dry run exits 4 only when an approval is missing and nothing would change
  5   applied, but a component did not become healthy in time
  64  a usage error: an unknown flag or a missing argument
  70  an internal error: a bug in the reconciler, in one line (RECONCILER_TRACEBACK=1 shows the
      traceback); please report it with the command that failed
  141 the output was closed before it was all written (`reconciler ... | head`): the run stops
      printing and exits quietly, as a tool stopped by SIGPIPE does (128 + 13)
"""

COMMANDS = {  # each command's line in `reconciler --help`, in this order
    "reconcile": "resolve, convert, diff, apply and prune once",
    "resolve": "choose the exact bundles, explain why, and write olm.lock",
    "diff": "review a change offline: bundles, upgrade edges, objects, RBAC, CRDs, API removals",
    "update": "list the updates each Operator could take; --apply commits each on a branch of its own",
    "adopt": "write what OLM v0 and OLM v1 run into the repository; --operator: compare a declared bundle with what runs",
    "handback": "write that the next reconcile returns an Operator to OLM v0, after checking OLM can take it back",
    "approve": "approve the permissions an Operator's new bundle waits for (writes approvals/)",
    "status": "show each installed Operator's bundle, health, updates and revision",
    "watch": "reconcile continuously from a working tree or a remote git repository",
    "promote": "copy the bundles a fleet's stage runs healthy into the next stage's lockfiles, as a commit",
    "fleet": "a fleet's status: every cluster's Operators, read through their kubeconfig contexts",
    "cluster": "a local Kubernetes cluster for users without one",
    "catalog": "validate, list, graph and render file-based catalogs; import a cluster's into the repository",
    "bundle": "render, validate or build a bundle",
    "completion": "print the shell code for tab completion",
}


_DECLARED = ("each Operator's install namespace is declared, not given on the command line: "
             "spec.install.namespace in its declaration, else the bundle's suggested namespace, else "
             "defaultInstallNamespace in reconciler.yaml")

# Why a command takes no -n/--namespace, and what to do instead (by command path; the first word as fallback).
# Commands with a namespace of their own (status, watch, bundle render and validate) define -n themselves.
NO_NAMESPACE = {
    "reconcile": f"{_DECLARED}; `reconciler status -n NS` lists the Operators installed in NS",
    "resolve": _DECLARED,
    "diff": _DECLARED,
    "update": f"{_DECLARED}; --only NAME limits the updates to one Operator",
    "approve": f"{_DECLARED}; name the Operators to approve",
    "handback": "the Operator's install namespace is declared (spec.install.namespace); --source NAMESPACE/NAME names "
                "the CatalogSource OLM subscribes from",
    "promote": f"a promotion moves bundles between a fleet's stages, whatever their namespace; {_DECLARED}",
    "fleet": "fleet status shows every cluster's Operators, whatever their namespace; `reconciler status REPO "
             "--cluster NAME -n NS` lists one cluster's Operators installed in NS",
    "catalog": "catalogs have no namespace: -c DIR names the catalog directory",
    "bundle build": "a bundle image holds the bundle as it is; `reconciler bundle render SOURCE -n NS` shows its "
                    "objects for one install namespace",
    "bundle convert": "the bundle written installs anywhere; `reconciler bundle render OUTDIR -n NS` shows its "
                      "objects for one install namespace",
    "cluster": "the local cluster is a whole cluster; pass -n to kubectl once KUBECONFIG names it",
    "completion": "completion prints shell code and reads no cluster",
}


def namespaced_arg(flag: str, value: str, example: str, hint: str = "") -> tuple[str, str]:
    """The namespace and name a ``flag`` taking ``NAMESPACE/NAME`` was given, checked before anything is read."""
    from reconciler.errors import UsageError
    from reconciler.model.kube import namespaced_name

    names = namespaced_name(value)
    if names is None:
        raise UsageError(f"{flag} {value!r} must be NAMESPACE/NAME, each a Kubernetes name",
                         hint=f"for example {flag} {example}" + (f" ({hint})" if hint else ""))
    return names


def add_offline_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--offline", action="store_true",
                   help="use no network at all: no cluster (what is installed comes from olm.lock), no registry, "
                        "git remote or download; bundles and catalog images come from the cache, an image tag by "
                        "the digest olm.lock pins it to (else the one it last resolved to), and tags are not "
                        "checked for moves. What the cache lacks is reported, not fetched")


def offline_run(repo: str) -> ContextManager[None]:
    """A context in which nothing uses the network (``reconciler.network``), knowing each source olm.lock pins
    (every cluster's lockfile, in a fleet) by its digest."""
    from reconciler import network
    from reconciler.repo import read_repository
    from reconciler.repo.fleet import lock_file_of, read_lock

    snapshot = read_repository(repo)
    locks = [snapshot.lock] + [read_lock(snapshot.root, lock_file_of(name)) for name in sorted(snapshot.clusters)]
    return network.offline({e.source: e.digest for lock in locks if lock for e in lock.entries
                            if e.source and e.digest})


def offline_aware(run: Callable[[argparse.Namespace, TextIO], int]) -> Callable[[argparse.Namespace, TextIO], int]:
    """``run`` as a command's handler that, given --offline, runs with no network (``offline_run``)."""
    def handler(args: argparse.Namespace, out: TextIO) -> int:
        if not args.offline:
            return run(args, out)
        with offline_run(args.repo):
            return run(args, out)
    return handler


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: the files in $KUBECONFIG merged as kubectl does, "
                                       "else ~/.kube/config, else the pod's service account)")
    p.add_argument("--context", help="kubeconfig context to use")


def add_fleet_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="NAME",
                   help="in a fleet repository (clusters/<name>.yaml), the cluster to act on; its kubeconfig "
                        "context (spec.context, else its name) is used when --context is not given and the "
                        "kubeconfig has it (docs/fleet.md)").completer = complete_clusters  # type: ignore[attr-defined]


def _repo_of(parsed_args: argparse.Namespace) -> str:
    return getattr(parsed_args, "repo", None) or "."


def complete_clusters(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
    """Tab completion of --cluster: the clusters the typed REPO declares (their file names; nothing else read)."""
    from reconciler.repo.fleet import cluster_names

    try:
        return [n for n in cluster_names(_repo_of(parsed_args)) if n.startswith(prefix)]
    except OSError:
        return []


def complete_stages(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
    """Tab completion of a stage: the ``stages`` of the typed REPO's reconciler.yaml, in their order."""
    import os

    import yaml

    try:
        with open(os.path.join(_repo_of(parsed_args), "reconciler.yaml"), encoding="utf-8") as f:
            stages = (yaml.safe_load(f) or {}).get("stages") or []
    except (OSError, yaml.YAMLError, AttributeError):
        return []
    return [s for s in stages if isinstance(s, str) and s.startswith(prefix)]


def add_trust_args(p: argparse.ArgumentParser) -> None:
    """Signed-commit verification (``repo/verify.py``); the file comes from outside the repository it verifies."""
    import os

    g = p.add_argument_group("signed commits (docs/security.md)")
    g.add_argument("--trusted-keys", metavar="FILE", default=os.environ.get("RECONCILER_TRUSTED_KEYS") or None,
                   help="verify the commit acted on against the OpenPGP public keys (armored) and SSH "
                        "allowed-signers lines in FILE, kept outside the repository ($RECONCILER_TRUSTED_KEYS); "
                        "an unsigned commit, or one signed by a key not in FILE, is refused")
    g.add_argument("--verify-mode", choices=("HEAD", "Tag", "TagAndHEAD"),
                   default=os.environ.get("RECONCILER_VERIFY_MODE") or "HEAD",
                   help="what must be signed, as Flux's modes: HEAD the commit (default), Tag the annotated tag "
                        "followed (--tag; in a working tree a tag at HEAD), TagAndHEAD both "
                        "($RECONCILER_VERIFY_MODE)")
    g.add_argument("--allow-rollback", action="store_true",
                   default=os.environ.get("RECONCILER_ALLOW_ROLLBACK", "").lower() in ("1", "true", "yes"),
                   help="accept a commit older than the one the cluster has applied (an ancestor of it: a branch "
                        "moved back), refused by default when verifying ($RECONCILER_ALLOW_ROLLBACK=true)")
    add_trust_root_arg(p)


def add_trust_root_arg(p: argparse.ArgumentParser) -> None:
    """The trust root of certificate-signed images (``oci/trustroot.py``), from outside the repository."""
    p.add_argument("--trust-root", metavar="FILE", action="append", default=None,
                   help="a Sigstore trusted_root.json or a PEM bundle of CA certificates that certificates signing "
                        "images (reconciler.yaml verify.identities) must chain to; repeatable "
                        "($RECONCILER_TRUST_ROOT, files separated by ':')")


def trust_from(args: argparse.Namespace):  # noqa: ANN201 - a repo.verify.Trust, imported only when asked for
    """The verification ``add_trust_args`` asked for, or None; the trust root of images is set for the run."""
    if getattr(args, "trust_root", None):
        from reconciler.oci import trustroot

        trustroot.use(args.trust_root)
    if not getattr(args, "trusted_keys", None):
        if getattr(args, "verify_mode", "HEAD") != "HEAD" or getattr(args, "allow_rollback", False):
            from reconciler.errors import UsageError

            given = [f for f, on in ((f"--verify-mode {getattr(args, 'verify_mode', '')}",
                                      getattr(args, "verify_mode", "HEAD") != "HEAD"),
                                     ("--allow-rollback", getattr(args, "allow_rollback", False))) if on]
            raise UsageError(f"{' and '.join(given)} {'need' if len(given) > 1 else 'needs'} --trusted-keys: "
                             "without trusted keys no signature is verified",
                             hint="give the file of trusted keys (--trusted-keys FILE, or $RECONCILER_TRUSTED_KEYS)")
        return None
    from reconciler.repo.verify import Trust, TrustedKeys

    return Trust(TrustedKeys.load(args.trusted_keys), args.verify_mode, args.allow_rollback)
