"""``opm`` from operator-registry, pinned by ``opm/go.mod`` and built by ``reconciler.gobuild``.

The catalog benchmarks and the verdict-comparison tests run ``opm validate``
and ``opm render`` on the same content as ``reconciler catalog``. opm links
mattn/go-sqlite3 for its (deprecated) SQLite index support, which needs cgo,
so it is built with ``cgo=True`` (a C compiler must be installed), and with the
build tags opm's own Makefile uses: ``json1`` (SQLite JSON functions) and
``containers_image_openpgp`` (signature checks in pure Go; without it cgo pulls
in the system's gpgme library). ``GoTool`` has no field for tags, so the flag
rides in front of the package list, where ``go build`` still reads flags.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("opm")
MODULE = "github.com/operator-framework/operator-registry"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="opm", version=VERSION, module_dir=MODULE_DIR,
              packages=("-tags=json1,containers_image_openpgp", f"{MODULE}/cmd/opm"), outputs=("opm",),
              cgo=True)


def opm_binary(log: Callable[[str], object] = print) -> Path:
    """The opm executable, built into the cache first when missing (a cold build takes minutes)."""
    return TOOL.ensure(log)["opm"]
