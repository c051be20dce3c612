"""cosign v2, pinned by ``cosign_v2/go.mod``: the signer of signatures made in the past.

cosign v2 stores a key-pair signature under the tag ``sha256-<hex>.sig`` as a
*simple signing* payload; images signed then are still in registries, and
still verified. The tests that sign as users do today use ``cosign`` (v3).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("cosign_v2")
MODULE = "github.com/sigstore/cosign/v2"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="cosign-v2", version=VERSION, module_dir=MODULE_DIR, packages=(f"{MODULE}/cmd/cosign",),
              outputs=("cosign",))


def cosign_v2_binary(log: Callable[[str], object] = print) -> Path:
    """The cosign v2 executable, built into the cache first when missing."""
    return TOOL.ensure(log)["cosign"]
