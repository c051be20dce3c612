"""Which commits change what a run reads (``repo/inputs.py``), on real git repositories: the example fleet (dev,
staging, prod-eu, prod-us, each with its lockfile) and the example single repository, each cluster's rule taken
from a real ``pipeline.prepare`` of the first commit, then judged against the diff of a second one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reconciler import pipeline
from reconciler.repo import inputs
from tests.support.repo import GitRepo
from tests.support.paths import EXAMPLES

CLUSTERS = ("dev", "staging", "prod-eu", "prod-us")


class Repo(GitRepo):
    """A copy of an example committed to git; ``rules`` holds each cluster's path rule at the first commit."""

    def __init__(self, root: Path, clusters: tuple[str | None, ...]) -> None:
        super().__init__(root)
        self.first = self.commit("first")
        self.rules = {c: pipeline.prepare(pipeline.Source(root, cluster=c)).inputs for c in clusters}

    def touched(self, message: str = "change") -> dict[str | None, list[str]]:
        """Commit what was written; per cluster, the changed paths its run reads."""
        new = self.commit(message)
        git_dir = self.path / ".git"
        changed = inputs.changes(git_dir, self.first, new)
        return {c: rule.touched(changed, lambda path: inputs.blob_text(git_dir, new, path))
                for c, rule in self.rules.items()}


@pytest.fixture
def fleet(tmp_path: Path) -> Repo:
    root = tmp_path / "fleet"
    shutil.copytree(EXAMPLES / "fleet-repo", root)
    return Repo(root, CLUSTERS)


@pytest.fixture
def single(tmp_path: Path) -> Repo:
    root = tmp_path / "single"
    shutil.copytree(EXAMPLES / "gitops-repo", root)
    return Repo(root, (None,))


PLACED = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: {name}
spec:
  catalog: {{name: community, package: {name}, channel: stable}}
  install: {{namespace: {name}-system}}
  placement:
    clusterSelector: {{matchLabels: {{env: {env}}}}}
"""


def test_a_lockfile_is_read_by_its_cluster_and_parsed_by_the_stage_after_it(fleet):
    fleet.write("clusters/prod-eu/olm.lock", (fleet.path / "clusters/prod-eu/olm.lock").read_text() + "# moved\n")
    fleet.write("clusters/dev/olm.lock", (fleet.path / "clusters/dev/olm.lock").read_text() + "# moved\n")
    # staging pins plumbus itself, so what dev pins does not hold it: dev's lockfile only has to parse
    assert fleet.rules["staging"].reads("clusters/dev/olm.lock") is None
    assert fleet.touched() == {"dev": ["clusters/dev/olm.lock"], "staging": [],
                               "prod-eu": ["clusters/prod-eu/olm.lock"],
                               "prod-us": []}                            # prod parses staging's, not dev's
    fleet.write("clusters/dev/olm.lock", "kind: NotALockfile\n")
    assert fleet.touched()["staging"] == ["clusters/dev/olm.lock"]       # staging's run would fail on it


def test_a_stage_that_does_not_pin_an_operator_yet_reads_what_the_stage_before_pins(tmp_path):
    root = tmp_path / "fleet"
    shutil.copytree(EXAMPLES / "fleet-repo", root)
    os.remove(root / "clusters/staging/olm.lock")
    fleet = Repo(root, ("staging", "prod-eu"))
    fleet.write("clusters/dev/olm.lock", (fleet.path / "clusters/dev/olm.lock").read_text() + "# moved\n")
    assert fleet.touched() == {"staging": ["clusters/dev/olm.lock"], "prod-eu": []}


def test_another_clusters_lockfile_and_files_nobody_reads_change_nothing(fleet):
    fleet.write("clusters/prod-us/olm.lock", (fleet.path / "clusters/prod-us/olm.lock").read_text() + "# x\n")
    fleet.write("clusters/prod-us/notes.txt", "not read by anyone\n")
    fleet.write("README.md", "# our fleet\n")
    fleet.write("docs/rollout.md", "how we roll out\n")
    fleet.write(".github/workflows/promote.yaml", "on: [schedule]\n")
    got = fleet.touched()
    assert got == {"dev": [], "staging": [], "prod-eu": [], "prod-us": ["clusters/prod-us/olm.lock"]}


@pytest.mark.parametrize("rel, text", [
    ("reconciler.yaml", "# a comment is a change of the settings\n"),
    ("catalogs/community/plumbus.yaml", "\n"),
    ("clusters/prod-us.yaml", "# the labels of every cluster decide placement and stages\n"),
    ("approvals/plumbus.yaml", "\n"),
    ("policies/mine.yaml", "anything\n"),
    ("olm.lock", "the root lockfile is read (and refused when malformed)\n"),
])
def test_shared_inputs_are_read_by_every_cluster(fleet, rel, text):
    path = fleet.path / rel
    fleet.write(rel, (path.read_text() if path.exists() else "") + text)
    assert fleet.touched() == {c: [rel] for c in CLUSTERS}


def test_a_declaration_placed_only_elsewhere_is_not_read_until_it_is_placed_here(fleet):
    fleet.write("operators/gadget.yaml", PLACED.format(name="gadget", env="prod"))
    got = fleet.touched("gadget on prod")
    assert got == {"dev": [], "staging": [], "prod-eu": ["operators/gadget.yaml"],
                   "prod-us": ["operators/gadget.yaml"]}
    # from a first commit that holds it: dev's rule knows the file is placed elsewhere
    fleet.first = fleet.head
    fleet.rules = {"dev": pipeline.prepare(pipeline.Source(fleet.path, cluster="dev")).inputs}
    assert fleet.rules["dev"].reads("operators/gadget.yaml") is None
    fleet.write("operators/gadget.yaml", PLACED.format(name="gadget", env="prod").replace("gadget-system",
                                                                                          "gadget-ops"))
    assert fleet.touched() == {"dev": []}
    fleet.write("operators/gadget.yaml", PLACED.format(name="gadget", env="dev"))
    assert fleet.touched()["dev"] == ["operators/gadget.yaml"]       # now placed on dev
    fleet.write("operators/gadget.yaml", "apiVersion: operators.coreos.com/v1\nkind: Operator\n: [\n")
    assert fleet.touched()["dev"] == ["operators/gadget.yaml"]       # does not parse: dev would reject it
    fleet.write("operators/gadget.yaml", PLACED.format(name="plumbus", env="prod"))
    assert fleet.touched()["dev"] == ["operators/gadget.yaml"]       # a name declared twice is everyone's error
    fleet.write("operators/gadget.yaml", PLACED.format(name="gadget", env="prod")
                + "---\napiVersion: operators.coreos.com/v1alpha1\nkind: InputClass\nmetadata: {name: x}\n")
    assert fleet.touched()["dev"] == ["operators/gadget.yaml"]       # something else than Operators
    os.remove(fleet.path / "operators/gadget.yaml")
    assert fleet.touched() == {"dev": []}


def test_an_input_without_placement_is_read_by_every_cluster(fleet):
    fleet.write("inputs/needs-plumbus.yaml", "apiVersion: deppy.io/v1\nkind: Input\nmetadata: {name: needs-plumbus}\n"
                "spec:\n  constraints:\n  - type: olm.gvk\n"
                "    value: {group: how.theydoit.com, version: v1alpha1, kind: Plumbus}\n")
    assert fleet.touched() == {c: ["inputs/needs-plumbus.yaml"] for c in CLUSTERS}


def test_two_new_files_placed_elsewhere_that_declare_the_same_name_are_read(fleet):
    fleet.write("operators/a.yaml", PLACED.format(name="gadget", env="prod"))
    assert fleet.touched()["dev"] == []
    fleet.write("operators/b.yaml", PLACED.format(name="gadget", env="prod"))
    assert fleet.touched()["dev"] == ["operators/b.yaml"]


def test_a_symbolic_link_anywhere_makes_every_path_count(fleet):
    (fleet.path / "docs").mkdir()
    (fleet.path / "docs" / "catalog").symlink_to("../catalogs/community")
    got = fleet.touched()
    assert all(got[c] == ["docs/catalog"] for c in CLUSTERS), got


def test_a_repository_without_clusters_skips_only_what_no_reader_opens(single):
    single.write("README.md", "# platform\n")
    single.write("notes/plan.txt", "not read\n")
    assert single.touched() == {None: []}
    single.write("operators/extra.yaml", PLACED.format(name="gadget", env="prod"))
    assert single.touched() == {None: ["operators/extra.yaml"]}    # no cluster: every declaration is its own


def test_a_local_bundle_directory_is_read_whatever_its_files_by_the_clusters_that_run_it(fleet):
    fleet.write("bundles/plumbus/1.0.0/README.md", "what this bundle is\n")
    fleet.write("bundles/gadget/2.0.0/manifests/config.yaml", "not in any catalog yet\n")
    got = fleet.touched()
    assert got == {"dev": [], "staging": ["bundles/plumbus/1.0.0/README.md"],   # dev runs 1.1.0
                   "prod-eu": ["bundles/plumbus/1.0.0/README.md"], "prod-us": ["bundles/plumbus/1.0.0/README.md"]}
    assert fleet.rules["dev"].referenced == ("bundles/plumbus/1.1.0",)
    fleet.write("bundles/plumbus/1.1.0/manifests/notes.txt", "\n")
    assert fleet.touched()["dev"] == ["bundles/plumbus/1.1.0/manifests/notes.txt"]
