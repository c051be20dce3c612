"""A repository's catalog served to OLM v0 on the local cluster, as OLM needs it (``cluster up --serve-catalog``).

OLM v0 reads a CatalogSource over gRPC from a registry server. On a real cluster that is a catalog pod; the
local cluster's kwok pods run nothing, so ``opm serve`` runs as a process of the plane on loopback, and the
CatalogSource names it by ``spec.address``. The catalog it serves is not the repository's file as it is: a
repository's catalog names each bundle's image (or a ``file://`` directory of the repository), which OLM
would try to unpack with a pod that never runs, and every Subscription would wait in ``BundleUnpacking``.
So the catalog is rendered for OLM: every bundle with its objects inline (``olm.bundle.object``, as ``reconciler
catalog render`` writes them, fetched from where the repository's catalog says) and no image; packages,
channels and the rest as the repository has them. The repository's copy stays what the reconciler resolves
against; both describe the same bundles by the same names, which is what ``reconciler adopt`` matches.

opm is built from the pin in ``opm/`` (operator-registry, with cgo and the build tags its own release uses),
once, into the cache, like the plane's other binaries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.errors import CatalogError, UsageError
from reconciler.localcluster.gobuild import GoTool, pinned

OPM_DIR = Path(__file__).with_name("opm")
OPM_MODULE = "github.com/operator-framework/operator-registry"
OPM_VERSION = pinned(OPM_DIR, OPM_MODULE)
# opm links mattn/go-sqlite3 for its deprecated SQLite index support, which needs cgo; the tags are its own
# Makefile's: json1 (SQLite JSON functions) and containers_image_openpgp (signature checks in pure Go, not the
# system's gpgme). GoTool takes flags in front of the package list, where `go build` still reads them.
OPM_TOOL = GoTool(label="opm", version=OPM_VERSION, module_dir=OPM_DIR,
                  packages=("-tags=json1,containers_image_openpgp", f"{OPM_MODULE}/cmd/opm"), outputs=("opm",),
                  cgo=True)
BUNDLE_OBJECT = "olm.bundle.object"


def ensure_opm(log: Callable[[str], object] = print) -> Path:
    """The opm executable, built into the cache first when missing (a cold build takes minutes; it needs a C
    compiler for cgo)."""
    return OPM_TOOL.ensure(log)["opm"]


def repository_of(catalog_dir: Path) -> Path:
    """The repository a catalog directory belongs to: the directory that holds its ``catalogs/``, against which
    its ``file://`` bundle references are read."""
    resolved = catalog_dir.resolve()
    parents = [p for p in resolved.parents if p.name == "catalogs"]
    if not resolved.is_dir() or not parents:
        raise UsageError(f"--serve-catalog {catalog_dir}: not a catalog directory of a repository "
                         f"(REPO/catalogs/NAME)",
                         hint="give the directory of one catalog under the repository's catalogs/, e.g. "
                              "platform-repo/catalogs/community")
    return parents[0].parent


def render_for_olm(catalog_dir: Path, log: Callable[[str], object] = lambda _: None) -> list[dict[str, Any]]:
    """The blobs of the catalog in ``catalog_dir`` as OLM v0 installs them on the local cluster: each bundle
    with its objects inline and no image; every other blob as it is. The catalog is validated first (an
    invalid one is refused, naming its file), and each bundle is fetched as a reconcile fetches it."""
    from reconciler.authoring.render import render_bundle_dir
    from reconciler.bundle.source import fetch
    from reconciler.catalog import load_catalog
    from reconciler.catalog.load import iter_blobs

    root = repository_of(catalog_dir)
    display = _display(catalog_dir, root)
    load_catalog(catalog_dir.name, catalog_dir, display)   # raises a CatalogError naming the file and the blob
    out = []
    for where, _, blob in iter_blobs(catalog_dir, display):
        if blob.get("schema") != "olm.bundle":
            out.append(blob)
            continue
        properties = list(blob.get("properties") or [])
        if not any(p.get("type") == BUNDLE_OBJECT for p in properties if isinstance(p, dict)):
            image = str(blob.get("image") or "")
            if not image:
                raise CatalogError(f"bundle {blob.get('name')} has neither an image nor its objects inline: OLM "
                                   f"cannot install it", path=where,
                                   hint="give the bundle its image (or file:// directory), or render it with "
                                        "`reconciler catalog render BUNDLE_DIR`")
            fetched = fetch(image, root)
            rendered = render_bundle_dir(fetched.path, display=image)
            properties += [p for p in rendered.get("properties") or [] if p.get("type") == BUNDLE_OBJECT]
            log(f"  {blob.get('name')}: objects of {image} inlined")
        out.append({**{k: v for k, v in blob.items() if k not in ("image", "properties")},
                    "properties": properties})
    return out


def write_for_olm(catalog_dir: Path, out_dir: Path, log: Callable[[str], object] = lambda _: None) -> int:
    """``render_for_olm`` written as one file-based catalog in ``out_dir`` (replaced); the number of bundles."""
    blobs = render_for_olm(catalog_dir, log)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    (out_dir / "catalog.json").write_text("".join(json.dumps(b, sort_keys=True) + "\n" for b in blobs))
    return sum(1 for b in blobs if b.get("schema") == "olm.bundle")


def catalog_source(name: str, namespace: str, address: str, directory: str) -> dict[str, Any]:
    """The CatalogSource of a catalog served at ``address``: by address, polled as OLM polls a grpc catalog."""
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"reconciler.dev/served-from": directory}},
            "spec": {"sourceType": "grpc", "address": address, "displayName": f"{name} (served from {directory})"}}


def _display(catalog_dir: Path, root: Path) -> str:
    try:
        return catalog_dir.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(catalog_dir)
