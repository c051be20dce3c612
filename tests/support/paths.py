"""Where the tests find what they read: the project's checkout, its examples, and the shared data beside it.

Every path is computed here once, from this file's place, so a test module reads the same location wherever
it sits in the tree.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]         # the project's checkout
RECONCILER = ROOT / "reconciler"
EXAMPLES = ROOT / "examples"
EXAMPLE = EXAMPLES / "gitops-repo"                   # the README's example repository (ships unapproved)
FLEET_EXAMPLE = EXAMPLES / "fleet-repo"
SHARED = ROOT.parent / "shared"                      # data beside the checkout, read when present, never copied
CORPUS = SHARED / "corpus"
SEEDS = SHARED / "seeds"
