"""`reconciler update` on a real git repository: proposals within and outside the declarations, never a
downgrade or a jump without an upgrade edge, and --apply commits that `reconcile --locked` accepts."""

from __future__ import annotations

import json

import pygit2
import pytest

from tests.e2e.support import cli
from tests.support.repo import GitOpsRepo

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


@pytest.fixture
def repo(gitops: GitOpsRepo, capsys) -> GitOpsRepo:
    """plumbus locked at 1.0.0 though its range allows 1.1.0; gadget locked at 1.0.0 by a range that stops
    short of 1.1.0; gadget 2.0.0 in channel next replaces 1.1.0 only (no edge from 1.0.0)."""
    r = gitops
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
    assert cli("update", str(repo.path), "--allow", "patch", capsys=capsys).out == "No updates available.\n"
    table = cli("update", str(repo.path), "--only", "plumbus", "--include-out-of-range", capsys=capsys).out
    assert "plumbus" in table and "gadget" not in table


def _branches(git: pygit2.Repository) -> dict[str, pygit2.Commit]:
    return {name: git.branches[name].peel(pygit2.Commit) for name in git.branches.local
            if name.startswith("reconciler/")}


def _clean(git: pygit2.Repository) -> bool:
    return all(f & pygit2.enums.FileStatus.IGNORED for f in git.status().values())


def test_apply_makes_one_branch_per_operator_and_returns_to_the_branch_it_started_on(repo, capsys):
    head = repo.git.head.target
    run = cli("update", str(repo.path), "--apply", "--include-out-of-range", capsys=capsys)
    assert run.code == 0, run.err
    git = pygit2.Repository(str(repo.path))
    assert (git.head.shorthand, git.head.target) == ("main", head) and _clean(git)
    branches = _branches(git)
    assert set(branches) == {"reconciler/gadget-1.1.0", "reconciler/plumbus-1.1.0"}   # as update bots name them
    gadget, plumbus = branches["reconciler/gadget-1.1.0"], branches["reconciler/plumbus-1.1.0"]
    assert [c.id for c in gadget.parents] == [head] and [c.id for c in plumbus.parents] == [head]
    assert gadget.message.startswith("Update gadget to gadget.v1.1.0")
    assert plumbus.message.startswith("Update plumbus to plumbus.v1.1.0")
    assert "| gadget | upgraded | gadget.v1.0.0 | gadget.v1.1.0 |" in gadget.message
    assert "| plumbus | upgraded | plumbus.v1.0.0 | plumbus.v1.1.0 | replaces plumbus.v1.0.0" in plumbus.message
    assert "| plumbus |" not in gadget.message and "| gadget |" not in plumbus.message
    declaration = (gadget.tree / "operators" / "gadget.yaml").data.decode()
    assert 'version: ">=1.1.0 <2.0.0"' in declaration and "# gadget: kept on 1.0.x for now" in declaration
    assert (repo.path / "operators/gadget.yaml").read_text() == GADGET   # the working tree is main's again
    assert f"committed gadget as {str(gadget.id)[:12]} on branch reconciler/gadget-1.1.0" in run.out
    assert run.out.rstrip().endswith("back on branch main")

    # The plumbus branch is exactly a lock that a locked reconcile accepts (gadget stays in its own range).
    git.checkout(git.branches["reconciler/plumbus-1.1.0"])
    locked = cli("reconcile", str(repo.path), "--locked", "--dry-run", capsys=capsys)
    assert "stale" not in locked.err and locked.code in (1, 4), locked.err
    assert "Operator plumbus: plumbus.v1.1.0" in locked.out and "Operator gadget: gadget.v1.0.0" in locked.out
    git.checkout(git.branches["main"])

    # Again: the branches are there, so nothing is proposed twice and nothing moves.
    again = cli("update", str(repo.path), "--apply", "--include-out-of-range", capsys=capsys)
    assert again.code == 0, again.err
    assert "skipped gadget: branch reconciler/gadget-1.1.0 already exists" in again.out
    assert _branches(pygit2.Repository(str(repo.path))) == branches


def test_apply_on_one_branch_and_locked_reconcile_accepts(repo, capsys):
    stale = cli("reconcile", str(repo.path), "--locked", "--dry-run", capsys=capsys)
    assert stale.code == 2 and "stale" in stale.err
    head = repo.git.head.target
    run = cli("update", str(repo.path), "--apply", "--include-out-of-range", "--branch", "reconciler/updates",
              "-o", "json", capsys=capsys)
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert [(c["operator"], c["branch"]) for c in doc["commits"]] == [
        ("gadget", "reconciler/updates"), ("plumbus", "reconciler/updates")]
    assert doc["returnedTo"] == "branch main"
    git = pygit2.Repository(str(repo.path))
    assert (git.head.shorthand, git.head.target) == ("main", head) and _clean(git)
    second = git.branches["reconciler/updates"].peel(pygit2.Commit)
    assert second.parents[0].parents[0].id == head and str(second.id) == doc["commits"][1]["commit"]
    git.checkout(git.branches["reconciler/updates"])
    locked = cli("reconcile", str(repo.path), "--locked", "--dry-run", capsys=capsys)
    assert "stale" not in locked.err and locked.code in (1, 4), locked.err
    assert "Operator plumbus: plumbus.v1.1.0" in locked.out and "Operator gadget: gadget.v1.1.0" in locked.out
    again = cli("update", str(repo.path), "--apply", capsys=capsys)   # gadget 2.0.0 is in channel next
    assert again.code == 0 and again.out == ("No updates available within the declarations.\n"
                                             "1 more beyond your range: --include-out-of-range\n")


def test_apply_refuses_a_dirty_tree_and_an_existing_branch(repo, capsys):
    repo.write("notes.txt", "wip\n")
    run = cli("update", str(repo.path), "--apply", capsys=capsys)
    assert run.code == 2 and "uncommitted changes" in run.err and "hint: commit or stash them" in run.err
    assert _branches(pygit2.Repository(str(repo.path))) == {}
    repo.remove("notes.txt")
    git = pygit2.Repository(str(repo.path))
    git.references.create("refs/heads/reconciler/updates", git.head.target)
    run = cli("update", str(repo.path), "--apply", "--branch", "reconciler/updates", capsys=capsys)
    assert run.code == 2 and "already exists" in run.err
    run = cli("update", str(repo.path), "--branch", "x", capsys=capsys)
    assert run.code == 64 and "--branch names the branch --apply commits on" in run.err


def test_a_failed_update_leaves_the_tree_and_the_branches_as_they_were(repo, capsys):
    repo.write("operators/gadget.yaml", GADGET.replace(
        "spec:\n  catalog:\n    name: extra\n    package: gadget\n    channel: stable\n  version: \">=1.0.0 <1.1.0\"\n"
        "  install:\n    namespace: gadget-system\n",
        'spec: {catalog: {name: extra, package: gadget, channel: stable}, version: ">=1.0.0 <1.1.0",\n'
        "       install: {namespace: gadget-system}}\n"))
    repo.commit("gadget in flow style")
    head = repo.git.head.target
    run = cli("update", str(repo.path), "--apply", "--include-out-of-range", capsys=capsys)
    assert run.code == 2, run.err
    assert "operators/gadget.yaml: Operator gadget: cannot point the declaration at gadget.v1.1.0" in run.err
    assert "hint: make the change by hand" in run.err
    git = pygit2.Repository(str(repo.path))
    assert (git.head.shorthand, git.head.target) == ("main", head) and _clean(git)
    assert _branches(git) == {}


def test_a_pinned_version_stays_a_pin(repo, capsys):
    repo.write("operators/gadget.yaml", GADGET.replace('version: ">=1.0.0 <1.1.0"', 'version: "1.0.0"'))
    repo.commit("gadget pinned")
    doc = json.loads(cli("update", str(repo.path), "--include-out-of-range", "-o", "json", capsys=capsys).out)
    gadget = next(u for u in doc["updates"] if u["operator"] == "gadget")
    assert gadget["declarationChanges"] == ["version '1.0.0' -> '1.1.0'"]
    assert cli("update", str(repo.path), "--apply", "--include-out-of-range", "--only", "gadget",
               capsys=capsys).code == 0
    branch = pygit2.Repository(str(repo.path)).branches["reconciler/gadget-1.1.0"].peel(pygit2.Commit)
    assert 'version: "1.1.0"' in (branch.tree / "operators" / "gadget.yaml").data.decode()


def test_updates_beyond_the_range_are_counted(repo, capsys):
    from tests.docblocks import assert_printed, indented_block

    run = cli("update", str(repo.path), capsys=capsys)
    assert run.code == 0
    assert_printed(indented_block("docs/review.md", "OPERATOR  INSTALLED       UPDATE          LEVEL  SCOPE   EDGE"
                                  "                                      DECLARATION CHANGES"), run.out)   # the page's
    assert run.out.splitlines()[-1] == "1 update; 1 more beyond your range: --include-out-of-range"
    assert json.loads(cli("update", str(repo.path), "-o", "json", capsys=capsys).out)["beyondRange"] == 1
    only = cli("update", str(repo.path), "--only", "gadget", capsys=capsys).out
    assert only == ("No updates available within the declarations.\n"
                    "1 more beyond your range: --include-out-of-range\n")
    assert cli("update", str(repo.path), "--only", "plumbus", capsys=capsys).out.splitlines()[-1] == "1 update"
    both = cli("update", str(repo.path), "--include-out-of-range", capsys=capsys).out
    assert both.splitlines()[-1] == "2 updates"


def test_resolve_graph_draws_operators_bundles_and_the_installed_bundle_replaced(repo, capsys):
    run = cli("resolve", str(repo.path), "--offline", "--no-write", "--graph", capsys=capsys)
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == "graph LR"
    assert '  n0["Operator gadget"] --> n1("gadget.v1.0.0<br/>extra, stable")' in lines
    assert '  n2["Operator plumbus"] --> n3("plumbus.v1.1.0<br/>community, stable")' in lines
    assert '  n4("plumbus.v1.0.0<br/>installed") -.->|upgrade| n3' in lines
    assert "  class n1,n3 chosen" in lines and "  class n4 installed" in lines


def test_branch_names_follow_update_bots():
    from reconciler.commands.update import branch_name
    from reconciler.review.updates import Proposal

    p = Proposal("plumbus", "plumbus", "plumbus.v1.0.0", "1.0.0", "plumbus.v1.1.0", "1.1.0", "community", "stable",
                 "within", "replaces plumbus.v1.0.0 (channel stable)", "minor")
    assert branch_name(p) == "reconciler/plumbus-1.1.0"
    assert branch_name(p, "prod-eu") == "reconciler/prod-eu/plumbus-1.1.0"   # a fleet's cluster, as a directory
