"""The loop verifying signed commits of a remote served by a real git server on loopback, against the cluster."""

from __future__ import annotations

import subprocess

from reconciler.loop import APPLIED, REJECTED, Loop, RemoteSource
from reconciler.repo.git import Auth, Ref, RemoteRepository
from reconciler.repo.verify import Trust, TrustedKeys
from tests.e2e.support import managed
from tests.e2e.test_reconcile import V100, V110
from tests.signing import SshSigner, tools_or_skip, trusted_keys
from tests.support.wait import wait_until

from .conftest import TOKEN, USER
from .test_watch_local import applied_at, clean, events, running, status  # noqa: F401  (clean is a fixture)


def test_signed_commits_are_applied_an_unsigned_one_and_a_rollback_are_not(gitops, git_server, k8s, clean,
                                                                           tmp_path):
    tools_or_skip()
    alice = SshSigner(tmp_path / "keys", "alice@example.invalid")
    trust = Trust(TrustedKeys.load(trusted_keys(tmp_path / "trusted", alice)))
    gitops.set_version("1.0.0")
    first = gitops.commit("pin 1.0.0", signer=alice)
    remote = RemoteRepository(f"{git_server.url}/gitops/.git", Ref(branch="main"), tmp_path / "cache",
                              Auth(username=USER, password=TOKEN))
    loop = Loop(RemoteSource(remote, poll_interval=0.2, trust=trust), k8s, interval=3600, identity="signed-test")
    with running(loop):
        wait_until(lambda: applied_at(k8s, first), "the signed commit applied")
        assert managed(k8s, "plumbus") == V100

        gitops.set_version(">=1.0.0 <2.0.0")
        unsigned = gitops.commit("follow 1.x, unsigned")
        wait_until(lambda: loop.last.outcome == REJECTED and loop.last.revision == unsigned, "the unsigned rejected")
        assert f"commit {unsigned}" in loop.last.error and "is not signed" in loop.last.error
        assert status(k8s)["revision"] == first and managed(k8s, "plumbus") == V100   # the cluster is unchanged
        said = wait_until(lambda: [e for e in events(k8s) if e["reason"] == "RevisionRejected"
                                   and unsigned in e["message"]], "the refusal recorded as an Event")
        assert said[0]["type"] == "Warning" and "is not signed" in said[0]["message"] and first in said[0]["message"]
        assert loop.metrics.rejected_commit._value == {"revision": unsigned, "reason": "UntrustedRevision"}
        shown = status(k8s)["rejected"]   # where `kubectl get` and `reconciler status` look
        assert (shown["revision"], shown["reason"], shown["applied"]) == (unsigned, "UntrustedRevision", first)
        assert "is not signed" in shown["message"]

        signed = gitops.commit("follow 1.x, signed", signer=alice)
        wait_until(lambda: applied_at(k8s, signed), "the next signed commit applied")
        assert managed(k8s, "plumbus") == V110
        wait_until(lambda: "rejected" not in status(k8s), "the refusal removed once a newer revision applied")

        # A force-push back to the first signed commit: signed, but a replay of the past.
        subprocess.run(["git", "update-ref", "refs/heads/main", first], cwd=gitops.path, check=True)
        wait_until(lambda: loop.last.outcome == REJECTED and loop.last.revision == first, "the rollback rejected")
        assert f"is older than commit {signed}" in loop.last.error
        assert status(k8s)["revision"] == signed and managed(k8s, "plumbus") == V110
        wait_until(lambda: status(k8s).get("rejected", {}).get("revision") == first, "the rollback shown as refused")
    assert loop.metrics.reconciles.labels(REJECTED)._value.get() >= 2
    assert loop.metrics.reconciles.labels(APPLIED)._value.get() >= 2


def test_reconcile_refuses_an_unsigned_commit_and_applies_nothing(gitops, control_plane, k8s, clean, tmp_path, capsys):
    from tests.e2e.support import reconcile

    tools_or_skip()
    alice = SshSigner(tmp_path / "keys", "alice@example.invalid")
    keys = str(trusted_keys(tmp_path / "trusted", alice))
    gitops.set_version("1.0.0")
    unsigned = gitops.commit("pin 1.0.0, unsigned")
    run = reconcile(gitops, control_plane.kubeconfig_path, "--trusted-keys", keys, capsys=capsys)
    assert run.code == 2 and f"commit {unsigned}" in run.err and "is not signed" in run.err
    assert not managed(k8s, "plumbus") and status(k8s) == {}
    signed = gitops.commit("pin 1.0.0, signed", signer=alice)
    run = reconcile(gitops, control_plane.kubeconfig_path, "--trusted-keys", keys, "--no-wait", capsys=capsys)
    assert run.code == 0, run.err
    assert status(k8s)["revision"] == signed and managed(k8s, "plumbus") == V100


def test_watch_takes_the_trusted_keys_from_the_environment_as_deploy_gives_them(gitops, git_server, control_plane,
                                                                              k8s, clean, tmp_path):
    """`reconciler watch` with $RECONCILER_TRUSTED_KEYS (deploy/remote's mounted Secret): an unsigned head is
    refused, /readyz and /metrics say so, and the signed commit after it is applied."""
    import json
    import os
    import signal
    import sys

    from .test_watch_remote import _free_port, _http

    tools_or_skip()
    alice = SshSigner(tmp_path / "keys", "alice@example.invalid")
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "watch.log").open("w+")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RECONCILER_TRUSTED_KEYS": str(trusted_keys(tmp_path / "t", alice))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "watch", f"{git_server.url}/gitops/.git", "--branch", "main",
         "--git-username", USER, "--git-token-file", str(tmp_path / "token"),
         "--kubeconfig", str(control_plane.kubeconfig_path), "--listen", f"127.0.0.1:{port}",
         "--poll", "0.3", "--interval", "3600", "--cache-dir", str(tmp_path / "cache")],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        unsigned = str(gitops.git.head.target)   # the example, committed unsigned

        def last() -> dict:
            code, body = _http(base + "/readyz")
            return json.loads(body) if body.startswith("{") else {}

        wait_until(lambda: (last().get("last") or {}).get("outcome") == "rejected", "the unsigned head rejected")
        said = last()["last"]
        assert said["revision"] == unsigned and "is not signed" in said["error"] and "trusted" in said["error"]
        assert status(k8s) == {}
        metrics = _http(base + "/metrics")[1]
        assert f'reconciler_rejected_info{{reason="UntrustedRevision",revision="{unsigned}"}} 1.0' in metrics
        signed = gitops.commit("signed", signer=alice)
        wait_until(lambda: applied_at(k8s, signed), "the signed commit applied")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        log.seek(0)
        text = log.read()
    assert f"not applying {unsigned}" in text
