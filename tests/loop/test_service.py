"""The running service against the real control plane: hooks reach the leader, Events aggregate,
per-Operator metrics stay bounded, and the shipped RBAC covers every kind the converters emit."""

from __future__ import annotations

import threading
import uuid

import pytest

from reconciler.cluster.status import objects as status_objects
from reconciler.cluster.status.events import EventRecorder
from reconciler.kube.client import Kube
from reconciler.loop import APPLIED, LeaderElector, Loop, RemoteSource
from reconciler.loop.relay import EVENT, RECEIVED_BY, REQUEST, HookRelay
from reconciler.repo.git import Auth, Ref, RemoteRepository
from reconciler.loop.server import Server, signature
from tests.support.wait import wait_until

from .conftest import TOKEN, USER
from .test_lease import lease
from .test_deploy import objects
from .test_watch_local import clean, events, running  # noqa: F401  (clean is a fixture)
from .test_watch_remote import _http

# A short retry period so the test is quick to elect; a lease long enough that a loaded machine does not move it.
FAST = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 0.3}
SECRET = b"hook-secret"


@pytest.fixture
def namespace(k8s) -> str:
    name = f"hook-{uuid.uuid4().hex[:8]}"
    k8s.apply(k8s.resource("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
              field_manager="test", dry_run=False)
    return name


def test_a_hook_on_the_standby_reaches_the_leader(control_plane, k8s, namespace, gitops, git_server, tmp_path,
                                                  clean):
    replicas = {}
    for name in ("a", "b"):
        kube = Kube(control_plane.admin_client())
        elector = LeaderElector(kube, namespace, "reconciler", name, **FAST)
        remote = RemoteRepository(f"{git_server.url}/gitops/.git", Ref(branch="main"), tmp_path / f"cache-{name}",
                                  Auth(username=USER, password=TOKEN))
        # Polls are an hour apart and drift corrections too: only a hook makes the leader read the remote.
        loop = Loop(RemoteSource(remote, poll_interval=3600), kube, interval=3600, dry_run=True, elector=elector,
                    identity=name)
        elector.on_change = (lambda lp: lambda leading: lp.trigger("leadership acquired") if leading else None)(loop)
        relay = HookRelay(elector, period=0.3)
        server = Server(loop, "127.0.0.1", 0, SECRET, relay=relay)
        replicas[name] = (elector, loop, relay, server)
    threads = []
    try:
        for elector, loop, relay, server in replicas.values():
            server.start()
            elector.start()
            relay.start(lambda e=elector: e.leading, loop.trigger)
            threads.append(threading.Thread(target=loop.run, daemon=True))
            threads[-1].start()
        leader = wait_until(lambda: next((n for n, r in replicas.items() if r[0].leading), None), "a leader")
        standby = "b" if leader == "a" else "a"
        first = str(gitops.git.head.target)
        lead_loop = replicas[leader][1]
        wait_until(lambda: lead_loop.last is not None and lead_loop.last.revision == first, "the first step")

        gitops.set_version("1.0.0")
        pushed = gitops.commit("pin 1.0.0")
        body = b'{"ref": "refs/heads/main"}'
        port = replicas[standby][3].port
        code, text = _http(f"http://127.0.0.1:{port}/hook", body,
                           {"X-Hub-Signature-256": signature(SECRET, body), "X-GitHub-Event": "push",
                            "Content-Type": "application/json"})
        assert (code, text) == (202, "recorded for the leader\n")
        try:
            wait_until(lambda: lead_loop.last.revision == pushed and lead_loop.last.outcome == APPLIED,
                       "the leader reading the pushed commit")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the leader's last step: {lead_loop.last}") from None
        assert replicas[standby][1].last is None or replicas[standby][1].last.revision != pushed
        recorded = lease_annotations(k8s, namespace)
        assert recorded[EVENT] == "push" and recorded[RECEIVED_BY] == standby

        # A bad signature is refused on either replica and records nothing.
        code, _ = _http(f"http://127.0.0.1:{port}/hook", body, {"X-Hub-Signature": "sha1=" + "0" * 40})
        assert code == 401
        assert lease_annotations(k8s, namespace)[REQUEST] == recorded[REQUEST]
    finally:
        for elector, loop, relay, server in replicas.values():
            loop.stop()
            relay.stop()
            server.stop()
        for t in threads:
            t.join(60)
        for elector, *_ in replicas.values():
            elector.stop()


def lease_annotations(k8s, namespace: str, name: str = "reconciler") -> dict:
    lease = k8s.get(k8s.resource("coordination.k8s.io/v1", "Lease"), namespace, name) or {}
    return (lease.get("metadata") or {}).get("annotations") or {}


def test_the_relay_never_takes_an_uncovered_hook_as_its_baseline(k8s, namespace):
    """Which recorded hooks a replica counts as covered, look by look (leading or not), from the Lease as its
    elector last saw it; a standby's record never disturbs the holder, who sees it at its next renewal."""
    a = LeaderElector(k8s, namespace, "reconciler", "a", **FAST)
    relay, standby = HookRelay(a), HookRelay(LeaderElector(k8s, namespace, "reconciler", "b", **FAST))
    assert a.try_acquire_or_renew()

    def recorded() -> str:
        pushed = standby.record("push")
        assert a.try_acquire_or_renew() and a.leading   # its renewal conflicts, it reads the Lease and renews
        return pushed

    first = recorded()
    assert lease_annotations(k8s, namespace)[RECEIVED_BY] == "b"
    assert relay.look(False) is None  # a standby's first look is the baseline...
    assert relay.look(True) is None  # ...covered by the reconcile that starts when it takes the Lease
    pushed = recorded()
    assert pushed != first and relay.look(True) == pushed
    assert relay.look(True) is None
    # A renewal that lapses for a moment (a slow API server) is no new term and no takeover reconcile
    # follows it: the hook recorded meanwhile reaches the replica when it leads again.
    pushed = recorded()
    assert relay.look(False) is None
    assert relay.look(True) == pushed
    # A replica whose first look is made leading cannot tell what its start-up reconcile read.
    c = LeaderElector(k8s, namespace, "reconciler", "c", **FAST)
    assert HookRelay(c).look(True) is None   # it has not read the Lease yet: nothing to say
    assert not c.try_acquire_or_renew()
    assert HookRelay(c).look(True) == pushed
    assert lease(k8s, namespace)["spec"]["holderIdentity"] == "a"
    # Nothing recorded yet: nothing to relay.
    d = LeaderElector(k8s, namespace, "reconciler-none", "d", **FAST)
    assert d.try_acquire_or_renew() and HookRelay(d).look(True) is None


def test_repeated_events_are_aggregated(k8s, gitops, clean):
    from reconciler import pipeline

    pipeline.reconcile(gitops.path, k8s, dry_run=False)
    recorder = EventRecorder(instance="test")
    for _ in range(3):
        recorder.record(k8s, "plumbus", type_="Normal", reason="DriftCorrected",
                        message="corrected drift from abc: 1 configured")
    EventRecorder(instance="test").record(k8s, "plumbus", type_="Normal", reason="Applied", message="applied abc")
    drift = [e for e in events(k8s) if e["reason"] == "DriftCorrected"]
    assert len(drift) == 1 and drift[0]["count"] == 3
    assert drift[0]["lastTimestamp"] >= drift[0]["firstTimestamp"]
    assert [e["count"] for e in events(k8s) if e["reason"] == "Applied" and e["message"] == "applied abc"] == [1]


def test_a_repeated_event_is_one_write_and_one_written_elsewhere_or_expired_is_still_counted_right(k8s, gitops,
                                                                                                   clean):
    """A repeat of an Event this process wrote is one PATCH (kubectl's recorder keeps its own too); one another
    writer counted since is read and counted on top; one deleted (expired) is written anew with count 1."""
    from reconciler import pipeline
    from reconciler.kube.client import Kube

    pipeline.reconcile(gitops.path, k8s, dry_run=False)
    sent: list[str] = []

    class Counting(Kube):
        def request(self, method, path, **kwargs):
            if "/events" in path:
                sent.append(method)
            return super().request(method, path, **kwargs)

    kube = Counting(k8s.transport)
    recorder = EventRecorder()
    about = k8s.get(status_objects.resource(k8s), "", "plumbus")["metadata"]

    def record() -> dict:
        recorder.record(kube, "plumbus", type_="Normal", reason="Probe", message="probe", about=about)
        return next(e for e in events(k8s) if e["reason"] == "Probe")

    assert record()["count"] == 1 and sent == ["POST"]
    sent.clear()
    assert record()["count"] == 2 and sent == ["PATCH"]
    event = record()
    info = k8s.resource("v1", "Event")
    ns, name = event["metadata"]["namespace"], event["metadata"]["name"]
    k8s.request("PATCH", info.path(ns, name), body={"count": 10}, content_type="application/merge-patch+json")
    sent.clear()
    assert record()["count"] == 11 and sent == ["PATCH", "GET", "PATCH"]
    k8s.delete(info, ns, name)
    sent.clear()
    assert record()["count"] == 1 and sent == ["PATCH", "POST"]


def test_drift_correction_is_an_event_and_a_metric_of_its_own(k8s, gitops, clean):
    from reconciler.loop import LocalSource, UNCHANGED

    loop = Loop(LocalSource(gitops.path, watch=False), k8s, interval=3600, identity="drift-test")
    first = loop.step(reason="start")
    assert first.outcome == APPLIED
    applied = [e for e in events(k8s) if e["reason"] == "Applied"]
    assert len(applied) == 1

    deployments = k8s.resource("apps/v1", "Deployment")
    k8s.delete(deployments, "plumbus-system", "plumbus-controller-manager")
    for _ in range(2):  # drift twice: one Event counted twice, not two objects
        assert loop.step(drift=True, reason="interval").outcome == APPLIED
        k8s.delete(deployments, "plumbus-system", "plumbus-controller-manager")
    assert loop.step(drift=True, reason="interval").outcome == APPLIED
    drift = [e for e in events(k8s) if e["reason"] == "DriftCorrected"]
    assert len(drift) == 1 and drift[0]["count"] == 3
    assert "Deployment.apps plumbus-system/plumbus-controller-manager" in drift[0]["message"]
    assert loop.step(drift=True, reason="interval").outcome == UNCHANGED

    m = loop.metrics
    assert m.operator_drift.labels("plumbus")._value.get() == 3
    assert m.operator_reconciles.labels("plumbus", "changed")._value.get() == 4
    assert m.operator_reconciles.labels("plumbus", "unchanged")._value.get() == 1
    assert m.operator_condition.labels("plumbus", "Ready", "True")._value.get() == 1
    assert m.operator_condition.labels("plumbus", "Ready", "False")._value.get() == 0
    from prometheus_client import generate_latest

    text = generate_latest(m.registry).decode()
    assert 'reconciler_operator_drift_corrected_total{operator="plumbus"} 3.0' in text
    assert "error=" not in text

    m.keep_only(set())  # an Operator no longer declared leaves no series behind
    assert 'operator="plumbus"' not in generate_latest(m.registry).decode()


def test_a_rejected_revision_has_no_error_text_in_metrics(tmp_path):
    from prometheus_client import generate_latest

    from reconciler.loop import REJECTED, LocalSource

    (tmp_path / "reconciler.yaml").write_text("allowEmpty: [not, a, bool\n")
    loop = Loop(LocalSource(tmp_path, watch=False), None, identity="t")
    assert loop.step().outcome == REJECTED
    text = generate_latest(loop.metrics.registry).decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("reconciler_rejected_info{"))
    assert 'reason="InputError"' in line and "error=" not in line and "reconciler.yaml" not in line


# Every kind the converters emit (registry+v1, k8s+v1, certificates), and registry+v1's optional objects.
def _converter_kinds() -> set[tuple[str, str]]:
    from reconciler.bundle.registry_v1 import OPTIONAL_KINDS

    generated = {("", "Namespace"), ("", "ServiceAccount"), ("", "Service"), ("", "Secret"),
                 ("apps", "Deployment"), ("apiextensions.k8s.io", "CustomResourceDefinition"),
                 ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"),
                 ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                 ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                 ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
                 ("apiregistration.k8s.io", "APIService"),
                 ("cert-manager.io", "Certificate"), ("cert-manager.io", "Issuer")}
    return generated | set(OPTIONAL_KINDS)


def test_the_shipped_rbac_covers_every_kind_the_converters_emit(control_plane, k8s):
    """The reconciler reads, prunes and grants every kind a bundle brings; it writes none of them itself.

    Bundle objects are written by each Operator's installer (impersonated), bound to its approved
    permissions: so the reconciler needs escalate and bind on RBAC and impersonate on its namespace's
    ServiceAccounts, not create on the kinds.
    """
    for doc in objects("base"):
        k8s.apply(k8s.require_resource(doc), doc, field_manager="deploy-test", dry_run=False)
    sar = k8s.resource("authorization.k8s.io/v1", "SubjectAccessReview")
    user = "system:serviceaccount:reconciler-system:reconciler"
    groups = ["system:serviceaccounts", "system:serviceaccounts:reconciler-system"]

    def allowed(**attrs) -> bool:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": user, "groups": groups, "resourceAttributes": attrs}}
        return bool(k8s.request("POST", sar.path(), body=review)["status"].get("allowed"))

    denied = []
    for group, kind in sorted(_converter_kinds()):
        served = None
        for gv in ([f"{group}/v1"] if group else ["v1"]):
            served = k8s.resource(gv, kind, refresh=False)
        plural = served.plural if served else kind.lower() + ("es" if kind.endswith("s") else "s")
        for verb in ("get", "list", "delete"):
            if not allowed(group=group, resource=plural, verb=verb, namespace="some-namespace"):
                denied.append(f"{verb} {plural}.{group or 'core'}")
    for resource in ("clusterroles", "roles"):
        for verb in ("create", "patch", "escalate", "bind"):
            if not allowed(group="rbac.authorization.k8s.io", resource=resource, verb=verb, namespace="ns"):
                denied.append(f"{verb} {resource}")
    if not allowed(group="", resource="serviceaccounts", verb="impersonate", namespace="reconciler-system",
                   name="install-plumbus"):
        denied.append("impersonate installers")
    if not allowed(group="authorization.k8s.io", resource="subjectaccessreviews", verb="create"):
        denied.append("create subjectaccessreviews")
    assert denied == []
    # The check can fail: what the reconciler leaves to the installers is denied to it.
    assert not allowed(group="apps", resource="deployments", verb="create", namespace="some-namespace")
    assert not allowed(group="", resource="serviceaccounts", verb="impersonate", namespace="kube-system",
                       name="default")
