"""The README's approval walk-through, run as printed, line by line in one shell, from the repository's root.

The block is found in README.md by its first line, so the test runs what a reader copies; a ``# exit N: ...``
comment is the exit code and a phrase the output must show (each checked). No cluster is configured, as on a
newcomer's laptop: a dry run compares against an empty cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docblocks import indented_block

ROOT = Path(__file__).resolve().parents[2]
FIRST_LINE = "cp -r examples/gitops-repo ~/gitops && cd ~/gitops"


def walkthrough() -> list[str]:
    return indented_block("README.md", FIRST_LINE)


def test_the_readme_walkthrough_shows_a_first_install_waiting_for_approval(tmp_path: Path):
    block = walkthrough()
    marker = "@@rc="
    script = "".join(f"{line}\necho \"{marker}$?\"\n" for line in block)
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": "", "GIT_AUTHOR_NAME": "Reader",
           "GIT_AUTHOR_EMAIL": "reader@example.invalid", "GIT_COMMITTER_NAME": "Reader",
           "GIT_COMMITTER_EMAIL": "reader@example.invalid", "RECONCILER_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    outputs = re.split(rf"^{re.escape(marker)}(\d+)\n", proc.stdout, flags=re.M)
    steps = list(zip(block, outputs[0::2], (int(c) for c in outputs[1::2])))
    assert len(steps) == len(block), proc.stdout + proc.stderr
    for line, out, code in steps:
        said = re.search(r"# exit (\d+): (.*?)(?: \(|,|;|$)", line)
        if said:
            assert code == int(said.group(1)), f"{line}\n{out}{proc.stderr}"
            assert said.group(2).split(" (")[0] in out, f"{line}\n{out}"
        else:
            assert code == 0, f"{line}\n{out}{proc.stderr}"
    first, approved = (out for line, out, _ in steps if "reconcile . --dry-run" in line)
    assert "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL (olm.resolveset, Android): first install" in first
    assert "would be created once approved" in first
    assert "plumbus: plumbus.v1.1.0 approved (olm.resolveset, Android)" in approved
    assert "  + Deployment.apps plumbus-system/plumbus-controller-manager  would be created  [plumbus]" in approved
    assert (tmp_path / "gitops" / "approvals" / "plumbus.yaml").is_file()
    assert not (ROOT / "examples" / "gitops-repo" / "approvals").exists()   # the example itself stays unapproved
