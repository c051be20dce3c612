"""A fleet rollout on live clusters, each running its own loop: commit -> stage converged, and dev -> staging -> prod.

    python -m bench.fleet_rollout --clusters 10,30 [--releases 3] [--poll 30]

For each size, a fresh fleet of ``tests.rollout.harness.LiveFleet``: N simulated
clusters over the stages dev / staging / prod (a third each, the later stages
taking the remainder), each a kube-apiserver of its own on one shared etcd
with its own controller-manager (the rollout controllers), scheduler and kwok
nodes, and each running its own ``reconciler watch URL`` process as
deploy/remote runs it (leader election, ``/hook``, poll 30 s), all following
one repository on a git server on loopback. A commit is announced by a signed
push hook to every loop, as a forge does.

Then, per release (``--releases``): a new widget bundle in the catalog,
``resolve`` and ``approve --all``, a commit; dev converges; ``promote --to
staging --soak 0`` commits; staging converges; ``promote --to prod --soak 0``;
prod converges. A cluster has *converged* when its Operator status object
reports the new bundle Ready (its Deployment's two replicas available on kwok
nodes), read from the cluster. Reported:

* commit -> every cluster of a stage converged, p50 and p90 over every stage of
  every release (the commit is the release's, or the promotion's);
* commit -> one cluster converged, p50 and p90 over every cluster;
* the three-stage rollout: from the release's commit to the last prod cluster
  converged, ``promote`` runs included;
* the loop steps that applied, found nothing, or skipped a commit that changes
  nothing their cluster reads (docs/loop.md), from the loops' logs;
* resident memory per cluster (its four processes) and per loop, and of the
  shared etcd;
* where the CPU goes while a stage converges: CPU seconds of each kind of
  process (API servers, controller-managers, schedulers, kwok, loops, etcd,
  the benchmark's own watching and the commands it runs) over each stage's
  windows, as a share of one core.

The last line is ``fleet rollout: N clusters, stage p90 S s, three-stage rollout R s`` per size.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.localcluster.virtual import rss_of
from tests.rollout.harness import LiveFleet, members

STAGES = ("dev", "staging", "prod")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _mib(values: list[int]) -> str:
    return f"{statistics.median(values) / 2**20:.0f} MiB" if values else "-"


def run_size(count: int, releases: int, poll: float, work: Path, gogc: int = 100, log_level: str = "info") -> dict:
    plane = ControlPlane(work / "plane", ensure_binaries(lambda _: None)).start()
    fleet = LiveFleet(plane, work, members(count, STAGES), poll=poll, interval=300.0, parallel=4, gogc=gogc,
                      log_level=log_level)
    out: dict = {"clusters": count, "stage": [], "cluster": [], "rollout": [], "promote": [], "resolve": []}
    try:
        started = time.monotonic()
        fleet.start()
        every = [m.name for m in fleet.fleet]
        first = fleet.wait_converged(every, "widget.v1.0.0", since=fleet.loops_started_at, timeout=900)
        out["start"] = time.monotonic() - started
        out["first"] = max(first.values())
        for r in range(releases):
            version = f"1.{r + 1}.0"
            bundle = f"widget.v{version}"
            before = time.monotonic()
            fleet.release(version)
            out["resolve"].append(fleet.committed_at - before)
            release_at = fleet.committed_at
            cpu_at = fleet.cpu()
            for stage in STAGES:
                if stage != STAGES[0]:
                    before = time.monotonic()
                    done = fleet.promote(stage)
                    out["promote"].append(time.monotonic() - before)
                    if done.returncode != 0:
                        raise SystemExit(f"promote --to {stage} refused: {done.stdout[-2000:]}{done.stderr[-2000:]}")
                times = fleet.wait_converged(fleet.names(stage), bundle, since=fleet.committed_at, timeout=900)
                out["stage"].append(max(times.values()))
                out["cluster"] += list(times.values())
                cpu_now, now = fleet.cpu(), time.monotonic()
                window = out.setdefault("cpu", {}).setdefault(stage, {"seconds": 0.0})
                window["seconds"] += now - (release_at if stage == STAGES[0] else before)
                for kind, used in cpu_now.items():
                    window[kind] = window.get(kind, 0.0) + used - cpu_at.get(kind, 0.0)
                cpu_at = cpu_now
            out["rollout"].append(time.monotonic() - release_at)
        clusters, loops = fleet.memory()
        out["cluster_rss"], out["loop_rss"] = clusters, loops
        out["etcd_rss"] = rss_of(plane._procs.get("etcd"))
        out["steps"] = _step_durations(fleet)
        out["load"] = os.getloadavg()[0]
    finally:
        fleet.close()
        plane.stop()
    return out


def _step_durations(fleet: LiveFleet) -> dict[str, list[float]]:
    """Where a loop's time goes: the durations of its steps that applied a change, of those that found none, and
    of those that skipped a commit changing nothing its cluster reads (every commit wakes every loop: a
    promotion's commit is read only by the clusters whose inputs it changes)."""
    out: dict[str, list[float]] = {"applied": [], "unchanged": [], "skipped": []}
    for live in fleet.live.values():
        text = live.log.read_text(errors="replace") if live.log and live.log.exists() else ""
        for outcome, seconds in re.findall(r"step (applied|unchanged|skipped) in ([0-9.]+)s", text):
            out[outcome].append(float(seconds))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", default="10,30", help="fleet sizes, comma-separated (default 10,30)")
    parser.add_argument("--releases", type=int, default=3, help="releases rolled out per size (default 3)")
    parser.add_argument("--poll", type=float, default=30.0, help="each loop's --poll, the fallback to the hook")
    parser.add_argument("--gogc", type=int, default=100,
                        help="each simulated API server's GOGC: its heap grows this %% over the live heap before a "
                             "collection (default 100, Go's own; 25 trades CPU for smaller heaps)")
    parser.add_argument("--keep", type=Path, help="work here and keep it (logs of every process)")
    parser.add_argument("--loop-log-level", default="info", choices=("debug", "info"),
                        help="each loop's --log-level; debug logs every API request (costs CPU: not for figures)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.clusters.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; simulated API servers' GOGC {args.gogc}",
          flush=True)
    results = []
    for count in sizes:
        work = (args.keep / f"fleet-{count}") if args.keep else Path(tempfile.mkdtemp(prefix="bench-rollout-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            results.append(run_size(count, args.releases, args.poll, work, args.gogc, args.loop_log_level))
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        r = results[-1]
        print(f"{count} clusters: started in {r['start']:.0f} s; stage samples {[round(s, 1) for s in r['stage']]}",
              flush=True)
        report(results)   # after each size, so that a long run's first figures are never lost


def report(results: list[dict]) -> None:
    rows = [("clusters (own loop each)", *(str(r["clusters"]) for r in results)),
            ("fleet started and installed everywhere", *(f"{r['start']:.0f} s" for r in results)),
            ("loops started -> every cluster installed", *(f"{r['first']:.1f} s" for r in results)),
            ("commit -> stage converged, p50", *(f"{pct(r['stage'], 0.5):.1f} s" for r in results)),
            ("commit -> stage converged, p90", *(f"{pct(r['stage'], 0.9):.1f} s" for r in results)),
            ("commit -> one cluster converged, p50", *(f"{pct(r['cluster'], 0.5):.1f} s" for r in results)),
            ("commit -> one cluster converged, p90", *(f"{pct(r['cluster'], 0.9):.1f} s" for r in results)),
            ("three-stage rollout (soak 0), median", *(f"{statistics.median(r['rollout']):.1f} s" for r in results)),
            ("three-stage rollout, slowest", *(f"{max(r['rollout']):.1f} s" for r in results)),
            ("resolve + approve before a release commit, median",
             *(f"{statistics.median(r['resolve']):.1f} s" for r in results)),
            ("promote command, median", *(f"{statistics.median(r['promote']):.1f} s" for r in results)),
            ("loop step that applies, median", *(f"{statistics.median(r['steps']['applied'] or [0]):.1f} s"
                                                  for r in results)),
            ("loop step that finds nothing to do, median",
             *(f"{statistics.median(r['steps']['unchanged'] or [0]):.1f} s" for r in results)),
            ("loop steps that skipped a commit: count, median",
             *(f"{len(r['steps']['skipped'])}, {statistics.median(r['steps']['skipped'] or [0]):.2f} s"
               for r in results)),
            ("memory per cluster (4 processes), median", *(_mib(r["cluster_rss"]) for r in results)),
            ("memory per loop, median", *(_mib(r["loop_rss"]) for r in results)),
            ("shared etcd", *(f"{r['etcd_rss'] / 2**20:.0f} MiB" for r in results)),
            ("load average at the end", *(f"{r['load']:.1f}" for r in results))]
    width = max(len(row[0]) for row in rows)
    for row in rows:
        print(f"{row[0]:<{width}}  " + "  ".join(f"{c:>9}" for c in row[1:]))
    for r in results:
        for stage, window in r.get("cpu", {}).items():
            wall = window.pop("seconds")
            split = ", ".join(f"{kind} {used / wall:.0%}" for kind, used in
                              sorted(window.items(), key=lambda kv: -kv[1]) if used / wall >= 0.005)
            total = sum(window.values()) / wall
            window["seconds"] = wall
            print(f"{r['clusters']} clusters, {stage} stage windows ({wall:.0f} s): CPU {total:.0%} of a core: {split}")
    for r in results:
        print(f"fleet rollout: {r['clusters']} clusters, stage p90 {pct(r['stage'], 0.9):.1f} s, "
              f"three-stage rollout {max(r['rollout']):.1f} s ({len(r['stage'])} stage samples)", flush=True)


if __name__ == "__main__":
    main()
