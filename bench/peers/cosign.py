"""cosign (sigstore), pinned by ``cosign/go.mod`` (the current major, v3) and built by ``reconciler.localcluster.gobuild``.

The signer whose signatures image verification accepts: tests sign images
pushed to the loopback registry with it, as users' pipelines do today
(``cosign sign --key``, a Sigstore bundle stored as an OCI referrer of the
image, and ``cosign attest``), so the reconciler is checked against what
cosign produces, not against signatures of its own. ``cosign_v2`` pins the
previous major, for signatures made in the past (the ``.sig`` tag).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("cosign")
MODULE = "github.com/sigstore/cosign/v3"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="cosign", version=VERSION, module_dir=MODULE_DIR, packages=(f"{MODULE}/cmd/cosign",),
              outputs=("cosign",))


def cosign_binary(log: Callable[[str], object] = print) -> Path:
    """The cosign executable, built into the cache first when missing."""
    return TOOL.ensure(log)["cosign"]


def module_source(module: str) -> Path:
    """Where the Go module cache holds ``module`` at the version cosign's pin requires (fetched from the module
    proxy when missing): tests read the real Sigstore bundles and trusted roots sigstore-go ships as test data."""
    import json
    import subprocess

    done = subprocess.run(["go", "mod", "download", "-json", module], cwd=MODULE_DIR, env=TOOL._env(),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {module} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return Path(json.loads(done.stdout)["Dir"])
