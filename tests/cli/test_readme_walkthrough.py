"""The README's approval walk-through, run as printed, line by line in one shell, from the repository's root.

The block is found in README.md by its first line, so the test runs what a reader copies; a ``# exit N: ...``
comment is the exit code and a phrase the output must show (each checked). No cluster is configured, as on a
newcomer's laptop: a dry run compares against an empty cluster.
"""

from __future__ import annotations

from pathlib import Path

from tests.docblocks import indented_block, run_walkthrough

ROOT = Path(__file__).resolve().parents[2]
FIRST_LINE = "cp -r examples/gitops-repo ~/gitops && cd ~/gitops"


def walkthrough() -> list[str]:
    return indented_block("README.md", FIRST_LINE)


def test_the_readme_walkthrough_shows_a_first_install_waiting_for_approval(tmp_path: Path):
    steps = run_walkthrough(walkthrough(), tmp_path)
    first, approved = (out for line, out, _ in steps if "reconcile . --dry-run" in line)
    assert "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL (olm.resolveset, Android): first install" in first
    assert "would be created once approved" in first
    assert "plumbus: plumbus.v1.1.0 approved (olm.resolveset, Android)" in approved
    assert "  + Deployment.apps plumbus-system/plumbus-controller-manager  would be created  [plumbus]" in approved
    assert (tmp_path / "gitops" / "approvals" / "plumbus.yaml").is_file()
    assert not (ROOT / "examples" / "gitops-repo" / "approvals").exists()   # the example itself stays unapproved
