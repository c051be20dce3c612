"""cosign (sigstore), pinned by ``cosign/go.mod`` and built by ``reconciler.localcluster.gobuild``.

The signer whose signatures image verification accepts: tests sign images
pushed to the loopback registry with it (``cosign sign --key``, stored
under the ``sha256-<digest>.sig`` tag) so the reconciler is checked
against what users' pipelines produce, not against signatures of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("cosign")
MODULE = "github.com/sigstore/cosign/v2"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="cosign", version=VERSION, module_dir=MODULE_DIR, packages=(f"{MODULE}/cmd/cosign",),
              outputs=("cosign",))


def cosign_binary(log: Callable[[str], object] = print) -> Path:
    """The cosign executable, built into the cache first when missing."""
    return TOOL.ensure(log)["cosign"]
