"""The CNCF distribution registry, pinned by ``registry/go.mod`` and built by ``reconciler.localcluster.gobuild``.

Tests push and pull the images the project builds to this registry, started
on a loopback port with a temporary storage directory (see
``tests/bundle/conftest.py``); no container engine or root is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("registry")
MODULE = "github.com/distribution/distribution/v3"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="registry", version=VERSION, module_dir=MODULE_DIR,
              packages=(f"{MODULE}/cmd/registry",), outputs=("registry",))


def registry_binary(log: Callable[[str], object] = print) -> Path:
    """The registry executable, built into the cache first when missing."""
    return TOOL.ensure(log)["registry"]
