"""One module per command group; each exposes ``register(subparsers)`` and sets ``run`` as its handler.

``common`` holds ``COMMANDS`` (the order they appear in ``--help``) and the arguments several commands share."""

from __future__ import annotations

from reconciler.commands.common import (
    COMMANDS, EXIT_CODES, NO_NAMESPACE, add_cluster_args, add_fleet_arg, add_offline_arg, add_trust_args,
    add_trust_root_arg, complete_stages, offline_run, trust_from,
)

__all__ = ["COMMANDS", "EXIT_CODES", "NO_NAMESPACE", "add_cluster_args", "add_fleet_arg", "add_offline_arg",
           "add_trust_args", "add_trust_root_arg", "complete_stages", "offline_run", "trust_from"]
