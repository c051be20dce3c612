"""The loop of one cluster of a fleet skips a commit that changes nothing it reads (repo/inputs.py): no
resolution, no request to the API server, the step logged as skipped; a commit that changes what it reads (the
settings, a catalog, its own lockfile) is read, and skipped after reading when what it asks of the cluster is what
is in place; its own bundle's change is applied; on a drift tick, a skipped commit is not
read either, and the last good state is checked and corrected. A real git server on loopback serves the
repository; the cluster is the session's control plane, reconciled as fleet cluster ``dev``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reconciler import pipeline
from reconciler.kube.client import Kube
from reconciler.loop import APPLIED, CURRENT, SKIPPED, Loop, RemoteSource
from reconciler.repo.git import Auth, Ref, RemoteRepository
from tests.e2e.support import cli, get
from tests.e2e.test_fleet import GADGET as FLEET_GADGET
from tests.loop.gitserver import GitHttpServer
from tests.support.repo import GitRepo
from tests.support.wait import wait_until

from .conftest import TOKEN, USER
from .test_watch_local import running

pytestmark = pytest.mark.cluster

INSTANCE, NAMESPACE = "loop-skip", "skip-gadget"
# one identity whether it is read through the git server or in place (the clean-up)
SETTINGS = f"instance: {INSTANCE}\nrepository: git.example.invalid/platform/fleet\nstages: [dev, prod]\n"
GADGET = FLEET_GADGET.replace("gadget-system", NAMESPACE)
GIZMO = GADGET.replace("gadget", "gizmo").replace("{env: dev}", "{env: prod}")


class Recording(Kube):
    """The real client, remembering every request that is not a read."""

    writes: list[str]

    def request(self, method, path, **kw):  # noqa: ANN001, ANN003, ANN201 - Kube.request's signature
        if method not in ("GET", "HEAD"):
            self.writes.append(f"{method} {path}")
        return super().request(method, path, **kw)


def _cluster(name: str) -> str:
    return (f"apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: {name}\n"
            f"  labels: {{env: {name}}}\nspec:\n  kubernetesVersion: \"1.36\"\n  stage: {name}\n")


class Fleet(GitRepo):
    def __init__(self, root: Path, capsys) -> None:  # noqa: ANN001 - pytest's capsys
        super().__init__(root)
        self.capsys = capsys
        self.write("reconciler.yaml", SETTINGS)
        self.write("clusters/dev.yaml", _cluster("dev"))
        self.write("clusters/prod.yaml", _cluster("prod"))
        self.write("operators/gadget.yaml", GADGET)
        self.write("bundles/gadget/manifests/config.yaml", self.config("one"))
        self.resolve()

    @staticmethod
    def config(mode: str) -> str:
        return (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: gadget-config, namespace: {NAMESPACE}}}\n"
                f"data: {{mode: {mode}}}\n")

    def resolve(self) -> None:
        for args in (("resolve", str(self.path)), ("approve", str(self.path), "--all")):
            run = cli(*args, capsys=self.capsys)
            assert run.code == 0, run.err + run.out


def revision_of(kube: Kube, name: str = "gadget") -> str:
    obj = get(kube, "reconciler.dev/v1alpha1", "Operator", name) or {}
    return (obj.get("status") or {}).get("revision", "")


def mode(kube: Kube) -> str | None:
    obj = get(kube, "v1", "ConfigMap", "gadget-config", NAMESPACE)
    return obj["data"]["mode"] if obj else None


@pytest.fixture
def served(control_plane, tmp_path, capsys):
    """The fleet, first commit made, served on loopback: (fleet, first commit, remote for dev's loop). Afterwards
    what dev runs is pruned through the pipeline."""
    fleet = Fleet(tmp_path / "served" / "fleet", capsys)
    first = fleet.commit("gadget everywhere")
    server = GitHttpServer(fleet.path.parent, username=USER, password=TOKEN).start()
    remote = RemoteRepository(f"{server.url}/fleet/.git", Ref(branch="main"), tmp_path / "cache",
                              Auth(username=USER, password=TOKEN))
    try:
        yield fleet, first, remote
    finally:
        server.stop()
        (fleet.path / "operators" / "gadget.yaml").unlink()
        fleet.write("reconciler.yaml", SETTINGS + "allowEmpty: true\n")
        pipeline.reconcile(pipeline.Source(fleet.path, cluster="dev"), Kube(control_plane.admin_client()),
                           dry_run=False)
    assert mode(Kube(control_plane.admin_client())) is None


def for_prod_only(fleet: Fleet) -> str:
    """A commit of prod's lockfile, an Operator placed on prod alone and a README: nothing dev reads."""
    lock = fleet.path / "clusters" / "prod" / "olm.lock"
    lock.write_text(lock.read_text() + "# reviewed by the prod owners\n")
    fleet.write("operators/gizmo.yaml", GIZMO)
    fleet.write("bundles/gizmo/manifests/config.yaml", fleet.config("prod").replace("gadget", "gizmo"))
    fleet.write("README.md", "# the fleet\n")
    return fleet.commit("prod only")


def test_a_commit_that_changes_only_what_other_clusters_read_is_skipped(served, control_plane, caplog):
    caplog.set_level(logging.INFO, logger="reconciler.loop")
    fleet, first, remote = served
    kube = Recording(control_plane.admin_client())
    kube.writes = []
    loop = Loop(RemoteSource(remote, poll_interval=0.2), kube, interval=3600, identity="skip-test", cluster="dev")
    with running(loop):
        wait_until(lambda: revision_of(kube) == first and mode(kube) == "one", "the first commit applied")
        # the step after the first (a poll) has run: the first step's writes, Events included, are done
        wait_until(lambda: loop.steps >= 2 and loop.applied_revision == first, "the loop settled on the first commit")
        status = get(kube, "reconciler.dev/v1alpha1", "Operator", "gadget")

        kube.writes.clear()
        other = for_prod_only(fleet)
        skipped = loop.metrics.reconciles.labels(SKIPPED)
        wait_until(lambda: skipped._value.get() == 1, "the commit for prod seen by dev's loop")
        assert loop.last.revision == other and loop.last.outcome in (SKIPPED, CURRENT), loop.last   # or polled
        assert kube.writes == []
        assert get(kube, "reconciler.dev/v1alpha1", "Operator", "gadget")["metadata"]["resourceVersion"] == \
            status["metadata"]["resourceVersion"]
        assert loop.applied_revision == first and revision_of(kube) == first
        assert f"skipped {other}" in caplog.text and "cluster dev" in caplog.text
        assert skipped._value.get() == 1

        # What every cluster reads (the settings, a catalog) and dev's own lockfile, even a comment in it: read and
        # resolved; what each asks of the cluster is what is in place, so nothing is written and the revision
        # applied stays (a second kind of skip, after reading)
        def read(commit: str, what: str) -> None:
            before = loop.metrics.registry.get_sample_value("reconciler_resolution_duration_seconds_count")
            kube.writes.clear()
            wait_until(lambda: f"skipped {commit}: what it asks of cluster dev is what {first} applied"
                       in caplog.text, f"the {what} commit read")
            assert loop.metrics.registry.get_sample_value("reconciler_resolution_duration_seconds_count") > before
            assert kube.writes == [] and revision_of(kube) == first and loop.applied_revision == first

        fleet.write("reconciler.yaml", SETTINGS + "# every cluster reads this\n")
        read(fleet.commit("a comment in the settings"), "settings")
        fleet.write("catalogs/community/gadget.yaml", "schema: olm.package\nname: gadget\ndefaultChannel: stable\n")
        read(fleet.commit("a catalog"), "catalog")
        lock = fleet.path / "clusters" / "dev" / "olm.lock"
        lock.write_text(lock.read_text() + "# reviewed by the dev owners\n")
        locked = fleet.commit("a comment in dev's lockfile")
        read(locked, "lockfile")

        # a new version of dev's bundle, resolved into its lockfile: applied
        fleet.write("bundles/gadget-2/manifests/config.yaml", fleet.config("two"))
        fleet.write("operators/gadget.yaml", GADGET.replace("gadget.v1.0.0", "gadget.v2.0.0").replace(
            "file://bundles/gadget]", "file://bundles/gadget-2]"))
        fleet.resolve()
        own = fleet.commit("gadget 2.0.0")
        assert "clusters/dev/olm.lock" in fleet.run("diff", "--name-only", f"{locked}..{own}").split()
        wait_until(lambda: mode(kube) == "two" and revision_of(kube) == own, "dev's own change applied")
        assert f"applied {own} " in caplog.text and loop.applied_revision == own


def test_on_a_drift_tick_a_skipped_commit_is_not_read_and_the_last_good_state_is_checked(served, control_plane,
                                                                                         caplog):
    caplog.set_level(logging.INFO, logger="reconciler.loop")
    fleet, first, remote = served
    kube = Kube(control_plane.admin_client())
    loop = Loop(RemoteSource(remote, poll_interval=None), kube, interval=3600, identity="skip-test", cluster="dev")
    assert loop.step(drift=False).outcome == APPLIED and loop.applied_revision == first
    reads = loop.metrics.registry.get_sample_value("reconciler_resolution_duration_seconds_count")
    assert reads == 1
    kube.request("DELETE", kube.resource("v1", "ConfigMap").path(NAMESPACE, "gadget-config"))
    other = for_prod_only(fleet)
    drift = loop.step(drift=True, reason="interval")   # the drift tick comes with the new commit
    assert drift.outcome == APPLIED and drift.revision == other and drift.applied == first, drift
    assert mode(kube) == "one" and revision_of(kube) == first
    assert f"skipped {other}" in caplog.text
    assert loop.metrics.registry.get_sample_value("reconciler_resolution_duration_seconds_count") == reads
    assert loop.step(drift=False).outcome == CURRENT   # the commit is known now: nothing to do at all
