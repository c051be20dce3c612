"""The printed outputs of the documents, compared whole with what the commands print (``docblocks.
assert_printed``): each block a page shows as a command's output is produced here by running that command on
what the page says it ran on, and must be that output line for line (a ``…`` in the page elides what changes
from run to run). docs/fleet.md's are in test_fleet_walkthrough.py, docs/health.md's cause line in
tests/e2e/test_health.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.docblocks import assert_printed, fenced_block
from tests.e2e.support import cli

ROOT = Path(__file__).resolve().parents[2]


def _example(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "examples" / "gitops-repo", tmp_path / "repo")
    return tmp_path / "repo"


def test_resolution_md_prints_the_conflict_of_scenario_057_as_resolve_does(tmp_path, capsys, monkeypatch):
    from tests.resolve.test_scenarios import SCENARIOS, _materialise

    (scenario,) = [p for p in SCENARIOS if p.name.startswith("057-")]
    root = tmp_path / "repo"
    _materialise(yaml.safe_load(scenario.read_text()), root)
    monkeypatch.chdir(root)
    block = fenced_block("docs/resolution.md", "$ reconciler resolve .")
    run = cli("resolve", ".", capsys=capsys)
    assert run.code == 2, run.out + run.err
    assert_printed(block[1:], run.err)


def test_resolution_md_prints_what_a_channel_has_as_resolve_does(tmp_path, capsys, monkeypatch):
    repo = _example(tmp_path, monkeypatch)
    decl = repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: ">=3.0.0"'))
    block = fenced_block("docs/resolution.md", "error: operators/plumbus.yaml: Operator plumbus: no bundle in "
                                               "channel 'stable' of package 'plumbus' satisfies version >=3.0.0")
    run = cli("resolve", str(repo), "--no-write", capsys=capsys)
    assert run.code == 2
    assert_printed(block, run.err)


def test_resolution_md_prints_the_explanation_of_the_example_as_resolve_explain_does(tmp_path, capsys, monkeypatch):
    repo = _example(tmp_path, monkeypatch)
    run = cli("resolve", str(repo), "--explain", "--no-write", capsys=capsys)
    assert run.code == 0, run.err
    assert_printed(fenced_block("docs/resolution.md", "why plumbus.v1.1.0 for plumbus:"), run.out, section=True)


def test_an_ellipsis_of_a_document_stands_for_any_text_and_nothing_else_differs():
    assert_printed(["commit … is signed"], "commit 5d41aa is signed\n")
    for printed in ("commit 5d41aa is signed\nmore\n", "commit 5d41aa was signed\n"):
        try:
            assert_printed(["commit … is signed"], printed)
        except AssertionError:
            continue
        raise AssertionError(f"{printed!r} passed for the document's block")
