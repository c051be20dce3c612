"""A fleet repository read and resolved offline: Cluster declarations, placement and overrides, per-cluster
lockfiles, stages that hold bundles back, one resolution per shape, and the review grouped by outcome."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler.errors import DeclarationError, InputError, UsageError
from reconciler.fleet.resolve import resolve_fleet
from reconciler.model.fleet import ClusterDecl, for_cluster, parse_selector
from reconciler.repo import read_repository
from reconciler.repo.fleet import cluster_context, select_cluster, stage_holds
from tests.unit.helpers import write
from tests.support.paths import FLEET_EXAMPLE
from tests.support.repo import commit_all, example_copy

FLEET = FLEET_EXAMPLE


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root, ignore=shutil.ignore_patterns("olm.lock"))
    return root


def cluster(root: Path, name: str, labels: str, stage: str | None = None) -> None:
    lines = ["apiVersion: reconciler.dev/v1alpha1", "kind: Cluster", f"metadata: {{name: {name}, labels: {labels}}}",
             "spec:", '  kubernetesVersion: "1.36"'] + ([f"  stage: {stage}"] if stage else [])
    (root / "clusters" / f"{name}.yaml").write_text("\n".join(lines) + "\n")


def test_the_example_fleet_reads_with_its_clusters_and_placement(fleet):
    snap = read_repository(fleet)
    assert sorted(snap.clusters) == ["dev", "prod-eu", "prod-us", "staging"]
    assert snap.settings.stages == ("dev", "staging", "prod")
    assert snap.clusters["prod-us"].kubernetes_version == "1.36.0"   # a minor, as written, is x.y.0
    us = select_cluster(snap, "prod-us")
    assert [op.install.namespace for op in us.operators] == ["plumbus-us"]   # the override for region us
    assert us.lock_file == "clusters/prod-us/olm.lock" and us.cluster.name == "prod-us"
    assert [op.install.namespace for op in select_cluster(snap, "prod-eu").operators] == ["plumbus-system"]


@pytest.mark.parametrize("given, message", [
    (None, "this repository drives 4 clusters: say which with --cluster NAME"),
    ("nowhere", "--cluster nowhere: no such cluster"),
])
def test_a_fleet_needs_a_known_cluster_and_says_which_exist(fleet, given, message):
    for call in (lambda: select_cluster(read_repository(fleet), given), lambda: cluster_context(fleet, given)):
        with pytest.raises(UsageError) as caught:
            call()
        assert message in caught.value.message and caught.value.exit_code == 64
        assert caught.value.hint == "clusters: dev, prod-eu, prod-us, staging"


def test_a_single_repository_refuses_a_cluster(tmp_path):
    root = example_copy(tmp_path / "repo")
    with pytest.raises(UsageError, match="declares no clusters"):
        select_cluster(read_repository(root), "dev")
    assert select_cluster(read_repository(root), None).lock_file == "olm.lock"


@pytest.mark.parametrize("body, message", [
    ("apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec: {region: eu}\n",
     "unknown field spec.region"),
    ("apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x, labels: {env: [a]}}\n",
     "metadata.labels.env"),
    ("apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {name: y}\n", "Cluster y is declared in x.yaml"),
    ("apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec: {stage: qa}\n",
     "stage 'qa' is not one of reconciler.yaml's stages (dev, staging, prod)"),
    ("apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec: {kubernetesVersion: 1.36}\n",
     "was read as a number"),
    ("apiVersion: reconciler.dev/v1\nkind: Cluster\nmetadata: {name: x}\n", "expected apiVersion reconciler.dev/v1alpha1"),
])
def test_bad_cluster_declarations_name_the_file(fleet, body, message):
    (fleet / "clusters" / "x.yaml").write_text(body)
    with pytest.raises((DeclarationError, InputError)) as caught:
        read_repository(fleet)
    assert caught.value.path == "clusters/x.yaml" and message in caught.value.message, caught.value.render()


def test_placement_selects_clusters_and_overrides_apply_in_order(fleet):
    write(fleet, "operators/fleeb.yaml", """
        apiVersion: operators.coreos.com/v1
        kind: Operator
        metadata: {name: fleeb}
        spec:
          catalog: {name: community, package: plumbus}
          placement:
            clusterSelector:
              matchExpressions: [{key: env, operator: In, values: [staging, prod]}]
            overrides:
            - clusterSelector: {matchLabels: {env: prod}}
              version: "1.0.x"
              installNamespace: fleeb-prod
            - clusterSelector: {matchExpressions: [{key: region, operator: NotIn, values: [eu]}]}
              installNamespace: fleeb-elsewhere
        """)
    snap = read_repository(fleet)
    placed = {name: {op.name: op for op in select_cluster(snap, name).operators} for name in snap.clusters}
    assert "fleeb" not in placed["dev"] and "fleeb" in placed["staging"]
    assert str(placed["prod-eu"]["fleeb"].version) == "1.0.x" and placed["staging"]["fleeb"].version is None
    assert placed["prod-eu"]["fleeb"].install.namespace == "fleeb-prod"
    assert placed["prod-us"]["fleeb"].install.namespace == "fleeb-elsewhere"   # the later override wins


@pytest.mark.parametrize("selector, labels, expected", [
    ({"matchLabels": {"env": "prod"}}, {"env": "prod", "region": "eu"}, True),
    ({"matchLabels": {"env": "prod"}}, {"env": "dev"}, False),
    ({"matchExpressions": [{"key": "region", "operator": "Exists"}]}, {"region": "eu"}, True),
    ({"matchExpressions": [{"key": "region", "operator": "DoesNotExist"}]}, {"region": "eu"}, False),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
    ({}, {"anything": "x"}, True),
])
def test_label_selectors_match_as_kubernetes_does(selector, labels, expected):
    assert parse_selector(selector, "s", "f", "o").matches(labels) is expected


@pytest.mark.parametrize("selector, message", [
    ({"matchExpressions": [{"key": "env", "operator": "In"}]}, "values must be a non-empty list"),
    ({"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}, "values must be empty"),
    ({"matchExpressions": [{"key": "env", "operator": "Like", "values": ["x"]}]}, "operator: must be one of"),
    ({"matchLabel": {"env": "x"}}, "unknown field s.matchLabel"),
])
def test_bad_selectors_are_refused(selector, message):
    with pytest.raises(DeclarationError, match=message):
        parse_selector(selector, "s", "f", "o")


def test_a_declaration_without_placement_goes_everywhere():
    from reconciler.model.declarations import OperatorDecl, Origin

    decl = OperatorDecl("x", Origin("x.yaml"))
    assert for_cluster(decl, ClusterDecl("c", "c.yaml", (("env", "prod"),))) is decl


def test_every_cluster_is_resolved_once_per_shape_and_gets_its_lockfile(fleet):
    result = resolve_fleet(fleet)
    assert sorted(result.written) == ["dev", "prod-eu", "prod-us", "staging"]
    # dev; staging and prod-eu (held to the same pins, same declarations); prod-us (its own namespace)
    assert result.shapes == 3
    for name in ("dev", "prod-eu", "prod-us", "staging"):
        text = (fleet / "clusters" / name / "olm.lock").read_text()
        assert "name: plumbus.v1.1.0" in text
    again = resolve_fleet(fleet)
    assert again.written == []   # deterministic: nothing to rewrite


def test_a_later_stage_is_held_to_what_the_previous_stage_pins(fleet):
    """dev moves to plumbus 1.1.0 as the catalog allows; staging and prod stay where promotion put them."""
    resolve_fleet(fleet)
    for name in ("staging", "prod-eu", "prod-us"):
        lock = fleet / "clusters" / name / "olm.lock"
        lock.write_text(lock.read_text().replace("1.1.0", "1.0.0").replace(
            "sha256:0ba79bff16bea7575f8261b469021ba777160b45afbf81060510cffc702f91d6",
            "sha256:cfbf439270b6dc572e0b8814167883db2a20672e84f272ccecb1a37e8f6116c4"))
    snap = read_repository(fleet)
    assert stage_holds(select_cluster(snap, "dev")) == {}
    assert stage_holds(select_cluster(snap, "prod-eu")) == {"plumbus": frozenset({"plumbus.v1.0.0"})}
    result = resolve_fleet(fleet)
    assert [e.name for e in result.lockfiles["dev"].entries] == ["plumbus.v1.1.0"]
    for name in ("staging", "prod-eu", "prod-us"):
        assert [e.name for e in result.lockfiles[name].entries] == ["plumbus.v1.0.0"], name
    # a cluster new to prod, with no lockfile, starts from what staging pins, not from the catalog's newest
    cluster(fleet, "prod-ap", "{env: prod, region: ap}", "prod")
    assert [e.name for e in resolve_fleet(fleet).lockfiles["prod-ap"].entries] == ["plumbus.v1.0.0"]


def test_the_fleet_review_groups_clusters_by_outcome(fleet):
    from reconciler.fleet.review import compute_fleet, render_fleet

    resolve_fleet(fleet)
    commit_all(fleet, "fleet")
    text = (fleet / "operators/plumbus.yaml").read_text().replace("plumbus-us\n", "plumbus-usa\n")
    (fleet / "operators/plumbus.yaml").write_text(text)
    review = compute_fleet(fleet)
    assert review.changed and review.clusters == 4
    assert [g.clusters for g in review.groups] == [("prod-us",), ("dev", "prod-eu", "staging")]
    out = render_fleet(review, "text")
    assert "prod-us (1 cluster): plumbus changed, objects +2 ~2 -2" in out
    assert "dev, prod-eu, staging (3 clusters): unchanged" in out


def test_the_fleet_review_in_markdown_stays_under_the_comment_limit():
    from reconciler.fleet.review import MARKDOWN_LIMIT, FleetReview, Group, render_fleet
    from reconciler.review import BundleInfo, ObjectChange, OperatorChange, Review
    from reconciler.model.kube import ObjectRef

    def rev(i: int) -> Review:
        b = BundleInfo(f"p.v1.{i}.0", f"1.{i}.0", "p", "c", "stable", "src", "d")
        objects = tuple(ObjectChange(ObjectRef("", "ConfigMap", "ns", f"cm-{j}"), "changed", ("--- a", "+++ b",
                                     "-x: 1", "+x: 2")) for j in range(40))
        return Review("base", "working tree", "1.36", "1.37", (OperatorChange("p", "Operator", "upgraded", b, b, "replaces",
                      objects=objects),), (), False)

    # 1,000 clusters, in 500 groups of different outcomes (the worst a review of one change meets is fewer)
    groups = tuple(Group(tuple(f"cluster-{i:04d}-{k}" for k in range(2)), rev(i)) for i in range(500))
    text = render_fleet(FleetReview("base", "working tree", groups), "markdown")
    assert len(text) < MARKDOWN_LIMIT
    for i in range(500):   # every cluster a change touches is named
        assert f"cluster-{i:04d}-0" in text and f"cluster-{i:04d}-1" in text
    assert "more groups of changed clusters are not detailed here" in text
