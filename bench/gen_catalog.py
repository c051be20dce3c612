"""Generate a synthetic, valid file-based catalog of a given size.

Each package gets a directory with one ``catalog.json`` (a JSON stream of
blobs, as large published catalogs are written): an ``olm.package``, a
``stable`` channel holding every bundle in a replaces chain with a skipRange
on each entry, a ``fast`` channel holding the newest half, and the bundles,
each with ``olm.package``, two ``olm.gvk``, one ``olm.gvk.required`` every
third bundle, and an ``olm.csv.metadata`` of realistic size. Output is
deterministic for given sizes.

    python -m bench.gen_catalog OUT_DIR --packages 300 --bundles 3000
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def _bundle(pkg: str, i: int) -> dict:
    version = f"{i // 10}.{i % 10}.0"
    props = [{"type": "olm.package", "value": {"packageName": pkg, "version": version}},
             {"type": "olm.gvk", "value": {"group": f"{pkg}.example.com", "kind": "Widget", "version": "v1"}},
             {"type": "olm.gvk", "value": {"group": f"{pkg}.example.com", "kind": "Gadget", "version": "v1beta1"}}]
    if i % 3 == 2:
        props.append({"type": "olm.gvk.required", "value": {"group": "base.example.com", "kind": "Base",
                                                             "version": "v1"}})
    props.append({"type": "olm.csv.metadata", "value": {
        "annotations": {"capabilities": "Basic Install", "categories": "Developer Tools",
                        "containerImage": f"quay.io/example/{pkg}:v{version}",
                        "createdAt": "2024-01-01T00:00:00Z", "repository": f"https://example.com/{pkg}"},
        "description": f"{pkg} manages widgets and gadgets. " * 8,
        "displayName": pkg.replace("-", " ").title(),
        "installModes": [{"type": t, "supported": t != "MultiNamespace"}
                         for t in ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")],
        "keywords": ["widgets", "gadgets"], "maturity": "stable", "minKubeVersion": "1.25.0",
        "provider": {"name": "Example"}, "maintainers": [{"name": "Example", "email": "ops@example.com"}]}})
    return {"schema": "olm.bundle", "name": f"{pkg}.v{version}", "package": pkg,
            "image": f"quay.io/example/{pkg}-bundle@sha256:{i:064x}", "properties": props,
            "relatedImages": [{"name": "operator", "image": f"quay.io/example/{pkg}:v{version}"}]}


def generate(out: Path, packages: int, bundles: int) -> Path:
    if out.exists():
        shutil.rmtree(out)
    per = max(1, bundles // packages)
    for p in range(packages):
        pkg = f"operator-{p:05d}"
        blobs = [{"schema": "olm.package", "name": pkg, "defaultChannel": "stable",
                  "description": f"The {pkg} operator."}]
        bs = [_bundle(pkg, i) for i in range(per)]
        names = [b["name"] for b in bs]
        versions = [b["properties"][0]["value"]["version"] for b in bs]
        stable = [{"name": names[0]}] + [{"name": n, "replaces": names[i], "skipRange": f"<{versions[i + 1]}"}
                                         for i, n in enumerate(names[1:])]
        half = len(names) // 2
        fast = [{"name": names[half]}] + [{"name": n, "replaces": names[half + i]}
                                          for i, n in enumerate(names[half + 1:])]
        blobs += [{"schema": "olm.channel", "package": pkg, "name": "stable", "entries": stable},
                  {"schema": "olm.channel", "package": pkg, "name": "fast", "entries": fast}]
        blobs += bs
        d = out / pkg
        d.mkdir(parents=True)
        (d / "catalog.json").write_text("\n".join(json.dumps(b, indent=2) for b in blobs) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--packages", type=int, default=300)
    ap.add_argument("--bundles", type=int, default=3000)
    args = ap.parse_args()
    generate(args.out, args.packages, args.bundles)
    print(f"wrote {args.packages} packages / {args.bundles} bundles to {args.out}")


if __name__ == "__main__":
    main()
