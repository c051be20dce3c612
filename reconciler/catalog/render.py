"""Rendering a bundle directory into the ``olm.bundle`` blob a catalog lists it with.

registry+v1 follows what ``opm render`` derives from a bundle:

* ``olm.package``: the package annotation and the CSV's ``spec.version``;
* ``olm.gvk``: every version of every CRD in the bundle, and owned APIService definitions;
* ``olm.gvk.required``: the CSV's required CRDs and APIServices, and ``olm.gvk`` entries of
  ``metadata/dependencies.yaml``;
* ``olm.package.required``: ``olm.package`` entries of ``dependencies.yaml`` (their ``version`` is a range);
* other dependencies (``olm.constraint``, ``olm.label``, ...) and every entry of
  ``metadata/properties.yaml`` and of the CSV's ``operatorframework.io/properties`` annotation, verbatim;
* ``olm.csv.metadata``: the CSV's display fields (the form opm's migration leaves in catalogs);
* ``relatedImages``: the CSV's ``spec.relatedImages``, then the bundle image, then the images of the
  install strategy's containers and init containers, without duplicates, sorted by image.

Properties are sorted by type, then by their compact JSON value, as opm sorts them. A k8s+v1
bundle carries no CSV: the bundle layer synthesizes one from ``metadata/olm.yaml`` and the
manifests (refusing wildcard RBAC bound to the operator), and the bundle renders through it, as
the design asks when such a bundle is added to a catalog. plain+v0 bundles carry no metadata: the
package and version must be given. Every rendered bundle carries an ``olm.bundle.mediatype``
property, so one catalog can mix formats.

The bundle is read once by the bundle layer (``reconciler.bundle.content``, the same reader the
reconciler converts with, cached by content digest); only ``metadata/dependencies.yaml`` and
``metadata/properties.yaml`` are read here. Nothing in a bundle is executed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.bundle.content import ANNOTATION_PACKAGE, BundleContent
from reconciler.errors import BundleError, InputError, UnsupportedBundleError
from reconciler.model.shape import kind_of
from reconciler.model.catalog import (
    PROP_BUNDLE_MEDIATYPE, PROP_CSV_METADATA, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE, PROP_PACKAGE_REQUIRED,
)

CSV_PROPERTIES_ANNOTATION = "operatorframework.io/properties"
CSV_METADATA_FIELDS = (("annotations", "metadata"), ("apiServiceDefinitions", "spec"),
                       ("crdDescriptions", "spec"), ("description", "spec"), ("displayName", "spec"),
                       ("installModes", "spec"), ("keywords", "spec"), ("labels", "metadata"), ("links", "spec"),
                       ("maintainers", "spec"), ("maturity", "spec"), ("minKubeVersion", "spec"),
                       ("nativeAPIs", "spec"), ("provider", "spec"))


def render_bundle_dir(path: Path, image: str = "", *, package: str | None = None, version: str | None = None,
                      display: str | None = None) -> dict[str, Any]:
    """The ``olm.bundle`` blob for the bundle directory at ``path``.

    The bundle is read once, by the same code the reconciler converts it with
    (``reconciler.bundle.content``); a k8s+v1 bundle is rendered through the
    CSV the bundle layer synthesizes for it, as the design asks when such a
    bundle is added to a catalog.
    """
    from reconciler.bundle.content import read_content
    from reconciler.bundle.source import FetchedBundle, directory_digest

    name = display or str(path)
    if not path.is_dir():
        raise BundleError(f"bundle directory {name} does not exist", path=name)
    content = read_content(FetchedBundle(name, path, directory_digest(path, name)))
    mediatype = content.mediatype
    if mediatype == "registry+v1":
        blob = _registry_v1(content, path, name, image)
    elif mediatype == "k8s+v1":
        from reconciler.bundle.k8s_v1 import synthesize

        blob = _registry_v1(synthesize(content)[0], path, name, image)
    elif mediatype == "plain+v0":
        blob = _plain_v0(content, name, image, package or content.annotations.get(ANNOTATION_PACKAGE), version)
    else:
        raise UnsupportedBundleError(f"bundle mediatype {mediatype or '(none)'!r} cannot be rendered",
                                     path=f"{name}/metadata/annotations.yaml",
                                     hint="supported: registry+v1, k8s+v1, plain+v0")
    blob["properties"] = sorted(blob["properties"] + [{"type": PROP_BUNDLE_MEDIATYPE, "value": mediatype}],
                                key=_prop_key)
    return blob


def _prop_key(p: dict[str, Any]) -> tuple[str, str]:
    return p["type"], json.dumps(p["value"], separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _metadata_list(root: Path, name: str, file: str, key: str) -> list[dict[str, Any]]:
    f = root / "metadata" / file
    if not f.is_file():
        return []
    display = f"{name}/metadata/{file}"
    doc = yamlio.load_one(yamlio.read_text(f, display), display)
    if doc is not None and not isinstance(doc, dict):
        raise BundleError(f"the file must be a mapping with a '{key}' list, not {kind_of(doc)}", path=display)
    items = doc.get(key) if isinstance(doc, dict) else None
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("type"), str) for i in items):
        raise BundleError(f"{key} must be a list of {{type, value}} entries", path=display)
    for i, item in enumerate(items):
        if problem := _entry_problem(item["type"], item.get("value"), dependency=key == "dependencies"):
            raise BundleError(f"{key}[{i}] ({item['type']}): {problem}", path=display)
    return items


def _entry_problem(type_: str, value: Any, *, dependency: bool) -> str | None:
    """What is wrong with one entry of dependencies.yaml or properties.yaml, as the catalog would see it."""
    from reconciler.catalog.validate import property_problem
    from reconciler.model.catalog import PROP_CONSTRAINT
    from reconciler.model.constraints import parse_olm_constraint

    if dependency and type_ in (PROP_PACKAGE, PROP_GVK):
        keys = ("packageName", "version") if type_ == PROP_PACKAGE else ("group", "version", "kind")
        if not isinstance(value, dict):
            return f"value must be a mapping with {', '.join(keys)}"
        bad = [k for k in keys if not isinstance(value.get(k), str)]
        return f"value.{bad[0]} must be a string" if bad else None
    if type_ == PROP_CONSTRAINT:
        try:
            parse_olm_constraint(value)
        except InputError as exc:
            return exc.message
        return None
    return property_problem(type_, value)


def _crd_gvks(objs: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for o in objs:
        if o.get("kind") != "CustomResourceDefinition":
            continue
        spec = o.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
        versions = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict)]
        if spec.get("version"):
            versions.append(spec["version"])
        out.extend({"group": group, "kind": kind, "version": v} for v in versions if v)
    return out


def _dedupe(props: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for p in props:
        k = _prop_key(p)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def _registry_v1(content: BundleContent, root: Path, name: str, image: str) -> dict[str, Any]:
    package = content.annotations.get(ANNOTATION_PACKAGE)
    if not package:
        raise BundleError(f"metadata/annotations.yaml has no {ANNOTATION_PACKAGE}", path=name)
    objs = [m.obj for m in content.manifests]
    csvs = [o for o in objs if o.get("kind") == "ClusterServiceVersion"
            and str(o.get("apiVersion", "")).startswith("operators.coreos.com/")]
    if len(csvs) != 1:
        raise BundleError(f"a registry+v1 bundle needs exactly one ClusterServiceVersion, found {len(csvs)}",
                          path=name)
    csv = csvs[0]
    meta, spec = csv.get("metadata") or {}, csv.get("spec") or {}
    csv_name, version = meta.get("name"), spec.get("version")
    if not csv_name or not version:
        raise BundleError("the ClusterServiceVersion needs metadata.name and spec.version", path=name)
    props: list[dict[str, Any]] = [{"type": PROP_PACKAGE, "value": {"packageName": package, "version": str(version)}}]
    provided = _crd_gvks(objs)
    required = []
    api = spec.get("apiservicedefinitions") or {}
    provided += [{"group": a.get("group", ""), "kind": a.get("kind", ""), "version": a.get("version", "")}
                 for a in api.get("owned") or [] if isinstance(a, dict)]
    crds = spec.get("customresourcedefinitions") or {}
    for r in crds.get("required") or []:
        if isinstance(r, dict):
            group = str(r.get("name", "")).partition(".")[2]
            required.append({"group": group, "kind": r.get("kind", ""), "version": r.get("version", "")})
    required += [{"group": a.get("group", ""), "kind": a.get("kind", ""), "version": a.get("version", "")}
                 for a in api.get("required") or [] if isinstance(a, dict)]
    others: list[dict[str, Any]] = []
    for dep in _metadata_list(root, name, "dependencies.yaml", "dependencies"):
        value = dep.get("value")
        if dep["type"] == PROP_GVK and isinstance(value, dict):
            required.append({k: str(value.get(k, "")) for k in ("group", "kind", "version")})
        elif dep["type"] == PROP_PACKAGE and isinstance(value, dict):
            others.append({"type": PROP_PACKAGE_REQUIRED, "value": {"packageName": str(value.get("packageName", "")),
                                                                    "versionRange": str(value.get("version", ""))}})
        else:
            others.append({"type": dep["type"], "value": value})
    declared = _metadata_list(root, name, "properties.yaml", "properties")
    raw = (meta.get("annotations") or {}).get(CSV_PROPERTIES_ANNOTATION)
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise BundleError(f"CSV annotation {CSV_PROPERTIES_ANNOTATION} is not valid JSON", path=name) from None
        declared += [p for p in (parsed.get("properties") if isinstance(parsed, dict) else None) or []
                     if isinstance(p, dict) and isinstance(p.get("type"), str)]
    for p in declared:
        if p["type"] == PROP_PACKAGE:
            props[0] = {"type": PROP_PACKAGE, "value": p.get("value")}  # an explicit olm.package wins, as in opm
        elif p["type"] == PROP_GVK and isinstance(p.get("value"), dict):
            provided.append({k: str(p["value"].get(k, "")) for k in ("group", "kind", "version")})
        else:
            others.append({"type": p["type"], "value": p.get("value")})
    props += [{"type": PROP_GVK, "value": g} for g in provided]
    props += [{"type": PROP_GVK_REQUIRED, "value": g} for g in required]
    metadata = {}
    for field, where in CSV_METADATA_FIELDS:
        src = meta if where == "metadata" else spec
        key = {"apiServiceDefinitions": "apiservicedefinitions", "crdDescriptions": "customresourcedefinitions"
               }.get(field, field)
        if src.get(key) not in (None, "", [], {}):
            metadata[field] = src[key]
    props += others
    props.append({"type": PROP_CSV_METADATA, "value": metadata})
    return {"schema": "olm.bundle", "name": csv_name, "package": package, "image": image,
            "properties": _dedupe(props), "relatedImages": _related_images(spec, image)}


def _related_images(spec: dict[str, Any], image: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for r in spec.get("relatedImages") or []:
        if isinstance(r, dict) and r.get("image"):
            out.append({k: str(r[k]) for k in ("name", "image") if r.get(k)})
            seen.add(str(r["image"]))
    extra = [image] if image else []
    strategy = (spec.get("install") or {})
    if strategy.get("strategy") == "deployment":
        for d in (strategy.get("spec") or {}).get("deployments") or []:
            pod = (((d or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            extra += [c.get("image", "") for c in (pod.get("containers") or []) + (pod.get("initContainers") or [])
                      if isinstance(c, dict)]
    for img in extra:
        if img not in seen:
            seen.add(img)
            out.append({"image": img})
    return sorted(out, key=lambda r: r["image"])


def _plain_v0(content: BundleContent, name: str, image: str, package: str | None,
              version: str | None) -> dict[str, Any]:
    if not package or not version:
        raise InputError("a plain+v0 bundle has no metadata: give its package and version",
                         path=name, hint="pass --package NAME --version X.Y.Z")
    objs = [m.obj for m in content.manifests]
    props = [{"type": PROP_PACKAGE, "value": {"packageName": package, "version": version}}]
    props += [{"type": PROP_GVK, "value": g} for g in _crd_gvks(objs)]
    return {"schema": "olm.bundle", "name": f"{package}.v{version}", "package": package, "image": image,
            "properties": _dedupe(props), "relatedImages": [{"image": image}] if image else []}
