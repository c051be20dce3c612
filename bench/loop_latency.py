"""Commit-to-applied latency of `reconciler watch`: local working tree vs remote polling vs push webhook.

  python -m bench.loop_latency [--rounds 10] [--poll 2]

For each round a commit is made (a comment added to the Operator
declaration) and the clock runs until the Operator's status object reports
that commit with Ready=True, read through a separate admin client every
10 ms. The loop runs in this process, against a control plane (real
kube-apiserver and etcd) started here; the remote is served by
`git http-backend` on loopback.

  local watch   watchdog sees the commit, 0.3 s debounce, then read/resolve/convert/apply
  remote poll   fetched every --poll seconds: expect about poll/2 more on average
  remote push   the loop is triggered at once, as POST /hook would

There is no peer measured in the same run: Flux and Argo CD need a full
cluster (controllers, pods) that this machine does not run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.loop_support import commit, copy_example, start_plane, status_revision
from reconciler.kube.client import Kube
from reconciler.loop import LocalSource, Loop, RemoteSource
from reconciler.repo.git import Ref, RemoteRepository
from tests.loop.gitserver import GitHttpServer


def _rounds(repo, path: Path, admin: Kube, loop: Loop, rounds: int, trigger: bool) -> list[float]:
    out = []
    decl = path / "operators" / "plumbus.yaml"
    for i in range(rounds):
        time.sleep(0.5)  # let the previous round's own writes settle
        decl.write_text(decl.read_text() + f"# round {i}\n")
        start = time.monotonic()
        sha = commit(repo, f"round {i}")
        if trigger:
            loop.trigger("webhook push")
        while status_revision(admin, "plumbus") != sha:
            if time.monotonic() - start > 120:
                raise SystemExit(f"round {i}: commit {sha} not applied within 120 s")
            time.sleep(0.01)
        out.append(time.monotonic() - start)
    return out


def _run(loop: Loop, body) -> list[float]:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        return body()
    finally:
        loop.stop()
        thread.join(60)


def _uninstall(kube: Kube, repository: str | None = None) -> None:
    """Remove every Operator by reconciling an empty repository (as ``repository``: the one that installed them)."""
    from reconciler import pipeline

    with tempfile.TemporaryDirectory() as d:
        Path(d, "reconciler.yaml").write_text("allowEmpty: true\n" + (f"repository: {repository}\n" if repository
                                                                      else ""))
        pipeline.reconcile(d, kube, dry_run=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--poll", type=float, default=2.0)
    args = ap.parse_args()
    plane = start_plane()
    rows = []
    try:
        admin = Kube(plane.admin_client())
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            repo = copy_example(tmp / "local")
            loop = Loop(LocalSource(tmp / "local"), Kube(plane.admin_client()), interval=3600)
            rows.append(("local watch (debounce 0.3 s)",
                         _run(loop, lambda: _rounds(repo, tmp / "local", admin, loop, args.rounds, False))))
            _uninstall(admin)

            repo = copy_example(tmp / "served" / "remote")
            server = GitHttpServer(tmp / "served").start()
            try:
                for label, poll, trigger in ((f"remote poll every {args.poll:g} s", args.poll, False),
                                             ("remote on push (webhook trigger)", 3600.0, True)):
                    remote = RemoteRepository(f"{server.url}/remote/.git", Ref(branch="main"), tmp / f"cache-{poll}")
                    loop = Loop(RemoteSource(remote, poll_interval=poll), Kube(plane.admin_client()), interval=3600)
                    rows.append((label, _run(loop, lambda: _rounds(repo, tmp / "served" / "remote", admin, loop,
                                                                   args.rounds, trigger))))
                    _uninstall(admin)
            finally:
                server.stop()
    finally:
        plane.stop()
    print(f"\ncommit-to-applied latency, {args.rounds} commits each (seconds)\n")
    print(f"| {'scenario':<36} | {'median':>7} | {'p90':>7} | {'min':>7} | {'max':>7} |")
    print(f"|{'-' * 38}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for label, xs in rows:
        xs = sorted(xs)
        p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
        print(f"| {label:<36} | {statistics.median(xs):7.2f} | {p90:7.2f} | {xs[0]:7.2f} | {xs[-1]:7.2f} |")


if __name__ == "__main__":
    main()
