"""A fleet at scale: N clusters x 50 Operators against the 30,000-bundle synthetic catalog.

    python -m bench.fleet --clusters 1000 [--status-clusters 100] [--shapes 5]

Builds a fleet repository in a temporary directory: the synthetic catalog of
``gen_catalog`` (300 packages x 100 bundles; the 50 declared packages get a
local plain bundle each, so conversion needs no registry), N clusters spread
over ``--shapes`` shapes (labels, Kubernetes versions, stages dev / staging /
prod) and 50 Operators, a few of them placed by selector and one with an
override. Then it times, as a user runs them:

* ``resolve``: every cluster's lockfile (``reconciler resolve REPO``);
* ``diff``: the review across the fleet of a one-line change (an Operator placed
  on staging instead of prod), grouped by outcome, as markdown;
* ``fleet status``: against ``--status-clusters`` simulated clusters, real
  kube-apiservers on one etcd under their own prefixes
  (``localcluster.virtual``, lean), each holding the 50 Operators' status
  objects; started in turns when the machine's memory cannot hold them at once.

The last line is ``fleet: N clusters resolved in S s, diff in D s, status of K
clusters in T s``. Resolving is measured at two sizes (N/10 and N) to show how
it grows.
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

ROOT = Path(__file__).resolve().parents[1]
OPERATORS = 50
PER_CLUSTER_MIB = 200   # a lean simulated cluster's resident memory, with room (measured: about 186 MiB)


def _shape(i: int, shapes: int) -> dict:
    s = i % shapes
    stage = ("dev", "staging", "prod", "prod", "prod")[s % 5]
    region = ("eu", "us", "ap")[s % 3]
    return {"labels": {"env": stage, "region": region, "shape": f"s{s}"}, "stage": stage,
            "kubernetesVersion": ("1.34", "1.35", "1.36")[s % 3]}


def build(root: Path, clusters: int, shapes: int, catalog_dir: Path) -> None:
    """The fleet repository: catalog, plain bundles for the declared packages, Operators, Clusters."""
    if root.exists():
        shutil.rmtree(root)
    (root / "catalogs").mkdir(parents=True)
    shutil.copytree(catalog_dir, root / "catalogs" / "synthetic")
    packages = sorted(p.name for p in (root / "catalogs" / "synthetic").iterdir())[:OPERATORS]
    for pkg in packages:
        path = root / "catalogs" / "synthetic" / pkg / "catalog.json"
        lines = []
        for blob in _stream(path.read_text()):
            if blob.get("schema") == "olm.bundle":
                blob["image"] = f"file://bundles/{pkg}"
                blob["properties"].append({"type": "olm.bundle.mediatype", "value": "plain+v0"})
                blob["properties"] = [p for p in blob["properties"] if p["type"] != "olm.gvk.required"]
            lines.append(json.dumps(blob))
        path.write_text("\n".join(lines) + "\n")
        manifests = root / "bundles" / pkg / "manifests"
        manifests.mkdir(parents=True)
        (manifests / "config.yaml").write_text(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {pkg}-config, namespace: {pkg}}}\n"
            f"data: {{package: {pkg}}}\n")
    (root / "operators").mkdir()
    for n, pkg in enumerate(packages):
        placement = ""
        if n % 10 == 1:
            placement = "  placement:\n    clusterSelector: {matchLabels: {env: prod}}\n"
        if n == 0:
            placement = ("  placement:\n    overrides:\n    - clusterSelector: {matchLabels: {region: us}}\n"
                         f"      installNamespace: {pkg}-us\n")
        (root / "operators" / f"{pkg}.yaml").write_text(
            f"apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {{name: {pkg}}}\nspec:\n"
            f"  catalog: {{name: synthetic, package: {pkg}, channel: stable}}\n"
            f"  install: {{namespace: {pkg}}}\n{placement}")
    (root / "clusters").mkdir()
    for i in range(clusters):
        name = f"c{i:05d}"
        shape = _shape(i, shapes)
        labels = ", ".join(f"{k}: {v}" for k, v in shape["labels"].items())
        (root / "clusters" / f"{name}.yaml").write_text(
            f"apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"
            f"spec: {{kubernetesVersion: \"{shape['kubernetesVersion']}\", stage: {shape['stage']}}}\n")
    (root / "reconciler.yaml").write_text("stages: [dev, staging, prod]\ninstance: bench\n")


def _stream(text: str):  # noqa: ANN202 - the blobs of a JSON stream
    decoder, at = json.JSONDecoder(), 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        blob, at = decoder.raw_decode(text, at)
        yield blob


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                    *args], check=True, capture_output=True)


def _cli(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "reconciler", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "KUBECONFIG": os.environ.get("KUBECONFIG", "")})
    return time.perf_counter() - started, done


def time_resolve(root: Path) -> tuple[float, str]:
    seconds, done = _cli("resolve", str(root), "-o", "json")
    if done.returncode != 0:
        raise SystemExit(f"resolve failed: {done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    return seconds, f"{len(doc['clusters'])} clusters, {doc['resolutions']} resolutions"


def time_diff(root: Path) -> tuple[float, int, str]:
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fleet")
    decl = sorted((root / "operators").iterdir())[1]   # one line: an Operator placed on staging, not prod
    decl.write_text(decl.read_text().replace("{env: prod}", "{env: staging}"))
    seconds, done = _cli("diff", str(root), "-o", "markdown")
    if done.returncode not in (0, 1):
        raise SystemExit(f"diff failed: {done.stderr[-2000:]}")
    groups = [ln for ln in done.stdout.splitlines() if ln.startswith("| ") and ln.count("|") == 3
              and not ln.startswith("| clusters")]
    return seconds, len(done.stdout), f"{len(groups)} groups"


def _available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 8192


def time_status(count: int, shapes: int, workdir: Path) -> tuple[float, int, list[str]]:
    """``fleet status`` of ``count`` simulated clusters, in turns of as many as memory holds; (seconds, turn, notes)."""
    from reconciler.cluster.status import objects as status_objects
    from reconciler.cluster.ownership.record import ensure_status_crd
    from reconciler.kube.client import Kube
    from reconciler.localcluster import ControlPlane, ensure_binaries
    from reconciler.localcluster.virtual import VirtualCluster, kubeconfig_with_contexts

    turn = max(1, min(count, int(_available_mib() * 0.7) // PER_CLUSTER_MIB))
    notes = [f"{count} simulated clusters in turns of {turn} (memory available: {_available_mib()} MiB)"]
    repo = workdir / "status-fleet"
    plane = ControlPlane(workdir / "plane", ensure_binaries()).start()
    total, rss = 0.0, []
    try:
        for start in range(0, count, turn):
            names = [f"c{i:05d}" for i in range(start, min(count, start + turn))]
            build(repo, 0, shapes, workdir / "catalog-small")
            for i, name in enumerate(names, start):
                shape = _shape(i, shapes)
                labels = ", ".join(f"{k}: {v}" for k, v in shape["labels"].items())
                (repo / "clusters" / f"{name}.yaml").write_text(
                    f"apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}, labels: "
                    f"{{{labels}}}}}\nspec: {{stage: {shape['stage']}}}\n")
            virtuals = []
            try:
                for name in names:
                    virtuals.append(VirtualCluster(plane, name, watch_cache=False, lean=True).start(timeout=120))
                for v in virtuals:
                    _seed(Kube(v.admin_client()), v.name, ensure_status_crd, status_objects)
                rss += [v.rss_bytes() for v in virtuals]
                kc = kubeconfig_with_contexts(workdir / "fleet.kubeconfig",
                                              {v.name: (v.server, v.kubeconfig_path) for v in virtuals})
                seconds, done = _cli("fleet", "status", str(repo), "--kubeconfig", str(kc), "-o", "json")
                doc = json.loads(done.stdout)
                unreachable = [c["name"] for c in doc["clusters"] if not c["reachable"]]
                if unreachable:
                    raise SystemExit(f"fleet status could not read {unreachable[:5]}: {done.stdout[-1000:]}")
                total += seconds
            finally:
                for v in virtuals:
                    v.stop()
    finally:
        plane.stop()
    if rss:
        notes.append(f"resident memory per simulated cluster: median {sorted(rss)[len(rss) // 2] // 2**20} MiB")
    return total, turn, notes


def _seed(kube, cluster: str, ensure_crd, status_objects) -> None:
    """The 50 Operators' status objects, as a reconcile records them (bundle, Ready, revision)."""
    from reconciler.cluster.status.events import EventRecorder

    writer = status_objects.StatusWriter(kube, ensure_crd(kube), status_objects.Stamp("bench", cluster=cluster),
                                         EventRecorder())
    for n in range(OPERATORS):
        pkg = f"operator-{n:05d}"
        cond = status_objects.condition("Ready", True, "Healthy", "applied; every component is healthy")
        writer.write(pkg, {"package": pkg}, {
            "bundle": {"name": f"{pkg}.v9.9.0", "package": pkg, "version": "9.9.0"},
            "revision": "0" * 40, "inventory": [], "conditions": [cond]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--status-clusters", type=int, default=100)
    parser.add_argument("--shapes", type=int, default=5)
    parser.add_argument("--bundles", type=int, default=30000)
    parser.add_argument("--keep", type=Path, help="build here and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", flush=True)
        catalog = generate(work / "catalog", packages=300, bundles=args.bundles)
        generate(work / "catalog-small", packages=OPERATORS, bundles=OPERATORS * 2)
        rows = []
        small = max(1, args.clusters // 10)
        for n in (small, args.clusters):
            build(work / "fleet", n, args.shapes, catalog)
            seconds, what = time_resolve(work / "fleet")
            rows.append((f"resolve every cluster, {n} clusters", f"{seconds:.1f} s", what))
        resolved = seconds
        diff_s, size, first = time_diff(work / "fleet")
        rows.append((f"diff of a one-line change, {args.clusters} clusters", f"{diff_s:.1f} s",
                     f"markdown {size} characters; {first}"))
        status_s, turn, notes = time_status(args.status_clusters, args.shapes, work)
        rows.append((f"fleet status, {args.status_clusters} simulated clusters", f"{status_s:.1f} s",
                     f"in turns of {turn}" if turn < args.status_clusters else "all at once"))
        width = max(len(r[0]) for r in rows)
        print(f"{'scenario':<{width}}  {'time':>8}  notes")
        for r in rows:
            print(f"{r[0]:<{width}}  {r[1]:>8}  {r[2]}")
        for note in notes:
            print(f"note: {note}")
        print(f"fleet: {args.clusters} clusters resolved in {resolved:.1f} s, diff in {diff_s:.1f} s, status of "
              f"{args.status_clusters} clusters in {status_s:.1f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
