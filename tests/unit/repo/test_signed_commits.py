"""Signed commits and tags, verified with the real gpg and ssh-keygen against keys made by the same tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from reconciler.errors import InputError
from reconciler.repo.verify import Trust, TrustedKeys, UntrustedRevision, verify_revision
from tests.e2e.support import cli
from tests.signing import GpgSigner, SshSigner, tag, tools_or_skip, trusted_keys
from tests.support.repo import commit_all, example_copy, git, init
from tests.support.parts import not_tested


@pytest.fixture(scope="module")
def signers(tmp_path_factory):
    tools_or_skip()
    keys = tmp_path_factory.mktemp("keys")
    alice = SshSigner(keys / "ssh", "alice@example.invalid")
    mallory = SshSigner(keys / "ssh-other", "mallory@example.invalid")
    bob = GpgSigner(keys, "Bob Builder", "bob@example.invalid")
    eve = GpgSigner(keys, "Eve Intruder", "eve@example.invalid")
    yield {"alice": alice, "mallory": mallory, "bob": bob, "eve": eve}
    bob.close()
    eve.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tools_or_skip()
    path = tmp_path / "repo"
    init(path)
    (path / "reconciler.yaml").write_text("instance: default\n")
    return path


@pytest.fixture
def trust(tmp_path: Path, signers) -> Trust:
    """Alice (SSH) and Bob (OpenPGP) are trusted, in one file; Mallory and Eve are not."""
    return Trust(TrustedKeys.load(trusted_keys(tmp_path / "trusted", signers["alice"], signers["bob"])))


def verify(repo: Path, trust: Trust, revision: str | None = None, **kw):
    return verify_revision(repo / ".git", revision or git(repo, "rev-parse", "HEAD"), trust, **kw)


def test_commits_signed_by_trusted_ssh_and_openpgp_keys_verify(repo, trust, signers):
    commit_all(repo, "by alice", signer=signers["alice"])
    (v,) = verify(repo, trust)
    assert v.format == "ssh" and v.signer == "alice@example.invalid" and v.key.startswith("SHA256:")
    (repo / "more").write_text("x")
    commit_all(repo, "by bob", signer=signers["bob"])
    (v,) = verify(repo, trust)
    assert v.format == "openpgp" and v.signer == "Bob Builder <bob@example.invalid>"
    assert v.key == signers["bob"].fingerprint
    assert "is signed by Bob Builder" in str(v)


def test_an_unsigned_commit_is_refused_naming_the_commit_and_committer(repo, trust):
    head = commit_all(repo, "unsigned change")
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust)
    text = err.value.render()
    assert f"commit {head}" in text and "'unsigned change'" in text and "Test <test@example.invalid>" in text
    assert "is not signed" in text and str(trust.keys.path) in text


def test_a_commit_signed_by_an_untrusted_ssh_key_is_refused_naming_the_key(repo, trust, signers):
    commit_all(repo, "by mallory", signer=signers["mallory"])
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust)
    key = subprocess.run(["ssh-keygen", "-lf", f"{signers['mallory'].key}.pub"], capture_output=True, text=True,
                         check=True).stdout.split()[1]
    assert "not among the trusted keys" in err.value.message
    assert key and key in err.value.message


def test_a_commit_signed_by_an_untrusted_openpgp_key_is_refused_naming_the_key(repo, trust, signers):
    commit_all(repo, "by eve", signer=signers["eve"])
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust)
    assert "not among the trusted keys" in err.value.message
    assert signers["eve"].fingerprint[-16:] in err.value.message


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_a_signature_moved_onto_other_content_is_a_bad_signature(repo, trust, signers, who):
    signed = commit_all(repo, "signed", signer=signers[who])
    g = pygit2.Repository(str(repo))
    signature, _ = g[signed].gpg_signature
    sig = pygit2.Signature("Test", "test@example.invalid")
    forged = g.create_commit_string(sig, sig, "signed", g[signed].tree_id, [])   # same tree, other time or parents
    forged = forged.replace("signed", "signed, then altered")
    oid = g.create_commit_with_signature(forged, signature.decode())
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust, str(oid))
    assert "bad" in err.value.message and "altered after signing" in err.value.message


def test_an_unsigned_merge_commit_on_a_signed_branch_is_refused(repo, trust, signers):
    commit_all(repo, "base", signer=signers["alice"])
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "feature").write_text("x")
    commit_all(repo, "feature", signer=signers["alice"])
    git(repo, "checkout", "-q", "main")
    (repo / "other").write_text("y")
    commit_all(repo, "other", signer=signers["bob"])
    git(repo, "merge", "-q", "--no-ff", "--no-gpg-sign", "-m", "merge feature", "feature")
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust)
    assert "'merge feature'" in err.value.message and "is not signed" in err.value.message


def test_moving_the_branch_back_to_an_older_signed_commit_is_refused_unless_declared(repo, trust, signers):
    older = commit_all(repo, "v1", signer=signers["alice"])
    (repo / "v2").write_text("x")
    newer = commit_all(repo, "v2", signer=signers["alice"])
    assert verify(repo, trust, newer, applied=[older])            # forward: fine
    with pytest.raises(UntrustedRevision) as err:
        verify(repo, trust, older, applied=[newer])
    assert f"commit {older} is older than commit {newer}" in err.value.message
    assert "--allow-rollback" in err.value.hint
    declared = Trust(trust.keys, allow_rollback=True)
    assert verify(repo, declared, older, applied=[newer])
    assert verify(repo, trust, older, applied=[older, "0" * 40])  # the same, or one this repository lacks


def test_tag_modes_verify_the_annotated_tag(repo, trust, signers):
    commit_all(repo, "release", signer=signers["alice"])
    tag(repo, "v1", signers["bob"])
    (v,) = verify(repo, Trust(trust.keys, "Tag"), tag="v1")
    assert v.subject.startswith("tag v1") and v.signer == "Bob Builder <bob@example.invalid>"
    both = verify(repo, Trust(trust.keys, "TagAndHEAD"))          # a working tree: the tags at HEAD
    assert [x.format for x in both] == ["openpgp", "ssh"]
    tag(repo, "v1-unsigned")
    with pytest.raises(UntrustedRevision, match="tag v1-unsigned .* is not signed"):
        verify(repo, Trust(trust.keys, "Tag"), tag="v1-unsigned")
    git(repo, "tag", "light")
    with pytest.raises(UntrustedRevision, match="lightweight"):
        verify(repo, Trust(trust.keys, "Tag"), tag="light")
    (repo / "next").write_text("x")
    commit_all(repo, "unsigned on top")
    git(repo, "tag", "-f", "-s", "v1", "-m", "moved", signer=signers["bob"])
    with pytest.raises(UntrustedRevision, match="is not signed"):
        verify(repo, Trust(trust.keys, "TagAndHEAD"), tag="v1")  # the tag is signed, the commit is not


def test_a_working_tree_with_uncommitted_changes_is_refused(repo, trust, signers):
    head = commit_all(repo, "signed", signer=signers["alice"])
    with pytest.raises(UntrustedRevision, match="changes not committed"):
        verify(repo, trust, f"{head}-dirty")


def test_the_trusted_keys_file_is_checked(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="holds no key"):
        TrustedKeys.load(empty)
    garbage = tmp_path / "garbage"
    garbage.write_text("alice@example.invalid not-a-key\n")
    with pytest.raises(InputError, match="line 1 is neither"):
        TrustedKeys.load(garbage)
    with pytest.raises(InputError, match="cannot read the trusted keys"):
        TrustedKeys.load(tmp_path / "missing")


def test_reconcile_dry_run_reports_the_verdict(tmp_path, trust, signers, capsys,
                                                                      monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))   # no ~/.kube/config
    root = example_copy(tmp_path / "repo", lock=False)
    commit_all(root, "example", signer=signers["alice"])
    keys = str(trust.keys.path)
    run = cli("reconcile", str(root), "--dry-run", "--trusted-keys", keys, capsys=capsys)
    assert run.code == 1, run.err
    lines = run.out.splitlines()   # the verdict above the plan (docs/security.md), not among the Changes' notes
    assert lines[0].startswith("Repository ") and lines[1].startswith("Verified: commit "), run.out
    assert "is signed by alice@example.invalid" in lines[1] and "note: verified" not in run.out
    (root / "README.md").write_text("unsigned\n")
    head = commit_all(root, "unsigned")
    run = cli("reconcile", str(root), "--dry-run", "--trusted-keys", keys, capsys=capsys)
    assert run.code == 2
    lines = run.out.splitlines()   # a refusal's reason first of all, above the plan
    assert lines[1].startswith(f"REFUSED: a real run refuses this revision: {keys}: commit {head}"), run.out
    assert lines[2].startswith("  hint: sign it with a key in") and "note: not verified" not in run.out
    run = cli("reconcile", str(root), "--dry-run", "--verify-mode", "Tag", capsys=capsys)
    assert run.code == 64 and "--verify-mode Tag needs --trusted-keys" in run.err


def test_verifiers_are_required(monkeypatch, repo, trust, signers):
    commit_all(repo, "by alice", signer=signers["alice"])
    monkeypatch.setenv("PATH", str(repo))   # neither ssh-keygen nor gpg
    if shutil.which("ssh-keygen"):
        not_tested("signing", "ssh-keygen is found outside PATH: no machine without it to try")
    with pytest.raises(Exception, match="ssh-keygen. is not installed"):
        verify_revision(repo / ".git", str(pygit2.Repository(str(repo)).head.target), trust)


def test_diff_reports_the_verdict_of_the_commit_under_the_working_tree(tmp_path, trust, signers, capsys):
    import json

    root = example_copy(tmp_path / "repo", lock=False)
    head = commit_all(root, "example", signer=signers["bob"])
    (root / "README.md").write_text("edited\n")
    keys = str(trust.keys.path)
    run = cli("diff", str(root), "--offline", "--trusted-keys", keys, capsys=capsys)
    assert run.code in (0, 1), run.err
    first = run.out.splitlines()[0]
    assert first.startswith(f"signature: verified: commit {head}") and "Bob Builder" in first
    assert "uncommitted changes are not signed" in first
    commit_all(root, "unsigned edit")
    run = cli("diff", str(root), "--offline", "--trusted-keys", keys, "-o", "json", capsys=capsys)
    doc = json.loads(run.out)
    assert doc["signature"]["verified"] is False and "is not signed" in doc["signature"]["message"]


def test_a_remote_followed_at_a_tag_verifies_the_fetched_tag(repo, trust, signers, tmp_path):
    """What `watch URL --tag T --verify-mode TagAndHEAD` verifies: the tag object fetched into the bare clone."""
    from reconciler.repo.git import Ref, RemoteRepository

    commit_all(repo, "release", signer=signers["alice"])
    tag(repo, "v1", signers["bob"])
    tag(repo, "v1-unsigned")
    remote = RemoteRepository(repo.as_uri(), Ref(tag="v1"), tmp_path / "cache")
    head = remote.fetch()
    verdicts = verify_revision(remote.path, head, Trust(trust.keys, "TagAndHEAD"), tag="v1")
    assert [v.signer for v in verdicts] == ["Bob Builder <bob@example.invalid>", "alice@example.invalid"]
    unsigned = RemoteRepository(repo.as_uri(), Ref(tag="v1-unsigned"), tmp_path / "cache")
    with pytest.raises(UntrustedRevision, match="tag v1-unsigned .* is not signed"):
        verify_revision(unsigned.path, unsigned.fetch(), Trust(trust.keys, "Tag"), tag="v1-unsigned")
