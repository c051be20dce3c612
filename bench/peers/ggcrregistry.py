"""go-containerregistry's registry (``pkg/registry``) with the OCI 1.1 referrers API on, behind a small main of ours.

The distribution registry (``registry``) answers ``GET /v2/<name>/referrers/
<digest>`` with 404, so signatures cosign v3 writes there are listed under the
referrers tag schema's fallback tag; this registry serves the API, so the tests
check both ways a signature is found. The module in ``ggcrregistry/`` pins the
library; ``main.go`` is ours and part of the cache key. It keeps manifests in
memory (blobs in ``-blobs DIR``), so each test starts it for itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("ggcrregistry")
MODULE = "github.com/google/go-containerregistry"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="ggcrregistry", version=VERSION, module_dir=MODULE_DIR, packages=(".",),
              outputs=("ggcrregistry",), sources=("main.go",))


def ggcrregistry_binary(log: Callable[[str], object] = print) -> Path:
    """The ggcrregistry executable, built into the cache first when missing."""
    return TOOL.ensure(log)["ggcrregistry"]
