"""The loop over a local working tree, end to end: a sequence of commits, one of them bad."""

from __future__ import annotations

import errno
import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from watchdog.observers import Observer

from reconciler.loop import REJECTED, UNCHANGED, LocalSource, Loop
from reconciler.repo import watch
from reconciler.repo.watch import TreeWatcher, relevant
from tests.e2e.support import get, managed
from tests.e2e.test_reconcile import V100, V110
from tests.support.wait import wait_until

from .conftest import uninstall


@contextmanager
def running(loop: Loop):
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.stop()
        thread.join(60)
        assert not thread.is_alive()


def status(kube, name="plumbus"):
    obj = get(kube, "reconciler.dev/v1alpha1", "Operator", name)
    return (obj or {}).get("status") or {}


def applied_at(kube, revision: str) -> bool:
    st = status(kube)
    return st.get("revision") == revision and any(c["type"] == "Ready" and c["status"] == "True"
                                                   for c in st.get("conditions", []))


def events(kube, name="plumbus"):
    """Events about the current status object ``name`` (earlier tests' objects of that name had other uids)."""
    obj = get(kube, "reconciler.dev/v1alpha1", "Operator", name)
    uid = obj["metadata"]["uid"] if obj else None
    return [e for e in kube.request("GET", "/api/v1/namespaces/default/events")["items"]
            if e["involvedObject"]["name"] == name and e["involvedObject"].get("uid") == uid]


def versions(kube) -> dict[str, str]:
    out = {}
    for api_version, kind, ns in [("apps/v1", "Deployment", "plumbus-system"), ("v1", "ServiceAccount", "plumbus-system"),
                                  ("rbac.authorization.k8s.io/v1", "ClusterRole", ""),
                                  ("reconciler.dev/v1alpha1", "Operator", "")]:
        info = kube.resource(api_version, kind)
        for item in kube.list(info):
            if item["metadata"].get("namespace", "") in (ns, ""):
                out[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
    return out


@pytest.fixture
def clean(k8s):
    uninstall(k8s)
    yield
    uninstall(k8s)
    assert managed(k8s, "plumbus") == set()


def test_watch_keeps_the_tree_applied_through_good_and_bad_commits(gitops, k8s, clean):
    gitops.set_version("1.0.0")
    pinned = gitops.commit("pin 1.0.0")
    loop = Loop(LocalSource(gitops.path, debounce=0.1), k8s, interval=2.0, identity="test")
    with running(loop):
        wait_until(lambda: applied_at(k8s, pinned), "the first commit applied")
        assert managed(k8s, "plumbus") == V100
        assert "plumbus.v1.0.0" in (gitops.path / "olm.lock").read_text()

        gitops.set_version(">=1.0.0 <2.0.0")
        upgraded = gitops.commit("follow 1.x")
        wait_until(lambda: applied_at(k8s, upgraded) and managed(k8s, "plumbus") == V110,
                   "the upgrade applied at its commit")
        assert "plumbus.v1.1.0" in (gitops.path / "olm.lock").read_text()
        assert any(e["reason"] == "Applied" and upgraded in e["message"] for e in events(k8s))

        # Nothing changed: drift corrections make no writes at all.
        before = versions(k8s)
        steps = loop.steps
        wait_until(lambda: loop.steps >= steps + 2 and loop.last.outcome == UNCHANGED, "two no-op corrections")
        assert versions(k8s) == before

        gitops.write("operators/broken.yaml", "apiVersion: example.invalid/v1\nkind: Nonsense\nmetadata: {name: x}\n")
        bad = gitops.commit("a declaration the reconciler does not know")
        wait_until(lambda: loop.last.outcome == REJECTED and loop.last.revision == bad, "the bad commit rejected")
        assert "operators/broken.yaml" in loop.last.error and "unknown declaration" in loop.last.error
        assert loop.applied_revision == upgraded
        assert status(k8s)["revision"] == upgraded and managed(k8s, "plumbus") == V110
        assert "plumbus.v1.1.0" in (gitops.path / "olm.lock").read_text()
        rejected = [e for e in events(k8s) if e["reason"] == "RevisionRejected" and bad in e["message"]]
        assert len(rejected) == 1 and rejected[0]["type"] == "Warning", events(k8s)
        assert "unknown declaration" in rejected[0]["message"] and upgraded in rejected[0]["message"]

        # Drift is still corrected from the last good state while the tree is broken.
        info = k8s.resource("apps/v1", "Deployment")
        k8s.delete(info, "plumbus-system", "plumbus-controller-manager")
        wait_until(lambda: get(k8s, "apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")
                   and loop.last.outcome == REJECTED, "the deleted Deployment restored from the last good commit")
        assert len([e for e in events(k8s) if e["reason"] == "RevisionRejected" and bad in e["message"]]) == 1

        gitops.remove("operators/broken.yaml")
        fixed = gitops.commit("fix")
        # The cluster shows the revision while the step still runs; the loop records it when the step ends.
        wait_until(lambda: applied_at(k8s, fixed) and managed(k8s, "plumbus") == V110
                   and loop.applied_revision == fixed, "the fixed commit applied")


def test_own_lockfile_writes_do_not_trigger(tmp_path: Path):
    seen: list[list[str]] = []
    watcher = TreeWatcher(tmp_path, seen.append, debounce=0.1)
    watcher.start()
    try:
        (tmp_path / "olm.lock").write_text("lock\n")
        (tmp_path / "olm.lock.tmp").write_text("lock\n")
        (tmp_path / "operators.yaml").write_text("x\n")
        wait_until(lambda: seen, "a change reported")
    finally:
        watcher.stop()
    assert [p for batch in seen for p in batch] == ["operators.yaml"]


def test_relevant_paths():
    assert relevant("operators/a.yaml") and relevant(".git/HEAD") and relevant(".git/refs/heads/main")
    assert not relevant("olm.lock") and not relevant(".git/index") and not relevant(".git/objects/ab/cd")
    assert not relevant(".git/refs/heads/main.lock")
    assert relevant(".worktrees/abc/operators/a.yaml") and not relevant(".worktrees/abc/olm.lock")
    assert not relevant("checkout/.git/objects/ab/cd") and relevant("checkout/.git/refs/heads/main")


def test_a_swapped_symlink_root_is_seen_and_followed(tmp_path: Path):
    """git-sync publishes each checkout by atomically re-pointing a link; the source follows it."""
    from reconciler.repo import read_repository
    from tests.support.repo import GitOpsRepo

    first, second = GitOpsRepo(tmp_path / "wt-1"), GitOpsRepo(tmp_path / "wt-2")
    second.set_version("1.0.0")
    second_commit = second.commit("pin")
    link = tmp_path / "repo"
    link.symlink_to(first.path)
    source = LocalSource(link, debounce=0.1, write_lockfile=False)
    reasons: list[str] = []
    source.start(reasons.append)
    try:
        (tmp_path / "repo.tmp").symlink_to(second.path)
        (tmp_path / "repo.tmp").replace(link)
        wait_until(lambda: reasons, "the link swap noticed")
    finally:
        source.stop()
    assert source.current().revision == second_commit
    with source.tree(source.current()) as tree:
        assert tree == second.path.resolve()
        assert str(read_repository(tree).operators[0].version) == "1.0.0"


@pytest.mark.parametrize("report", [False, True])
def test_watch_logs_on_stderr_and_prints_the_report_only_when_asked(gitops, k8s, clean, control_plane, tmp_path,
                                                                      report):
    import os
    import signal
    import subprocess
    import sys

    head = str(gitops.git.head.target)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "watch", str(gitops.path), "--interval", "3600",
             "--kubeconfig", str(control_plane.kubeconfig_path), *(["--report"] if report else [])],
            stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            wait_until(lambda: applied_at(k8s, head), "the example applied")
            wait_until(lambda: "Deployment.apps plumbus-system/plumbus-controller-manager created" in err.read_text(),
                       "the change logged")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 0
    if report:
        assert "Changes (applied to " in out.read_text() and "Summary: " in out.read_text()
    else:
        assert out.read_text() == "", out.read_text()
    logged = err.read_text()
    assert "Changes (" not in logged and "Summary: " not in logged   # the report never mixes into the log


class _RefusedInotify(Observer):
    """The inotify observer as a crowded node's kernel answers it: no instance (or watch) left."""

    def __init__(self, *args, refusal: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.refusal = refusal

    def start(self) -> None:
        raise OSError(self.refusal, {errno.EMFILE: "inotify instance limit reached",
                                     errno.ENOSPC: "inotify watch limit reached"}[self.refusal])


@pytest.mark.parametrize("refusal", [errno.EMFILE, errno.ENOSPC], ids=["instances", "watches"])
def test_a_tree_is_polled_when_inotify_is_refused_and_says_so_once(tmp_path: Path, monkeypatch, caplog, refusal):
    monkeypatch.setattr(watch, "Observer", lambda: _RefusedInotify(refusal=refusal))
    monkeypatch.setattr(watch, "POLL_SECONDS", 0.2)
    seen: list[list[str]] = []
    caplog.set_level(logging.WARNING, "reconciler.loop")
    watcher = TreeWatcher(tmp_path, seen.append, debounce=0.1)
    watcher.start()
    try:
        (tmp_path / "operators.yaml").write_text("x\n")
        wait_until(lambda: seen, "a change reported by polling")
        (tmp_path / "operators.yaml").write_text("y\n")
        wait_until(lambda: len(seen) > 1, "a second change reported")
    finally:
        watcher.stop()
    assert watcher.polling and seen[0] == ["operators.yaml"]
    said = [r.getMessage() for r in caplog.records if "by polling" in r.getMessage()]
    limit = "max_user_instances" if refusal == errno.EMFILE else "max_user_watches"
    assert len(said) == 1 and said[0].startswith(f"watching {tmp_path.resolve()} by polling every 0.2s: inotify ")
    assert f"raise fs.inotify.{limit}" in said[0]


def test_the_loop_keeps_reconciling_a_polled_tree(gitops, k8s, clean, monkeypatch, caplog):
    """`watch` on a working tree where inotify is refused at start: the loop polls and applies each commit
    (the drift interval is far away, so only the polling sees them)."""
    monkeypatch.setattr(watch, "Observer", lambda: _RefusedInotify(refusal=errno.EMFILE))
    monkeypatch.setattr(watch, "POLL_SECONDS", 0.5)
    caplog.set_level(logging.WARNING, "reconciler.loop")
    gitops.set_version("1.0.0")
    pinned = gitops.commit("pin 1.0.0")
    loop = Loop(LocalSource(gitops.path, debounce=0.1), k8s, interval=600.0, identity="test")
    with running(loop):
        wait_until(lambda: applied_at(k8s, pinned), "the first commit applied")
        gitops.set_version(">=1.0.0 <2.0.0")
        upgraded = gitops.commit("follow 1.x")
        wait_until(lambda: applied_at(k8s, upgraded) and managed(k8s, "plumbus") == V110,
                   "the upgrade applied at its commit, seen by polling")
    assert sum("by polling" in r.getMessage() for r in caplog.records) == 1
