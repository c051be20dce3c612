"""The fleet's promotion model offline: each Operator moves along the stages it is placed on, a hold is said
where it bites (resolve --explain, update, diff) and named with its stage when it contradicts an override,
resolving a fleet writes every lockfile or none, and a promotion says in its commit what it moves.

The evidence is given as the ``FleetStatus`` that ``fleet status`` reads from clusters (the live path is in
tests/e2e/test_fleet.py); everything else (repository, resolution, lockfiles, git) is real.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from reconciler.errors import ResolutionError
from reconciler.fleet import promote
from reconciler.fleet.promote import Kind, Outcome
from reconciler.fleet.resolve import resolve_fleet
from reconciler.repo import read_repository
from reconciler.repo.fleet import hold_details, operator_stages, select_cluster
from tests.e2e.support import cli
from tests.support.paths import FLEET_EXAMPLE as FLEET
from tests.support.repo import GitRepo, commit_all
from tests.unit.fleet.fleets import NOW, healthy, pin_old

LATER_STAGES = "  placement:\n    clusterSelector:\n      matchExpressions: [{key: env, operator: In, values: [staging, prod]}]\n"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    return root


def place(root: Path, placement: str) -> None:
    decl = root / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("  placement:\n", placement))


def pinned(root: Path, cluster: str) -> list[str]:
    text = (root / "clusters" / cluster / "olm.lock").read_text()
    return [line.split(": ")[1] for line in text.splitlines() if line.startswith("  name: ")]


# Stages follow placement ---------------------------------------------------------------------------------

def test_an_operator_placed_only_on_later_stages_moves_from_its_first_stage(fleet, capsys):
    """docs/fleet.md's `env In [staging, prod]`: staging is plumbus's first stage, so it takes what the catalog
    offers (update lists it), and prod is promoted from staging, not from dev where it never runs."""
    place(fleet, LATER_STAGES)
    pin_old(fleet, "staging", "prod-eu", "prod-us")
    snap = read_repository(fleet)
    assert operator_stages(snap)["plumbus"] == ("staging", "prod")
    assert hold_details(select_cluster(snap, "staging")) == []   # its first stage: nothing held
    update = cli("update", str(fleet), "--cluster", "staging", capsys=capsys)
    assert update.code == 0 and "plumbus.v1.1.0" in update.out, update.out
    assert "No updates available" not in update.out

    assert cli("resolve", str(fleet), capsys=capsys).code == 0
    assert pinned(fleet, "staging") == ["plumbus.v1.1.0"] and pinned(fleet, "prod-eu") == ["plumbus.v1.0.0"]
    # prod is held, and every command that meets the hold says by which stage, to what, and what moves it
    explain = cli("resolve", str(fleet), "--cluster", "prod-eu", "--explain", "--offline", capsys=capsys)
    held = (f"plumbus: held by stage prod to plumbus.v1.0.0 (its lockfile pins it); a newer bundle comes only "
            f"by promotion from staging: reconciler promote {fleet} --to prod --operator plumbus")
    assert held in explain.out, explain.out
    update = cli("update", str(fleet), "--cluster", "prod-eu", capsys=capsys)
    assert "No updates available." in update.out and held in update.out, update.out
    commit_all(fleet, "fleet")
    diff = cli("diff", str(fleet), "--cluster", "prod-eu", "--base", "HEAD", "--offline", capsys=capsys)
    assert held in diff.out, diff.out

    promotion = promote.plan(fleet, "prod", soak=0, now=NOW,
                             status=healthy(fleet, running={"staging": "plumbus.v1.1.0"}))
    assert [ev.source for ev in promotion.evidence] == ["staging"]
    assert promotion.outcome is Outcome.PROMOTED
    assert [m.text() for m in promotion.moves] == ["prod-eu: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0",
                                                   "prod-us: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0"]


def test_a_stage_without_clusters_is_passed_over(fleet):
    (fleet / "clusters" / "staging.yaml").unlink()
    shutil.rmtree(fleet / "clusters" / "staging")
    pin_old(fleet, "prod-eu", "prod-us")
    snap = read_repository(fleet)
    assert operator_stages(snap)["plumbus"] == ("dev", "prod")
    [hold] = hold_details(select_cluster(snap, "prod-eu"))
    assert (hold.by, hold.previous, sorted(hold.bundles)) == ("prod", "dev", ["plumbus.v1.0.0"])
    promotion = promote.plan(fleet, "prod", soak=0, now=NOW, status=healthy(fleet, running={"dev": "plumbus.v1.1.0"}))
    assert promotion.source == "dev" and promotion.outcome is Outcome.PROMOTED
    with pytest.raises(Exception, match="stage staging has no clusters"):
        promote.plan(fleet, "staging", soak=0, now=NOW, status=healthy(fleet, running={}))


def test_a_placement_that_adds_an_earlier_stage_leaves_the_later_one_where_it_is(fleet):
    """plumbus placed on prod only: prod is its first stage and resolves freely; placed on staging too, staging
    becomes the first stage and prod keeps its pins until promoted."""
    place(fleet, "  placement:\n    clusterSelector: {matchLabels: {env: prod}}\n")
    pin_old(fleet, "prod-eu", "prod-us")
    for name in ("dev", "staging"):
        (fleet / "clusters" / name / "olm.lock").unlink()
    snap = read_repository(fleet)
    assert hold_details(select_cluster(snap, "prod-eu")) == []
    decl = fleet / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("{matchLabels: {env: prod}}\n", "{matchExpressions: [{key: env, "
                                             "operator: In, values: [staging, prod]}]}\n", 1))
    resolve_fleet(fleet)
    assert pinned(fleet, "staging") == ["plumbus.v1.1.0"]
    assert pinned(fleet, "prod-eu") == ["plumbus.v1.0.0"] and pinned(fleet, "prod-us") == ["plumbus.v1.0.0"]


def test_an_operator_on_clusters_without_a_stage_is_never_held(fleet):
    for name in ("staging", "prod-eu", "prod-us"):
        path = fleet / "clusters" / f"{name}.yaml"
        path.write_text(path.read_text().replace(f"stage: {name.split('-')[0]}\n", ""))
    pin_old(fleet, "prod-eu")
    snap = read_repository(fleet)
    assert operator_stages(snap)["plumbus"] == ("dev",)
    assert hold_details(select_cluster(snap, "prod-eu")) == []


# Errors name the cluster; all or nothing ------------------------------------------------------------------

PROD_OVERRIDE = """      installNamespace: plumbus-us
    - clusterSelector: {matchLabels: {env: prod}}
      version: "1.0.x"
"""


def test_a_hold_that_contradicts_an_override_names_both_and_writes_no_lockfile(fleet, capsys):
    """docs/fleet.md's prod override (1.0.x) on a prod new to plumbus while staging pins 1.1.0."""
    decl = fleet / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("      installNamespace: plumbus-us\n", PROD_OVERRIDE))
    for lock in fleet.glob("clusters/*/olm.lock"):
        lock.unlink()
    run = cli("resolve", str(fleet), capsys=capsys)
    assert run.code == 2
    assert ("cluster prod-eu (stage prod): Operator plumbus declares version 1.0.x here, but stage staging holds "
            "plumbus to plumbus.v1.1.0 (1.1.0), which that range excludes") in run.err, run.err
    assert "give stage staging a bundle in 1.0.x first" in run.err
    assert not list(fleet.glob("clusters/*/olm.lock"))   # dev and staging resolved fine: nothing written


def test_any_cluster_error_names_the_cluster_and_stage_and_writes_nothing(fleet, capsys):
    decl = fleet / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("      installNamespace: plumbus-us\n",
                                             "      installNamespace: plumbus-us\n      version: \">=3.0.0\"\n"))
    before = {p: p.read_text() for p in fleet.glob("clusters/*/olm.lock")}
    pin_old(fleet, "dev")   # dev would be rewritten to 1.1.0 if anything were written
    before["dev"] = (fleet / "clusters/dev/olm.lock").read_text()
    with pytest.raises(ResolutionError) as caught:
        resolve_fleet(fleet)
    assert caught.value.message.startswith("cluster prod-us (stage prod): "), caught.value.message
    assert (fleet / "clusters/dev/olm.lock").read_text() == before["dev"]


# What a promotion moves -----------------------------------------------------------------------------------

def test_a_forced_promotion_names_what_it_moves_and_the_dry_run_prints_that_commit(fleet, capsys):
    """The example fleet: dev pins plumbus 1.1.0, staging and prod 1.0.0; no cluster can be read."""
    pin_old(fleet, "staging", "prod-eu", "prod-us")
    repo = GitRepo(fleet, "fleet").git
    args = ("promote", str(fleet), "--to", "staging", "--soak", "0", "--force", "--reason", "hotfix for CVE-1")
    dry = cli(*args, "--dry-run", capsys=capsys)
    assert dry.code == 1, dry.out + dry.err
    done = cli(*args, capsys=capsys)
    assert done.code == 0, done.out + done.err
    message = repo[repo.head.target].message
    assert message.startswith("Promote plumbus plumbus.v1.1.0 to staging (forced)\n"), message
    assert "Forced past the evidence: hotfix for CVE-1" in message
    assert "Moves:\n  staging: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0\n" in message
    assert "Lockfiles: clusters/staging/olm.lock" in message
    assert dry.out.startswith(message), dry.out   # the dry run prints the commit it would make
    head = repo.head.target
    again = cli(*args, capsys=capsys)
    assert again.code == 0 and repo.head.target == head   # idempotent: nothing moves, nothing is committed
    assert "Promote to staging: nothing moves" in again.out
    # forced to prod, it moves prod from what staging pins now, cluster by cluster
    forced = cli("promote", str(fleet), "--to", "prod", "--force", "--reason", "r", capsys=capsys)
    assert forced.code == 0, forced.out + forced.err
    assert [line for line in repo[repo.head.target].message.splitlines() if " -> " in line] == [
        "  prod-eu: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0", "  prod-us: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0"]


def test_promote_all_moves_what_is_ready_one_stage_per_run_and_is_idempotent(fleet):
    pin_old(fleet, "staging", "prod-eu", "prod-us")
    repo = GitRepo(fleet, "fleet").git
    status = healthy(fleet, running={"dev": "plumbus.v1.1.0", "staging": "plumbus.v1.0.0",
                                     "prod-eu": "plumbus.v1.0.0", "prod-us": "plumbus.v1.0.0"})
    first = promote.plan_all(fleet, soak=3600, now=NOW, status=status)
    assert [(p.target, p.outcome) for p in first] == [("staging", Outcome.PROMOTED), ("prod", Outcome.UP_TO_DATE)]
    head = promote.write(fleet, first)
    assert repo[head].message.startswith("Promote plumbus plumbus.v1.1.0 to staging\n")
    assert pinned(fleet, "staging") == ["plumbus.v1.1.0"] and pinned(fleet, "prod-eu") == ["plumbus.v1.0.0"]
    # the same evidence again (staging has not applied it yet): nothing moves, nothing is written
    status = healthy(fleet, running={"dev": "plumbus.v1.1.0", "staging": "plumbus.v1.0.0",
                                     "prod-eu": "plumbus.v1.0.0", "prod-us": "plumbus.v1.0.0"})
    second = promote.plan_all(fleet, soak=3600, now=NOW, status=status)
    assert [p.outcome for p in second] == [Outcome.UP_TO_DATE, Outcome.NOT_READY]
    assert {f.kind for f in second[1].refused} == {Kind.NOT_IN_SYNC}
    assert promote.write(fleet, second) is None and repo.head.target == head
    # staging runs it, not for an hour yet: not ready; then ready
    soaking = healthy(fleet, running={"dev": "plumbus.v1.1.0", "staging": "plumbus.v1.1.0"}, hours=0.5)
    assert [p.outcome for p in promote.plan_all(fleet, soak=3600, now=NOW, status=soaking)][1] is Outcome.NOT_READY
    ready = healthy(fleet, running={"dev": "plumbus.v1.1.0", "staging": "plumbus.v1.1.0"})
    third = promote.plan_all(fleet, soak=3600, now=NOW, status=ready)
    assert [p.outcome for p in third] == [Outcome.UP_TO_DATE, Outcome.PROMOTED]


def test_a_bad_version_is_refused_and_an_unreachable_stage_gives_no_evidence(fleet):
    pin_old(fleet, "staging", "prod-eu", "prod-us")
    bad = healthy(fleet, running={"dev": "plumbus.v1.1.0"}, health="Degraded")
    [to_staging, _] = promote.plan_all(fleet, soak=0, now=NOW, status=bad)
    assert to_staging.outcome is Outcome.REFUSED and not to_staging.moves
    assert [f.kind for f in to_staging.refused] == [Kind.UNHEALTHY]
    down = healthy(fleet, running={"dev": "plumbus.v1.1.0"}, unreachable=("dev",))
    strict = promote.plan(fleet, "staging", soak=0, now=NOW, status=down)
    assert strict.blocked and strict.outcome is Outcome.UNREACHABLE and not strict.lockfiles


def test_a_promotion_for_a_pull_request_commits_on_a_new_branch_and_leaves_the_checkout(fleet, capsys):
    pin_old(fleet, "staging", "prod-eu", "prod-us")
    repo = GitRepo(fleet, "fleet").git
    head = repo.head.target
    lock = (fleet / "clusters/staging/olm.lock").read_text()
    run = cli("promote", str(fleet), "--to", "staging", "--force", "--reason", "r", "--branch", "promote/prod",
              capsys=capsys)
    assert run.code == 0, run.out + run.err
    assert repo.head.target == head and repo.head.shorthand == "main"
    assert (fleet / "clusters/staging/olm.lock").read_text() == lock
    branch = repo.branches["promote/prod"].peel(pygit2.Commit)
    assert branch.parents[0].id == head and "plumbus.v1.1.0" in (branch.tree / "clusters/staging/olm.lock").data.decode()
    assert subprocess.run(["git", "-C", str(fleet), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""
    again = cli("promote", str(fleet), "--to", "staging", "--force", "--reason", "r", "--branch", "promote/prod",
                capsys=capsys)
    assert again.code == 2 and "branch promote/prod already exists" in again.err
