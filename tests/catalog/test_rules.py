"""One failing fixture per validation rule, with the finding's rule, file, blob and message asserted."""

from __future__ import annotations

import pytest

from reconciler.catalog import RULES, CatalogInvalid, compose, load, load_catalog
from tests.catalog.helpers import EMPTY_DOCUMENTS, bundle, channel, findings, package, rules
from tests.unit.helpers import write, write_docs

CHECKED: set[str] = set()


def only(found, rule):
    """The single finding of ``rule`` among ``found`` (and nothing else)."""
    CHECKED.add(rule)
    assert rules(found) == [rule], [f.render() for f in found]
    return found[0]


def test_valid_catalog_has_no_findings(tmp_path):
    assert findings(tmp_path, package(), channel(), bundle()) == []


def test_parse(tmp_path):
    write(tmp_path, "broken.yaml", "schema: olm.package\nname: [x\n")
    write_docs(tmp_path, "ok.yaml", package(), channel(), bundle())
    f = only(findings(tmp_path), "parse")
    assert f.path == "catalogs/test/broken.yaml"
    assert f.message.startswith("invalid YAML (line 3, column 1)")


@pytest.mark.parametrize("doc, message", [
    ([1, 2], "blob 1 is not a mapping"),
    ({"name": "x"}, "blob has no 'schema'"),
    ({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "metadata": {"name": "dev"}},
     "blob has no 'schema': it is a Kubernetes CatalogSource dev, not catalog content"),
    ({"schema": 3}, "'schema' must be a string"),
    ({"schema": "example.com/note", "package": None}, "'package' is null"),
    ({"schema": "olm.package", "Schema": "olm.package", "name": "demo"},
     "keys 'schema' and 'Schema' differ only in case; opm reads them as one"),
    ({"schema": "olm.package", "name": "demo", "defaultChannel": ["x"]},
     "olm.package demo: 'defaultChannel' must be a string, not a list"),
    ({"schema": "olm.bundle", "package": "demo", "name": "b", "properties": [{"type": "x"}]},
     "olm.bundle b: property 1 (x) has no value"),
    ({"schema": "olm.package", "name": "demo", "icon": {"base64data": "!!", "mediatype": "image/png"}},
     "olm.package demo: icon base64data is not valid base64"),
])
def test_blob_shape(tmp_path, doc, message):
    write_docs(tmp_path, "bad.yaml", doc)
    found = [f for f in findings(tmp_path) if f.rule == "blob-shape"]
    CHECKED.add("blob-shape")
    assert [f.message for f in found] == [message]
    assert found[0].path == "catalogs/test/bad.yaml"


@pytest.mark.parametrize("text, lines", EMPTY_DOCUMENTS)
def test_empty_yaml_documents_are_blobs_without_schema(tmp_path, text, lines):
    (tmp_path / "notes.yaml").write_text(text, encoding="utf-8")
    found = [f for f in findings(tmp_path, package(), channel(), bundle()) if f.rule == "blob-shape"]
    CHECKED.add("blob-shape")
    assert [f.message for f in found] == [f"the YAML document at line {n} is empty (null, or only blank lines, "
                                          f"comments or '---')" for n in lines]
    assert all(f.path == "catalogs/test/notes.yaml" and "refuses the catalog" in f.hint for f in found)


def test_top_level_fields_are_read_whatever_their_case(tmp_path):
    """As opm reads them: `Schema:` (how template examples are written) is the schema, and so on."""
    docs = [{"Schema": "olm.package", "NAME": "demo", "defaultchannel": "stable"},
            {"Schema": "olm.channel", "Package": "demo", "Name": "stable", "Entries": [{"name": "demo.v1.0.0"}]},
            {k[0].upper() + k[1:]: v for k, v in bundle().items()},
            {"Schema": "olm.semver", "Stable": {"Bundles": []}}]
    assert rules(findings(tmp_path, *docs)) == ["template"]  # the semver template is one, and no error
    loaded = load(tmp_path, "test", use_cache=False).catalog
    assert loaded.packages["demo"].default_channel == "stable"
    assert [e.name for e in loaded.channels[("demo", "stable")].entries] == ["demo.v1.0.0"]
    assert loaded.bundles[("demo", "demo.v1.0.0")].image == "quay.io/demo/demo.v1.0.0:latest"
    assert [(m.schema, m.blob) for m in loaded.others] == [("olm.semver", docs[3])]  # kept as written


@pytest.mark.parametrize("doc, command", [
    ({"schema": "olm.template.basic", "entries": [package("other")]}, "basic"),
    ({"Schema": "olm.semver", "Stable": {"Bundles": [{"Image": "quay.io/demo/other-bundle:v1.0.0"}]}}, "semver"),
])
def test_template_in_a_catalog_is_a_warning(tmp_path, doc, command):
    write_docs(tmp_path, "templates/other.yaml", doc)
    f = only(findings(tmp_path, package(), channel(), bundle()), "template")
    assert (f.severity, f.path, f.obj) == ("warning", "catalogs/test/templates/other.yaml", "blob 1")
    assert f.message.endswith("template is not catalog content: opm keeps it as an unknown blob, so the packages "
                              "it describes are not in the catalog")
    assert f"`reconciler catalog template {command} FILE`" in f.hint
    assert load_catalog("t", tmp_path).packages.keys() == {"demo"}  # a warning: the catalog still loads


def test_non_catalog_file_is_a_warning(tmp_path):
    write(tmp_path, "README.md", "# notes\n")
    f = only(findings(tmp_path, package(), channel(), bundle()), "non-catalog-file")
    assert f.severity == "warning" and f.path == "catalogs/test/README.md"
    assert load_catalog("t", tmp_path)  # warnings never fail a load


@pytest.mark.parametrize("name", ["index", "catalog.YAML", "catalog.txt"])
def test_a_file_of_another_name_that_holds_blobs_is_read_as_opm_reads_it(tmp_path, name):
    write_docs(tmp_path, f"demo/{name}", package(), channel(), bundle())
    write_docs(tmp_path, "other/catalog.yaml", package("other"), channel(pkg="other"), bundle(pkg="other"))
    write(tmp_path, "other/README.md", "# The other operator\n\nnotes\n")
    found = findings(tmp_path)
    assert [(f.rule, f.severity, f.path) for f in found] == [
        ("non-catalog-file", "warning", f"catalogs/test/demo/{name}"),
        ("non-catalog-file", "warning", "catalogs/test/other/README.md")]
    assert found[0].message.endswith("but it holds catalog blobs: read as part of the catalog, as opm reads it")
    assert found[1].message == "not a .json, .yaml or .yml file; skipped"
    assert sorted(load_catalog("t", tmp_path).packages) == ["demo", "other"]


def test_a_file_of_another_name_is_judged_as_a_catalog_file(tmp_path):
    write_docs(tmp_path, "index", package(), channel(), bundle(), bundle())  # in walk order, before z.yaml
    write_docs(tmp_path, "z.yaml", package())
    found = findings(tmp_path)
    assert [(f.rule, f.path) for f in found] == [
        ("non-catalog-file", "catalogs/test/index"), ("duplicate-bundle", "catalogs/test/index"),
        ("duplicate-package", "catalogs/test/z.yaml")]
    assert found[2].hint == "the first definition is in catalogs/test/index"


@pytest.mark.parametrize("name", ["Demo", "demo_op", "-demo", "a" * 64])
def test_package_name(tmp_path, name):
    f = only(findings(tmp_path, package(name), channel(pkg=name), bundle(pkg=name)), "package-name")
    assert f.message == f"package name {name!r} is not a valid DNS-1123 label"
    assert f.obj == f"olm.package {name}"


def test_duplicate_package(tmp_path):
    write_docs(tmp_path, "b.yaml", package())
    f = only(findings(tmp_path, package(), channel(), bundle()), "duplicate-package")
    assert (f.path, f.message) == ("catalogs/test/catalog.yaml", "package 'demo' is defined twice")
    assert f.hint == "the first definition is in catalogs/test/b.yaml"


def test_duplicate_channel(tmp_path):
    f = only(findings(tmp_path, package(), channel(), channel(), bundle()), "duplicate-channel")
    assert f.message == "channel 'stable' is defined twice in package 'demo'"


def test_duplicate_bundle(tmp_path):
    f = only(findings(tmp_path, package(), channel(), bundle(), bundle()), "duplicate-bundle")
    assert f.message == "bundle 'demo.v1.0.0' is defined twice in package 'demo'"
    assert f.obj == "olm.bundle demo.v1.0.0"


def test_duplicate_entry(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.0.0", None)])
    f = only(findings(tmp_path, package(), ch, bundle()), "duplicate-entry")
    assert f.message == "bundle 'demo.v1.0.0' appears twice in channel 'stable'"


def test_default_channel_missing(tmp_path):
    f = only(findings(tmp_path, package(default=None), channel(), bundle()), "default-channel")
    assert f.message == "package 'demo' has no default channel"


def test_default_channel_absent(tmp_path):
    f = only(findings(tmp_path, package(default="fast"), channel(), bundle()), "default-channel")
    assert f.message == "default channel 'fast' of package 'demo' does not exist"
    assert f.hint == "channels of the package: stable"


def test_package_without_channels(tmp_path):
    found = findings(tmp_path, package(default="stable"))
    assert rules(found) == ["default-channel", "package-channels"]
    CHECKED.add("package-channels")
    assert found[1].message == "package 'demo' has no channels"


def test_channel_of_unknown_package(tmp_path):
    found = findings(tmp_path, package(), channel(), bundle(), channel(pkg="ghost"))
    f = only(found, "channel-package")
    assert f.message == "channel 'stable' names package 'ghost', which has no olm.package blob"


def test_channel_empty(tmp_path):
    found = findings(tmp_path, package(), channel(), bundle(), channel("fast", entries=()))
    assert only(found, "channel-empty").message == "channel 'fast' has no entries"


def test_channel_entry_bundle(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v2.0.0", "demo.v1.0.0")])
    f = only(findings(tmp_path, package(), ch, bundle()), "channel-entry-bundle")
    assert f.message == "channel 'stable' lists bundle 'demo.v2.0.0', which is not in package 'demo'"
    assert f.obj == "olm.channel stable"


def test_bundle_in_no_channel(tmp_path):
    f = only(findings(tmp_path, package(), channel(), bundle(), bundle("demo.v2.0.0", version="2.0.0")),
             "bundle-in-channel")
    assert f.message == "bundle 'demo.v2.0.0' is not in any channel of package 'demo'"


@pytest.mark.parametrize("props, message", [
    ([], "bundle has no olm.package property"),
    ([{"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}}] * 2,
     "bundle has 2 olm.package properties; exactly one is required"),
    ([{"type": "olm.package", "value": {"packageName": "other", "version": "1.0.0"}}],
     "olm.package property names package 'other', but the bundle is in package 'demo'"),
    ([{"type": "olm.package", "value": {"packageName": "demo", "version": "v1.0.0"}}],
     'olm.package property: version "v1.0.0" is not a strict semantic version'),
    ([{"type": "olm.package", "value": "demo@1.0.0"}],
     "the olm.package property's value must be a mapping with packageName and version"),
])
def test_bundle_package_property(tmp_path, props, message):
    f = only(findings(tmp_path, package(), channel(), bundle(props=props)), "bundle-package-property")
    assert f.message == message and f.obj == "olm.bundle demo.v1.0.0"


def test_bundle_image(tmp_path):
    b = bundle()
    del b["image"]
    assert only(findings(tmp_path, package(), channel(), b), "bundle-image").message == "bundle has no image"


@pytest.mark.parametrize("prop, message", [
    ({"type": "olm.gvk", "value": {"group": "g", "kind": "K", "version": 1}}, "property 2 (olm.gvk): version must be "
                                                                              "a string"),
    ({"type": "olm.gvk.required", "value": "g/v1/K"}, "property 2 (olm.gvk.required): value must be a mapping with "
                                                      "group, version, kind"),
    ({"type": "olm.package.required", "value": {"packageName": 7}}, "property 2 (olm.package.required): "
                                                                    "packageName must be a string"),
    ({"type": "olm.bundle.object", "value": {"data": "not base64!"}}, "property 2 (olm.bundle.object): data is "
                                                                      "not valid base64"),
    ({"type": "olm.csv.metadata", "value": {"annotations": {"a": 1}}}, "property 2 (olm.csv.metadata): annotations "
                                                                       "must map strings to strings"),
    ({"type": "", "value": 1}, "property 2 (): type must be set"),
])
def test_property_value(tmp_path, prop, message):
    props = [{"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}}, prop]
    f = only(findings(tmp_path, package(), channel(), bundle(props=props)), "property-value")
    assert f.message == message


def test_opaque_properties_pass_through(tmp_path):
    props = [{"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}},
             {"type": "example.com/anything", "value": [1, {"x": None}]},
             {"type": "olm.constraint", "value": {"failureMessage": "m", "cel": {"rule": "true"}}}]
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle(props=props),
               {"schema": "example.com/custom", "package": "demo", "data": 1})
    loaded = load(tmp_path, use_cache=False)
    assert rules(loaded.findings) == ["property-type"]   # a warning saying what becomes of it: no error
    b = loaded.catalog.bundle("demo", "demo.v1.0.0")
    assert b.properties_of("example.com/anything") == [[1, {"x": None}]]
    c = b.typed_properties("olm.constraint")[0]
    assert (c.failure_message, c.kind, c.spec) == ("m", "cel", {"rule": "true"})
    assert [(m.schema, m.blob["data"]) for m in loaded.catalog.others] == [("example.com/custom", 1)]


def test_property_type(tmp_path):
    """A type nothing here interprets is said once per type, at its first bundle, with what becomes of it."""
    def props(version: str, *types: str) -> list:
        return [{"type": "olm.package", "value": {"packageName": "demo", "version": version}},
                *({"type": t, "value": {"label": "lts"}} for t in types)]
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.1.0", "demo.v1.0.0")])
    found = findings(tmp_path, package(), ch,
                     bundle(props=props("1.0.0", "olm.label.requires", "olm.label", "olm.label.required")),
                     bundle("demo.v1.1.0", version="1.1.0", props=props("1.1.0", "olm.label.requires",
                                                                         "olm.maxOpenShiftVersion")))
    assert [f.rule for f in found] == ["property-type", "property-type"]
    CHECKED.add("property-type")
    first, second = found
    assert (first.obj, first.severity) == ("olm.bundle demo.v1.0.0", "warning")
    assert first.message.startswith("property type 'olm.label.requires' (and 1 other bundle) is not one the "
                                    "reconciler interprets: it is kept as written")
    assert "plays no part in resolution" in first.message and "olm.label.required" in first.hint
    assert second.message.startswith("property type 'olm.maxOpenShiftVersion' is not one")
    assert second.obj == "olm.bundle demo.v1.1.0"


def test_channel_head_multiple(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.1.0", None)])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.1.0", version="1.1.0")), "channel-head")
    assert f.message == "channel 'stable' has 2 heads: demo.v1.0.0, demo.v1.1.0"


def test_channel_head_none(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", "demo.v1.1.0"), ("demo.v1.1.0", "demo.v1.0.0")])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.1.0", version="1.1.0")), "channel-head")
    assert f.message.startswith("channel 'stable' has no head")


def test_replaces_cycle(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", "demo.v1.1.0"), ("demo.v1.1.0", "demo.v1.0.0"),
                          ("demo.v1.2.0", "demo.v1.1.0")])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.1.0", version="1.1.0"),
                      bundle("demo.v1.2.0", version="1.2.0")), "replaces-cycle")
    assert f.message == ("channel 'stable': replaces chain has a cycle: demo.v1.1.0 -> demo.v1.0.0 -> demo.v1.1.0")


def test_stranded_bundle(tmp_path):
    # head v1.2.0 replaces v1.1.0 and skips v1.0.1; v1.0.1 replaces v1.0.0, which the head's chain never reaches
    ch = channel(entries=[("demo.v1.1.0", None), {"name": "demo.v1.2.0", "replaces": "demo.v1.1.0",
                                                  "skips": ["demo.v1.0.1"]},
                          ("demo.v1.0.0", None), ("demo.v1.0.1", "demo.v1.0.0")])
    docs = [bundle(f"demo.v{v}", version=v) for v in ("1.0.0", "1.0.1", "1.1.0", "1.2.0")]
    f = only(findings(tmp_path, package(), ch, *docs), "stranded-bundle")
    assert f.message == ("channel 'stable' has stranded bundles (not reachable from the head 'demo.v1.2.0' by "
                         "replaces, nor skipped): demo.v1.0.0")


def test_skip_range(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), {"name": "demo.v1.1.0", "replaces": "demo.v1.0.0",
                                                  "skipRange": ">=1.0 <1.1.0"}])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.1.0", version="1.1.0")), "skip-range")
    assert f.message.startswith("entry 'demo.v1.1.0': skipRange: ")
    assert "1.0" in f.message


def test_skips_empty_name(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), {"name": "demo.v1.1.0", "replaces": "demo.v1.0.0", "skips": [""]}])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.1.0", version="1.1.0")), "skips")
    assert f.message == "entry 'demo.v1.1.0': skips[0] is empty"


def test_unique_version(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.0.0-again", "demo.v1.0.0")])
    f = only(findings(tmp_path, package(), ch, bundle(), bundle("demo.v1.0.0-again", version="1.0.0")),
             "unique-version")
    assert f.message == "bundles demo.v1.0.0, demo.v1.0.0-again of package 'demo' all have version 1.0.0"


def test_versions_differing_in_build_metadata_are_distinct(tmp_path):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.0.0-b", "demo.v1.0.0")])
    assert findings(tmp_path, package(), ch, bundle(version="1.0.0+a"),
                    bundle("demo.v1.0.0-b", version="1.0.0+b")) == []


@pytest.mark.parametrize("entries, message", [
    ([{"reference": {"schema": "olm.bundle", "name": "demo.v9"}, "message": "m"}],
     "entry 1: bundle 'demo.v9' is not in package 'demo'"),
    ([{"reference": {"schema": "olm.channel", "name": "fast"}, "message": "m"}],
     "entry 1: channel 'fast' is not in package 'demo'"),
    ([{"reference": {"schema": "olm.package", "name": "demo"}, "message": "m"}],
     "entry 1: an olm.package reference must not have a name (it is 'demo')"),
    ([{"reference": {"schema": "olm.thing"}, "message": "m"}], "entry 1: unknown reference schema 'olm.thing'"),
    ([{"reference": {"schema": "olm.package"}, "message": ""}], "entry 1: message is empty"),
    ([{"reference": {"schema": "olm.package"}, "message": "a"}, {"reference": {"schema": "olm.package"},
                                                                 "message": "b"}],
     "entry 2 repeats the reference olm.package"),
])
def test_deprecation(tmp_path, entries, message):
    dep = {"schema": "olm.deprecations", "package": "demo", "entries": entries}
    f = only(findings(tmp_path, package(), channel(), bundle(), dep), "deprecation")
    assert f.message == message and f.obj == "olm.deprecations demo"


def test_deprecation_of_unknown_package_and_twice(tmp_path):
    dep = {"schema": "olm.deprecations", "package": "ghost", "entries": []}
    found = findings(tmp_path, package(), channel(), bundle(), dep, dep)
    assert [f.message for f in found] == ["package 'ghost' has more than one olm.deprecations blob",
                                          "deprecations name package 'ghost', which is not in the catalog"]


def test_deprecations_are_queryable(tmp_path):
    dep = {"schema": "olm.deprecations", "package": "demo", "entries": [
        {"reference": {"schema": "olm.bundle", "name": "demo.v1.0.0"}, "message": "use 2.0"},
        {"reference": {"schema": "olm.package"}, "message": "end of life"}]}
    write_docs(tmp_path, "c.yaml", package(), channel(), bundle(), dep)
    cat = load_catalog("t", tmp_path)
    assert cat.deprecation("demo") == "end of life"
    assert cat.deprecation("demo", "olm.bundle", "demo.v1.0.0") == "use 2.0"
    assert cat.deprecation("demo", "olm.channel", "stable") is None


def test_compose_duplicate(tmp_path):
    write_docs(tmp_path / "a", "c.yaml", package(), channel(), bundle())
    write_docs(tmp_path / "b", "c.yaml", package(), channel(), bundle())
    write_docs(tmp_path / "c", "c.yaml", package("other"), channel(pkg="other", entries=[("demo.v1.0.0", None)]),
               bundle(pkg="other"))
    cats = [load_catalog(n, tmp_path / n, f"catalogs/{n}") for n in "abc"]
    merged, found = compose("all", cats)
    CHECKED.add("compose-duplicate")
    assert [f.message for f in found] == [
        "package 'demo' is defined in catalogs 'a' and 'b'",
        "bundle 'demo.v1.0.0' of package 'demo' is defined in more than one catalog (also in catalogs/a/c.yaml)"]
    assert sorted(merged.packages) == ["demo", "other"]
    assert sorted(merged.bundles) == [("demo", "demo.v1.0.0"), ("other", "demo.v1.0.0")]


def test_every_problem_is_reported_and_raised_together(tmp_path):
    write(tmp_path, "broken.json", "{\"schema\": ")
    docs = [package(default="fast"), channel(entries=[("demo.v1.0.0", None), ("demo.v2", None)]), bundle(version="1")]
    write_docs(tmp_path, "c.yaml", *docs)
    with pytest.raises(CatalogInvalid) as err:
        load_catalog("test", tmp_path, "catalogs/test")
    got = [f.rule for f in err.value.findings]
    assert got == ["parse", "default-channel", "channel-entry-bundle", "channel-head", "bundle-package-property"]
    text = err.value.render()
    assert text.startswith("catalog 'test' is invalid: 5 problems\n")
    assert "catalogs/test/c.yaml: olm.channel stable: channel 'stable' lists bundle 'demo.v2'" in text


PKG = {"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}}


@pytest.mark.parametrize("docs", [
    [bundle(pkg="ghost")],
    [channel("fast", entries=[{"name": "demo.v1.0.0", "skips": [""]}])],
    [bundle(props=[PKG, PKG])],
    [bundle(props=[{"type": "olm.package", "value": "demo@1.0.0"}])],
    [bundle(props=[{"type": "olm.package", "value": {"packageName": "x", "version": "1.0.0"}}])],
    [bundle(props=[PKG, {"type": "olm.gvk", "value": {"group": "g", "kind": "K", "version": 1}}])],
    [{"schema": "olm.deprecations", "package": "ghost", "entries": []}],
    [{"schema": "olm.deprecations", "package": "demo", "entries": [
        {"reference": {"schema": "olm.channel", "name": "fast"}, "message": "m"},
        {"reference": {"schema": "olm.channel", "name": "fast"}, "message": "m"},
        {"reference": {"schema": "olm.bundle", "name": "demo.v9"}, "message": "m"}, {"message": "m"}]}],
    [{"schema": "olm.channel", "package": "demo", "name": "fast", "entries": [{"replaces": "x"}]}],
    [{"schema": "olm.channel", "package": "demo", "name": "fast", "entries": "demo.v1.0.0"}],
    [{"schema": "olm.channel", "package": "demo"}],
    [{"schema": "olm.channel", "package": "demo", "name": "fast", "entries": [{"name": "demo.v1.0.0", "skips": "x"}]}],
    [bundle(props=[PKG, "olm.gvk"])], [bundle(props=[PKG, {"value": 1}])], [bundle(props=[PKG, {"type": "t"}])],
    [bundle(relatedImages=["quay.io/x"])],
    [{"schema": "olm.package", "name": "other", "defaultChannel": True}],
    [{"schema": "olm.package", "name": "other", "icon": "x.png"}],
    [{"schema": "olm.package", "name": "other", "icon": {"base64data": "%%", "mediatype": "image/png"}}],
    [{"schema": ["olm.package"]}],
])
def test_every_error_says_what_to_do(tmp_path, docs):
    write_docs(tmp_path, "extra.yaml", *docs)
    found = findings(tmp_path, package(), channel())  # with the bundle of docs, or lacking it: also a finding
    assert found and all(f.hint for f in found), [f.render() for f in found if not f.hint]


def test_every_rule_has_a_fixture():
    # runs last in this module: every rule id is exercised by a test above
    # (the non-catalog-file, skips and parse tests add themselves through only())
    missing = set(RULES) - CHECKED
    assert not missing, f"rules without a failing fixture: {sorted(missing)}"


@pytest.mark.parametrize("text", [
    "1.0.0", "0.0.0", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0-x-y-z.--",
    "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0+21AF26D3----117B344092BD", "1.0.0-rc.1+build.1",
    "v1.0.0", "1.0", "1", "01.0.0", "1.00.0", "1.0.0-01", "1.0.0-", "1.0.0+", "1.0.0+a..b", "1.0.0-a..b", " 1.0.0",
    "1.0.0 ", "1.0.0\n", "1.0.0\n\n", "1.\u0661.0", "\u0661.0.0-a", "1.0.0-\u0661", "", "1.0.0-alpha_beta", "1.2.3.4",
])
def test_versions_are_judged_as_semver_parses_them(text):
    """The version rules read well-formed versions without semver; what they conclude is semver's verdict."""
    import semver

    from reconciler.catalog.validate import _strict_version

    try:
        expected = str(semver.Version.parse(text))
    except ValueError:
        expected = None
    assert _strict_version(text) == expected


@pytest.mark.parametrize("text", [
    ">=1.0.0 <1.2.0", "<0.1.0", ">1.0.0-rc.1 <=2.0.0", "=1.2.3", "1.2.3", "!=1.0.0 >0.1.0",
    ">=1.0.0 <2.0.0 || >=3.0.0", ">=1.0.0 <1.2.0+build.5", ">=1.0.0  <2.0.0",
    # left to the parser, which accepts or refuses them with its own message
    ">= 1.0.0", " >=1.0.0", "1.x", ">=v1.0.0", ">=01.0.0", ">=1.0.0 ||", "=>1.0.0", "", "<1.0",
])
def test_a_plain_skip_range_is_accepted_only_where_the_parser_accepts_it(text):
    """What the validation's shortcut accepts, the blang parser accepts too; the rest goes to the parser."""
    from reconciler.catalog.validate import _PLAIN_SKIP_RANGE
    from reconciler.errors import InputError
    from reconciler.model.semver_range import VersionRange

    try:
        VersionRange.parse(text, dialect="blang")
        parsed = True
    except InputError:
        parsed = False
    if _PLAIN_SKIP_RANGE.fullmatch(text):
        assert parsed
    assert (_PLAIN_SKIP_RANGE.fullmatch(text) is not None) == (text in (
        ">=1.0.0 <1.2.0", "<0.1.0", ">1.0.0-rc.1 <=2.0.0", "=1.2.3", "1.2.3", "!=1.0.0 >0.1.0",
        ">=1.0.0 <2.0.0 || >=3.0.0", ">=1.0.0 <1.2.0+build.5", ">=1.0.0  <2.0.0"))


def test_random_skip_ranges_the_shortcut_accepts_all_parse():
    import random

    from reconciler.catalog.validate import _PLAIN_SKIP_RANGE
    from reconciler.model.semver_range import VersionRange

    rng = random.Random(7)
    ops = ["", ">=", "<=", ">", "<", "=", "==", "!=", "=>", "!", "<>", ">= "]
    versions = ["1.0.0", "0.10.2", "1.0.0-rc.1", "1.0.0+b.1", "1.0.0-0.a", "01.0.0", "1.0", "1.0.0-", "v1.0.0",
                "1.x", "1.0.0-01", "1.0.0+", ""]
    seps = [" ", "  ", " || ", "||", " ||", "", "\t"]
    accepted = 0
    for _ in range(20000):
        text = rng.choice(ops) + rng.choice(versions)
        for _ in range(rng.randint(0, 3)):
            text += rng.choice(seps) + rng.choice(ops) + rng.choice(versions)
        if _PLAIN_SKIP_RANGE.fullmatch(text):
            accepted += 1
            VersionRange.parse(text, dialect="blang")  # raises if the shortcut accepted a non-range
    assert accepted > 500
