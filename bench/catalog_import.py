"""`catalog import` of a full-size index image, filtered to 5 packages and whole, beside `opm render` of the image.

The index is built from the whole corpus: every bundle of ../shared/corpus/operators rendered with its objects
inline (``olm.bundle.object``, as a real index has them; ``catalog_bench.rendered_index``), a package per
directory in one ``catalog.json``, as opm's indexes keep them. The corpus has 59 packages; ``--copies N`` adds
N-1 renamed copies of each (``<package>-copy2``, ...), so the index has the few hundred packages of a real one.
It is pushed to a distribution registry on loopback (built from bench/peers/registry) as one layer.

Each run is one process with an empty cache, its wall time and peak RSS measured, alternating ours and opm's:

* ours, filtered: ``reconciler catalog import REPO --image REF --package P`` x5 (the layers streamed, only those
  packages' directories written and parsed);
* ours, whole: ``--all``, every package split into its own directory (no file over the loader's limit is checked);
* opm: ``opm render REF --use-http -o json`` (to /dev/null), which pulls and unpacks the image and renders all.

    python -m bench.catalog_import [--copies 6] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.catalog_bench import CORPUS, _measured, rendered_index
from bench.peers.opm import opm_binary
from bench.peers.registry import registry_binary
from bench.startup_bench import command, installed

FILTER = ["ack-s3-controller", "cert-manager", "odoo-operator", "apicurito", "move2kube-operator"]


def build_index(work: Path, copies: int) -> tuple[Path, int, int]:
    """The index's /configs tree; its package and bundle counts."""
    from reconciler import yamlio

    rendered = rendered_index(work)
    if rendered is None:
        sys.exit("../shared/corpus is absent: the index is built from it")
    configs = work / "index" / "configs"
    packages = bundles = 0
    for package_dir in sorted(p for p in rendered.iterdir() if p.is_dir()):
        blobs = yamlio.read_all(package_dir / "package.yaml") + [
            yamlio.read_all(f)[0] for f in sorted((package_dir / "bundles").iterdir())]
        name = blobs[0]["name"]
        for copy in range(1, copies + 1):
            new = name if copy == 1 else f"{name}-copy{copy}"
            text = json.dumps(blobs)
            text = text.replace(f'"packageName": "{name}"', f'"packageName": "{new}"') \
                .replace(f'"package": "{name}"', f'"package": "{new}"').replace(f'"name": "{name}"', f'"name": "{new}"')
            (configs / new).mkdir(parents=True)
            with open(configs / new / "catalog.json", "w") as f:
                for blob in json.loads(text):
                    f.write(json.dumps(blob) + "\n")
            packages += 1
            bundles += sum(1 for b in blobs if b.get("schema") == "olm.bundle")
    shutil.rmtree(rendered)
    return configs.parent, packages, bundles


def push(ref: str, copies: int, work: Path) -> None:
    """Build the index and push it to ``ref``; its facts as one JSON line."""
    from reconciler import oci
    from reconciler.catalog.source import CONFIGS_LABEL

    index, packages, bundles = build_index(work, copies)
    size = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())
    layout = oci.build_layout(index, work / "layout", {CONFIGS_LABEL: "/configs"})
    oci.push_layout(layout.path, ref)
    layer = max(f.stat().st_size for f in (layout.path / "blobs" / "sha256").iterdir())
    shutil.rmtree(layout.path)
    shutil.rmtree(index)
    print(json.dumps({"packages": packages, "bundles": bundles, "size": size, "layer": layer}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--push", metavar="REF", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.push:
        return push(args.push, args.copies, args.work)
    if not CORPUS.is_dir():
        sys.exit("../shared/corpus is absent")
    from bench.peers import stop
    from tests.bundle.oci_registry import start_registry

    opm = opm_binary(log=print)
    work = Path(tempfile.mkdtemp(prefix="bench-catalog-import-"))
    python, base_env = installed(work)
    proc, registry = start_registry(registry_binary(log=print), work / "registry")
    try:
        # Built and pushed by a child process: a child forked from a process that held the index would count that
        # memory in its own peak RSS before it runs the command measured.
        ref = registry.ref("catalogs/community-index", "v1")
        built = subprocess.run([sys.executable, "-m", "bench.catalog_import", "--push", ref, "--copies",
                                str(args.copies), "--work", str(work)], check=True, capture_output=True, text=True)
        facts = json.loads(built.stdout.splitlines()[-1])
        packages = facts["packages"]
        print(f"index: {packages} packages, {facts['bundles']} bundles, {facts['size'] / 1e6:.0f} MB of FBC, one "
              f"layer of {facts['layer'] / 1e6:.0f} MB, at {ref}")
        rows: dict[str, list[tuple[float, float]]] = {"filtered": [], "whole": [], "opm": []}
        largest = 0
        for i in range(args.repeat):
            for kind in ("filtered", "opm", "whole"):
                cache = work / f"cache-{kind}-{i}"
                repo = work / f"repo-{kind}-{i}"
                repo.mkdir()
                env = {**base_env, "RECONCILER_CACHE_DIR": str(cache), "HOME": str(work / "home")}
                if kind == "opm":
                    cmd = [str(opm), "render", ref, "--use-http", "-o", "json"]
                    env["XDG_CACHE_HOME"] = str(cache)
                else:
                    cmd = [command(python), "catalog", "import", str(repo), "--image", ref, "--name", "community"]
                    cmd += [a for p in FILTER for a in ("--package", p)] if kind == "filtered" else ["--all"]
                rows[kind].append(_measured(cmd, env))
                if kind != "opm":
                    files = [f for f in (repo / "catalogs" / "community").rglob("*") if f.is_file()]
                    dirs = [d for d in (repo / "catalogs" / "community").iterdir() if d.is_dir()]
                    want = len(FILTER) if kind == "filtered" else packages
                    if len(dirs) != want:
                        sys.exit(f"{kind} import wrote {len(dirs)} package directories, not {want}")
                    largest = max(largest, *(f.stat().st_size for f in files))
                shutil.rmtree(cache, ignore_errors=True)
                shutil.rmtree(repo, ignore_errors=True)
        from reconciler import yamlio

        if largest > yamlio.MAX_FILE_BYTES:
            sys.exit(f"a file of {largest} bytes was written, over the loader's {yamlio.MAX_FILE_BYTES}")
        best = {k: (min(t for t, _ in v), min(m for _, m in v)) for k, v in rows.items()}
        print(f"\nbest of {args.repeat}, one process each, empty cache; largest file written: "
              f"{largest / 1e6:.1f} MB (limit {yamlio.MAX_FILE_BYTES / 1e6:.0f} MB)\n")
        print("| run | s | peak MiB | s / opm | MiB / opm |")
        print("|---|---:|---:|---:|---:|")
        labels = {"filtered": f"catalog import, {len(FILTER)} packages", "whole": "catalog import --all (split per "
                  "package)", "opm": "opm render (the whole index)"}
        for kind in ("filtered", "whole", "opm"):
            s, mib = best[kind]
            print(f"| {labels[kind]} | {s:.2f} | {mib:.0f} | {s / best['opm'][0]:.2f} | {mib / best['opm'][1]:.2f} |")
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
