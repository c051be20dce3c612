"""Leader election against the real control plane: exactly one leads, and the other takes over."""

from __future__ import annotations

import threading
import uuid

import pytest

from reconciler.loop import UNCHANGED, LeaderElector, LocalSource, Loop
from tests.support.wait import wait_until

from .conftest import uninstall
from .test_watch_local import applied_at, clean  # noqa: F401  (clean is a fixture)

# Short enough for the expiry test to be quick, long enough that a loaded machine does not make leadership flap.
FAST = {"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 0.3}


@pytest.fixture
def namespace(k8s) -> str:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    info = k8s.resource("v1", "Namespace")
    k8s.apply(info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
              field_manager="test", dry_run=False)
    return name


def lease(k8s, namespace: str) -> dict:
    return k8s.get(k8s.resource("coordination.k8s.io/v1", "Lease"), namespace, "reconciler") or {}


def one_leader(*electors: LeaderElector) -> LeaderElector | None:
    leading = [e for e in electors if e.leading]
    assert len(leading) <= 1, [e.identity for e in leading]
    return leading[0] if leading else None


def test_exactly_one_leads_and_the_other_takes_over_on_release_and_on_expiry(control_plane, k8s, namespace):
    from reconciler.kube.client import Kube

    def elector(name: str) -> LeaderElector:
        return LeaderElector(Kube(control_plane.admin_client()), namespace, "reconciler", name, **FAST)

    a, b = elector("a"), elector("b")
    a.start()
    b.start()
    first = wait_until(lambda: one_leader(a, b), "a leader")
    other = b if first is a else a
    renewed = lease(k8s, namespace)["spec"]["renewTime"]
    wait_until(lambda: one_leader(a, b) is first and lease(k8s, namespace)["spec"]["renewTime"] != renewed,
               "the leader renewing")
    assert lease(k8s, namespace)["spec"]["holderIdentity"] == first.identity
    assert not other.leading

    first.stop(release=True)  # graceful: hands the Lease back
    wait_until(lambda: other.leading, "the other replica taking over after a release")
    spec = lease(k8s, namespace)["spec"]
    assert spec["holderIdentity"] == other.identity and spec["leaseTransitions"] == 1

    c = elector("c")
    c.start()
    other.stop(release=False)  # a crash: the Lease is left to expire
    assert lease(k8s, namespace)["spec"]["holderIdentity"] == other.identity
    wait_until(lambda: c.leading, "a new replica taking over an expired Lease")
    assert lease(k8s, namespace)["spec"]["holderIdentity"] == "c"
    c.stop()
    assert not lease(k8s, namespace)["spec"].get("holderIdentity")


def test_a_holder_renews_with_one_write_and_reads_the_lease_again_after_anyone_else_writes_it(control_plane, k8s,
                                                                                                namespace):
    """A renewal is one PUT on top of the holder's last write (client-go reads before each renewal: two). A write
    by anyone else in between makes that PUT conflict: the holder reads the Lease and renews in the same round,
    keeping what the other wrote, and never stops leading for it."""
    from reconciler.kube.client import Kube

    requests: list[tuple[str, str]] = []

    class Counting(Kube):
        def request(self, method, path, **kwargs):
            if "/leases" in path:
                requests.append((method, path))
            return super().request(method, path, **kwargs)

    holder = LeaderElector(Counting(control_plane.admin_client()), namespace, "reconciler", "holder", **FAST)
    assert holder.try_acquire_or_renew() and holder.leading
    requests.clear()
    for _ in range(3):
        assert holder.try_acquire_or_renew()
    assert [m for m, _ in requests] == ["PUT"] * 3, requests

    info = k8s.resource("coordination.k8s.io/v1", "Lease")
    k8s.request("PATCH", info.path(namespace, "reconciler"), body={"metadata": {"annotations": {"noted": "by-hand"}}},
                content_type="application/merge-patch+json")
    requests.clear()
    assert holder.try_acquire_or_renew() and holder.leading
    assert [m for m, _ in requests] == ["PUT", "GET", "PUT"], requests
    after = lease(k8s, namespace)
    assert after["spec"]["holderIdentity"] == "holder" and after["metadata"]["annotations"]["noted"] == "by-hand"
    assert after["spec"]["leaseTransitions"] == 0
    requests.clear()
    assert holder.try_acquire_or_renew()
    assert [m for m, _ in requests] == ["PUT"], requests


def test_only_the_leading_loop_applies(control_plane, k8s, namespace, gitops, clean):
    from reconciler.kube.client import Kube

    loops, threads = {}, {}
    for name in ("one", "two"):
        kube = Kube(control_plane.admin_client())
        elector = LeaderElector(Kube(control_plane.admin_client()), namespace, "reconciler", name, **FAST)
        loop = Loop(LocalSource(gitops.path, debounce=0.1), kube, interval=3600, elector=elector, identity=name)
        elector.on_change = lambda leading, loop=loop: loop.trigger("leadership acquired") if leading else None
        loops[name] = loop
        elector.start()
        threads[name] = threading.Thread(target=loop.run, daemon=True)
        threads[name].start()
    try:
        head = str(gitops.git.head.target)
        wait_until(lambda: applied_at(k8s, head), "the example applied")
        wait_until(lambda: any(lp.last for lp in loops.values()), "the applying loop finishing its step")
        applied = [n for n, lp in loops.items() if lp.steps]
        assert len(applied) == 1, applied  # exactly one loop reconciled
        leader = applied[0]
        follower = "two" if leader == "one" else "one"
        assert loops[leader].elector.leading and not loops[follower].elector.leading
        assert loops[follower].ready and not loops[follower].elector.leading

        loops[leader].stop()
        threads[leader].join(60)
        loops[leader].elector.stop(release=True)
        wait_until(lambda: loops[follower].steps >= 1, "the follower reconciling once it leads")
        assert loops[follower].last.outcome == UNCHANGED  # it found the cluster already applied
        gitops.write("reconciler.yaml", "defaultInstallNamespace: operators\n")
        changed = gitops.commit("a commit the new leader applies")
        wait_until(lambda: applied_at(k8s, changed), "the new leader applying the next commit")
        # The status is written (and its transitions announced) just before the step records the revision.
        wait_until(lambda: loops[follower].applied_revision == changed, "the new leader recording the commit")
    finally:
        for name, lp in loops.items():
            lp.stop()
            threads[name].join(60)
            lp.elector.stop()
    uninstall(k8s)
