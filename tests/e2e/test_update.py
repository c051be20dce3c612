"""`reconciler update` on a real git repository: proposals within and outside the declarations, never a
downgrade or a jump without an upgrade edge, and --apply commits that `reconcile --locked` accepts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pygit2
import pytest

from reconciler.cli import main
from tests.e2e.support import GitOpsRepo, Run

GADGET_CATALOG = """\
---
schema: olm.package
name: gadget
defaultChannel: stable
---
schema: olm.channel
package: gadget
name: stable
entries:
  - name: gadget.v1.0.0
  - name: gadget.v1.1.0
    replaces: gadget.v1.0.0
---
schema: olm.channel
package: gadget
name: next
entries:
  - name: gadget.v2.0.0
    replaces: gadget.v1.1.0
""" + "".join(f"""---
schema: olm.bundle
package: gadget
name: gadget.v{v}
image: file://bundles/gadget/{v}
properties:
  - type: olm.package
    value: {{packageName: gadget, version: {v}}}
  - type: olm.bundle.mediatype
    value: plain+v0
""" for v in ("1.0.0", "1.1.0", "2.0.0"))

GADGET = """\
# gadget: kept on 1.0.x for now
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: gadget
spec:
  catalog:
    name: extra
    package: gadget
    channel: stable
  version: ">=1.0.0 <1.1.0"
  install:
    namespace: gadget-system
"""


def cli(*args: str, capsys: pytest.CaptureFixture[str]) -> Run:
    capsys.readouterr()
    out = io.StringIO()
    code = main(list(args), out=out)
    return Run(code, out.getvalue(), capsys.readouterr().err)


@pytest.fixture
def repo(tmp_path: Path, capsys) -> GitOpsRepo:
    """plumbus locked at 1.0.0 though its range allows 1.1.0; gadget locked at 1.0.0 by a range that stops
    short of 1.1.0; gadget 2.0.0 in channel next replaces 1.1.0 only (no edge from 1.0.0)."""
    r = GitOpsRepo(tmp_path / "repo")
    r.write("catalogs/extra/gadget.yaml", GADGET_CATALOG)
    for v in ("1.0.0", "1.1.0", "2.0.0"):
        r.write(f"bundles/gadget/{v}/manifests/config.yaml",
                f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: gadget, namespace: gadget-system}}\n"
                f"data: {{version: \"{v}\"}}\n")
    r.write("operators/gadget.yaml", GADGET)
    r.set_version(">=1.0.0 <1.1.0")
    assert cli("resolve", str(r.path), "--offline", capsys=capsys).code == 0
    r.set_version(">=1.0.0 <2.0.0")
    r.commit("plumbus and gadget at 1.0.0")
    return r


def test_lists_updates_within_and_outside_the_declarations(repo, capsys):
    within = json.loads(cli("update", str(repo.path), "-o", "json", capsys=capsys).out)["updates"]
    assert [(u["operator"], u["target"]["name"], u["scope"]) for u in within] == [
        ("plumbus", "plumbus.v1.1.0", "within")]
    assert within[0]["edge"] == "replaces plumbus.v1.0.0 (channel stable)" and within[0]["level"] == "minor"
    run = cli("update", str(repo.path), "--include-out-of-range", "-o", "json", capsys=capsys)
    both = json.loads(run.out)["updates"]
    gadget = next(u for u in both if u["operator"] == "gadget")
    # 2.0.0 is newer but replaces 1.1.0 only: no edge from the installed 1.0.0, so never proposed.
    assert gadget["target"]["name"] == "gadget.v1.1.0" and gadget["scope"] == "outside"
    assert gadget["declarationChanges"] == ["version '>=1.0.0 <1.1.0' -> '>=1.1.0 <2.0.0'"]
    assert cli("update", str(repo.path), "--include-out-of-range", "--allow", "patch", capsys=capsys).out \
        == "No updates available.\n"
    table = cli("update", str(repo.path), "--only", "plumbus", "--include-out-of-range", capsys=capsys).out
    assert "plumbus" in table and "gadget" not in table


def test_apply_commits_one_update_per_operator_and_locked_reconcile_accepts(repo, capsys):
    stale = cli("reconcile", str(repo.path), "--locked", "--dry-run", capsys=capsys)
    assert stale.code == 2 and "stale" in stale.err
    head = repo.git.head.target
    run = cli("update", str(repo.path), "--apply", "--include-out-of-range", capsys=capsys)
    assert run.code == 0, run.err
    git = pygit2.Repository(str(repo.path))
    assert git.head.shorthand == "reconciler/updates"
    second = git.head.peel(pygit2.Commit)
    first = second.parents[0]
    assert first.parents[0].id == head
    assert first.message.startswith("Update gadget to gadget.v1.1.0")
    assert second.message.startswith("Update plumbus to plumbus.v1.1.0")
    assert "| gadget | upgraded | gadget.v1.0.0 | gadget.v1.1.0 |" in first.message
    assert "| plumbus | upgraded | plumbus.v1.0.0 | plumbus.v1.1.0 | replaces plumbus.v1.0.0" in second.message
    assert "| plumbus |" not in first.message and "| gadget |" not in second.message
    declaration = (repo.path / "operators/gadget.yaml").read_text()
    assert 'version: ">=1.1.0 <2.0.0"' in declaration and "# gadget: kept on 1.0.x for now" in declaration
    assert not git.status() or all(f & pygit2.enums.FileStatus.IGNORED for f in git.status().values())
    locked = cli("reconcile", str(repo.path), "--locked", "--dry-run", capsys=capsys)
    assert "stale" not in locked.err and locked.code in (1, 4), locked.err
    assert "Operator plumbus: plumbus.v1.1.0" in locked.out and "Operator gadget: gadget.v1.1.0" in locked.out
    again = cli("update", str(repo.path), "--apply", capsys=capsys)
    assert again.code == 0 and again.out == "No updates available.\n"


def test_apply_refuses_a_dirty_tree_and_an_existing_branch(repo, capsys):
    repo.write("notes.txt", "wip\n")
    run = cli("update", str(repo.path), "--apply", capsys=capsys)
    assert run.code == 64 and "uncommitted changes" in run.err
    repo.remove("notes.txt")
    git = pygit2.Repository(str(repo.path))
    git.references.create("refs/heads/reconciler/updates", git.head.target)
    run = cli("update", str(repo.path), "--apply", capsys=capsys)
    assert run.code == 64 and "already exists" in run.err


def test_resolve_graph_draws_operators_bundles_and_the_installed_bundle_replaced(repo, capsys):
    run = cli("resolve", str(repo.path), "--offline", "--no-write", "--graph", capsys=capsys)
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == "graph LR"
    assert '  n0["Operator gadget"] --> n1("gadget.v1.0.0<br/>extra, stable")' in lines
    assert '  n2["Operator plumbus"] --> n3("plumbus.v1.1.0<br/>community, stable")' in lines
    assert '  n4("plumbus.v1.0.0<br/>installed") -.->|upgrade| n3' in lines
    assert "  class n1,n3 chosen" in lines and "  class n4 installed" in lines
