"""``kubectl`` at the local control plane's version, pinned by ``kubectl/go.mod`` and built by ``reconciler.localcluster.gobuild``.

The apply benchmark compares the reconciler's server-side apply with
``kubectl apply --server-side`` against the same API server. The module pins
k8s.io/kubernetes at the control plane's version (same requirements and
replacements as ``reconciler/localcluster/gomod``, so a warm Go build
cache is shared), and the version stamped into the binary is that pin.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("kubectl")
MODULE = "k8s.io/kubernetes"
VERSION = pinned(MODULE_DIR, MODULE)
_MINOR = VERSION.lstrip("v").split(".")[1]

TOOL = GoTool(label="kubectl", version=VERSION, module_dir=MODULE_DIR,
              packages=(f"{MODULE}/cmd/kubectl",), outputs=("kubectl",),
              ldflags=("-s", "-w", f"-X k8s.io/component-base/version.gitVersion={VERSION}",
                       "-X k8s.io/component-base/version.gitMajor=1",
                       f"-X k8s.io/component-base/version.gitMinor={_MINOR}",
                       "-X k8s.io/component-base/version.gitTreeState=clean"))


def kubectl_binary(log: Callable[[str], object] = print) -> Path:
    """The kubectl executable, built into the cache first when missing."""
    return TOOL.ensure(log)["kubectl"]
