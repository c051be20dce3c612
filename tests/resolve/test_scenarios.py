"""The resolution scenario suite: every file in scenarios/ is one case, read like a specification.

A scenario gives catalogs (a compact description turned into real FBC files),
declarations exactly as a user commits them, what is installed (olm.lock), and
the expected result: the bundle each owner gets, or the sentences the error
must contain. Each runs through the real path (repository reader, catalog
loader, resolver, lockfile) twice, and the two lockfiles must be identical.

Scenario keys:
  description      what the case shows
  upstream         for a case translated from OLM v0's or deppy's own resolver tests: the repository, file
                   and test (and sub-case) it translates; the expectation is upstream's unless
  differs          says why the answer here differs on purpose (docs/resolution.md, "Upstream test cases")
  catalogs         {name: {priority, upgradeGraph, packages: {pkg: {defaultChannel, channels: {ch: [entry]}, bundles: {name: spec}}},
                           deprecations: {pkg: [{schema, name, message}]}}}
                   entry: a bundle name, or {name, replaces, skips, skipRange}
                   bundle spec: {version, provides: [g/v/Kind], requires: [g/v/Kind],
                                 requiresPackage: {pkg: range}, properties: [...], minKubeVersion,
                                 objects: true (the CSV, and a CRD, as olm.bundle.object, not olm.csv.metadata)}
  declarations     YAML documents (Operator, Input, InputClass)
  installed        {owner: "catalog/bundle"}  (a bundle the catalog lacks is of the package its name starts with;
                   "catalog/bundle@1.2.3" gives the installed version where the name does not carry it)
  kubernetesVersion
  expect           bundles: {owner: bundle or catalog/bundle}  (the complete set)
                   applied: {owner: false}    required_by: {owner: [names]}
                   dependencies: {owner: [[need, bundle]]}    satisfies: {owner: [[bundle, need]]}
                   updates: {owner: {channel: [bundles]}}  (channel as catalog/channel when in another catalog)
                   deprecations: {owner: [[package|channel|bundle, name]]}      error: [substrings]
                   errorExcludes: [substrings the error must not contain]
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from reconciler import pipeline, yamlio
from reconciler.lock import plan_lock
from reconciler.errors import ReconcilerError
from reconciler.model.lock import LockEntry, Lockfile
from reconciler.repo import read_repository

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _gvk(text: str) -> dict[str, str]:
    parts = text.split("/")
    group, version, kind = (parts if len(parts) == 3 else ["", *parts])
    return {"group": group, "version": version, "kind": kind}


def _version_of(name: str) -> str:
    match = re.search(r"\.v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$", name)
    assert match, f"cannot infer a version from bundle name {name}; give 'version'"
    return match.group(1)


def _objects(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A CRD and the CSV as ``olm.bundle.object`` properties, as ``opm render`` writes them without migration."""
    csv = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
           "metadata": {"name": name}, "spec": {"displayName": name, "description": "mentions minKubeVersion 9.9.9"}}
    if spec.get("minKubeVersion"):
        csv["spec"]["minKubeVersion"] = str(spec["minKubeVersion"])
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    return [{"type": "olm.bundle.object", "value": {"data": base64.b64encode(json.dumps(o, sort_keys=True).encode())
                                                    .decode()}} for o in (crd, csv)]


def _fbc(catalog: dict[str, Any]) -> list[dict[str, Any]]:
    blobs: list[dict[str, Any]] = []
    for pkg, spec in sorted((catalog.get("packages") or {}).items()):
        blobs.append({"schema": "olm.package", "name": pkg, "defaultChannel": spec.get("defaultChannel", "stable")})
        for ch, entries in sorted((spec.get("channels") or {}).items()):
            blobs.append({"schema": "olm.channel", "package": pkg, "name": ch,
                          "entries": [e if isinstance(e, dict) else {"name": e} for e in entries]})
        for name, b in sorted((spec.get("bundles") or {}).items()):
            b = b or {}
            version = str(b.get("version") or _version_of(name))
            props = [{"type": "olm.package", "value": {"packageName": pkg, "version": version}}]
            props += [{"type": "olm.gvk", "value": _gvk(g)} for g in b.get("provides", [])]
            props += [{"type": "olm.gvk.required", "value": _gvk(g)} for g in b.get("requires", [])]
            props += [{"type": "olm.package.required", "value": {"packageName": p, "versionRange": r}}
                      for p, r in sorted((b.get("requiresPackage") or {}).items())]
            if b.get("objects"):
                props += _objects(name, b)
            elif b.get("minKubeVersion"):
                props.append({"type": "olm.csv.metadata", "value": {"minKubeVersion": str(b["minKubeVersion"])}})
            props += b.get("properties", [])
            blobs.append({"schema": "olm.bundle", "package": pkg, "name": name,
                          "image": f"registry.invalid/{pkg}-bundle:v{version}", "properties": props})
    for pkg, entries in sorted((catalog.get("deprecations") or {}).items()):
        blobs.append({"schema": "olm.deprecations", "package": pkg, "entries": [
            {"reference": {"schema": e["schema"], **({"name": e["name"]} if e.get("name") else {})},
             "message": e.get("message", "deprecated")} for e in entries]})
    return blobs


def _materialise(scenario: dict[str, Any], root: Path) -> None:
    settings: dict[str, Any] = {}
    for name, catalog in (scenario.get("catalogs") or {}).items():
        path = root / "catalogs" / name / "catalog.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(yamlio.dump_all(_fbc(catalog)))
        for key in ("priority", "upgradeGraph"):
            if catalog.get(key):
                settings.setdefault("catalogs", {}).setdefault(name, {})[key] = catalog[key]
    if scenario.get("kubernetesVersion"):
        settings["kubernetesVersion"] = str(scenario["kubernetesVersion"])
    if settings:
        (root / "reconciler.yaml").write_text(yamlio.dump(settings))
    (root / "declarations").mkdir()
    (root / "declarations" / "all.yaml").write_text(scenario.get("declarations") or "")
    entries = []
    for owner, ref in sorted((scenario.get("installed") or {}).items()):
        catalog, _, bundle = ref.partition("/")
        bundle, _, version = bundle.partition("@")
        specs = scenario["catalogs"][catalog]["packages"]
        pkg = next((p for p, spec in specs.items() if bundle in (spec.get("bundles") or {})),
                   bundle.rsplit(".v", 1)[0])  # gone: by its name
        known = (specs.get(pkg, {}).get("bundles") or {}).get(bundle) or {}
        version = version or str(known.get("version") or _version_of(bundle))
        entries.append(LockEntry(operator=owner, package=pkg, name=bundle, version=version,
                                 catalog=catalog, channel="", source=f"registry.invalid/{pkg}-bundle",
                                 digest=""))
    if entries:
        (root / "olm.lock").write_text(Lockfile(tuple(entries)).render())


def _resolve(root: Path) -> tuple[Any, str]:
    snapshot = read_repository(root)
    resolution = pipeline.resolve(snapshot)
    return resolution, plan_lock(snapshot, resolution).render()


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, tmp_path: Path) -> None:
    scenario = yamlio.load_one(path.read_text(), str(path))
    expect = scenario["expect"]
    _materialise(scenario, tmp_path)
    if "error" in expect:
        with pytest.raises(ReconcilerError) as err:
            _resolve(tmp_path)
        text = err.value.render()
        for fragment in expect["error"]:
            assert fragment in text, f"{path.name}: expected {fragment!r} in:\n{text}"
        for fragment in expect.get("errorExcludes", []):
            assert fragment not in text, f"{path.name}: {fragment!r} must not be blamed in:\n{text}"
        return
    resolution, lock = _resolve(tmp_path)
    got = {s.owner: (s.catalog, s.bundle_name) for s in resolution.selections}
    want = {owner: tuple(ref.split("/", 1)) if "/" in ref else (got.get(owner, ("", ""))[0], ref)
            for owner, ref in (expect.get("bundles") or {}).items()}
    assert got == want, f"{path.name}: {scenario.get('description', '')}"
    for owner, applied in (expect.get("applied") or {}).items():
        assert resolution.for_owner(owner).apply is applied
    for owner, names in (expect.get("required_by") or {}).items():
        assert list(resolution.for_owner(owner).required_by) == names
    for owner, pairs in (expect.get("dependencies") or {}).items():
        assert [list(p) for p in resolution.for_owner(owner).dependencies] == pairs
    for owner, pairs in (expect.get("satisfies") or {}).items():
        assert [list(p) for p in resolution.for_owner(owner).satisfies] == pairs
    if "updates" in expect:
        updates = {}
        for u in resolution.updates:
            own = resolution.for_owner(u.operator).catalog
            key = u.channel if u.catalog == own else f"{u.catalog}/{u.channel}"
            updates.setdefault(u.operator, {})[key] = list(u.options)
        assert updates == (expect["updates"] or {})
    if "deprecations" in expect:
        found: dict[str, list[list[str]]] = {}
        for dep in resolution.deprecations:
            found.setdefault(dep.operator, []).append([dep.scope, dep.name])
        assert found == (expect["deprecations"] or {})
    again = _resolve(tmp_path)[1]
    assert again == lock, "the same inputs must give the same lockfile, byte for byte"


def test_there_are_at_least_forty_scenarios() -> None:
    assert len(SCENARIOS) >= 40


def test_upstream_translations_cite_their_test() -> None:
    """Every translated OLM v0 or deppy case names the upstream test it translates; a deliberate difference
    is one docs/resolution.md lists."""
    docs = (Path(__file__).parents[2] / "docs" / "resolution.md").read_text()
    translated = [p for p in SCENARIOS if p.name[0] in "12" and p.name[3:].startswith(("-olm-", "-deppy-"))]
    assert len(translated) >= 79
    for path in translated:
        scenario = yamlio.load_one(path.read_text(), str(path))
        assert str(scenario.get("upstream", "")).startswith("operator-framework/"), path.name
        if scenario.get("differs"):
            assert f"| {path.name[:3]} |" in docs, f"{path.name} differs from upstream but docs/resolution.md " \
                                                     f"does not list it"
