"""One module per command group; each exposes ``register(subparsers)`` and sets ``run`` as its handler.

``COMMANDS`` is the order they appear in ``--help``. Handlers take the parsed
arguments and an output stream and return an exit code; errors are raised as
``ReconcilerError`` and mapped to exit codes by ``reconciler.cli``.
"""

from __future__ import annotations

import argparse

EXIT_CODES = """\
exit codes:
  0   success: nothing to change, or every change was applied
  1   changes were found by --dry-run or `diff` (as kubectl diff), or applied with --exit-code
  2   an error in the repository, a catalog, resolution or a bundle: nothing was applied; or a guardrail
      policy violation: the Operator concerned was not applied, the others were
  3   the cluster could not be reached or refused a request
  4   an Operator waits for approval; everything else was applied (see `reconciler approve`)
  5   applied, but a component did not become healthy in time
  64  a usage error: an unknown flag or a missing argument
  70  an internal error: a bug in the reconciler; please report it with the command that failed
"""

COMMANDS = ("reconcile", "resolve", "diff", "update", "approve", "watch", "cluster", "catalog", "bundle")


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context to use")
