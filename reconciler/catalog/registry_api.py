"""A catalog read through the registry gRPC API (``api.Registry``), as OLM v0's catalog-operator reads a
CatalogSource: ``opm serve`` and every registry pod serve it, and a CatalogSource with ``spec.address`` names one.

The messages are described here in code (a ``FileDescriptorProto`` built field by field) from the wire facts of
operator-registry's ``pkg/api/registry.proto``: message and field names, numbers and types. Only the calls the
import needs are used: ``ListPackages``, ``GetPackage``, ``ListBundles`` and, for a bundle that has an image (whose
objects ``ListBundles`` leaves out), ``GetBundle``.

From what they answer, file-based catalog blobs are made back as opm's own conversion from the API to its
model does: a bundle's properties are those served plus the APIs it provides and requires and its
dependencies (``olm.gvk``, ``olm.gvk.required``, ``olm.package.required``), one ``olm.bundle.object`` per object
it carries inline, sorted by type and value; ``ListBundles`` answers once per bundle and channel, which gives
each channel's entries (``replaces``, ``skips``, ``skipRange``); ``GetPackage`` gives the default channel and the
deprecations of the package and its channels. What the API does not carry (a package's icon and description)
is not in the result.
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Any

from reconciler.errors import CatalogError

SERVICE = "api.Registry"
TIMEOUT = 300.0          # seconds for one call; ListBundles of a large index streams for a while
MAX_MESSAGE = 256 * 1024 * 1024   # a bundle message carries its objects inline

_STRING, _MESSAGE = 9, 11   # FieldDescriptorProto types
_OPTIONAL, _REPEATED = 1, 3
# message -> [(field name, number, repeated, message type or None for a string)], as registry.proto declares them
_MESSAGES: dict[str, list[tuple[str, int, bool, str | None]]] = {
    "Deprecation": [("message", 1, False, None)],
    "Channel": [("name", 1, False, None), ("csvName", 2, False, None), ("deprecation", 3, False, "Deprecation")],
    "PackageName": [("name", 1, False, None)],
    "Package": [("name", 1, False, None), ("channels", 2, True, "Channel"), ("defaultChannelName", 3, False, None),
                ("deprecation", 4, False, "Deprecation")],
    "GroupVersionKind": [("group", 1, False, None), ("version", 2, False, None), ("kind", 3, False, None),
                         ("plural", 4, False, None)],
    "Dependency": [("type", 1, False, None), ("value", 2, False, None)],
    "Property": [("type", 1, False, None), ("value", 2, False, None)],
    "Bundle": [("csvName", 1, False, None), ("packageName", 2, False, None), ("channelName", 3, False, None),
               ("csvJson", 4, False, None), ("object", 5, True, None), ("bundlePath", 6, False, None),
               ("providedApis", 7, True, "GroupVersionKind"), ("requiredApis", 8, True, "GroupVersionKind"),
               ("version", 9, False, None), ("skipRange", 10, False, None),
               ("dependencies", 11, True, "Dependency"), ("properties", 12, True, "Property"),
               ("replaces", 13, False, None), ("skips", 14, True, None), ("deprecation", 15, False, "Deprecation")],
    "ListPackageRequest": [],
    "ListBundlesRequest": [],
    "GetPackageRequest": [("name", 1, False, None)],
    "GetBundleRequest": [("pkgName", 1, False, None), ("channelName", 2, False, None), ("csvName", 3, False, None)],
}


@lru_cache(maxsize=1)
def _classes() -> dict[str, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="reconciler/registry.proto", package="api", syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=name)
        for field_name, number, repeated, type_name in fields:
            f = msg.field.add(name=field_name, number=number, label=_REPEATED if repeated else _OPTIONAL,
                              type=_MESSAGE if type_name else _STRING, json_name=field_name)
            if type_name:
                f.type_name = f".api.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"api.{name}")) for name in _MESSAGES}


class Registry:
    """A connection to one registry server (``host:port``, plain text as OLM dials ``spec.address``)."""

    def __init__(self, address: str, what: str) -> None:
        import grpc

        self.address, self.what = address, what
        self.channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", MAX_MESSAGE)])
        self.types = _classes()

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: str, response: str, stream: bool, **fields: Any) -> Any:
        import grpc

        make = self.channel.unary_stream if stream else self.channel.unary_unary
        call = make(f"/{SERVICE}/{method}", request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=self.types[response].FromString)
        try:
            answer = call(self.types[request](**fields), timeout=TIMEOUT)
            return list(answer) if stream else answer
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            name = getattr(code, "name", "") or "an error"
            if name == "UNAVAILABLE":
                raise CatalogError(f"cannot reach the registry server at {self.address}: nothing answers there",
                                   obj=self.what, hint="check the CatalogSource's spec.address, and that this machine "
                                                       "can connect to it (a cluster address may need `kubectl "
                                                       "port-forward`)") from None
            if name == "UNIMPLEMENTED":
                raise CatalogError(f"{self.address} does not serve the registry API ({SERVICE}/{method})",
                                   obj=self.what, hint="spec.address must name a catalog's gRPC server "
                                                       "(opm serve, a registry pod)") from None
            detail = exc.details() if hasattr(exc, "details") else ""
            raise CatalogError(f"the registry server at {self.address} answered {method} with {name}: {detail}",
                               obj=self.what) from None

    def packages(self) -> list[str]:
        return sorted(p.name for p in self._call("ListPackages", "ListPackageRequest", "PackageName", True))

    def package(self, name: str) -> Any:
        return self._call("GetPackage", "GetPackageRequest", "Package", False, name=name)

    def bundles(self) -> list[Any]:
        return self._call("ListBundles", "ListBundlesRequest", "Bundle", True)

    def bundle(self, package: str, channel: str, name: str) -> Any:
        return self._call("GetBundle", "GetBundleRequest", "Bundle", False, pkgName=package, channelName=channel,
                          csvName=name)


def read(address: str, what: str, wanted: frozenset[str] | None) -> tuple[dict[str, list[dict]], tuple[str, ...]]:
    """The blobs of each package served at ``address`` (only ``wanted`` ones when given), and every package name
    the server has."""
    with Registry(address, what) as registry:
        names = tuple(registry.packages())
        chosen = [n for n in names if wanted is None or n in wanted]
        packages = {n: registry.package(n) for n in chosen}
        bundles = [b for b in registry.bundles() if b.packageName in packages] if packages else []
        # A bundle with an image comes without its objects and CSV in ListBundles (opm serve leaves them out, as
        # catalog-operator unpacks the image); GetBundle sends them, once per bundle.
        full: dict[tuple[str, str], Any] = {}
        for b in bundles:
            if b.bundlePath and not b.object and (b.packageName, b.csvName) not in full:
                full[(b.packageName, b.csvName)] = registry.bundle(b.packageName, b.channelName, b.csvName)
        for b in bundles:
            if (b.packageName, b.csvName) in full:
                whole = full[(b.packageName, b.csvName)]
                b.csvJson = whole.csvJson
                b.object.extend(whole.object)
    return {name: package_blobs(packages[name], [b for b in bundles if b.packageName == name]) for name in chosen}, \
        names


def package_blobs(package: Any, bundles: list[Any]) -> list[dict]:
    """One package's file-based catalog blobs from its ``Package`` and its ``Bundle`` answers (one per channel)."""
    name = package.name
    out: list[dict] = [{"schema": "olm.package", "name": name, "defaultChannel": package.defaultChannelName}]
    entries: dict[str, list[dict]] = {}
    seen: dict[str, Any] = {}
    for b in bundles:
        entry: dict[str, Any] = {"name": b.csvName}
        if b.replaces:
            entry["replaces"] = b.replaces
        if b.skips:
            entry["skips"] = list(b.skips)
        if b.skipRange:
            entry["skipRange"] = b.skipRange
        entries.setdefault(b.channelName, []).append(entry)
        seen.setdefault(b.csvName, b)
    for channel in sorted(entries):
        out.append({"schema": "olm.channel", "package": name, "name": channel,
                    "entries": sorted(entries[channel], key=lambda e: e["name"])})
    out += [bundle_blob(seen[n]) for n in sorted(seen)]
    deprecations = []
    if package.HasField("deprecation") and package.deprecation.message:
        deprecations.append({"reference": {"schema": "olm.package"}, "message": package.deprecation.message})
    for channel in package.channels:
        if channel.HasField("deprecation") and channel.deprecation.message:
            deprecations.append({"reference": {"schema": "olm.channel", "name": channel.name},
                                 "message": channel.deprecation.message})
    for n in sorted(seen):
        if seen[n].HasField("deprecation") and seen[n].deprecation.message:
            deprecations.append({"reference": {"schema": "olm.bundle", "name": n},
                                 "message": seen[n].deprecation.message})
    if deprecations:
        out.append({"schema": "olm.deprecations", "package": name, "entries": deprecations})
    return out


def bundle_blob(b: Any) -> dict:
    """An ``olm.bundle`` blob from one ``Bundle`` answer, as opm's API-to-model conversion makes it."""
    props: list[dict] = []
    provided: list[tuple[str, str, str]] = []
    required: list[tuple[str, str, str]] = []
    packages: dict[tuple[str, str], None] = {}   # olm.package.required, served both as a property and a dependency
    has_package = False
    for p in b.properties:
        value = _json(p.value, b.csvName)
        if p.type in ("olm.gvk", "olm.gvk.required") and isinstance(value, dict):
            (provided if p.type == "olm.gvk" else required).append(
                (value.get("group", ""), value.get("version", ""), value.get("kind", "")))
        elif p.type == "olm.package.required" and isinstance(value, dict):
            packages[(str(value.get("packageName", "")), str(value.get("versionRange", "")))] = None
        else:
            has_package = has_package or p.type == "olm.package"
            props.append({"type": p.type, "value": value})
    for d in b.dependencies:
        value = _json(d.value, b.csvName)
        if not isinstance(value, dict):
            continue
        if d.type == "olm.gvk":
            required.append((value.get("group", ""), value.get("version", ""), value.get("kind", "")))
        elif d.type == "olm.package":
            packages[(str(value.get("packageName", "")), str(value.get("version", "")))] = None
    props += [{"type": "olm.package.required", "value": {"packageName": n, "versionRange": r}} for n, r in packages]
    if not has_package:
        props.append({"type": "olm.package", "value": {"packageName": b.packageName, "version": b.version}})
    provided += [(g.group, g.version, g.kind) for g in b.providedApis]
    required += [(g.group, g.version, g.kind) for g in b.requiredApis]
    props += [{"type": "olm.gvk", "value": {"group": g, "kind": k, "version": v}} for g, v, k in sorted(set(provided))]
    props += [{"type": "olm.gvk.required", "value": {"group": g, "kind": k, "version": v}}
              for g, v, k in sorted(set(required))]
    props += [{"type": "olm.bundle.object", "value": {"data": base64.b64encode(o.encode()).decode()}}
              for o in b.object]
    props.sort(key=lambda p: (p["type"], json.dumps(p["value"], sort_keys=True, separators=(",", ":"))))
    blob: dict[str, Any] = {"schema": "olm.bundle", "name": b.csvName, "package": b.packageName,
                            "image": b.bundlePath, "properties": props}
    related = _related_images(b.csvJson, b.csvName)
    if related:
        blob["relatedImages"] = related
    return blob


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise CatalogError(f"bundle {where}: the registry server sent a property that is not JSON: {text[:80]!r}")\
            from None


def _related_images(csv_json: str, where: str) -> list[dict]:
    if not csv_json:
        return []
    csv = _json(csv_json, where)
    images = ((csv.get("spec") or {}).get("relatedImages") or []) if isinstance(csv, dict) else []
    return [{"name": str(i.get("name") or ""), "image": str(i.get("image") or "")} for i in images
            if isinstance(i, dict)]
