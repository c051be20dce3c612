"""Rendering a bundle directory into the ``olm.bundle`` blob a catalog lists it with.

registry+v1 follows what ``opm render`` derives from a bundle:

* ``olm.package``: the package annotation and the CSV's ``spec.version``;
* ``olm.gvk``: every version of every CRD in the bundle, and owned APIService definitions;
* ``olm.gvk.required``: the CSV's required CRDs and APIServices, and ``olm.gvk`` entries of
  ``metadata/dependencies.yaml``;
* ``olm.package.required``: ``olm.package`` entries of ``dependencies.yaml`` (their ``version`` is a range);
* ``olm.label.required``: ``olm.label`` entries of ``dependencies.yaml``, as OLM v0 reads such a
  dependency (opm writes it as ``olm.label``, which would make the bundle provide the label it needs);
* other dependencies (``olm.constraint``, ...) and every entry of
  ``metadata/properties.yaml`` and of the CSV's ``olm.properties`` annotation, verbatim;
* ``olm.bundle.object``: every manifest (the first document of each file, the first CSV) as base64
  of its JSON as Go writes it, after the other properties, ordered by that text as opm sorts
  them; or, with ``migrate``, one ``olm.csv.metadata`` with the CSV's display fields instead (what opm's
  ``bundle-object-to-csv-metadata`` migration leaves in catalogs);
* ``relatedImages``: the CSV's ``spec.relatedImages``, then the bundle image, then the images of the
  install strategy's containers and init containers, without duplicates, sorted by image (ties keep
  that order; opm's unstable sort may swap them); every entry has a ``name`` (empty when the CSV
  gives none), as opm writes it.

Properties are sorted by type, then by their JSON value as Go writes it, as opm sorts them.
``dependencies`` and ``properties`` are read from the first file of ``metadata/`` that has them,
whatever its name, as opm reads them; the CSV's ``olm.properties`` annotation adds properties.
Among the ``olm.package`` properties the last one read wins (``properties`` of ``metadata/``, the
one derived from the annotations and CSV, those of the annotation), as in opm.

A k8s+v1 bundle carries no CSV: the bundle layer synthesizes one from ``metadata/olm.yaml`` and the
manifests (refusing wildcard RBAC bound to the operator), and the bundle renders through it, as
the design asks when such a bundle is added to a catalog; the APIs it requires (inferred from its
RBAC) become ``olm.gvk.required`` properties (see ``reconciler.bundle.k8s_v1.required_apis`` and ``APIKinds``).
plain+v0 bundles carry no metadata: the package and version must be given. k8s+v1 and plain+v0
bundles carry an ``olm.bundle.mediatype`` property, so one catalog can mix formats; a registry+v1
bundle has none, as in opm's output (its absence means registry+v1).

The bundle is read once by the bundle layer (``reconciler.bundle.content``, the same reader the
reconciler converts with, cached by content digest); only the files of ``metadata/`` are read
here, and a manifest file again when reading it repaired something (its object is kept as
written). Nothing in a bundle is executed.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.bundle.apikinds import (  # noqa: F401 - APIKinds and api_kinds_of_objects are importable from here
    APIKinds, Table, api_kinds_of_objects, collect, crd_names, finish,
)
from reconciler.bundle.content import ANNOTATION_PACKAGE, BundleContent
from reconciler.errors import BundleError, InputError, UnsupportedBundleError
from reconciler.model.shape import kind_of
from reconciler.model.catalog import (
    PROP_BUNDLE_MEDIATYPE, PROP_BUNDLE_OBJECT, PROP_CONSTRAINT, PROP_CSV_METADATA, PROP_GVK, PROP_GVK_REQUIRED,
    PROP_LABEL, PROP_LABEL_REQUIRED, PROP_PACKAGE, PROP_PACKAGE_REQUIRED, csv_metadata,
)

CSV_PROPERTIES_ANNOTATION = "olm.properties"   # operator-registry's key for extra bundle properties


def api_kinds(catalogs: Iterable[Any]) -> APIKinds:
    """The plural -> kind mapping of every API the bundles of ``catalogs`` (``model.catalog.Catalog``) provide."""
    exact: Table = {}
    guessed: Table = {}
    for cat in catalogs:
        for bundle in cat.bundles.values():
            for p in bundle.properties:
                value = p.value if isinstance(p.value, dict) else {}
                if p.type == PROP_BUNDLE_OBJECT and value.get("data"):
                    try:
                        crd_names(exact, json.loads(base64.b64decode(str(value["data"]))))
                    except (ValueError, RecursionError):
                        continue   # a catalog finding, not ours to report here
                elif p.type == PROP_CSV_METADATA and isinstance(value.get("crdDescriptions"), dict):
                    for d in value["crdDescriptions"].get("owned") or []:
                        if isinstance(d, dict) and "." in str(d.get("name") or ""):
                            plural, _, group = str(d["name"]).partition(".")
                            collect(exact, group, plural, str(d.get("kind") or ""), str(d.get("version") or ""))
                elif p.type == PROP_GVK:
                    collect(guessed, str(value.get("group") or ""), "", str(value.get("kind") or ""),
                             str(value.get("version") or ""))
    return finish(exact, guessed)


def api_kinds_of_catalogs(directories: Iterable[str]) -> APIKinds | None:
    """``api_kinds`` of the file-based catalogs in ``directories`` (each loaded and validated); None for none."""
    from reconciler.catalog import load_catalog

    dirs = list(directories)
    return api_kinds(load_catalog(d, Path(d)) for d in dirs) if dirs else None


def render_bundle_dir(path: Path, image: str = "", *, package: str | None = None, version: str | None = None,
                      display: str | None = None, migrate: bool = False,
                      providers: APIKinds | None = None, warn: Callable[[str], object] | None = None
                      ) -> dict[str, Any]:
    """The ``olm.bundle`` blob for the bundle directory at ``path``.

    The bundle is read once, by the same code the reconciler converts it with
    (``reconciler.bundle.content``); a k8s+v1 bundle is rendered through the
    CSV the bundle layer synthesizes for it, as the design asks when such a
    bundle is added to a catalog. ``migrate`` gives ``olm.csv.metadata`` in
    place of ``olm.bundle.object`` properties. ``providers`` maps the
    resources a k8s+v1 bundle's RBAC names to kinds (see ``api_kinds``);
    ``warn`` hears what could not be mapped.
    """
    from reconciler.bundle.content import read_content
    from reconciler.bundle.source import FetchedBundle, directory_digest

    name = display or str(path)
    if not path.is_dir():
        raise BundleError(f"bundle directory {name} does not exist", path=name)
    content = read_content(FetchedBundle(name, path, directory_digest(path, name)))
    mediatype = content.mediatype
    if mediatype == "registry+v1":
        return _registry_v1(content, path, name, image, migrate)
    if mediatype == "k8s+v1":
        from reconciler.bundle.k8s_v1 import required_properties, synthesize

        synthesized, inferred = synthesize(content)
        extra = required_properties(content, inferred, providers, name, warn)
        extra.append({"type": PROP_BUNDLE_MEDIATYPE, "value": mediatype})
        return _registry_v1(synthesized, path, name, image, migrate, extra, synthesized=True)
    if mediatype == "plain+v0":
        blob = _plain_v0(content, name, image, package or content.annotations.get(ANNOTATION_PACKAGE), version)
        blob["properties"] = _sorted(blob["properties"] + [{"type": PROP_BUNDLE_MEDIATYPE, "value": mediatype}])
        return blob
    raise UnsupportedBundleError(f"bundle mediatype {mediatype or '(none)'!r} cannot be rendered",
                                 path=f"{name}/metadata/annotations.yaml",
                                 hint="supported: registry+v1, k8s+v1, plain+v0")


def go_json(value: Any, *, sort_keys: bool = True, indent: str | None = None, escape_html: bool = True) -> str:
    """JSON as Go's encoding/json writes it: ``json.Marshal``, or with ``indent`` ``json.MarshalIndent``.

    Go writes every number as a float64 (integral ones below 1e21 as integers, others in the shortest form,
    fixed-point from 1e-6 to 1e21), sorts a map's keys (``sort_keys``; a struct keeps its fields' order) and,
    unless told not to (``escape_html``), escapes ``<``, ``>``, ``&``, U+2028 and U+2029 in strings. A
    subtree wrapped in ``_Marshalled`` is written escaped and with sorted keys whatever the rest is: JSON
    that Go produced with ``json.Marshal`` and kept as raw bytes.
    """
    out: list[str] = []
    colon = ":" if indent is None else ": "

    def emit(v: Any, pad: str, escape: bool, sort: bool) -> None:
        if isinstance(v, _Marshalled):
            emit(v.value, pad, True, True)
        elif isinstance(v, (dict, list, tuple)):
            items = [(_go_key(k), x) for k, x in v.items()] if isinstance(v, dict) else v
            if sort and isinstance(v, dict):
                items.sort(key=lambda kv: kv[0])
            if not items:
                out.append("{}" if isinstance(v, dict) else "[]")
                return
            inner = pad if indent is None else pad + indent
            out.append("{" if isinstance(v, dict) else "[")
            for i, item in enumerate(items):
                out.append("," if i else "")
                if indent is not None:
                    out.append("\n" + inner)
                if isinstance(v, dict):
                    out.append(_go_string(item[0], escape) + colon)
                    item = item[1]
                emit(item, inner, escape, sort)
            out.append(("" if indent is None else "\n" + pad) + ("}" if isinstance(v, dict) else "]"))
        elif isinstance(v, str):
            out.append(_go_string(v, escape))
        elif v is None or isinstance(v, bool):
            out.append({None: "null", True: "true", False: "false"}[v])
        elif isinstance(v, int) and -(1 << 63) <= v < (1 << 64):
            out.append(str(v))   # what a YAML or JSON integer that fits int64 or uint64 decodes to in Go
        elif isinstance(v, (int, float)):
            out.append(_go_float(float(v)))
        else:
            raise TypeError(f"{type(v).__name__} is not JSON")

    emit(value, "", escape_html, sort_keys)
    return "".join(out)


class _Marshalled:
    """A value Go marshalled on its own and kept as raw JSON: HTML characters escaped, map keys sorted."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


# Properties opm builds from typed values and writes unescaped, in their fields' order; any other property's
# value it holds as the raw JSON its YAML decoder marshalled (properties.yaml, an olm.constraint dependency).
_TYPED_PROPERTIES = frozenset((PROP_PACKAGE, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE_REQUIRED, PROP_CSV_METADATA,
                               PROP_BUNDLE_OBJECT, PROP_BUNDLE_MEDIATYPE))


def blob_json(blob: dict[str, Any]) -> str:
    """A rendered blob as ``opm render -o json`` writes it, byte for byte.

    opm writes the blob, its properties and related images as Go structs (fields in order, nothing escaped),
    indented by four spaces; a property's value as its type makes it (``_TYPED_PROPERTIES``), as it was
    written (``_AsWritten``), or else as the JSON its YAML decoder marshalled (``_Marshalled``).
    """
    properties = [p if p.get("type") in _TYPED_PROPERTIES or isinstance(p, _AsWritten)
                  else {**p, "value": _Marshalled(p.get("value"))} for p in blob.get("properties") or []]
    shown = {**blob, "properties": properties} if "properties" in blob else blob
    return go_json(shown, sort_keys=False, indent="    ", escape_html=False) + "\n"


_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SURROGATE = re.compile("[\ud800-\udfff]")


def _go_key(key: Any) -> str:
    """A map key as JSON writes it: a YAML key that is not a string (``1:``, ``true:``) becomes its text."""
    if isinstance(key, str):
        return key
    return json.dumps(key) if key is None or isinstance(key, (bool, int, float)) else str(key)


def _go_string(text: str, escape_html: bool = True) -> str:
    text = json.dumps(_SURROGATE.sub("\ufffd", text), ensure_ascii=False)  # Go writes a lone surrogate as U+FFFD
    for raw, escaped in _GO_ESCAPES if escape_html else _GO_ESCAPES[3:]:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def _go_float(f: float) -> str:
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{f} is not a JSON number")
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    text = repr(f)   # the shortest digits that read back as f, as Go's strconv gives
    if 1e-6 <= abs(f) < 1e21:
        if "e" in text:
            from decimal import Decimal

            text = format(Decimal(text), "f")
        return text
    mantissa, exponent = text.split("e") if "e" in text else (text, "0")
    exponent = int(exponent)
    return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".replace("e-0", "e-")  # e-07 -> e-7


def _prop_key(p: dict[str, Any]) -> tuple[str, str]:
    return p["type"], p.get("_raw") or go_json(p["value"])


def _sorted(props: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """opm's order: by type, then by the value's JSON text."""
    return [(_AsWritten if "_raw" in p else dict)(type=p["type"], value=p["value"])
            for p in sorted(props, key=_prop_key)]


class _AsWritten(dict):  # type: ignore[type-arg]
    """A property opm keeps as the JSON it was written in (the CSV's ``olm.properties`` annotation).

    Equal to the plain entry; ``blob_json`` writes its value in its own key order and unescaped, as opm does.
    """


def _metadata_lists(root: Path, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(dependencies, properties): from the first file of ``metadata/`` that has each, as opm reads them.

    opm skips a file it cannot parse; here a file named ``dependencies.yaml`` or
    ``properties.yaml`` that does not parse is an error (its entries would be
    lost silently), and any other file that does not parse is passed over.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    meta = root / "metadata"
    for f in sorted(meta.iterdir()) if meta.is_dir() else []:
        if not f.is_file() or f.is_symlink():
            continue
        display = f"{name}/metadata/{f.name}"
        try:
            docs = yamlio.read_all(f, display, go=True)
        except InputError as exc:
            if f.name in ("dependencies.yaml", "properties.yaml"):
                raise BundleError(exc.message, path=exc.path,
                                  hint=f"fix the file: opm would drop it and the bundle's {f.name[:-5]} with it"
                                  ) from None
            continue
        doc = docs[0] if docs else None
        if not isinstance(doc, dict):
            if doc is not None and f.name in ("dependencies.yaml", "properties.yaml"):
                raise BundleError(f"the file must be a mapping with a '{f.name[:-5]}' list, not "
                                  f"{kind_of(doc)}", path=display)
            continue
        for key in ("dependencies", "properties"):
            items = doc.get(key)
            if key in found or not items:
                continue
            if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("type"), str)
                                                      for i in items):
                raise BundleError(f"{key} must be a list of {{type, value}} entries", path=display)
            for i, item in enumerate(items):
                if problem := _entry_problem(item["type"], item.get("value"), dependency=key == "dependencies"):
                    raise BundleError(f"{key}[{i}] ({item['type']}): {problem}", path=display)
            found[key] = items
    return found.get("dependencies", []), found.get("properties", [])


def _entry_problem(type_: str, value: Any, *, dependency: bool) -> str | None:
    """What is wrong with one entry of dependencies.yaml or properties.yaml, as the catalog would see it."""
    from reconciler.catalog.validate import property_problem
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
        if spec.get("version") and str(o.get("apiVersion", "")).endswith("/v1beta1"):
            versions.append(spec["version"])   # only v1beta1 has spec.version (opm reads it there only)
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


def _gvk(value: Any) -> dict[str, str]:
    value = value if isinstance(value, dict) else {}
    return {k: str(value.get(k) or "") for k in ("group", "kind", "version")}


def _registry_v1(content: BundleContent, root: Path, name: str, image: str, migrate: bool,
                 extra: list[dict[str, Any]] | None = None, *, synthesized: bool = False) -> dict[str, Any]:
    package = content.annotations.get(ANNOTATION_PACKAGE)
    if not package:
        raise BundleError(f"metadata/annotations.yaml has no {ANNOTATION_PACKAGE}", path=name)
    # opm keeps the first document of each manifest file, and the first CSV, as written: a file whose
    # reading repaired something (a key's case, a CSV's group) is read again for its original text.
    # A synthesized (k8s+v1) bundle has no opm reading to follow: all its objects, as synthesized.
    repaired = {w.partition(": ")[0] for w in content.warnings}
    firsts: list[dict[str, Any]] = [m.obj for m in content.manifests] if synthesized else []
    files: set[str] = set()
    for m in content.manifests if not synthesized else ():
        if m.file not in files:
            files.add(m.file)
            if m.obj.get("kind") != "ClusterServiceVersion" or not any(
                    o.get("kind") == "ClusterServiceVersion" for o in firsts):
                obj = m.obj
                if m.file in repaired:
                    docs = [d for d in yamlio.read_all(root / m.file, f"{name}/{m.file}") if isinstance(d, dict)]
                    obj = docs[0] if docs else obj
                firsts.append(obj)
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
    dependencies, declared = _metadata_lists(root, name)
    # the order opm reads properties in: metadata/ properties, the derived package, the CSV's annotation
    read: list[dict[str, Any]] = [{"type": p["type"], "value": p.get("value")} for p in declared]
    read.append({"type": PROP_PACKAGE, "value": {"packageName": package, "version": str(version)}})
    raw = (meta.get("annotations") or {}).get(CSV_PROPERTIES_ANNOTATION)
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None   # opm logs and ignores an annotation it cannot parse
        read += [{"type": p["type"], "value": p.get("value"), "_raw": go_json(p.get("value"), sort_keys=False)}
                 for p in (parsed if isinstance(parsed, list) else []) if isinstance(p, dict)
                 and isinstance(p.get("type"), str)]
    package_prop: dict[str, Any] | None = None
    provided: list[dict[str, str]] = []
    others: list[dict[str, Any]] = []
    for p in _dedupe(read):   # opm keeps one of each (type, value)
        if p["type"] == PROP_PACKAGE:
            v = p["value"] if isinstance(p["value"], dict) else {}
            package_prop = {"type": PROP_PACKAGE, "value": {"packageName": str(v.get("packageName") or ""),
                                                            "version": str(v.get("version") or "")}}
        elif p["type"] == PROP_GVK:
            provided.append(_gvk(p["value"]))
        else:
            others.append(p)
    required: list[dict[str, str]] = []
    package_required: list[dict[str, Any]] = []
    for dep in dependencies:
        value = dep.get("value")
        if dep["type"] == PROP_GVK:
            required.append(_gvk(value))
        elif dep["type"] == PROP_PACKAGE:
            value = value if isinstance(value, dict) else {}
            package_required.append({"type": PROP_PACKAGE_REQUIRED, "value": {
                "packageName": str(value.get("packageName") or ""), "versionRange": str(value.get("version") or "")}})
        elif dep["type"] == PROP_LABEL:   # a requirement, as OLM v0 reads it (see the module's docstring)
            others.append({"type": PROP_LABEL_REQUIRED, "value": value})
        else:
            others.append({"type": dep["type"], "value": value})
    provided += _crd_gvks(firsts)
    api = spec.get("apiservicedefinitions") or {}
    provided += [_gvk(a) for a in api.get("owned") or [] if isinstance(a, dict)]
    crds = spec.get("customresourcedefinitions") or {}
    for r in crds.get("required") or []:
        if isinstance(r, dict):
            group = str(r.get("name", "")).partition(".")[2]
            required.append({"group": group, "kind": str(r.get("kind") or ""), "version": str(r.get("version") or "")})
    required += [_gvk(a) for a in api.get("required") or [] if isinstance(a, dict)]
    props: list[dict[str, Any]] = [package_prop] if package_prop else []
    props += _dedupe([{"type": PROP_GVK, "value": g} for g in provided])
    props += _dedupe([{"type": PROP_GVK_REQUIRED, "value": g} for g in required])
    props += package_required + others + list(extra or ())
    props = _sorted(props)
    if migrate and image:
        props.append({"type": PROP_CSV_METADATA, "value": csv_metadata(csv)})
    else:
        # sorted with the other properties by opm (by their base64 text), then moved after them
        props += [{"type": PROP_BUNDLE_OBJECT, "value": {"data": data}}
                  for data in sorted(base64.b64encode(go_json(o).encode()).decode() for o in firsts)]
    return {"schema": "olm.bundle", "name": csv_name, "package": package, "image": image,
            "properties": props, "relatedImages": _related_images(spec, image)}


def _related_images(spec: dict[str, Any], image: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for r in spec.get("relatedImages") or []:
        if isinstance(r, dict):
            out.append({"name": str(r.get("name") or ""), "image": str(r.get("image") or "")})
            seen.add(str(r.get("image") or ""))
    extra = [image] if image else []
    strategy = (spec.get("install") or {})
    if strategy.get("strategy") == "deployment":
        for d in (strategy.get("spec") or {}).get("deployments") or []:
            pod = (((d or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            containers = (pod.get("containers") or []) + (pod.get("initContainers") or [])
            extra += [str(c.get("image") or "") for c in containers if isinstance(c, dict)]
    for img in extra:
        if img not in seen:
            seen.add(img)
            out.append({"name": "", "image": img})
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
