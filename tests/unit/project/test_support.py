"""What the tests share (``tests/support/``): the repository builder and the bounded wait behave as they say."""

from __future__ import annotations

import pygit2
import pytest

from tests.support.paths import EXAMPLE
from tests.support.repo import AUTHOR, GitOpsRepo, GitRepo, commit_all, example_copy, git
from tests.support.wait import WaitTimeout, wait_until


def test_the_example_repository_is_committed_approved_and_without_its_lock(tmp_path):
    repo = GitOpsRepo(tmp_path / "gitops")
    assert repo.run("status", "--porcelain") == ""
    commit = repo.git[repo.head]
    assert (commit.author.name, commit.author.email) == AUTHOR and repo.git.head.shorthand == "main"
    assert (repo.path / "approvals" / "plumbus.yaml").is_file() and not (repo.path / "olm.lock").exists()
    assert (repo.path / "operators" / "plumbus.yaml").read_text() == (EXAMPLE / "operators/plumbus.yaml").read_text()


def test_a_commit_takes_what_was_written_and_what_was_removed(tmp_path):
    repo = GitOpsRepo(tmp_path / "gitops")
    first = repo.head
    repo.write("notes/a.txt", "a\n")
    repo.remove("operators/plumbus.yaml")
    second = repo.commit("notes, no plumbus")
    assert second == repo.head and repo.git[second].parents[0].id == repo.git[first].id
    tree = repo.git[second].tree
    assert "notes/a.txt" in tree and "operators/plumbus.yaml" not in tree
    assert repo.run("status", "--porcelain") == ""


def test_commit_all_makes_a_plain_directory_a_repository_and_commits_even_nothing(tmp_path):
    root = example_copy(tmp_path / "plain")
    assert not (root / ".git").exists()
    first = commit_all(root, "first")
    again = commit_all(root, "nothing changed")
    repo = pygit2.Repository(str(root))
    assert repo[again].parents[0].id == repo[first].id and repo[again].tree_id == repo[first].tree_id
    assert git(root, "log", "--format=%an <%ae> %s", "-1") == f"{AUTHOR[0]} <{AUTHOR[1]}> nothing changed"


def test_a_repository_written_as_documents_reads_back(tmp_path):
    repo = GitRepo(tmp_path / "r")
    repo.write_docs("objects.yaml", {"a": 1}, {"b": 2})
    repo.commit("two documents")
    assert repo.git[repo.head].tree["objects.yaml"].data.decode() == "---\na: 1\n---\nb: 2\n"


class Clock:
    """Time for the wait that moves only when read or slept through: a wait's deadline without waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("tests.support.wait.time", fake)
    return fake


class Pods:
    """A falsy reading that says what it saw."""

    def __init__(self, ready: int) -> None:
        self.ready = ready

    def __bool__(self) -> bool:
        return self.ready == 3

    def __repr__(self) -> str:
        return f"<{self.ready} of 3 pods ready>"


def test_a_wait_returns_the_first_true_value(clock):
    readings = iter([Pods(0), Pods(2), Pods(3), Pods(1)])
    found = wait_until(lambda: next(readings), "the pods to be ready", timeout=60, every=1)
    assert repr(found) == "<3 of 3 pods ready>" and clock.now == 2


def test_a_wait_that_runs_out_names_what_it_waited_for_and_the_last_value_it_saw(clock):
    readings = iter([Pods(0), Pods(1), Pods(2), Pods(2), Pods(3)])
    with pytest.raises(WaitTimeout) as caught:
        wait_until(lambda: next(readings), "the pods to be ready", timeout=3, every=1)
    assert str(caught.value) == "timed out after 3s waiting for the pods to be ready; last seen: <2 of 3 pods ready>"
    assert isinstance(caught.value, AssertionError)   # a failed test, as an assert's
    assert next(readings).ready == 3                  # not read after the deadline


def test_a_wait_goes_through_the_errors_it_is_told_to_and_shows_the_last_one(clock):
    calls = []

    def probe():
        calls.append(1)
        raise ConnectionRefusedError(f"nothing listens on 127.0.0.1:9 (try {len(calls)})")

    with pytest.raises(WaitTimeout) as caught:
        wait_until(probe, "the server to listen", timeout=2, every=1, ignoring=OSError,
                   diagnose=lambda: "--- server.log\nbind: address in use")
    assert str(caught.value) == ("timed out after 2s waiting for the server to listen; last seen: error "
                                 "ConnectionRefusedError: nothing listens on 127.0.0.1:9 (try 3)\n"
                                 "--- server.log\nbind: address in use")
    # an error it is not told to wait through ends the wait at once
    for ignoring in ((KeyError,), lambda exc: "403" in str(exc)):
        with pytest.raises(ConnectionRefusedError):
            wait_until(probe, "the server to listen", timeout=60, every=1, ignoring=ignoring)
    assert len(calls) == 5


def test_a_long_last_value_is_cut(clock):
    with pytest.raises(WaitTimeout) as caught:
        wait_until(lambda: Long(), "a short value", timeout=0)
    text = str(caught.value)
    assert text.startswith("timed out after 0s waiting for a short value; last seen: xxx")
    assert text.endswith("... (8000 more characters)") and len(text) < 2100


class Long:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "x" * 10_000
