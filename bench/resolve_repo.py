"""Resolution as a user runs it: whole processes on repositories, with the catalog cache warm.

  python -m bench.resolve_repo [--repeat 5] [--work DIR] [--baseline CHECKOUT]

Rows (each the median of --repeat runs after one that fills the catalog cache;
peak RSS from the child's rusage):

  (a) ``reconciler resolve --offline --no-write`` of 50 Operators against the
      30,000-bundle synthetic catalog of ``bench.resolve_bench`` (3,000
      packages, replaces chains, dependency chains several packages deep),
      written as a file-based catalog (one JSON file per package); and the
      same resolution in a process that has imported everything first, its
      phases timed: reading the repository, loading the catalog (warm) and
      resolving (``pipeline.resolve`` is the last two);
  (b) ``reconciler reconcile --dry-run`` (no cluster) of examples/gitops-repo,
      alone and with an unused 30,000-bundle catalog beside its own
      (``bench.gen_catalog``: 2,000 packages), and the difference: what a
      catalog nobody declares from costs.

``--baseline CHECKOUT`` runs every row with that checkout's reconciler too
(its own installation and catalog cache), alternating with this one, and
prints the ratio this / baseline: on a shared, noisy machine the ratio of
interleaved runs is the figure to trust. The load average is printed with
the table. The reconciler runs as installed (``bench.startup_bench.installed``).
There is no peer: OLM v0 resolves inside its controller, and
operator-controller resolves no dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.gen_catalog import generate
from bench.resolve_bench import operators, synthetic_catalog
from bench.startup_bench import command, installed
from reconciler import yamlio
from reconciler.model.catalog import Catalog

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gitops-repo"

PHASES = """
import json, sys, time
from reconciler import pipeline
from reconciler.repo import read_repository
import pysat.solvers, semver, reconciler.resolve, reconciler.catalog.cache   # imports are not the measure
t0 = time.perf_counter()
snapshot = read_repository(sys.argv[1])
t1 = time.perf_counter()
catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
t2 = time.perf_counter()
from reconciler.resolve import ResolutionRequest, SatResolver
request = ResolutionRequest(snapshot.operators, catalogs)
resolution = SatResolver().resolve(request)
t3 = time.perf_counter()
print(json.dumps({"read": t1 - t0, "load": t2 - t1, "resolve": t3 - t2, "chosen": len(resolution.selections)}))
"""


def write_catalog(cat: Catalog, out: Path) -> None:
    """``cat`` as a file-based catalog: one directory and JSON stream per package."""
    blobs: dict[str, list[dict]] = {}
    for name, pkg in cat.packages.items():
        blobs[name] = [{"schema": "olm.package", "name": name, "defaultChannel": pkg.default_channel}]
    for (pkg, name), ch in sorted(cat.channels.items()):
        blobs[pkg].append({"schema": "olm.channel", "package": pkg, "name": name, "entries": [
            {"name": e.name, **({"replaces": e.replaces} if e.replaces else {})} for e in ch.entries]})
    for (pkg, name), b in sorted(cat.bundles.items()):
        blobs[pkg].append({"schema": "olm.bundle", "package": pkg, "name": name, "image": b.image,
                           "properties": [{"type": p.type, "value": p.value} for p in b.properties]})
    for pkg, docs in blobs.items():
        (out / pkg).mkdir(parents=True)
        (out / pkg / "catalog.json").write_text("".join(json.dumps(d) + "\n" for d in docs))


def make_repos(root: Path) -> None:
    cat = synthetic_catalog(30_000)
    repo = root / "synthetic-30k"
    write_catalog(cat, repo / "catalogs" / "synthetic")
    (repo / "operators").mkdir(parents=True)
    (repo / "operators" / "all.yaml").write_text(yamlio.dump_all([
        {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": d.name},
         "spec": {"catalog": {"name": "synthetic", "package": d.catalog.package, "channel": "stable"}}}
        for d in operators(50, cat)]))
    shutil.copytree(EXAMPLE, root / "example")
    shutil.copytree(EXAMPLE, root / "example-with-unused-30k")
    generate(root / "example-with-unused-30k" / "catalogs" / "unused", 2000, 30_000)


class Side:
    """One installed reconciler (this checkout, or the baseline) with its own catalog cache."""

    def __init__(self, label: str, checkout: Path, work: Path, home: Path) -> None:
        self.label = label
        self.python, env = installed(work / f"install-{label}", checkout)
        self.env = {**env, "RECONCILER_CACHE_DIR": str(work / f"cache-{label}"), "KUBECONFIG": "", "HOME": str(home)}
        self.env.pop("KUBERNETES_SERVICE_HOST", None)
        self.exe = command(self.python)

    def run(self, args: list[str]) -> tuple[float, float]:
        """(seconds, peak RSS in MiB) of one child process."""
        start = time.perf_counter()
        proc = subprocess.Popen([self.exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):   # 1: a dry run that would change something
            raise RuntimeError(f"{self.label}: reconciler {' '.join(args)} exited {code}: {err[-800:]}")
        return seconds, usage.ru_maxrss / 1024

    def phases(self, repo: Path) -> dict[str, float]:
        # run from the home directory: with -c, the current directory comes first on the path, and a checkout
        # there would be imported instead of the installed package
        out = subprocess.run([self.python, "-c", PHASES, str(repo)], capture_output=True, text=True, env=self.env,
                             check=True, cwd=self.env["HOME"])
        return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, help="keep the repositories and caches here (default: a temporary dir)")
    parser.add_argument("--baseline", type=Path, help="another checkout to run alternately, for ratios")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="resolve-repo-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "home").mkdir(exist_ok=True)
    repos = work / "repos"
    if not (repos / "synthetic-30k").is_dir():
        shutil.rmtree(repos, ignore_errors=True)
        make_repos(repos)
    for old in work.glob("install-*"):
        shutil.rmtree(old)
    sides = [Side("this", ROOT, work, work / "home")]
    if args.baseline:
        sides.append(Side("baseline", args.baseline.resolve(), work, work / "home"))
    rows = {
        "(a) resolve 50 Operators, 30,000-bundle catalog": ["resolve", str(repos / "synthetic-30k"), "--offline",
                                                            "--no-write", "-o", "json"],
        "(b) dry-run examples/gitops-repo": ["reconcile", "--dry-run", str(repos / "example")],
        "(b) ... with an unused 30,000-bundle catalog": ["reconcile", "--dry-run",
                                                         str(repos / "example-with-unused-30k")],
    }
    for side in sides:
        for cmd in rows.values():   # fill the catalog cache
            side.run(cmd)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {(s.label, r): [] for s in sides for r in rows}
    inside: dict[str, list[dict[str, float]]] = {s.label: [] for s in sides}
    for _ in range(args.repeat):
        for name, cmd in rows.items():
            for side in sides:
                samples[(side.label, name)].append(side.run(cmd))
        for side in sides:
            inside[side.label].append(side.phases(repos / "synthetic-30k"))
    load = os.getloadavg()
    report(sides, rows, samples, inside)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.repeat} runs of each, alternating")


def report(sides: list[Side], rows: dict, samples: dict, inside: dict) -> None:
    def med(values) -> float:
        return statistics.median(values)

    table: list[tuple[str, dict[str, tuple[float, float | None]]]] = []
    for name in rows:
        table.append((name, {s.label: (med(t for t, _ in samples[(s.label, name)]),
                                       med(r for _, r in samples[(s.label, name)])) for s in sides}))
    unused = {s.label: (table[2][1][s.label][0] - table[1][1][s.label][0],
                        table[2][1][s.label][1] - table[1][1][s.label][1]) for s in sides}
    table.append(("(b) what the unused catalog costs (difference)", unused))
    for phase, label in (("read", "(a) in one process: read the repository"),
                         ("load", "(a) ... load the catalog (warm)"), ("resolve", "(a) ... resolve")):
        table.append((label, {s.label: (med(r[phase] for r in inside[s.label]), None) for s in sides}))
    table.append(("(a) ... pipeline.resolve (load + resolve)",
                  {s.label: (med(r["load"] + r["resolve"] for r in inside[s.label]), None) for s in sides}))
    width = max(len(name) for name, _ in table)
    head = "".join(f"  {s.label + ' s':>11}  {s.label + ' MiB':>12}" for s in sides)
    print(f"{'scenario'.ljust(width)}{head}" + ("  ratio s" if len(sides) > 1 else ""))
    for name, values in table:
        cells = ""
        for s in sides:
            seconds, rss = values[s.label]
            cells += f"  {seconds:>+11.3f}" if name.endswith("(difference)") else f"  {seconds:>11.3f}"
            cells += f"  {rss:>+12.0f}" if rss is not None and name.endswith("(difference)") else \
                f"  {rss:>12.0f}" if rss is not None else f"  {'':>12}"
        ratio = ""
        if len(sides) > 1 and values["baseline"][0]:
            ratio = f"  {values['this'][0] / values['baseline'][0]:>7.2f}"
        print(f"{name.ljust(width)}{cells}{ratio}")
    print(f"chosen by (a): {inside[sides[0].label][0]['chosen']} bundles")


if __name__ == "__main__":
    main()
