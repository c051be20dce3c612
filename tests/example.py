"""The example repository (examples/gitops-repo), copied for a test that needs its Operator approved.

The example ships without an approval, so that a user following the README sees its first install wait for
one. Most tests are about something else and start where the README ends: ``approved_copy`` writes the
approval `reconciler approve` recorded for plumbus 1.0.0 and 1.1.0 (``tests/example_approval.yaml``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gitops-repo"
APPROVAL = Path(__file__).resolve().parent / "example_approval.yaml"


def approved_copy(dest: Path, *, lock: bool = True) -> Path:
    """A copy of the example at ``dest`` (without its olm.lock unless ``lock``), its plumbus approved."""
    shutil.copytree(EXAMPLE, dest, ignore=None if lock else shutil.ignore_patterns("olm.lock"))
    (dest / "approvals").mkdir(exist_ok=True)
    shutil.copyfile(APPROVAL, dest / "approvals" / "plumbus.yaml")
    return dest
