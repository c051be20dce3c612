"""operator-controller's registry+v1 renderer, pinned by ``operator_controller/go.mod`` and built by ``reconciler.localcluster.gobuild``.

The conversion-parity sweep (``bench/convert_parity.py``) and its test render
the same bundle with the reconciler and with OLM v1's own converter. That
converter lives in ``internal/`` packages of operator-controller, which Go lets
only code under the module's import path import. Since Go decides that by
import path, not by directory, ``operator_controller/`` is a module of its own
whose path sits under operator-controller's
(``github.com/operator-framework/operator-controller/ocrender``): it
requires the pinned release from the module proxy like any dependency, and its
small ``main.go`` calls the renderer. Nothing of operator-controller is copied.

``ocrender render -bundle DIR -namespace NS [-watch NS]... [-cert-manager]``
prints the objects as one JSON array; ``ocrender normalize`` reads a JSON array
on stdin and writes each object back through its Go type, so two outputs can be
compared in one serialization.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("operator_controller")
MODULE = "github.com/operator-framework/operator-controller"
VERSION = pinned(MODULE_DIR, MODULE)

TOOL = GoTool(label="operator-controller", version=VERSION, module_dir=MODULE_DIR,
              packages=(".",), outputs=("ocrender",), sources=("main.go",))


def ocrender_binary(log: Callable[[str], object] = print) -> Path:
    """The ocrender executable, built into the cache first when missing (a cold build takes minutes)."""
    return TOOL.ensure(log)["ocrender"]
