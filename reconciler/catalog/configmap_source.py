"""A catalog kept in a ConfigMap (a CatalogSource of ``sourceType: configmap``), made into bundles and channels.

The old ConfigMap catalog, as operator-registry's ConfigMap loader read it for OLM's configmap registry
server, holds three keys, each a YAML list: ``customResourceDefinitions``, ``clusterServiceVersions`` and
``packages`` (package manifests: ``packageName``, ``channels`` of ``name`` and ``currentCSV``,
``defaultChannel``). A bundle is a CSV with the CRDs it owns (matched by the owned entry's name); a channel is
its head ``currentCSV`` and every CSV reached from it along ``spec.replaces``, with ``spec.skips`` and the
``olm.skipRange`` annotation. Such bundles have no image: each becomes a bundle directory (manifests/ and
metadata/annotations.yaml) that the import writes into the repository.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler import yamlio
from reconciler.errors import CatalogError

KEYS = ("customResourceDefinitions", "clusterServiceVersions", "packages")
SKIP_RANGE = "olm.skipRange"


@dataclass(frozen=True)
class BundleFiles:
    """One bundle as files: ``manifests`` by file name, and its annotations."""

    name: str
    package: str
    version: str
    manifests: dict[str, dict] = field(hash=False)
    annotations: dict[str, str] = field(hash=False)


@dataclass(frozen=True)
class Package:
    name: str
    blobs: tuple[dict, ...]           # olm.package and olm.channel blobs
    bundles: tuple[BundleFiles, ...]


def read(config_map: dict, what: str) -> dict[str, Package]:
    """Every package of the ConfigMap catalog, by name."""
    data = config_map.get("data") or {}
    missing = [k for k in KEYS if k not in data]
    if missing:
        raise CatalogError(f"{what} is not a ConfigMap catalog: it has no {', '.join(missing)}",
                           hint="a configmap CatalogSource's ConfigMap holds customResourceDefinitions, "
                                "clusterServiceVersions and packages, each a YAML list")
    lists = {k: _list(data[k], f"{what} {k}") for k in KEYS}
    crds = {str((c.get("metadata") or {}).get("name")): c for c in lists["customResourceDefinitions"]
            if isinstance(c, dict)}
    csvs = {str((c.get("metadata") or {}).get("name")): c for c in lists["clusterServiceVersions"]
            if isinstance(c, dict)}
    out: dict[str, Package] = {}
    for manifest in lists["packages"]:
        if not isinstance(manifest, dict) or not manifest.get("packageName"):
            raise CatalogError(f"{what} packages: an entry has no packageName")
        out[manifest["packageName"]] = _package(manifest, csvs, crds, what)
    return out


def _list(text: Any, where: str) -> list:
    docs = yamlio.load_all(str(text), where) if text else []
    value = docs[0] if len(docs) == 1 else docs
    if value is None:
        return []
    if not isinstance(value, list):
        raise CatalogError(f"{where} is not a YAML list")
    return value


def _package(manifest: dict, csvs: dict[str, dict], crds: dict[str, dict], what: str) -> Package:
    name = str(manifest["packageName"])
    channels = [c for c in manifest.get("channels") or [] if isinstance(c, dict) and c.get("name")]
    if not channels:
        raise CatalogError(f"{what}: package {name} has no channels")
    default = manifest.get("defaultChannel") or (channels[0]["name"] if len(channels) == 1 else "")
    blobs: list[dict] = [{"schema": "olm.package", "name": name, "defaultChannel": default}]
    in_channels: dict[str, list[str]] = {}
    for channel in channels:
        entries, head = [], channel.get("currentCSV")
        seen: set[str] = set()
        while head and head in csvs and head not in seen:
            seen.add(head)
            spec = csvs[head].get("spec") or {}
            entry: dict[str, Any] = {"name": head}
            if spec.get("replaces"):
                entry["replaces"] = spec["replaces"]
            if spec.get("skips"):
                entry["skips"] = list(spec["skips"])
            if skip_range := ((csvs[head].get("metadata") or {}).get("annotations") or {}).get(SKIP_RANGE):
                entry["skipRange"] = skip_range
            entries.append(entry)
            in_channels.setdefault(head, []).append(channel["name"])
            head = spec.get("replaces")
        if not entries:
            raise CatalogError(f"{what}: channel {channel['name']} of package {name} names CSV "
                               f"{channel.get('currentCSV')!r}, which clusterServiceVersions lacks")
        blobs.append({"schema": "olm.channel", "package": name, "name": channel["name"],
                      "entries": sorted(entries, key=lambda e: e["name"])})
    bundles = tuple(_bundle(csvs[n], name, in_channels[n], default, crds, what) for n in sorted(in_channels))
    return Package(name, tuple(blobs), bundles)


def _bundle(csv: dict, package: str, channels: list[str], default: str, crds: dict[str, dict],
            what: str) -> BundleFiles:
    name = str(csv["metadata"]["name"])
    version = str((csv.get("spec") or {}).get("version") or "")
    if not version:
        raise CatalogError(f"{what}: ClusterServiceVersion {name} has no spec.version")
    document = {"apiVersion": csv.get("apiVersion") or "operators.coreos.com/v1alpha1",
                "kind": csv.get("kind") or "ClusterServiceVersion", **{k: v for k, v in csv.items()
                                                                      if k not in ("apiVersion", "kind")}}
    manifests = {f"{name}.clusterserviceversion.yaml": document}
    owned = ((csv.get("spec") or {}).get("customresourcedefinitions") or {}).get("owned") or []
    for crd_name in sorted({str(o.get("name")) for o in owned if isinstance(o, dict) and o.get("name")}):
        if crd_name not in crds:
            raise CatalogError(f"{what}: ClusterServiceVersion {name} owns CRD {crd_name}, which "
                               "customResourceDefinitions lacks")
        crd = crds[crd_name]
        manifests[f"{crd_name}.crd.yaml"] = {"apiVersion": crd.get("apiVersion") or "apiextensions.k8s.io/v1beta1",
                                            "kind": "CustomResourceDefinition",
                                            **{k: v for k, v in crd.items() if k not in ("apiVersion", "kind")}}
    annotations = {"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
                   "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
                   "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
                   "operators.operatorframework.io.bundle.package.v1": package,
                   "operators.operatorframework.io.bundle.channels.v1": ",".join(sorted(channels))}
    if default:
        annotations["operators.operatorframework.io.bundle.channel.default.v1"] = default
    return BundleFiles(name, package, version, manifests, annotations)
