"""What a new user meets first, offline: wrong paths, unknown flags, an empty directory, flags that do not go
together. Each is refused with the message about that problem, the command's own usage, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.support import cli
from tests.unit.helpers import no_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("no_cluster")
REPO_COMMANDS = [("resolve", "{repo}", "--offline"), ("diff", "{repo}", "--offline"), ("reconcile", "{repo}"),
                 ("update", "{repo}"), ("approve", "{repo}", "--all", "--offline"), ("status", "{repo}")]


@pytest.mark.parametrize("command", REPO_COMMANDS, ids=lambda c: c[0])
def test_a_missing_repository_and_a_file_are_named_as_such(tmp_path: Path, capsys, command):
    (tmp_path / "notes.txt").write_text("x\n")
    for path, problem in ((tmp_path / "nope", "no such directory"), (tmp_path / "notes.txt",
                                                                     "is a file, not a directory")):
        run = cli(*(a.format(repo=path) for a in command), capsys=capsys)
        assert run.code == 2 and run.err.startswith(f"error: {path}: {problem}\n"), run.err
        assert "hint: REPO is" in run.err


@pytest.mark.parametrize("argv, usage", [
    (["reconcile", ".", "--offline"], "usage: reconciler reconcile "),
    (["catalog", "list", "packages", "--bogus"], "usage: reconciler catalog list "),
    (["bundle", "render", "x", "--nope"], "usage: reconciler bundle render "),
])
def test_an_unknown_flag_prints_the_commands_usage(capsys, argv, usage):
    with pytest.raises(SystemExit) as exc:   # argparse exits; the process exits 64
        cli(*argv, capsys=capsys)
    err = capsys.readouterr().err
    assert exc.value.code == 64 and err.startswith(usage), err
    assert f"error: unrecognized arguments: {argv[-1]}" in err


def test_resolve_in_an_empty_directory_says_nothing_is_declared_and_writes_nothing(tmp_path: Path, capsys):
    run = cli("resolve", str(tmp_path), "--offline", capsys=capsys)
    assert run.code == 2, run.err
    assert run.err.startswith(f"error: {tmp_path}: nothing is declared: no Operator, Input, Install, Instance or "
                              f"BundleDeployment; olm.lock was not written\n")
    assert not (tmp_path / "olm.lock").exists()
    (tmp_path / "reconciler.yaml").write_text("allowEmpty: true\n")   # told to: an empty lock is recorded
    assert cli("resolve", str(tmp_path), "--offline", capsys=capsys).code == 0
    assert (tmp_path / "olm.lock").exists()


def test_graph_and_a_document_output_do_not_go_together(tmp_path: Path, capsys):
    run = cli("resolve", str(tmp_path), "--graph", "-o", "json", capsys=capsys)
    assert run.code == 64 and "--graph prints a Mermaid graph and -o json a document: choose one" in run.err
