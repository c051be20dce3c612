"""A rollout on live clusters: four simulated clusters (dev, two of staging, prod), each running its own
``reconciler watch`` of one repository served by a git server on loopback, workloads rolling out on kwok nodes.

The story a team lives: a commit reaches every cluster that its placement names (and no other); a new version
reaches dev alone; ``promote`` moves it to staging while a staging cluster is down (that cluster is reported
unreachable and catches up when it returns), refuses prod until every staging cluster can give evidence, then
moves it to prod (after a commit that changes nothing any cluster reads, which every loop skips); a version
whose Deployment never becomes available stops at dev, the refusal naming the
cluster and why, and nothing of it reaches staging or prod. Every wait is bounded; nothing is timed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rollout.harness import UNSCHEDULABLE, LiveFleet, Member
from tests.support.wait import wait_until

pytestmark = pytest.mark.cluster

FLEET = [Member("dev-1", "dev", "eu"), Member("staging-1", "staging", "eu"), Member("staging-2", "staging", "us"),
         Member("prod-1", "prod", "eu")]
EVERY = [m.name for m in FLEET]
V100, V110, V120 = "widget.v1.0.0", "widget.v1.1.0", "widget.v1.2.0"


@pytest.fixture(scope="module")
def fleet(control_plane, tmp_path_factory) -> Iterator[LiveFleet]:
    live = LiveFleet(control_plane, tmp_path_factory.mktemp("rollout"), FLEET).start()
    try:
        yield live
    finally:
        live.close()


def running(fleet: LiveFleet, names: list[str]) -> dict[str, str]:
    """What each cluster reports of widget: bundle and Ready, read from the cluster."""
    out = {}
    for name in names:
        seen = (fleet.observe(name) or {}).get("widget")
        out[name] = f"{seen.bundle} {'Ready' if seen.ready else seen.reason}" if seen else "nothing"
    return out


def test_a_version_moves_stage_by_stage_on_evidence_and_a_bad_one_stops_at_dev(fleet: LiveFleet):
    # the first commit reaches every cluster it places an Operator on, and only those
    fleet.wait_converged(EVERY, V100, timeout=300)
    fleet.wait_converged(["dev-1", "staging-1", "prod-1"], "gizmo.v1.0.0", operator="gizmo")
    assert "gizmo" not in fleet.observe("staging-2")
    for name in EVERY:
        deployment = fleet.deployment(name)
        assert deployment["status"].get("availableReplicas") == 2, (name, deployment["status"])
        assert deployment["spec"]["template"]["metadata"]["labels"]["version"] == "1.0.0"

    # a new version reaches the first stage alone: the later stages' lockfiles hold them
    fleet.release("1.1.0")
    fleet.wait_converged(["dev-1"], V110)
    assert running(fleet, ["staging-1", "staging-2", "prod-1"]) == {
        n: f"{V100} Ready" for n in ("staging-1", "staging-2", "prod-1")}

    # staging-2 goes down: fleet status says so, in words
    fleet.stop_cluster("staging-2")
    try:
        code, doc = fleet.commands.status()
        rows = fleet.commands.rows(doc)
        assert code == 3 and not rows["staging-2"]["reachable"], doc
        assert "cannot reach the API server" in rows["staging-2"]["error"], rows["staging-2"]
        assert all(rows[n]["reachable"] for n in ("dev-1", "staging-1", "prod-1"))

        # promotion to staging needs dev's evidence only: it goes ahead, and the staging cluster that runs takes it
        done = fleet.promote("staging")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "widget widget.v1.1.0 to staging" in done.stdout and "dev-1: widget.v1.1.0 healthy" in done.stdout
        assert V110 in fleet.locked("staging-1") and V110 in fleet.locked("staging-2")
        fleet.wait_converged(["staging-1"], V110)

        # promotion to prod needs every staging cluster's evidence: refused, naming the one that is down
        head, prod_lock = fleet.head(), fleet.locked("prod-1")
        refused = fleet.promote("prod")
        assert refused.returncode != 0, refused.stdout
        assert "staging-2: unreachable" in refused.stdout, refused.stdout
        assert fleet.head() == head and fleet.locked("prod-1") == prod_lock
        assert running(fleet, ["prod-1"]) == {"prod-1": f"{V100} Ready"}
    finally:
        fleet.start_cluster("staging-2")

    # back, staging-2's own loop catches up with the promotion it missed
    fleet.wait_converged(["staging-2"], V110, timeout=600)

    # a commit that changes nothing any cluster reads: every loop skips it, and the status objects keep the
    # revision they applied; staging's evidence still counts, since nothing staging reads changed since
    (fleet.repo / "README.md").write_text("# The widget fleet\n\nPromote with `reconciler promote`.\n")
    note = fleet.commit("a README for the team")
    wait_until(lambda: all(fleet.logged(n, f"skipped {note}") for n in EVERY), "every loop to skip the README")
    assert all(fleet.observe(n)["widget"].revision not in ("", note) for n in EVERY)
    done = fleet.promote("prod")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "staging-1: widget.v1.1.0 healthy" in done.stdout and "staging-2: widget.v1.1.0 healthy" in done.stdout
    fleet.wait_converged(["prod-1"], V110)
    assert fleet.deployment("prod-1")["spec"]["template"]["metadata"]["labels"]["version"] == "1.1.0"

    # a version whose Deployment never becomes available: dev applies it and it stays unavailable there
    fleet.release("1.2.0", unschedulable=True)
    fleet.wait_converged(["dev-1"], V120, ready=False)
    deployment = fleet.deployment("dev-1")
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == UNSCHEDULABLE
    assert not deployment["status"].get("availableReplicas") or deployment["status"].get("unavailableReplicas")
    assert running(fleet, ["dev-1"])["dev-1"].startswith(f"{V120} ") and "Ready" not in running(fleet, ["dev-1"])[
        "dev-1"]

    # promotion refuses with dev's evidence; nothing of 1.2.0 reaches a later stage
    head, locks = fleet.head(), {n: fleet.locked(n) for n in EVERY[1:]}
    refused = fleet.promote("staging")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"dev-1: widget {V120} is not healthy" in refused.stdout, refused.stdout
    assert fleet.head() == head and {n: fleet.locked(n) for n in EVERY[1:]} == locks
    assert all(V120 not in lock for lock in locks.values())
    assert running(fleet, EVERY[1:]) == {n: f"{V110} Ready" for n in EVERY[1:]}
    code, doc = fleet.commands.status()
    cells = {name: row["operators"]["widget"] for name, row in fleet.commands.rows(doc).items()}
    assert cells["dev-1"]["bundle"] == V120 and cells["dev-1"]["health"] != "Healthy", cells["dev-1"]
    assert all(cells[n]["bundle"] == V110 and cells[n]["health"] == "Healthy" for n in EVERY[1:]), cells
