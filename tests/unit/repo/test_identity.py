"""A repository's identity: the same for every checkout of it, different between repositories; and what an
instance does with Operators another repository recorded."""

from __future__ import annotations

import pytest

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.ownership.applyset import Instance
from reconciler.cluster.ownership.inventory import check_repositories
from reconciler.errors import PolicyError
from reconciler.repo import read_repository
from reconciler.repo.identity import detect, from_setting, has_commit, normalize
from tests.support.repo import commit_all, init


@pytest.mark.parametrize("address", [
    "git@github.com:org/ops.git", "ssh://git@github.com/org/ops", "ssh://git@GitHub.com:22/org/ops.git",
    "https://github.com/org/ops", "https://token:x-oauth@github.com/org/ops.git/", "git+ssh://git@github.com/org/ops",
    "http://github.com:80/org/ops",
])
def test_every_address_of_one_repository_is_one_identity(address):
    assert normalize(address) == "github.com/org/ops"


def test_different_repositories_and_ports_stay_apart():
    assert normalize("https://github.com/org/ops") != normalize("https://github.com/org/ops2")
    assert normalize("https://git.example:8443/org/ops") == "git.example:8443/org/ops"
    assert normalize("https://github.com/Org/ops") == "github.com/Org/ops"   # paths keep their case


def test_a_local_repository_is_its_path_and_a_clone_of_it_names_the_same(tmp_path):
    first = tmp_path / "first"
    init(first)
    assert detect(first) == f"file://{first}"
    clone = tmp_path / "clone"
    init(clone).remotes.create("origin", str(first))
    assert detect(clone) == detect(first)
    assert detect(tmp_path / "first") != detect(tmp_path)   # not a repository: its path


def test_a_subdirectory_is_part_of_the_identity(tmp_path):
    repo = init(tmp_path / "r")
    repo.remotes.create("origin", "git@github.com:org/fleet.git")
    (tmp_path / "r" / "clusters" / "prod").mkdir(parents=True)
    assert detect(tmp_path / "r") == "github.com/org/fleet"
    assert detect(tmp_path / "r" / "clusters" / "prod") == "github.com/org/fleet//clusters/prod"


def test_the_setting_wins_and_is_normalised(tmp_path):
    init(tmp_path)
    (tmp_path / "reconciler.yaml").write_text("repository: git@github.com:org/ops.git\n")
    assert read_repository(tmp_path).identity == "github.com/org/ops"
    assert from_setting("GitHub.com/org/ops.git/") == "github.com/org/ops"


def test_has_commit_looks_in_the_repository_history(tmp_path):
    commit = commit_all(tmp_path, "one")
    git_dir = tmp_path / ".git"
    assert has_commit(git_dir, commit) and has_commit(git_dir, commit + "-dirty")
    assert not has_commit(git_dir, "0" * 40) and not has_commit(git_dir, None) and not has_commit(None, commit)


def _rec(name: str, repository: str = "", revision: str | None = None) -> status_objects.Recorded:
    return status_objects.Recorded(name, (), {}, {"revision": revision}, repository=repository)


def test_operators_of_another_repository_stop_the_run_naming_both():
    me = Instance(repository="github.com/org/b")
    mine = {"plumbus": _rec("plumbus", "github.com/org/a"), "own": _rec("own", "github.com/org/b")}
    with pytest.raises(PolicyError) as caught:
        check_repositories(mine, set(), me)
    text = caught.value.render()
    assert "this is repository github.com/org/b" in text and "from repository github.com/org/a: plumbus" in text
    assert "reconciler.dev/repository=github.com/org/b --overwrite" in text
    assert check_repositories({"own": mine["own"]}, set(), me) == []


def test_unrecorded_operators_belong_to_who_declares_them_or_holds_their_commit():
    known = "a" * 40
    me = Instance(repository="github.com/org/b", knows_revision=lambda rev: rev == known)
    assert check_repositories({"x": _rec("x", revision="f" * 40)}, {"x"}, me) == ["x"]
    assert check_repositories({"x": _rec("x", revision=known)}, set(), me) == ["x"]
    with pytest.raises(PolicyError, match="installed before repositories were recorded, at ffffffffffff"):
        check_repositories({"x": _rec("x", revision="f" * 40)}, set(), me)


def test_no_repository_given_checks_nothing():
    assert check_repositories({"x": _rec("x", "github.com/org/a")}, set(), Instance()) == []
