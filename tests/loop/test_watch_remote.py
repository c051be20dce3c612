"""The loop and `reconciler watch` over a remote repository served by a real git server on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from reconciler.loop import APPLIED, REJECTED, Loop, RemoteSource
from reconciler.repo.git import Auth, Ref, RemoteRepository
from reconciler.loop.server import signature
from tests.e2e.support import managed
from tests.e2e.test_reconcile import V100, V110
from tests.support.wait import wait_until

from .conftest import TOKEN, USER
from .test_watch_local import applied_at, clean, running, status  # noqa: F401  (clean is a fixture)


def test_remote_commits_are_applied_and_a_bad_one_is_not(gitops, git_server, k8s, clean, tmp_path):
    gitops.set_version("1.0.0")
    pinned = gitops.commit("pin 1.0.0")
    remote = RemoteRepository(f"{git_server.url}/gitops/.git", Ref(branch="main"), tmp_path / "cache",
                              Auth(username=USER, password=TOKEN))
    loop = Loop(RemoteSource(remote, poll_interval=0.2), k8s, interval=3600, identity="remote-test")
    with running(loop):
        wait_until(lambda: applied_at(k8s, pinned), "the pinned commit applied")
        assert managed(k8s, "plumbus") == V100
        assert not (gitops.path / "olm.lock").exists()  # a remote is never written to

        gitops.write("catalogs/community/broken.json", "{not json")
        bad = gitops.commit("a broken catalog")
        wait_until(lambda: loop.last.outcome == REJECTED and loop.last.revision == bad, "the bad commit rejected")
        assert "catalogs/community/broken.json" in loop.last.error
        assert status(k8s)["revision"] == pinned and managed(k8s, "plumbus") == V100

        gitops.remove("catalogs/community/broken.json")
        gitops.set_version(">=1.0.0 <2.0.0")
        upgraded = gitops.commit("follow 1.x")
        wait_until(lambda: applied_at(k8s, upgraded), "the next good commit applied")
        assert managed(k8s, "plumbus") == V110
        assert loop.applied_revision == upgraded
    assert loop.metrics.reconciles.labels(REJECTED)._value.get() >= 1
    assert loop.metrics.reconciles.labels(APPLIED)._value.get() >= 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_watch_command_serves_metrics_takes_signed_hooks_and_stops_on_sigterm(gitops, git_server, control_plane,
                                                                              k8s, clean, tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "hook").write_text("hook-secret\n")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "watch.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "watch", f"{git_server.url}/gitops/.git", "--branch", "main",
         "--git-username", USER, "--git-token-file", str(tmp_path / "token"),
         "--kubeconfig", str(control_plane.kubeconfig_path), "--listen", f"127.0.0.1:{port}",
         "--hook-secret-file", str(tmp_path / "hook"), "--poll", "3600", "--interval", "3600",
         "--cache-dir", str(tmp_path / "cache")],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        first = str(gitops.git.head.target)
        wait_until(lambda: _http(base + "/readyz")[0] == 200, "/readyz")
        wait_until(lambda: applied_at(k8s, first), "the branch head applied")
        assert _http(base + "/healthz") == (200, "ok\n")
        ready = json.loads(_http(base + "/readyz")[1])
        # The step that applied it, or a later look while the Operator rolls out, which finds nothing to change.
        assert ready["applied"] == first and ready["last"]["outcome"] in ("applied", "unchanged")

        def push() -> int:
            return _http(base + "/hook", payload, {"X-Hub-Signature-256": signature(b"hook-secret", payload),
                                                   "X-GitHub-Event": "push"})[0]

        def last() -> dict:
            return json.loads(_http(base + "/readyz")[1])

        payload = b'{"ref": "refs/heads/main"}'
        gitops.write("operators/broken.yaml", "apiVersion: example.invalid/v1\nkind: Nonsense\n")
        bad = gitops.commit("a bad commit")
        assert _http(base + "/hook", payload, {"X-Hub-Signature-256": "sha256=" + "0" * 64})[0] == 401
        assert _http(base + "/hook", payload, {"X-Gitlab-Token": "wrong"})[0] == 401
        assert _http(base + "/hook", payload)[0] == 401
        assert push() == 202
        wait_until(lambda: last()["last"]["revision"] == bad, "the bad commit read")
        ready = last()
        assert ready["last"]["outcome"] == "rejected" and "operators/broken.yaml" in ready["last"]["error"]
        assert ready["applied"] == first and applied_at(k8s, first) and managed(k8s, "plumbus") == V110

        gitops.remove("operators/broken.yaml")
        gitops.write("reconciler.yaml", "defaultInstallNamespace: operators\n")
        second = gitops.commit("fixed")
        assert _http(base + "/hook", payload, {"X-Gitlab-Token": "hook-secret", "X-Gitlab-Event": "Push Hook"})[0] == 202
        wait_until(lambda: applied_at(k8s, second), "the fixed commit applied")
        wait_until(lambda: last()["applied"] == second, "/readyz reporting the fixed commit")
        assert managed(k8s, "plumbus") == V110

        code, metrics = _http(base + "/metrics")
        assert code == 200
        assert 'reconciler_reconciles_total{outcome="rejected"} 1.0' in metrics
        assert f'reconciler_applied_info{{revision="{second}"}} 1.0' in metrics
        rejected = next(ln for ln in metrics.splitlines() if ln.startswith("reconciler_rejected_info{"))
        assert f'revision="{bad}"' in rejected and 'reason="' in rejected and "error=" not in rejected
        assert "reconciler_reconcile_duration_seconds_count" in metrics
        assert "reconciler_resolution_duration_seconds_count" in metrics
        created = re.search(r'^reconciler_objects_total\{action="created"\} (\S+)$', metrics, re.M)
        assert created and float(created.group(1)) >= 7  # the example's seven objects (and its namespace)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.seek(0)
    text = log.read()
    assert "SIGTERM received" in text and first in text
    assert "webhook refused" not in text.lower() or "refused" in text
    assert TOKEN not in text
