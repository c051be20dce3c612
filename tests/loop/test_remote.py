"""Remote sources against a real git server on loopback: branches, tags, pinned commits, auth, hostile trees."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.errors import InputError
from reconciler.pipeline import Source, prepare
from reconciler.repo.git import Auth, Ref, RemoteRepository, SourceError, is_remote, materialise, redact_url

from .conftest import TOKEN, USER
from tests.support.repo import init

AUTH = Auth(username=USER, password=TOKEN)


def remote(server, tmp_path: Path, ref: Ref = Ref(branch="main"), auth: Auth = AUTH) -> RemoteRepository:
    return RemoteRepository(f"{server.url}/gitops/.git", ref, tmp_path / "cache", auth)


def test_branch_follows_new_commits_and_the_tree_is_read_without_a_working_copy(gitops, git_server, tmp_path):
    r = remote(git_server, tmp_path)
    first = r.fetch()
    assert first == str(gitops.git.head.target)
    gitops.set_version("1.0.0")
    second = gitops.commit("pin 1.0.0")
    assert r.fetch() == second
    assert pygit2.Repository(str(r.path)).is_bare
    with r.checkout(first) as tree:
        prepared = prepare(Source(tree, revision=first))
        assert prepared.snapshot.revision == first
        assert [i.lock.version for i in prepared.installs] == ["1.1.0"]
        assert not (tree / "olm.lock").exists()
    assert not tree.exists()
    with r.checkout(second) as tree:
        assert [i.lock.version for i in prepare(tree).installs] == ["1.0.0"]


def test_tag_and_pinned_commit_do_not_move(gitops, git_server, tmp_path):
    first = str(gitops.git.head.target)
    gitops.git.create_tag("v1", gitops.git.head.target, pygit2.enums.ObjectType.COMMIT,
                          pygit2.Signature("T", "t@example.invalid"), "release v1")
    gitops.set_version("1.0.0")
    second = gitops.commit("later")
    assert remote(git_server, tmp_path, Ref(tag="v1")).fetch() == first
    pinned = remote(git_server, tmp_path / "pin", Ref(commit=first))
    assert pinned.fetch() == first
    assert remote(git_server, tmp_path / "head", Ref()).fetch() == second  # the remote's default branch


def test_wrong_token_is_an_error_naming_the_credentials(git_server, tmp_path):
    with pytest.raises(SourceError) as err:
        remote(git_server, tmp_path, auth=Auth(username=USER, password="wrong")).fetch()
    assert "credentials" in err.value.render() or "401" in err.value.render()
    with pytest.raises(SourceError) as err:
        remote(git_server, tmp_path / "none", auth=Auth()).fetch()
    assert "credentials" in err.value.render()


def test_missing_branch_and_unknown_commit_are_errors(gitops, git_server, tmp_path):
    with pytest.raises(SourceError, match="branch nope does not exist"):
        remote(git_server, tmp_path, Ref(branch="nope")).fetch()
    with pytest.raises(SourceError, match="not in the fetched repository"):
        remote(git_server, tmp_path / "c", Ref(commit="0" * 40)).fetch()
    with pytest.raises(InputError, match="full 40-character"):
        Ref(commit="abc123")


def test_unreachable_server_is_a_source_error(tmp_path):
    r = RemoteRepository("http://127.0.0.1:1/none.git", Ref(branch="main"), tmp_path, AUTH)
    with pytest.raises(SourceError, match="cannot fetch branch main"):
        r.fetch()


def _commit_tree(repo: pygit2.Repository, entries: list[tuple[str, bytes, int]]) -> str:
    builder = repo.TreeBuilder()
    for name, data, mode in entries:
        builder.insert(name, repo.create_blob(data), mode)
    sig = pygit2.Signature("T", "t@example.invalid")
    return str(repo.create_commit(None, sig, sig, "hostile", builder.write(), []))


def test_materialise_refuses_links_out_of_the_tree_and_names_that_escape(tmp_path):
    repo = init(tmp_path / "bare", bare=True)
    ok = _commit_tree(repo, [("a.yaml", b"x: 1\n", 0o100644), ("link", b"a.yaml", 0o120000)])
    (tmp_path / "ok").mkdir()
    materialise(repo, ok, tmp_path / "ok")
    assert (tmp_path / "ok" / "link").read_text() == "x: 1\n"
    bad = _commit_tree(repo, [("link", b"../../etc/passwd", 0o120000)])
    (tmp_path / "bad").mkdir()
    with pytest.raises(InputError, match="points outside the repository"):
        materialise(repo, bad, tmp_path / "bad")
    big = _commit_tree(repo, [("big", b"x" * 2048, 0o100644)])
    (tmp_path / "big").mkdir()
    with pytest.raises(InputError, match="too large"):
        materialise(repo, big, tmp_path / "big", max_bytes=1024)


def _nested(repo: pygit2.Repository, levels: int, name: str) -> str:
    """A commit of ``levels`` directories named ``name``, one in another, around one file (made without a
    file system, as a hostile push can)."""
    builder = repo.TreeBuilder()
    builder.insert("f.yaml", repo.create_blob(b"x: 1\n"), 0o100644)
    tree = builder.write()
    for _ in range(levels):
        builder = repo.TreeBuilder()
        builder.insert(name, tree, 0o040000)
        tree = builder.write()
    sig = pygit2.Signature("T", "t@example.invalid")
    return str(repo.create_commit(None, sig, sig, "hostile", tree, []))


def test_materialise_refuses_trees_no_file_system_can_hold(tmp_path):
    """Deep trees, long names and long paths are input errors, not a RecursionError or an OSError."""
    repo = init(tmp_path / "bare", bare=True)
    cases = [(_nested(repo, 1200, "d"), "nests directories more than 64 levels deep"),
             (_commit_tree(repo, [("a" * 300, b"x", 0o100644)]), "of 300 bytes; file systems hold at most 255"),
             (_nested(repo, 60, "d" * 100), "has a path too long to write")]
    for index, (commit, message) in enumerate(cases):
        (tmp_path / str(index)).mkdir()
        with pytest.raises(InputError, match=message):
            materialise(repo, commit, tmp_path / str(index))
    (tmp_path / "ok").mkdir()
    materialise(repo, _nested(repo, 20, "d" * 100), tmp_path / "ok")
    assert (tmp_path / "ok" / "/".join(["d" * 100] * 20) / "f.yaml").read_text() == "x: 1\n"


def test_url_helpers():
    assert is_remote("https://example.invalid/r.git") and is_remote("git@example.invalid:org/r.git")
    assert not is_remote("/tmp/repo") and not is_remote("examples/gitops-repo")
    assert redact_url("https://user:tok@example.invalid/r.git") == "https://user:***@example.invalid/r.git"
    assert "tok" not in repr(Auth(username="u", password="tok"))


def test_default_branch_is_the_one_the_remote_head_names(gitops, git_server, tmp_path):
    first = gitops.git.head.target
    gitops.set_version("1.0.0")
    gitops.commit("main moves on")
    gitops.git.branches.local.create("trunk", gitops.git[first])
    gitops.git.set_head("refs/heads/trunk")
    assert remote(git_server, tmp_path, Ref()).fetch() == str(first)
