"""Flux's server-side apply engine (``github.com/fluxcd/pkg/ssa``) behind a small main of ours.

The reconcile benchmark's peer for a no-op and a first apply: ``fluxssa
[-wait] FILE...`` applies the objects as Flux's kustomize-controller does
(``ResourceManager.ApplyAllStaged``: CRDs and namespaces first, then a
server-side dry-run and a comparison per object, only what differs applied;
four objects at a time, its default) and, with ``-wait``, polls every
object's kstatus until it is Current (``WaitForSet``, every 2 s). The module
in ``fluxssa/`` pins the library at the release that builds against the
control plane's client-go; ``main.go`` is ours and part of the cache key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("fluxssa")
MODULE = "github.com/fluxcd/pkg/ssa"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="fluxssa", version=VERSION, module_dir=MODULE_DIR, packages=(".",), outputs=("fluxssa",),
              sources=("main.go",))


def fluxssa_binary(log: Callable[[str], object] = print) -> Path:
    """The fluxssa executable, built into the cache first when missing."""
    return TOOL.ensure(log)["fluxssa"]
