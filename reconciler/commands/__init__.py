"""One module per command group; each exposes ``register(subparsers)`` and sets ``run`` as its handler.

``COMMANDS`` is the order they appear in ``--help``. Handlers take the parsed
arguments and an output stream and return an exit code; errors are raised as
``ReconcilerError`` and mapped to exit codes by ``reconciler.cli``.
"""

from __future__ import annotations

import argparse

EXIT_CODES = """\
exit codes (as kubectl diff):
  0  nothing to change: the cluster already matches the repository
  1  changes were found (--dry-run) or applied
  2  an error in the repository, a catalog, resolution, a bundle or the policy; nothing was applied
  3  the cluster could not be reached or refused a request
"""

COMMANDS = ("reconcile", "resolve", "watch", "cluster", "catalog", "bundle")


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context to use")
