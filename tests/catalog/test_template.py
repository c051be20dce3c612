"""Catalog templates: the semver template's channels and edges, the basic template, and the CLI."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.catalog import load_catalog
from reconciler.authoring.template import render_template
from reconciler.cli.parser import main
from reconciler.errors import CatalogError
from tests.catalog.test_corpus import opm_or_skip

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"
VERSIONS = ["0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "1.0.0", "1.0.1", "1.1.0"]


def fake_render(ref: str) -> dict:
    """Bundles named after their reference's tag; the template logic only reads name, package, version."""
    version = ref.rsplit(".v", 1)[1]
    return {"schema": "olm.bundle", "package": "testoperator", "name": f"testoperator.v{version}", "image": ref,
            "properties": [{"type": "olm.package", "value": {"packageName": "testoperator", "version": version}}]}


def template(**flags) -> dict:
    img = "quay.io/foo/olm:testoperator.v{}".format
    return {"Schema": "olm.semver", **flags,
            "Candidate": {"Bundles": [{"Image": img(v)} for v in VERSIONS]},
            "Fast": {"Bundles": [{"Image": img(v)} for v in ("0.2.1", "0.2.2", "0.3.0", "1.0.1", "1.1.0")]},
            "Stable": {"Bundles": [{"Image": img("1.0.1")}]}}


def channels(blobs) -> dict:
    return {b["name"]: b["entries"] for b in blobs if b["schema"] == "olm.channel"}


def test_semver_major_channels_link_as_opm_does():
    """opm's README draws each minor's head skipping its own minor only; opm writes (and so do we) skips of every
    lower bundle of the major but the one replaced (test_semver_template_matches_opm_on_generated_templates)."""
    blobs = render_template("semver", template(GenerateMajorChannels=True), Path("."), "t.yaml", fake_render)
    assert blobs[0] == {"schema": "olm.package", "name": "testoperator", "defaultChannel": "stable-v1"}
    ch = channels(blobs)
    assert sorted(ch) == ["candidate-v0", "candidate-v1", "fast-v0", "fast-v1", "stable-v1"]
    v = "testoperator.v{}".format
    assert ch["candidate-v0"] == [
        {"name": v("0.1.0")}, {"name": v("0.1.1")}, {"name": v("0.1.2")},
        {"name": v("0.1.3"), "skips": [v("0.1.0"), v("0.1.1"), v("0.1.2")]},
        {"name": v("0.2.0")}, {"name": v("0.2.1")},
        {"name": v("0.2.2"), "replaces": v("0.1.3"),
         "skips": [v("0.1.0"), v("0.1.1"), v("0.1.2"), v("0.2.0"), v("0.2.1")]},
        {"name": v("0.3.0"), "replaces": v("0.2.2"),
         "skips": [v("0.1.0"), v("0.1.1"), v("0.1.2"), v("0.1.3"), v("0.2.0"), v("0.2.1")]}]
    assert ch["candidate-v1"] == [
        {"name": v("1.0.0")},
        {"name": v("1.0.1"), "skips": [v("1.0.0")]},
        {"name": v("1.1.0"), "replaces": v("1.0.1"), "skips": [v("1.0.0")]}]
    assert ch["fast-v0"] == [
        {"name": v("0.2.1")},
        {"name": v("0.2.2"), "skips": [v("0.2.1")]},
        {"name": v("0.3.0"), "replaces": v("0.2.2"), "skips": [v("0.2.1")]}]
    assert ch["stable-v1"] == [{"name": v("1.0.1")}]
    assert len([b for b in blobs if b["schema"] == "olm.bundle"]) == 11


def test_semver_minor_channels_by_default_with_cross_channel_replaces():
    blobs = render_template("semver", template(), Path("."), "t.yaml", fake_render)
    assert blobs[0]["defaultChannel"] == "stable-v1.0"
    ch = channels(blobs)
    assert sorted(ch) == ["candidate-v0.1", "candidate-v0.2", "candidate-v0.3", "candidate-v1.0", "candidate-v1.1",
                          "fast-v0.2", "fast-v0.3", "fast-v1.0", "fast-v1.1", "stable-v1.0"]
    assert ch["candidate-v0.2"][-1] == {"name": "testoperator.v0.2.2", "replaces": "testoperator.v0.1.3",
                                        "skips": ["testoperator.v0.1.0", "testoperator.v0.1.1", "testoperator.v0.1.2",
                                                  "testoperator.v0.2.0", "testoperator.v0.2.1"]}
    assert ch["candidate-v1.0"] == [{"name": "testoperator.v1.0.0"},
                                    {"name": "testoperator.v1.0.1", "skips": ["testoperator.v1.0.0"]}]
    assert ch["fast-v1.1"] == [{"name": "testoperator.v1.1.0", "replaces": "testoperator.v1.0.1"}]


def test_semver_never_crosses_a_major_version():
    blobs = render_template("semver", template(GenerateMajorChannels=True, GenerateMinorChannels=True),
                            Path("."), "t.yaml", fake_render)
    for entries in channels(blobs).values():
        for e in entries:
            if "replaces" in e:
                assert e["replaces"].split(".v")[1][0] == e["name"].split(".v")[1][0]


@pytest.mark.parametrize("doc, message", [
    ({"Schema": "olm.semver"}, "lists no bundles"),
    ({"Schema": "olm.semver", "Stable": {"Bundles": [{"Image": ""}]}}, "every entry needs an Image"),
    ({"Schema": "olm.other"}, "not olm.semver"),
    ({"Schema": "olm.semver", "GenerateMinorChannel": True}, "unknown field.*GenerateMinorChannel"),
    ({"Schema": "olm.semver", "DefaultChannelTypePreference": "patch"}, "unknown DefaultChannelTypePreference"),
    ({"Schema": "olm.semver", "DefaultChannelTypePreference": "major"}, "no major-version channels"),
])
def test_semver_errors(doc, message):
    with pytest.raises(CatalogError, match=message):
        render_template("semver", doc, Path("."), "t.yaml", fake_render)


def test_semver_build_metadata_as_opm_treats_it():
    """Build metadata is kept (and ignored for order); two versions of one channel type that differ only by it
    cannot be ordered, and are refused, as opm refuses them."""
    def render(ref):
        blob = fake_render(ref)
        blob["properties"][0]["value"]["version"] += "+build.1"
        return blob
    assert channels(render_template("semver", template(), Path("."), "t.yaml", render))["stable-v1.0"] == [
        {"name": "testoperator.v1.0.1"}]

    def twice(ref):
        blob = fake_render(ref.removesuffix("+b"))
        if ref.endswith("+b"):
            blob["name"] += "-b"
            blob["properties"][0]["value"]["version"] += "+b"
        return blob
    doc = {"Schema": "olm.semver", "Stable": {"Bundles": [{"Image": "x.v1.0.0"}, {"Image": "x.v1.0.0+b"}]}}
    with pytest.raises(CatalogError, match=r"Stable: bundles testoperator.v1.0.0 and testoperator.v1.0.0-b have "
                                           r"versions that differ only by build metadata \(1.0.0\)"):
        render_template("semver", doc, Path("."), "t.yaml", twice)


def test_basic_template_renders_bundle_images_from_directories(tmp_path):
    tpl = {"schema": "olm.template.basic", "entries": [
        {"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"},
        {"schema": "olm.channel", "package": "plumbus", "name": "stable",
         "entries": [{"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]},
        {"schema": "olm.bundle", "image": "file://bundles/plumbus/1.0.0"},
        {"schema": "olm.bundle", "image": "bundles/plumbus/1.1.0"},
    ]}
    blobs = render_template("basic", tpl, EXAMPLE, "t.yaml")
    bundles = [b for b in blobs if b["schema"] == "olm.bundle"]
    assert [b["name"] for b in bundles] == ["plumbus.v1.0.0", "plumbus.v1.1.0"]
    assert {"type": "olm.gvk", "value": {"group": "how.theydoit.com", "kind": "Plumbus", "version": "v1alpha1"}} \
        in bundles[0]["properties"]
    out = tmp_path / "cat" / "catalog.yaml"
    out.parent.mkdir()
    out.write_text(yamlio.dump_all(blobs))
    cat = load_catalog("cat", out.parent)   # the output is a valid catalog
    assert cat.channels[("plumbus", "stable")].heads == ("plumbus.v1.1.0",)


def test_cli_semver_template_on_real_bundles(tmp_path, capsys):
    tpl = tmp_path / "semver.yaml"
    tpl.write_text(yamlio.dump({"Schema": "olm.semver", "GenerateMajorChannels": True, "Stable": {"Bundles": [
        {"Image": f"file://{EXAMPLE}/bundles/plumbus/1.0.0"}, {"Image": f"{EXAMPLE}/bundles/plumbus/1.1.0"}]}}))
    out = io.StringIO()
    assert main(["catalog", "template", "semver", str(tpl)], out=out) == 0
    blobs = yamlio.load_all(out.getvalue(), "out")
    assert blobs[0] == {"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable-v1"}
    assert channels(blobs) == {"stable-v1": [{"name": "plumbus.v1.0.0"},
                                             {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]}
    assert main(["catalog", "template", "basic", str(tpl)], out=io.StringIO()) == 2
    assert "not olm.template.basic" in capsys.readouterr().err


def test_semver_fields_match_case_insensitively_as_opm_reads_them():
    doc = {k[0].lower() + k[1:] if isinstance(v, dict) or k == "Schema" else k: v for k, v in template().items()}
    doc = {k: ({"bundles": [{"image": b["Image"]} for b in v["Bundles"]]} if isinstance(v, dict) else v)
           for k, v in doc.items()}
    assert "schema" in doc and "stable" in doc and "bundles" in doc["stable"]
    lowered = render_template("semver", doc, Path("."), "t.yaml", fake_render)
    assert lowered == render_template("semver", template(), Path("."), "t.yaml", fake_render)


@pytest.mark.parametrize("flags, default", [
    ({}, "stable-v1.0"),
    ({"GenerateMajorChannels": True}, "stable-v1"),
    ({"GenerateMajorChannels": True, "GenerateMinorChannels": True}, "stable-v1.0"),   # minor preferred on a tie
    ({"GenerateMajorChannels": True, "GenerateMinorChannels": True, "DefaultChannelTypePreference": "major"},
     "stable-v1"),
])
def test_semver_default_channel_as_opm_chooses_it(flags, default):
    blobs = render_template("semver", template(**flags), Path("."), "t.yaml", fake_render)
    assert blobs[0]["defaultChannel"] == default


PARITY_VERSIONS = [f"{x}.{y}.{z}" for x in range(3) for y in range(3) for z in range(3)]


def _random_semver_template(rng, image) -> dict:
    """A semver template of random bundles per channel type and random flags: the space opm's linking covers."""
    doc: dict = {"Schema": "olm.semver"}
    flags = rng.choice([(), ("Major",), ("Minor",), ("Major", "Minor")])
    for flag in flags:
        doc[f"Generate{flag}Channels"] = True
    if len(flags) == 2 and rng.random() < 0.5:
        doc["DefaultChannelTypePreference"] = rng.choice(["major", "minor"])
    for kind in ("Candidate", "Fast", "Stable"):
        if rng.random() < 0.75:
            doc[kind] = {"Bundles": [{"Image": image(v)} for v in rng.sample(PARITY_VERSIONS, rng.randint(1, 10))]}
    doc.setdefault("Stable", {"Bundles": [{"Image": image("1.0.0")}]})
    return doc


def test_semver_template_matches_opm_on_generated_templates(tmp_path, oci_registry):
    """Channels, edges and the default channel, as `opm alpha render-template semver` writes them, on 40 random
    templates over bundle images in a real registry on loopback."""
    import json
    import random
    import subprocess

    from reconciler import oci
    from tests.unit.helpers import csv_doc, write_bundle

    exe = opm_or_skip()
    refs = {}
    for v in PARITY_VERSIONS:
        write_bundle(tmp_path, f"src/{v}", csv_doc(f"tpl.v{v}", version=v), package="tpl")
        labels = {"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
                  "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
                  "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
                  "operators.operatorframework.io.bundle.package.v1": "tpl"}   # how opm tells a bundle image
        layout = oci.build_layout(tmp_path / "src" / v, tmp_path / "layouts" / v, labels)
        refs[v] = oci_registry.ref("semver-parity/tpl-bundle", f"v{v}")
        oci.push_layout(layout.path, refs[v])
    rng = random.Random(20240611)
    differences = []
    for i in range(40):
        doc = _random_semver_template(rng, refs.__getitem__)
        path = tmp_path / f"template-{i}.yaml"
        path.write_text(yamlio.dump(doc))
        proc = subprocess.run([exe, "alpha", "render-template", "semver", str(path), "-o", "json", "--use-http"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        theirs = [json.loads(d) for d in proc.stdout.replace("}\n{", "}\n\0{").split("\0")]
        ours = render_template("semver", doc, tmp_path, str(path))
        got, want = ((b[0]["defaultChannel"], channels(b)) for b in (ours, theirs))
        if got != want:
            differences.append((i, doc, got, want))
    assert not differences, f"{len(differences)} of 40 templates differ from opm; the first: {differences[0]}"
