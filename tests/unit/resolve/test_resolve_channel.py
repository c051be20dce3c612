"""SatResolver on single Operators: channel heads, ranges, channels, entrypoints, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.errors import DeclarationError, ResolutionError
from reconciler.model.catalog import Catalog
from reconciler.model.declarations import Origin, parse_operator
from reconciler.resolve import ResolutionRequest, SatResolver, Selection
from tests.unit.helpers import write_docs
from tests.support.paths import EXAMPLE

ORIGIN = Origin("operators/op.yaml")


def op(name="plumbus", *, catalog="community", package="plumbus", channel="stable", version=None,
       api="v1", entrypoint=None, **spec):
    if api == "v2alpha1":
        cs = {"package": package, "ref": {"name": catalog}} if package else {"ref": {"name": catalog}}
        if channel:
            cs["channel"] = channel
        if entrypoint:
            cs["entrypoint"] = entrypoint
        spec = {"updates": {"catalogSource": cs}, **spec}
    elif "bundle" not in spec:
        sel = {"name": catalog, "package": package}
        if channel:
            sel["channel"] = channel
        spec = {"catalog": sel, **spec}
    if version is not None:
        spec["version"] = version
    doc = {"apiVersion": f"operators.coreos.com/{api}", "kind": "Operator", "metadata": {"name": name},
           "spec": spec}
    return parse_operator(doc, ORIGIN)


def resolve_one(decl, catalogs) -> Selection:
    resolution = SatResolver().resolve(ResolutionRequest((decl,), catalogs))
    assert len(resolution.selections) == 1
    return resolution.selections[0]


def resolve_error(decl, catalogs) -> ResolutionError:
    with pytest.raises(ResolutionError) as err:
        SatResolver().resolve(ResolutionRequest((decl,), catalogs))
    assert err.value.path == "operators/op.yaml"
    assert err.value.obj == f"Operator {decl.name}"
    return err.value


@pytest.fixture(scope="module")
def example() -> dict[str, Catalog]:
    return {"community": load_catalog("community", EXAMPLE / "catalogs" / "community",
                                      "catalogs/community")}


def _bundle(name, version, pkg="widget"):
    return {"schema": "olm.bundle", "package": pkg, "name": name, "image": f"file://bundles/{name}",
            "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": version}}]}


@pytest.fixture(scope="module")
def widgets(tmp_path_factory) -> dict[str, Catalog]:
    """Package widget: stable 1.0.0 -> 1.1.0 -> 1.2.0 -> 2.0.0; fast adds 2.1.0; gadget has one bundle."""
    root: Path = tmp_path_factory.mktemp("catalogs") / "extra"
    write_docs(root, "widget.yaml",
               {"schema": "olm.package", "name": "widget", "defaultChannel": "stable"},
               {"schema": "olm.channel", "package": "widget", "name": "stable", "entries": [
                   {"name": "widget.v1.0.0"},
                   {"name": "widget.v1.1.0", "replaces": "widget.v1.0.0"},
                   {"name": "widget.v1.2.0", "replaces": "widget.v1.1.0"},
                   {"name": "widget.v2.0.0", "replaces": "widget.v1.2.0"}]},
               {"schema": "olm.channel", "package": "widget", "name": "fast", "entries": [
                   {"name": "widget.v2.0.0"},
                   {"name": "widget.v2.1.0", "replaces": "widget.v2.0.0"}]},
               *[_bundle(f"widget.v{v}", v) for v in ("1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0")])
    write_docs(root, "gadget.yaml",
               {"schema": "olm.package", "name": "gadget", "defaultChannel": "alpha"},
               {"schema": "olm.channel", "package": "gadget", "name": "alpha",
                "entries": [{"name": "gadget.v0.1.0"}]},
               _bundle("gadget.v0.1.0", "0.1.0", "gadget"))
    return {"extra": load_catalog("extra", root, "catalogs/extra")}


def test_example_resolves_to_channel_head(example):
    sel = resolve_one(op(version=">=1.0.0 <2.0.0"), example)
    assert (sel.bundle_name, sel.version, sel.image) == ("plumbus.v1.1.0", "1.1.0", "file://bundles/plumbus/1.1.0")
    assert (sel.package, sel.catalog, sel.channel) == ("plumbus", "community", "stable")
    assert (sel.owner, sel.kind) == ("plumbus", "Operator")


def test_head_without_version(widgets):
    sel = resolve_one(op(catalog="extra", package="widget"), widgets)
    assert sel.bundle_name == "widget.v2.0.0"


def test_version_range_picks_newest_satisfying(widgets):
    sel = resolve_one(op(catalog="extra", package="widget", version="<2.0.0"), widgets)
    assert (sel.bundle_name, sel.version) == ("widget.v1.2.0", "1.2.0")
    sel = resolve_one(op(catalog="extra", package="widget", version="~1.1"), widgets)
    assert sel.bundle_name == "widget.v1.1.0"


def test_exact_version_pins(example):
    sel = resolve_one(op(version="1.0.0"), example)
    assert (sel.bundle_name, sel.image) == ("plumbus.v1.0.0", "file://bundles/plumbus/1.0.0")


def test_default_channel_used_when_channel_omitted(widgets):
    sel = resolve_one(op(catalog="extra", package="widget", channel=None), widgets)
    assert (sel.channel, sel.bundle_name) == ("stable", "widget.v2.0.0")


def test_other_channel(widgets):
    sel = resolve_one(op(catalog="extra", package="widget", channel="fast"), widgets)
    assert (sel.channel, sel.bundle_name) == ("fast", "widget.v2.1.0")


def test_each_operator_resolved_in_order(widgets, example):
    catalogs = {**widgets, **example}
    decls = (op("a", catalog="extra", package="widget", version="1.x"), op("b"))
    sels = SatResolver().resolve(ResolutionRequest(decls, catalogs)).selections
    assert [(s.owner, s.bundle_name) for s in sels] == [("a", "widget.v1.2.0"), ("b", "plumbus.v1.1.0")]


def test_unknown_catalog_lists_catalogs(example, widgets):
    err = resolve_error(op(catalog="certified"), {**example, **widgets})
    assert err.message == "catalog 'certified' not found"
    assert "community, extra" in err.hint and "catalogs/" in err.hint


def test_unknown_catalog_when_there_are_none():
    err = resolve_error(op(), {})
    assert "catalogs in this repository: none" in err.hint


def test_unknown_package_lists_packages(widgets):
    err = resolve_error(op(catalog="extra", package="gizmo"), widgets)
    assert err.message == "package 'gizmo' not found in catalog 'extra'"
    assert err.hint == "packages in extra: gadget, widget"


def test_unknown_channel_lists_channels(widgets):
    err = resolve_error(op(catalog="extra", package="widget", channel="beta"), widgets)
    assert err.message == "channel 'beta' not found in package 'widget' of catalog 'extra'"
    assert err.hint == "channels: fast, stable"


def test_no_default_channel_and_none_given(widgets):
    # load_catalog refuses such a package (opm's rule); a catalog built another way may still lack one
    extra = widgets["extra"]
    packages = {**extra.packages, "gadget": extra.packages["gadget"].replace(default_channel=None)}
    err = resolve_error(op(catalog="extra", package="gadget", channel=None),
                        {"extra": extra.replace(packages=packages)})
    assert err.message == "package 'gadget' has no default channel; set spec.catalog.channel"


def test_no_satisfying_version_lists_channel(widgets):
    err = resolve_error(op(catalog="extra", package="widget", version=">=3.0.0"), widgets)
    assert err.message == "no bundle in channel 'stable' of package 'widget' satisfies version >=3.0.0"
    assert err.hint == ("the channel has: widget.v2.0.0 (2.0.0), widget.v1.2.0 (1.2.0), widget.v1.1.0 (1.1.0), "
                        "widget.v1.0.0 (1.0.0)")


def test_entrypoint_selects_that_bundle(example):
    sel = resolve_one(op(api="v2alpha1", entrypoint="plumbus.v1.0.0"), example)
    assert (sel.bundle_name, sel.version, sel.channel) == ("plumbus.v1.0.0", "1.0.0", "stable")


def test_entrypoint_not_in_channel(example):
    err = resolve_error(op(api="v2alpha1", entrypoint="plumbus.v9.0.0"), example)
    assert err.message == "no bundle in channel 'stable' of package 'plumbus' satisfies entrypoint plumbus.v9.0.0"
    assert "plumbus.v1.1.0 (1.1.0), plumbus.v1.0.0 (1.0.0)" in err.hint


def test_an_entrypoint_alone_is_that_bundle_without_updates(example):
    """Seed 001: "Omitting package and channel will install the entrypoint from ref without subscribing to
    updates" -- the older bundle stays although the channel has a newer one, and it is not an upgrade edge's."""
    decl = op(api="v2alpha1", package=None, channel=None, entrypoint="plumbus.v1.0.0")
    assert (decl.package, decl.follow_updates) == ("", False)
    sel = resolve_one(decl, example)
    assert (sel.bundle_name, sel.package, sel.channel) == ("plumbus.v1.0.0", "plumbus", "stable")
    installed = _lock("plumbus.v1.0.0", "1.0.0", catalog="community", package="plumbus")
    again = SatResolver().resolve(ResolutionRequest((decl,), example, installed={"plumbus": installed}))
    assert [s.bundle_name for s in again.selections] == ["plumbus.v1.0.0"]
    err = resolve_error(op(api="v2alpha1", package=None, channel=None, entrypoint="plumbus.v9.0.0"), example)
    assert err.message == "entrypoint 'plumbus.v9.0.0' is no bundle of catalog 'community'"


@pytest.mark.parametrize("channel, entrypoint", [("stable", "plumbus.v1.0.0"), (None, None)])
def test_a_catalog_source_without_a_package_needs_an_entrypoint_alone(channel, entrypoint):
    with pytest.raises(DeclarationError) as err:
        op(api="v2alpha1", package=None, channel=channel, entrypoint=entrypoint)
    assert "spec.updates.catalogSource needs a package (and optionally a channel and an entrypoint), or an " \
           "entrypoint alone" in err.value.message


def test_entrypoint_and_version_must_both_hold(example):
    err = resolve_error(op(api="v2alpha1", entrypoint="plumbus.v1.0.0", version=">=1.1.0"), example)
    assert "satisfies version >=1.1.0" in err.message


def test_v2alpha1_default_channel(example):
    sel = resolve_one(op(api="v2alpha1", channel=None), example)
    assert (sel.channel, sel.bundle_name) == ("stable", "plumbus.v1.1.0")


def test_direct_bundle_needs_no_catalog():
    decl = op(bundle={"name": "plumbus.v1.0.0", "spec": {"refs": ["file://bundles/plumbus/1.0.0"]}})
    sel = resolve_one(decl, {})
    assert (sel.bundle_name, sel.image) == ("plumbus.v1.0.0", "file://bundles/plumbus/1.0.0")
    assert (sel.package, sel.version, sel.catalog, sel.channel) == ("", "", "", "")


def _lock(name, version, catalog="extra", package="widget"):
    from reconciler.model.lock import LockEntry
    return LockEntry(operator="widget", package=package, name=name, version=version, catalog=catalog,
                     channel="stable", source=f"file://bundles/{name}", digest="")


def test_a_locked_bundle_is_preferred_while_it_satisfies_the_declaration(widgets):
    decl = op("widget", catalog="extra", package="widget", channel="stable", version=">=1.0.0 <2.0.0")
    pins = {"widget": _lock("widget.v1.1.0", "1.1.0")}
    sel = SatResolver().resolve(ResolutionRequest((decl,), widgets, pins=pins)).selections[0]
    assert sel.bundle_name == "widget.v1.1.0"
    # no longer satisfied: resolved afresh, not kept
    decl = op("widget", catalog="extra", package="widget", channel="stable", version=">=1.2.0 <2.0.0")
    sel = SatResolver().resolve(ResolutionRequest((decl,), widgets, pins=pins)).selections[0]
    assert sel.bundle_name == "widget.v1.2.0"


def test_what_is_installed_wins_over_a_pin(widgets):
    decl = op("widget", catalog="extra", package="widget", channel="stable", version=">=1.0.0 <2.0.0")
    request = ResolutionRequest((decl,), widgets, installed={"widget": _lock("widget.v1.1.0", "1.1.0")},
                                pins={"widget": _lock("widget.v1.0.0", "1.0.0")})
    assert SatResolver().resolve(request).selections[0].bundle_name == "widget.v1.2.0"
