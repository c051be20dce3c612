"""No exception stops the loop: a revision whose preparation fails in an unexpected way is rejected like a
bad one, the last good state stays applied and drift is still corrected."""

from __future__ import annotations

from reconciler.loop import REJECTED, LocalSource, Loop
from tests.e2e.support import get, managed
from tests.e2e.test_reconcile import V100
from tests.support.wait import wait_until

from .test_watch_local import applied_at, clean, events, running  # noqa: F401 - fixtures

__all__ = ["clean"]


def test_an_unexpected_exception_while_preparing_rejects_the_revision(gitops, k8s, clean, monkeypatch):
    gitops.set_version("1.0.0")
    good = gitops.commit("pin 1.0.0")
    from reconciler.pipeline import prepared

    real_resolve = prepared.resolve

    def resolve(snapshot, *args, **kwargs):
        # A fault injected at one stage stands for any bug a hostile revision could trigger there.
        if "# poison" in (snapshot.root / "reconciler.yaml").read_text():
            raise ZeroDivisionError("division by zero in a stage")
        return real_resolve(snapshot, *args, **kwargs)

    monkeypatch.setattr(prepared, "resolve", resolve)
    loop = Loop(LocalSource(gitops.path, debounce=0.1), k8s, interval=2.0, identity="test")
    with running(loop):
        wait_until(lambda: applied_at(k8s, good), "the first commit applied")
        assert managed(k8s, "plumbus") == V100

        gitops.write("reconciler.yaml", (gitops.path / "reconciler.yaml").read_text() + "# poison\n")
        bad = gitops.commit("a revision the reconciler fails on")
        wait_until(lambda: loop.last.outcome == REJECTED and loop.last.revision == bad, "the bad revision rejected")
        assert "internal error: ZeroDivisionError: division by zero in a stage" in loop.last.error
        assert loop.applied_revision == good
        rejected = loop.metrics.registry.get_sample_value("reconciler_reconciles_total", {"outcome": "rejected"})
        assert rejected and rejected >= 1
        warnings = [e for e in events(k8s) if e["reason"] == "RevisionRejected" and bad in e["message"]]
        assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
        assert "ZeroDivisionError" in warnings[0]["message"]

        # Drift is corrected from the last good state while the source stays rejected.
        info = k8s.resource("apps/v1", "Deployment")
        uid = get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system")["metadata"]["uid"]
        k8s.delete(info, "plumbus-system", "plumbus-controller")

        def recreated():
            obj = get(k8s, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system")
            return obj is not None and obj["metadata"]["uid"] != uid and loop.last.outcome == REJECTED

        wait_until(recreated, "the deleted Deployment restored from the last good commit")
        assert loop.running and managed(k8s, "plumbus") == V100
