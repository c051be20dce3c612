"""docs/security.md's commands for signed commits, run as printed in a directory holding a copy of the example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docblocks import indented_block
from tests.signing import tools_or_skip
from tests.support.repo import GIT_USER, commit_all, example_copy

FIRST_LINE = "ssh-keygen -q -t ed25519 -N '' -C alice@example.com -f alice"
# what the page says the dry run prints above its plan
DOC_VERDICT = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text().split(
    "The dry run says `Verified: ", 1)[1].split("`", 1)[0].replace("\n", " ")


def test_turning_on_signed_commits_as_the_document_prints_it(tmp_path):
    tools_or_skip()
    block = indented_block("docs/security.md", FIRST_LINE)
    assert len(block) == 4 and block[-1] == "reconciler reconcile gitops --dry-run --trusted-keys trusted-keys"
    gitops = example_copy(tmp_path / "gitops", lock=False)
    env = {**os.environ, "KUBECONFIG": "", "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "Alice",
           "GIT_AUTHOR_EMAIL": "alice@example.com", "GIT_COMMITTER_NAME": "Alice",
           "GIT_COMMITTER_EMAIL": "alice@example.com",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    commit_all(gitops, "Unsigned example")

    def run(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    for line in block[:2]:   # the key and the trusted-keys file
        done = run(line)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    before = run(block[-1])   # the example's own commit is not signed
    assert before.returncode == 2 and "is not signed" in before.stdout, before.stdout + before.stderr
    done = run(block[2])
    assert done.returncode == 0, done.stderr
    after = run(block[-1])
    assert after.returncode == 1, after.stdout + after.stderr    # verified; the plan has changes
    said = after.stdout.splitlines()[1]   # "above the plan": right under the line naming the revision
    assert said.startswith("Verified: commit ") and "'Signed by Alice'" in said, after.stdout
    assert said.split("Verified: ", 1)[1].startswith(DOC_VERDICT.split("…")[0]), (said, DOC_VERDICT)
    assert "is signed by alice@example.com (SSH key SHA256:" in after.stdout


def test_a_refusal_is_what_the_page_prints(tmp_path, control_plane):
    """docs/security.md's refusal, whole (its `…` elide the commit id and the key's fingerprint): a commit by
    Mallory, signed with a key trusted-keys does not hold, refused by a real reconcile, which exits 2."""
    from tests.docblocks import assert_printed

    tools_or_skip()
    gitops = example_copy(tmp_path / "gitops", lock=False)
    env = {**os.environ, "KUBECONFIG": "", "HOME": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("alice", "mallory"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@example.com", "-f", name],
                       cwd=tmp_path, check=True)
    alice = (tmp_path / "alice.pub").read_text().split()
    (tmp_path / "trusted-keys").write_text(f"alice@example.com {alice[0]} {alice[1]}\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=gitops, check=True)
    subprocess.run(["git", *GIT_USER, "add", "-A"], cwd=gitops, check=True)
    subprocess.run(["git", "-c", "user.name=Mallory", "-c", "user.email=m@example.com", "-c", "gpg.format=ssh",
                    "-c", f"user.signingkey={tmp_path / 'mallory'}", "commit", "-S", "-qm", "Follow 1.x"],
                   cwd=gitops, check=True, env={**env, "GIT_COMMITTER_NAME": "Mallory",
                                                "GIT_COMMITTER_EMAIL": "m@example.com"})
    done = subprocess.run([sys.executable, "-m", "reconciler", "reconcile", "gitops", "--trusted-keys", "trusted-keys",
                           "--kubeconfig", str(control_plane.kubeconfig_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert_printed(indented_block("docs/security.md", "error: trusted-keys: commit … ('Follow 1.x' committed by "
                                  "Mallory <m@example.com>) is signed with SSH key SHA256:…, which is not among "
                                  "the trusted keys"), done.stderr)
