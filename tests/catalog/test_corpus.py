"""The published catalogs of ../shared/corpus load, and our verdict matches `opm validate` on each.

Skipped when the corpus is absent; the opm comparisons are skipped unless opm
is built (bench/peers/opm.py builds it: `python -m bench.catalog_bench` does)
or on PATH. A cold build of opm takes many minutes, so tests never start one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import load
from tests.catalog.helpers import CORPUS, EMPTY_DOCUMENTS, bundle, channel, package
from tests.unit.helpers import write, write_docs
from tests.support.parts import not_tested

pytestmark = pytest.mark.corpus

CATALOGS = sorted(p.parent for p in (CORPUS / "catalogs").glob("v4.*/*/catalog.yaml")) if CORPUS.is_dir() else []

def _find_opm() -> str | None:
    from bench.peers.opm import TOOL
    if TOOL.present():
        return str(TOOL.paths()["opm"])
    return shutil.which("opm")


_OPM = _find_opm()  # at import: the tests' private cache directory is not where opm was built


def opm() -> str | None:
    return _OPM


def opm_valid(directory: Path) -> tuple[bool, str]:
    proc = subprocess.run([opm_or_skip(), "validate", str(directory)], capture_output=True, text=True, timeout=300)
    return proc.returncode == 0, proc.stderr


def opm_or_skip() -> str:
    exe = opm()
    if exe is None:
        not_tested("opm", "opm is not built (run `make peers` or `python -m bench.catalog_bench` once) and not on PATH")
    return exe


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


@pytest.mark.corpus(missing=not CATALOGS, reason="../shared/corpus is absent")
@pytest.mark.parametrize("directory", CATALOGS, ids=_id)
def test_corpus_catalog_loads_valid(directory: Path):
    loaded = load(directory, use_cache=False)
    assert [f.render() for f in loaded.findings] == []
    assert len(loaded.catalog.packages) == 1 and loaded.catalog.bundles


@pytest.mark.corpus(missing=not CATALOGS, reason="../shared/corpus is absent")
@pytest.mark.parametrize("directory", CATALOGS, ids=_id)
def test_corpus_verdict_matches_opm(directory: Path):
    valid, stderr = opm_valid(directory)
    ours = load(directory, use_cache=False)
    assert (not ours.errors) == valid, f"opm: {stderr[-2000:]}\nours: {[f.render() for f in ours.errors]}"


def _entries(*pairs):
    return [{"name": n, **({"replaces": r} if r else {})} for n, r in pairs]


# Catalogs where opm and we must agree; skip-range and non-catalog files are deliberate differences
# (opm leaves skipRange to run time and parses every file), documented in docs/catalogs.md.
VERDICT_FIXTURES = {
    "valid": [package(), channel(), bundle()],
    "no-default-channel": [package(default=None), channel(), bundle()],
    "absent-default-channel": [package(default="fast"), channel(), bundle()],
    "bad-package-name": [package("Demo"), channel(pkg="Demo"), bundle(pkg="Demo")],
    "duplicate-bundle": [package(), channel(), bundle(), bundle()],
    "missing-entry-bundle": [package(), channel(entries=[("demo.v1.0.0", None), ("demo.v2.0.0", "demo.v1.0.0")]),
                             bundle()],
    "bundle-in-no-channel": [package(), channel(), bundle(), bundle("demo.v2.0.0", version="2.0.0")],
    "two-heads": [package(), channel(entries=[("demo.v1.0.0", None), ("demo.v2.0.0", None)]), bundle(),
                  bundle("demo.v2.0.0", version="2.0.0")],
    "v-prefixed-version": [package(), channel(), bundle(version="v1.0.0")],
    "package-mismatch": [package(), channel(),
                         bundle(props=[{"type": "olm.package", "value": {"packageName": "x", "version": "1.0.0"}}])],
    "duplicate-version": [package(), channel(entries=_entries(("demo.v1.0.0", None), ("demo.b", "demo.v1.0.0"))),
                          bundle(), bundle("demo.b", version="1.0.0")],
    "bad-gvk": [package(), channel(), bundle(props=[
        {"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}},
        {"type": "olm.gvk", "value": {"group": "g", "kind": "K", "version": 1}}])],
    "deprecated-missing-bundle": [package(), channel(), bundle(), {
        "schema": "olm.deprecations", "package": "demo",
        "entries": [{"reference": {"schema": "olm.bundle", "name": "nope"}, "message": "m"}]}],
    "valid-with-deprecation-and-custom-schema": [package(), channel(), bundle(), {
        "schema": "olm.deprecations", "package": "demo",
        "entries": [{"reference": {"schema": "olm.channel", "name": "stable"}, "message": "m"}]},
        {"schema": "example.com/thing", "x": 1}],
    "empty-channel": [package(), channel(), bundle(), channel("fast", entries=())],
    # opm reads top-level field names whatever their case (templates are documented with `Schema:`)
    "valid-capitalised-fields": [{"Schema": "olm.package", "Name": "demo", "DefaultChannel": "stable"},
                                 {"Schema": "olm.channel", "Package": "demo", "Name": "stable",
                                  "Entries": [{"name": "demo.v1.0.0"}]},
                                 {k.capitalize(): v for k, v in bundle().items()},
                                 {"Schema": "olm.semver", "GenerateMajorChannels": True, "Stable": {"Bundles": []}}],
    "null-name-of-custom-blob": [package(), channel(), bundle(), {"schema": "example.com/thing", "name": None}],
    "keys-differing-in-case": [package(), channel(), bundle(), {"schema": "example.com/thing", "Schema": "x"}],
    "replaces-cycle": [package(), channel(entries=_entries(("demo.v1.0.0", "demo.v1.1.0"),
                                                           ("demo.v1.1.0", "demo.v1.0.0"),
                                                           ("demo.v1.2.0", "demo.v1.1.0"))),
                       bundle(), bundle("demo.v1.1.0", version="1.1.0"), bundle("demo.v1.2.0", version="1.2.0")],
}


@pytest.mark.parametrize("name", sorted(VERDICT_FIXTURES))
def test_fixture_verdict_matches_opm(tmp_path, name):
    write_docs(tmp_path, "catalog.yaml", *VERDICT_FIXTURES[name])
    valid, stderr = opm_valid(tmp_path)
    ours = load(tmp_path, use_cache=False)
    assert (not ours.errors) == valid, f"opm: {stderr[-2000:]}\nours: {[f.render() for f in ours.errors]}"
    assert valid == name.startswith("valid")


def test_broken_yaml_verdict_matches_opm(tmp_path):
    write(tmp_path, "catalog.yaml", "schema: olm.package\nname: [x\n")
    valid, _ = opm_valid(tmp_path)
    assert not valid and load(tmp_path, use_cache=False).errors


@pytest.mark.parametrize("text, lines", EMPTY_DOCUMENTS)
def test_empty_document_verdict_matches_opm(tmp_path, text, lines):
    write_docs(tmp_path, "catalog.yaml", package(), channel(), bundle())
    (tmp_path / "notes.yaml").write_text(text, encoding="utf-8")
    valid, stderr = opm_valid(tmp_path)
    ours = load(tmp_path, use_cache=False)
    assert (not ours.errors) == valid == (not lines), \
        f"opm: {stderr[-2000:]}\nours: {[f.render() for f in ours.errors]}"


def test_file_of_another_name_verdict_and_content_match_opm(tmp_path):
    """opm reads every file it does not ignore: blobs in `index` are part of its catalog, and of ours."""
    write_docs(tmp_path, "index", package(), channel(), bundle())
    write_docs(tmp_path, "other.yaml", package("other"), channel(pkg="other", entries=[("other.v1.0.0", None)]),
               bundle("other.v1.0.0", pkg="other"))
    valid, stderr = opm_valid(tmp_path)
    ours = load(tmp_path, use_cache=False)
    assert valid and not ours.errors, stderr
    rendered = subprocess.run([opm(), "render", str(tmp_path), "-o", "yaml"], capture_output=True, text=True,
                              check=True).stdout
    assert "name: demo.v1.0.0" in rendered and sorted(ours.catalog.packages) == ["demo", "other"]


GO_SCALARS = """\
schema: olm.package
name: demo
defaultChannel: stable
---
schema: olm.channel
package: demo
name: stable
entries:
- name: demo.v1.0.0
---
schema: olm.bundle
package: demo
name: demo.v1.0.0
image: quay.io/demo/demo:1
properties:
- type: olm.package
  value: {packageName: demo, version: 1.0.0}
- type: example.com/flags
  value: {a: y, b: N, c: 1e5, d: 0o17, e: 1:20, f: 09, y: 1}
"""


def test_plain_scalars_mean_what_they_mean_to_opm(tmp_path):
    """opm reads YAML as Go's YAML 1.1 decoder does: a bare y or N is a boolean (also as a key), 1e5 and 09 are
    numbers, 1:20 is text. The catalog holds opm's values; where a field needs a string, both refuse it."""
    write(tmp_path, "catalog.yaml", GO_SCALARS)
    rendered = subprocess.run([opm_or_skip(), "render", str(tmp_path), "-o", "json"], capture_output=True,
                              text=True, check=True).stdout
    theirs = [json.loads(doc) for doc in rendered.replace("}\n{", "}\n\0{").split("\0")]
    value = next(p["value"] for b in theirs if b["schema"] == "olm.bundle" for p in b["properties"]
                 if p["type"] == "example.com/flags")
    ours = load(tmp_path, use_cache=False).catalog.bundle("demo", "demo.v1.0.0").properties_of("example.com/flags")
    assert json.loads(json.dumps(ours[0])) == value == {"a": True, "b": False, "c": 100000, "d": 15, "e": "1:20",
                                                       "f": 9, "true": 1}
    write(tmp_path, "catalog.yaml", GO_SCALARS.replace("defaultChannel: stable", "defaultChannel: y"))
    valid, _ = opm_valid(tmp_path)
    errors = load(tmp_path, use_cache=False).errors
    assert not valid and errors[0].message == "olm.package demo: 'defaultChannel' must be a string, not a boolean"
