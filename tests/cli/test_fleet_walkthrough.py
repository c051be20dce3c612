"""docs/fleet.md run as printed: the offline walk-through line by line in one shell from the project's root (a
``# exit N: ...`` comment is the exit code and a phrase the output shows), and every other example of the page
checked against what the reconciler does with it: the YAML is read as a repository would hold it, and each
printed output is what the command prints (a commit id aside)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from reconciler.fleet import promote
from reconciler.model.fleet import parse_cluster
from reconciler.repo import read_repository
from reconciler.repo.fleet import select_cluster
from tests.docblocks import assert_printed, fenced_block, indented_block, run_walkthrough
from tests.unit.fleet.fleets import NOW, healthy

ROOT = Path(__file__).resolve().parents[2]
DOC = "docs/fleet.md"
FLEET = ROOT / "examples" / "fleet-repo"
FIRST_LINE = "cp -r examples/fleet-repo ~/fleet && cd ~/fleet"


def output_of(steps: list[tuple[str, str, int]], command: str) -> str:
    return next(out for line, out, _ in steps if line.startswith(command))


def test_the_fleet_walkthrough_promotes_on_a_branch_as_printed(tmp_path: Path):
    steps = run_walkthrough(indented_block(DOC, FIRST_LINE), tmp_path)
    assert "0 written" in output_of(steps, "reconciler resolve .")
    # the printed outputs of the page are what the commands print
    assert_printed(fenced_block(DOC, "No updates available."), output_of(steps, "reconciler update . --cluster staging"))
    assert_printed(fenced_block(DOC, "CLUSTER  STAGE    plumbus"), output_of(steps, "reconciler fleet status ."))
    subject = next(line for line in indented_block(DOC, FIRST_LINE) if line.startswith("git log"))
    assert output_of(steps, "git log").strip() == subject.split("# ", 1)[1]
    diff = fenced_block(DOC, next(line for line in _lines() if line.startswith("Diff base main (")))
    assert_printed(diff, output_of(steps, "git checkout -q promote-staging"),
                   normalise=lambda text: re.sub(r"\(([0-9a-f]{7})\)", "(0000000)", text))
    # the branch holds the promotion; main and the working tree of main are as they were
    fleet = tmp_path / "fleet"
    git = ["git", "-C", str(fleet)]
    assert "plumbus.v1.0.0" in subprocess.run([*git, "show", "main:clusters/staging/olm.lock"], capture_output=True,
                                              text=True, check=True).stdout
    assert "plumbus.v1.1.0" in (fleet / "clusters/staging/olm.lock").read_text()   # promote-staging is checked out


def _lines() -> list[str]:
    return (ROOT / DOC).read_text().splitlines()


def test_the_pages_commit_message_is_what_a_promotion_with_evidence_commits(tmp_path: Path):
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    status = healthy(root, running={"dev": "plumbus.v1.1.0", "staging": "plumbus.v1.0.0"}, hours=3.2)
    promotion = promote.plan(root, "staging", soak=3600, now=NOW, status=status)
    assert promotion.message().splitlines() == fenced_block(DOC, "Promote plumbus plumbus.v1.1.0 to staging")


def test_the_pages_declarations_read_as_printed(tmp_path: Path):
    cluster = yaml.safe_load("\n".join(fenced_block(DOC, "apiVersion: reconciler.dev/v1alpha1")))
    parsed = parse_cluster(cluster, "clusters/prod-eu.yaml")
    example = parse_cluster(yaml.safe_load((FLEET / "clusters/prod-eu.yaml").read_text()), "clusters/prod-eu.yaml")
    assert (parsed.labels, parsed.stage, parsed.kubernetes_version) == (example.labels, example.stage,
                                                                        example.kubernetes_version)
    assert parsed.context == "prod-eu"
    stages = yaml.safe_load("\n".join(fenced_block(DOC, "stages: [dev, staging, prod]")))
    assert tuple(stages["stages"]) == read_repository(FLEET).settings.stages
    # the placement example, as plumbus's spec in the example fleet: staging and prod only, prod on 1.0.x, the
    # us region in its own namespace
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    spec = yaml.safe_load("\n".join(fenced_block(DOC, "spec:")))
    decl = yaml.safe_load((root / "operators/plumbus.yaml").read_text())
    decl["spec"] = spec["spec"]
    (root / "operators/plumbus.yaml").write_text(yaml.safe_dump(decl))
    (root / "operators" / "strict.yaml").write_text(   # the class the example names, as docs/approval.md writes one
        "apiVersion: core.rukpak.io/v1alpha1\nkind: ProvisionerClass\nmetadata: {name: strict-approval}\n"
        "provisioner: operators.coreos.com/operators\nparameters: {approval: UserPermission, approver: {user: alice}}\n")
    snap = read_repository(root)
    views = {name: {op.name: op for op in select_cluster(snap, name).operators} for name in snap.clusters}
    assert "plumbus" not in views["dev"]
    assert str(views["prod-us"]["plumbus"].version) == "1.0.x"
    assert views["prod-us"]["plumbus"].install.namespace == "plumbus-us"
    assert views["prod-eu"]["plumbus"].provisioner_class == "strict-approval"
