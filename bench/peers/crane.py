"""crane (go-containerregistry), pinned by ``crane/go.mod`` and built by ``reconciler.localcluster.gobuild``.

An OCI client independent of the one the project uses (oras-py): tests pull
the images ``reconciler bundle build`` pushes with it, to prove that a
standard client accepts them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("crane")
MODULE = "github.com/google/go-containerregistry"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="crane", version=VERSION, module_dir=MODULE_DIR, packages=(f"{MODULE}/cmd/crane",),
              outputs=("crane",))


def crane_binary(log: Callable[[str], object] = print) -> Path:
    """The crane executable, built into the cache first when missing."""
    return TOOL.ensure(log)["crane"]
