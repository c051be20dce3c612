"""Loading file-based catalogs: the model built, and errors that name the file and the blob."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import semver

from reconciler.catalog import iter_blobs, load_catalog
from reconciler.errors import CatalogError, InputError
from reconciler.model.catalog import ChannelEntry
from tests.unit.helpers import write, write_docs
from tests.support.paths import EXAMPLE

COMMUNITY = EXAMPLE / "catalogs" / "community"


def package(name="demo", default="stable"):
    blob = {"schema": "olm.package", "name": name}
    if default:
        blob["defaultChannel"] = default
    return blob


def channel(name="stable", pkg="demo", entries=(("demo.v1.0.0", None),)):
    return {"schema": "olm.channel", "package": pkg, "name": name,
            "entries": [{"name": n, **({"replaces": r} if r else {})} for n, r in entries]}


def bundle(name="demo.v1.0.0", pkg="demo", version="1.0.0", props=None):
    if props is None:
        props = [{"type": "olm.package", "value": {"packageName": pkg, "version": version}}]
    return {"schema": "olm.bundle", "package": pkg, "name": name, "image": f"file://bundles/{name}",
            "properties": props}


def load(root: Path, name="test"):
    return load_catalog(name, root, f"catalogs/{name}")


def load_error(root: Path) -> CatalogError:
    with pytest.raises(CatalogError) as err:
        load(root)
    return err.value


def test_example_catalog_loads():
    cat = load_catalog("community", COMMUNITY, "catalogs/community", priority=5)
    assert cat.name == "community" and cat.root == "catalogs/community" and cat.priority == 5
    assert list(cat.packages) == ["plumbus"]
    pkg = cat.packages["plumbus"]
    assert pkg.default_channel == "stable"
    assert pkg.source == "catalogs/community/plumbus.yaml"
    assert pkg.description == "Plumbus keeps everyday things plumbed."
    assert list(cat.channels) == [("plumbus", "stable")]
    stable = cat.channels[("plumbus", "stable")]
    assert stable.entries == (ChannelEntry("plumbus.v1.0.0"), ChannelEntry("plumbus.v1.1.0", "plumbus.v1.0.0"))
    assert stable.heads == ("plumbus.v1.1.0",)
    assert [c.name for c in cat.channels_of("plumbus")] == ["stable"]
    assert sorted(cat.bundles) == [("plumbus", "plumbus.v1.0.0"), ("plumbus", "plumbus.v1.1.0")]
    b = cat.bundle("plumbus", "plumbus.v1.1.0")
    assert b.version == semver.Version(1, 1, 0)
    assert b.image == "file://bundles/plumbus/1.1.0"
    assert b.mediatype == "registry+v1"
    assert b.properties_of("olm.gvk") == [{"group": "how.theydoit.com", "kind": "Plumbus",
                                           "version": "v1alpha1"}]
    assert cat.bundle("plumbus", "plumbus.v1.0.0").version == semver.Version(1, 0, 0)
    assert cat.bundle("plumbus", "nope") is None


def test_blobs_may_be_split_across_files_and_formats(tmp_path):
    write_docs(tmp_path, "demo/package.yaml", package())
    write(tmp_path, "demo/channels.json", json.dumps(channel(entries=[("demo.v1.0.0", None),
                                                                       ("demo.v1.1.0", "demo.v1.0.0")])))
    write(tmp_path, "demo/bundles.json",
          json.dumps(bundle()) + "\n" + json.dumps(bundle("demo.v1.1.0", version="1.1.0")))
    write(tmp_path, "demo/README.md", "not a catalog file\n")
    write_docs(tmp_path, "demo/extra.yml", {"schema": "olm.deprecations", "package": "demo"})
    cat = load(tmp_path)
    assert cat.channels[("demo", "stable")].heads == ("demo.v1.1.0",)
    assert cat.bundle("demo", "demo.v1.1.0").source == "catalogs/test/demo/bundles.json"


def test_skips_make_heads(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.2.0", None)])
    ch["entries"][1]["skips"] = ["demo.v1.0.0"]
    ch["entries"][1]["skipRange"] = "<1.2.0"
    write_docs(tmp_path, "c.yaml", package(), ch, bundle(), bundle("demo.v1.2.0", version="1.2.0"))
    stable = load(tmp_path).channels[("demo", "stable")]
    assert stable.heads == ("demo.v1.2.0",)
    assert stable.entries[1] == ChannelEntry("demo.v1.2.0", None, ("demo.v1.0.0",), "<1.2.0")


def test_v_prefixed_version_rejected_as_opm_does(tmp_path):
    # opm parses bundle versions strictly (blang semver.Parse): a "v" prefix is invalid.
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle(version="v1.0.0"))
    err = load_error(tmp_path)
    assert err.obj == "olm.bundle demo.v1.0.0"
    assert err.message == 'olm.package property: version "v1.0.0" is not a strict semantic version'


def test_channel_naming_a_missing_bundle(tmp_path):
    write_docs(tmp_path, "c.yaml", package(),
               channel(entries=[("demo.v1.0.0", None), ("demo.v9.9.9", "demo.v1.0.0")]), bundle())
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/c.yaml"
    assert err.message == "channel 'stable' lists bundle 'demo.v9.9.9', which is not in package 'demo'"


def test_channel_of_a_missing_package(tmp_path):
    write_docs(tmp_path, "c.yaml", channel(pkg="ghost"))
    err = load_error(tmp_path)
    assert err.message == "channel 'stable' names package 'ghost', which has no olm.package blob"


def test_missing_default_channel(tmp_path):
    write_docs(tmp_path, "pkg.yaml", package(default="fast"))
    write_docs(tmp_path, "rest.yaml", channel(), bundle())
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/pkg.yaml"
    assert err.message == "default channel 'fast' of package 'demo' does not exist"


def test_package_without_default_channel_is_rejected_as_opm_does(tmp_path):
    write_docs(tmp_path, "c.yaml", package(default=None), channel(), bundle())
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/c.yaml"
    assert err.message == "package 'demo' has no default channel"


def test_duplicate_package(tmp_path):
    write_docs(tmp_path, "a.yaml", package(), channel(), bundle())
    write_docs(tmp_path, "b.yaml", package())
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/b.yaml"
    assert err.message == "package 'demo' is defined twice"
    assert err.hint == "the first definition is in catalogs/test/a.yaml"


def test_duplicate_bundle(tmp_path):
    write_docs(tmp_path, "a.yaml", package(), channel(), bundle(), bundle())
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/a.yaml"
    assert err.message == "bundle 'demo.v1.0.0' is defined twice in package 'demo'"


def test_duplicate_channel(tmp_path):
    # A second definition must not silently replace the first one's entries.
    write_docs(tmp_path, "a.yaml", package(), channel(), bundle(), bundle("demo.v1.1.0", version="1.1.0"))
    write_docs(tmp_path, "b.yaml", channel(entries=[("demo.v1.1.0", None)]))
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/b.yaml"
    assert "channel 'stable'" in err.message and "twice" in err.message
    assert "catalogs/test/a.yaml" in (err.hint or "")


def test_bundle_without_olm_package_property(tmp_path):
    write_docs(tmp_path, "a.yaml", package(), channel(),
               bundle(props=[{"type": "olm.gvk", "value": {"group": "g", "kind": "K", "version": "v1"}}]))
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/a.yaml"
    assert err.obj == "olm.bundle demo.v1.0.0"
    assert err.message == "bundle has no olm.package property"


@pytest.mark.parametrize("version", ["1.0", "latest", "", "01.0.0"])
def test_bundle_with_non_semver_version(tmp_path, version):
    write_docs(tmp_path, "a.yaml", package(), channel(), bundle(version=version))
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/a.yaml"
    assert err.obj == "olm.bundle demo.v1.0.0"
    assert "olm.package" in err.message


def test_bundle_whose_olm_package_value_is_not_a_mapping(tmp_path):
    write_docs(tmp_path, "a.yaml", package(), channel(),
               bundle(props=[{"type": "olm.package", "value": "demo@1.0.0"}]))
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/a.yaml"
    assert err.obj == "olm.bundle demo.v1.0.0"
    assert "olm.package" in err.message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "schema: olm.package\nname: x\n---\n[1]\n"])
def test_blob_that_is_not_a_mapping(tmp_path, text):
    write(tmp_path, "sub/bad.yaml", text)
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/sub/bad.yaml"
    assert err.message.startswith("blob ") and err.message.endswith(" is not a mapping")


def test_second_blob_index_reported(tmp_path):
    write(tmp_path, "bad.yaml", "schema: olm.package\nname: x\n---\n- 1\n")
    assert load_error(tmp_path).message == "blob 2 is not a mapping"


@pytest.mark.parametrize("blob, message", [
    ({"schema": "olm.package"}, "olm.package has no 'name'"),
    ({"schema": "olm.channel", "name": "stable"}, "olm.channel has no 'package'"),
    ({"schema": "olm.channel", "package": "demo"}, "olm.channel in package demo has no 'name'"),
    ({"schema": "olm.bundle", "package": "demo", "name": ""}, "olm.bundle in package demo has no 'name'"),
    ({"schema": "olm.channel", "package": "demo", "name": "s", "entries": [{"replaces": "x"}]},
     "olm.channel demo/s: every entry needs a name"),
])
def test_incomplete_blobs(tmp_path, blob, message):
    write_docs(tmp_path, "x.yaml", blob)
    err = load_error(tmp_path)
    assert err.path == "catalogs/test/x.yaml"
    assert err.message == message


def test_invalid_yaml_names_catalog_file(tmp_path):
    write(tmp_path, "demo/broken.yaml", "schema: olm.package\nname: [x\n")
    with pytest.raises(InputError) as err:
        load(tmp_path)
    assert err.value.path == "catalogs/test/demo/broken.yaml"
    assert "invalid YAML (line" in err.value.message


def test_indexignore_excludes_files(tmp_path):
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle())
    write(tmp_path, "notes.yaml", "- not a blob\n")
    write(tmp_path, "drafts/d.yaml", "- not a blob\n")
    write(tmp_path, "demo/README.yaml", "- not a blob\n")
    write(tmp_path, ".indexignore", "# comments are skipped\nnotes.yaml\ndrafts/*\nREADME.*\n")
    cat = load(tmp_path)
    assert list(cat.packages) == ["demo"]


def test_nested_indexignore_applies_below_its_directory_only(tmp_path):
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle())
    write(tmp_path, "sub/.indexignore", "*.yaml\n")
    write(tmp_path, "sub/x.yaml", "- ignored\n")
    write(tmp_path, "sub/deeper/y.yaml", "- ignored too\n")
    assert list(load(tmp_path).packages) == ["demo"]
    write(tmp_path, "other/x.yaml", "- not ignored\n")
    assert load_error(tmp_path).path == "catalogs/test/other/x.yaml"


def test_iter_blobs_order_and_positions(tmp_path):
    write_docs(tmp_path, "b.yaml", {"schema": "x", "n": 1}, {"schema": "x", "n": 2})
    write_docs(tmp_path, "a/z.yaml", {"schema": "x", "n": 0})
    blobs = iter_blobs(tmp_path, "catalogs/t")
    # a directory's own files first, then its subdirectories, each sorted by name
    assert [(p, i, b["n"]) for p, i, b in blobs] == [
        ("catalogs/t/b.yaml", 0, 1), ("catalogs/t/b.yaml", 1, 2), ("catalogs/t/a/z.yaml", 0, 0)]


def test_mediatype_property(tmp_path):
    props = [{"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}},
             {"type": "olm.bundle.mediatype", "value": "plain+v0"}]
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle(props=props))
    assert load(tmp_path).bundle("demo", "demo.v1.0.0").mediatype == "plain+v0"


@pytest.mark.parametrize("links", [{"demo/again": "."}, {"a/to-b": "../b", "b/to-a": "../a"}],
                         ids=["to-its-parent", "two-directories"])
def test_a_loop_of_directory_links_is_refused_naming_the_link(tmp_path, links):
    write(tmp_path, "demo/catalog.yaml", "schema: olm.package\nname: demo\n")
    for link, target in links.items():
        (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / link).symlink_to(target)
    with pytest.raises(CatalogError) as err:
        load_catalog("x", tmp_path, "catalogs/x")
    assert err.value.message == "symbolic link points to a directory that contains it"
    assert err.value.path in ("catalogs/x/demo/again", "catalogs/x/a/to-b/to-a")
