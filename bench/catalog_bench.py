"""Catalog benchmark: cold load + validate, and warm (cached) load, against `opm validate` and `opm render`.

Every figure is one process run from start to exit, so interpreter and Go
runtime start-up count on both sides:

* ours cold:  ``reconciler catalog validate --no-cache DIR``
* ours warm:  a child process timing ``reconciler.catalog.load(DIR)`` on a primed cache, and its peak RSS
* opm:        ``opm validate DIR`` and ``opm render DIR -o json`` (output discarded)

A first ``catalog validate`` of the corpus catalogs (every version in one directory) and of the corpus's bundles
rendered into one YAML index (``rendered_index``: 726 bundles, each manifest an ``olm.bundle.object``, about
130 MB) is measured for its peak RSS as well, beside opm's.

Scenarios: each version index the corpus samples (../shared/corpus/catalogs/v4.*, one catalog of
its packages, as an index image holds them), all of their packages as one index (``all-versions``:
nearer the size of a real index, which holds hundreds of packages), the corpus catalogs one process
each, and synthetic catalogs from ``bench.gen_catalog`` (300 packages / 3,000 bundles, 2,000 / 30,000).

The reconciler runs as installed (``bench.startup_bench.installed``: its own virtual environment,
bytecode compiled), not from the checkout.

    python -m bench.catalog_bench [--skip-large] [--skip-synthetic] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.gen_catalog import generate
from bench.peers.opm import opm_binary
from bench.startup_bench import command, installed

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "catalogs"
PY = sys.executable

_WARM_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from reconciler.catalog import load
t1 = time.perf_counter()
out = [load(d) for d in sys.argv[1:]]
t2 = time.perf_counter()
assert all(o.cached for o in out), "cache was not primed"
print(json.dumps({"import": t1 - t0, "load": t2 - t1,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def _best(n: int, fn) -> float:
    return min(fn() for _ in range(n))


def _measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB, the largest of the process and any child it forked) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def memory_row(label: str, directory: Path, opm: Path, env: dict[str, str], repeat: int) -> dict:
    """A first ``catalog validate`` (nothing cached: it parses, validates and writes the cache, as a user's
    first run does), its time and peak RSS beside ``opm validate``'s; the best of ``repeat``, each with an empty
    cache directory."""
    ours = []
    for attempt in range(repeat):
        cold = dict(env, RECONCILER_CACHE_DIR=str(Path(env["RECONCILER_CACHE_DIR"]) / f"memory-{label}-{attempt}"))
        ours.append(_measured([command(PY), "catalog", "validate", str(directory)], cold))
    theirs = [_measured([str(opm), "validate", str(directory)], env) for _ in range(repeat)]
    files = [f for f in directory.rglob("*") if f.is_file()]
    return {"label": label, "files": len(files), "mb": sum(f.stat().st_size for f in files) / 1e6,
            "ours_s": min(t for t, _ in ours), "ours_mib": min(m for _, m in ours),
            "opm_s": min(t for t, _ in theirs), "opm_mib": min(m for _, m in theirs)}


def rendered_index(work: Path) -> Path | None:
    """Every bundle of the corpus's operators rendered (``catalog render``, as opm renders them: each manifest
    an ``olm.bundle.object``) into one YAML index, a package per directory and a file per bundle: the shape and
    size of a real community index, written by the reconciler's own renderer."""
    operators = CORPUS.parent / "operators"
    if not operators.is_dir():
        return None
    from bench.bundle_corpus import find_bundles
    from reconciler import yamlio
    from reconciler.authoring.render import render_bundle_dir
    from reconciler.errors import ReconcilerError

    out = work / "rendered-index"
    bundles, _ = find_bundles(operators)
    by_package: dict[str, list[dict]] = {}
    for root in bundles:
        package, version = root.relative_to(operators).parts[:2]
        try:
            blob = render_bundle_dir(root, f"quay.io/example/{package}-bundle:{version}")
        except ReconcilerError:
            continue   # the two the renderer refuses (docs/catalogs.md)
        if all(b["name"] != blob["name"] for b in by_package.get(package, [])):
            by_package.setdefault(package, []).append(blob)
    for package, blobs in by_package.items():
        for blob in blobs:
            (out / package / "bundles").mkdir(parents=True, exist_ok=True)
            (out / package / "bundles" / f"{blob['name']}.yaml").write_text(yamlio.dump(blob))
        name = blobs[0]["package"]
        entries = [{"name": b["name"], **({"replaces": blobs[i - 1]["name"]} if i else {})} for i, b in enumerate(blobs)]
        (out / package / "package.yaml").write_text(yamlio.dump_all([
            {"schema": "olm.package", "name": name, "defaultChannel": "stable"},
            {"schema": "olm.channel", "package": name, "name": "stable", "entries": entries}]))
    return out


def index_row(index: Path, opm: Path, env: dict[str, str], repeat: int) -> dict:
    """One version index, cold: ``catalog validate --no-cache`` beside ``opm validate``, best of ``repeat``."""
    ours = _best(repeat, lambda: _timed([command(PY), "catalog", "validate", "--no-cache", str(index)],
                                        env))
    theirs = _best(repeat, lambda: _timed([str(opm), "validate", str(index)], env))
    size = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())
    packages = sum(1 for d in index.iterdir() if d.is_dir())
    return {"index": index.name, "packages": packages, "mb": size / 1e6, "ours": ours, "opm": theirs}


def _together(work: Path) -> Path:
    """Every package the corpus samples as one index (its newest version's catalog), closer to a real index's size."""
    out = work / "all-versions"
    for version in sorted(CORPUS.glob("v4.*"), key=lambda d: [int(x) for x in d.name[1:].split(".")], reverse=True):
        for package in sorted(d for d in version.iterdir() if d.is_dir()):
            if not (out / package.name).exists():
                shutil.copytree(package, out / package.name)
    return out


def scenario(name: str, dirs: list[Path], opm: Path, env: dict[str, str], repeat: int) -> dict:
    ours_cold = _best(repeat, lambda: sum(_timed([command(PY), "catalog", "validate", "--no-cache",
                                                  str(d)], env) for d in dirs))
    opm_validate = _best(repeat, lambda: sum(_timed([str(opm), "validate", str(d)], env) for d in dirs))
    opm_render = _best(repeat, lambda: sum(_timed([str(opm), "render", str(d), "-o", "json"], env) for d in dirs))
    subprocess.run([PY, "-c", "import sys\nfrom reconciler.catalog import load\n[load(d) for d in sys.argv[1:]]",
                    *map(str, dirs)], env=env, check=True)
    time.sleep(2.1)  # files younger than the racy-stat margin are hashed, not trusted by stat: let them age
    subprocess.run([PY, "-c", "import sys\nfrom reconciler.catalog import load\n[load(d) for d in sys.argv[1:]]",
                    *map(str, dirs)], env=env, check=True)  # records the stat key
    warm = min((json.loads(subprocess.run([PY, "-c", _WARM_CHILD, *map(str, dirs)], env=env, check=True,
                                          capture_output=True, text=True).stdout) for _ in range(repeat)),
               key=lambda r: r["load"])
    return {"scenario": name, "ours_cold": ours_cold, "opm_validate": opm_validate, "opm_render": opm_render,
            "ours_warm": warm["load"], "warm_import": warm["import"], "warm_rss_mb": warm["rss_mb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-large", action="store_true", help="skip the 30,000-bundle catalog")
    ap.add_argument("--skip-synthetic", action="store_true", help="only the corpus rows")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept (default 3)")
    args = ap.parse_args()
    global PY
    opm = opm_binary(log=lambda m: print(m, file=sys.stderr))
    work = Path(tempfile.mkdtemp(prefix="catalog-bench-"))
    PY, env = installed(work)
    env["RECONCILER_CACHE_DIR"] = str(work / "cache")
    rows = []
    indexes = []
    if CORPUS.is_dir():
        indexes = [index_row(d, opm, env, args.repeat) for d in sorted(CORPUS.glob("v4.*")) if d.is_dir()]
        indexes.append(index_row(_together(work), opm, env, args.repeat))
        dirs = sorted(p.parent for p in CORPUS.glob("v4.*/*/catalog.yaml"))
        rows.append(scenario(f"corpus ({len(dirs)} catalogs)", dirs, opm, env, args.repeat))
    memory = []
    if CORPUS.is_dir():
        memory.append(memory_row("corpus catalogs, every version (one directory)", CORPUS, opm, env, args.repeat))
        if (index := rendered_index(work)) is not None:
            memory.append(memory_row("corpus bundles rendered as one YAML index", index, opm, env, args.repeat))
    sizes = [] if args.skip_synthetic else [(300, 3000)] + ([] if args.skip_large else [(2000, 30000)])
    for packages, bundles in sizes:
        d = generate(work / f"synthetic-{bundles}", packages, bundles)
        rows.append(scenario(f"synthetic {packages} pkgs / {bundles} bundles", [d], opm, env,
                             args.repeat if bundles <= 3000 else 1))
    print(f"opm {opm.parent.name}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"| {'scenario':38} | ours cold+validate | opm validate | ratio | opm render | ratio "
          f"| ours warm | warm RSS |")
    print(f"|{'-' * 40}|-------------------:|-------------:|------:|-----------:|------:|----------:|---------:|")
    for r in rows:
        print(f"| {r['scenario']:38} | {r['ours_cold']:17.2f}s | {r['opm_validate']:11.2f}s "
              f"| {r['ours_cold'] / r['opm_validate']:5.2f} | {r['opm_render']:9.2f}s "
              f"| {r['ours_cold'] / r['opm_render']:5.2f} | {r['ours_warm']:8.3f}s | {r['warm_rss_mb']:5.0f} MB |")
    print("ratio = ours / opm (below 1: faster than opm). warm = load() from the cache, import time excluded "
          "(import: %.2fs).\n" % rows[-1]["warm_import"])
    if memory:
        print(f"a first `catalog validate` (nothing cached; the cache written), best of {args.repeat}: time and peak "
              f"RSS beside `opm validate`\n")
        print("| catalog | files | MB | ours s | ours peak MiB | opm s | opm peak MiB |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in memory:
            print(f"| {r['label']} | {r['files']} | {r['mb']:.1f} | {r['ours_s']:.2f} | {r['ours_mib']:.0f} | "
                  f"{r['opm_s']:.2f} | {r['opm_mib']:.0f} |")
        print()
    if indexes:
        print(f"each version index of the corpus as one catalog, cold, best of {args.repeat}\n")
        print("| index | packages | MB | ours cold+validate s | opm validate s | ratio |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for r in indexes:
            print(f"| {r['index']} | {r['packages']} | {r['mb']:.1f} | {r['ours']:.2f} | {r['opm']:.2f} | "
                  f"{r['ours'] / r['opm']:.2f} |")
        print("\nratio = ours / opm (at most 1: as fast as opm or faster).")


if __name__ == "__main__":
    main()
