"""Resolution as a user runs it: whole processes on repositories, with the catalog cache warm.

  python -m bench.resolve_repo [--repeat 5] [--work DIR]

Rows (each the median of --repeat runs after one that fills the catalog cache;
peak RSS from the child's rusage):

  (a) ``reconciler resolve --offline --no-write`` of 50 Operators against the
      30,000-bundle synthetic catalog of ``bench.resolve_bench`` (3,000
      packages, replaces chains, dependency chains several packages deep),
      written as a file-based catalog (one JSON file per package);
  (b) ``reconciler reconcile --dry-run`` (no cluster) of examples/gitops-repo,
      alone and with an unused 30,000-bundle catalog beside its own
      (``bench.gen_catalog``: 2,000 packages), and the difference: what a
      catalog nobody declares from costs.

Runs of the rows alternate, so a noisy machine slows all of them alike; the
load average is printed with the table. The reconciler runs as installed
(``bench.startup_bench.installed``). There is no peer: OLM v0 resolves inside
its controller, and operator-controller resolves no dependencies.
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


def synthetic_repo(root: Path) -> Path:
    cat = synthetic_catalog(30_000)
    repo = root / "synthetic-30k"
    write_catalog(cat, repo / "catalogs" / "synthetic")
    decls = operators(50, cat)
    (repo / "operators").mkdir(parents=True)
    (repo / "operators" / "all.yaml").write_text(yamlio.dump_all([
        {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": d.name},
         "spec": {"catalog": {"name": "synthetic", "package": d.catalog.package, "channel": "stable"}}}
        for d in decls]))
    return repo


def example_repos(root: Path) -> tuple[Path, Path]:
    alone, beside = root / "example", root / "example-with-unused-30k"
    shutil.copytree(EXAMPLE, alone)
    shutil.copytree(EXAMPLE, beside)
    generate(beside / "catalogs" / "unused", 2000, 30_000)
    return alone, beside


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):   # 1: a dry run that would change something
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {err[-800:]}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, help="keep the repositories and cache here (default: a temporary dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="resolve-repo-"))
    work.mkdir(parents=True, exist_ok=True)
    python, env = installed(work / "install")
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = {**env, "RECONCILER_CACHE_DIR": str(work / "cache"), "KUBECONFIG": "", "HOME": str(home)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    exe = command(python)
    if not (work / "repos" / "synthetic-30k").is_dir():
        (work / "repos").mkdir(exist_ok=True)
        synthetic_repo(work / "repos")
        example_repos(work / "repos")
    repos = work / "repos"
    rows = {
        "(a) resolve 50 Operators, 30,000-bundle catalog": [exe, "resolve", str(repos / "synthetic-30k"),
                                                            "--offline", "--no-write", "-o", "json"],
        "(b) dry-run examples/gitops-repo": [exe, "reconcile", "--dry-run", str(repos / "example")],
        "(b) ... with an unused 30,000-bundle catalog": [exe, "reconcile", "--dry-run",
                                                         str(repos / "example-with-unused-30k")],
    }
    for cmd in rows.values():   # fill the catalog cache
        run(cmd, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, cmd in rows.items():
            samples[name].append(run(cmd, env))
    load = os.getloadavg()
    width = max(map(len, rows))
    print(f"{'scenario'.ljust(width)}  {'median s':>9}  {'min s':>7}  {'peak RSS MiB':>12}")
    med = {}
    for name, runs in samples.items():
        med[name] = statistics.median(t for t, _ in runs)
        rss = statistics.median(r for _, r in runs)
        print(f"{name.ljust(width)}  {med[name]:>9.3f}  {min(t for t, _ in runs):>7.3f}  {rss:>12.0f}")
    alone, beside = (statistics.median(t for t, _ in samples[k]) for k in list(rows)[1:])
    rss_alone, rss_beside = (statistics.median(r for _, r in samples[k]) for k in list(rows)[1:])
    print(f"{'(b) the unused catalog costs'.ljust(width)}  {beside - alone:>+9.3f}  {'':>7}  "
          f"{rss_beside - rss_alone:>+12.0f}")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.repeat} runs each, alternating")


if __name__ == "__main__":
    main()
