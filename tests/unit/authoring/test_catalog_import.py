"""`catalog import` without a registry or a cluster: what it writes, what it says changed, its refusals; the
ConfigMap catalog format; registry credentials from pull secrets, auth files and credential helpers."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.authoring import importer
from reconciler.catalog import load
from reconciler.authoring.importer import Origin, Source
from reconciler.errors import CatalogError, InputError
from reconciler.oci import auth

CSV = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
       "metadata": {"name": "foo.v1.0.0"},
       "spec": {"version": "1.0.0", "installModes": [{"type": "AllNamespaces", "supported": True}],
                "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "foo", "spec": {
                    "selector": {"matchLabels": {"app": "foo"}}, "template": {
                        "metadata": {"labels": {"app": "foo"}},
                        "spec": {"containers": [{"name": "foo", "image": "quay.io/org/foo:1"}]}}}}]}}}}


def blobs(package: str = "foo", versions: tuple[str, ...] = ("1.0.0",), image: str = "quay.io/org/{p}-bundle:{v}"):
    out = [{"schema": "olm.package", "name": package, "defaultChannel": "stable"},
           {"schema": "olm.channel", "package": package, "name": "stable",
            "entries": [{"name": f"{package}.v{v}"} for v in versions]}]
    for v in versions:
        csv = json.loads(json.dumps(CSV).replace("foo.v1.0.0", f"{package}.v{v}").replace('"1.0.0"', f'"{v}"'))
        out.append({"schema": "olm.bundle", "name": f"{package}.v{v}", "package": package,
                    "image": image.format(p=package, v=v),
                    "properties": [{"type": "olm.package", "value": {"packageName": package, "version": v}},
                                   {"type": "olm.bundle.object",
                                    "value": {"data": base64.b64encode(json.dumps(csv).encode()).decode()}}]})
    return out


def source(packages: dict[str, list[dict]], digest: str = "sha256:" + "1" * 64) -> Source:
    return Source(Origin(image="registry.example.com/index:v1", digest=digest), packages,
                  tuple(sorted(packages) + ["fooo-operator", "unrelated"]))


def run(repo: Path, src: Source) -> importer.Imported:
    imported = importer.plan(repo, "community", src, importer.previous_import(repo, "community"))
    importer.write(repo, imported)
    return imported


def test_each_package_gets_a_directory_and_the_catalog_loads_clean(tmp_path):
    imported = run(tmp_path, source({"foo": blobs(), "bar": blobs("bar")}))
    assert sorted(imported.files) == ["catalogs/community/.indexignore", "catalogs/community/bar/catalog.json",
                                      "catalogs/community/foo/catalog.json", "catalogs/community/import.yaml"]
    loaded = load(tmp_path / "catalogs" / "community")
    assert loaded.findings == ()   # the record is ignored, not a file the loader warns about
    assert sorted(loaded.catalog.bundles) == [("bar", "bar.v1.0.0"), ("foo", "foo.v1.0.0")]
    record = yamlio.load_one((tmp_path / "catalogs/community/import.yaml").read_text(), "import.yaml")
    assert record["source"] == {"image": "registry.example.com/index:v1", "digest": "sha256:" + "1" * 64}
    assert list(record["packages"]["foo"]["bundles"]) == ["foo.v1.0.0"]
    assert imported.lines()[-1] == ("Summary: 2 packages added, 0 changed, 0 removed, 0 unchanged; bundles: 2 "
                                    "added, 0 removed, 0 changed")


def test_a_later_import_says_what_changed(tmp_path):
    run(tmp_path, source({"foo": blobs(versions=("1.0.0", "1.1.0")), "bar": blobs("bar")}))
    changed = blobs(versions=("1.1.0", "1.2.0"))
    changed[2]["properties"].append({"type": "olm.maxOpenShiftVersion", "value": "4.20"})   # 1.1.0 changed
    second = run(tmp_path, source({"foo": changed}, digest="sha256:" + "2" * 64))
    assert second.lines() == [
        f"catalogs/community from registry.example.com/index:v1 (sha256:{'2' * 64}), was sha256:{'1' * 64}",
        "  ~ package foo: + foo.v1.2.0, - foo.v1.0.0, ~ foo.v1.1.0",
        "  - package bar: the source no longer has it",
        "Summary: 0 packages added, 1 changed, 1 removed, 0 unchanged; bundles: 1 added, 2 removed, 1 changed"]
    assert not (tmp_path / "catalogs/community/bar").exists()
    assert sorted(load(tmp_path / "catalogs/community").catalog.bundles) == [("foo", "foo.v1.1.0"), ("foo", "foo.v1.2.0")]
    third = run(tmp_path, source({"foo": changed}, digest="sha256:" + "2" * 64))
    assert third.lines()[-1].startswith("Summary: 0 packages added, 0 changed, 0 removed, 1 unchanged")


def test_a_large_package_is_split_below_the_loaders_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(importer, "FILE_LIMIT", 6000)
    imported = run(tmp_path, source({"foo": blobs(versions=tuple(f"1.{i}.0" for i in range(8)))}))
    files = sorted(p for p in imported.files if p.startswith("catalogs/community/foo/"))
    assert len(files) >= 2 and all(len(imported.files[f].encode()) <= 6000 for f in files)
    assert len(load(tmp_path / "catalogs/community").catalog.bundles) == 8


def test_a_bundle_without_an_image_becomes_a_bundle_directory(tmp_path):
    imported = run(tmp_path, source({"foo": blobs(image="")}))
    assert "bundles/foo/1.0.0/manifests/foo.v1.0.0.clusterserviceversion.yaml" in imported.files
    annotations = yamlio.load_one((tmp_path / "bundles/foo/1.0.0/metadata/annotations.yaml").read_text(), "a")
    assert annotations["annotations"]["operators.operatorframework.io.bundle.package.v1"] == "foo"
    (bundle,) = load(tmp_path / "catalogs/community").catalog.bundles.values()
    assert bundle.image == "file://bundles/foo/1.0.0"
    from reconciler.authoring.render import render_bundle_dir
    assert render_bundle_dir(tmp_path / "bundles/foo/1.0.0")["name"] == "foo.v1.0.0"   # a bundle the renderer reads


def test_a_directory_the_import_did_not_write_is_left_alone(tmp_path):
    (tmp_path / "catalogs/community").mkdir(parents=True)
    (tmp_path / "catalogs/community/catalog.yaml").write_text("schema: olm.package\nname: mine\n")
    with pytest.raises(InputError, match="exists and was not written by `catalog import`") as info:
        importer.previous_import(tmp_path, "community")
    assert "--name" in info.value.hint
    (tmp_path / "bundles/foo/1.0.0").mkdir(parents=True)
    with pytest.raises(InputError, match="bundles/foo/1.0.0 exists and was not written"):
        importer.plan(tmp_path, "other", source({"foo": blobs(image="")}), (None, {}, []))


def test_a_package_the_source_lacks_lists_the_near_names():
    with pytest.raises(CatalogError) as info:
        importer.check_wanted(source({"foo": blobs()}), ["foo", "foo-operator"])
    assert "the source has no package foo-operator" in info.value.message
    assert info.value.hint == "foo-operator: did you mean fooo-operator?"


def test_a_configmap_catalog_becomes_bundles_and_channels(tmp_path):
    from reconciler.catalog import configmap_source

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    owned = {"owned": [{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}]}
    v1 = json.loads(json.dumps(CSV))
    v1["spec"]["customresourcedefinitions"] = owned
    v2 = json.loads(json.dumps(v1).replace("foo.v1.0.0", "foo.v1.1.0").replace('"1.0.0"', '"1.1.0"'))
    v2["spec"]["replaces"] = "foo.v1.0.0"
    v2["metadata"]["annotations"] = {"olm.skipRange": "<1.0.0"}
    cm = {"data": {"customResourceDefinitions": yamlio.dump([crd]),
                   "clusterServiceVersions": yamlio.dump([v1, v2]),
                   "packages": yamlio.dump([{"packageName": "foo", "defaultChannel": "stable",
                                             "channels": [{"name": "stable", "currentCSV": "foo.v1.1.0"}]}])}}
    src = importer.read_config_map(cm, None, Origin(catalog_source="ns/cm-catalog", config_map="ns/cm-catalog"))
    run(tmp_path, src)
    cat = load(tmp_path / "catalogs/community").catalog
    assert load(tmp_path / "catalogs/community").errors == []
    (channel,) = cat.channels.values()
    assert [(e.name, e.replaces, e.skip_range) for e in sorted(channel.entries, key=lambda e: e.name)] == [
        ("foo.v1.0.0", None, None), ("foo.v1.1.0", "foo.v1.0.0", "<1.0.0")]
    bundle = cat.bundles[("foo", "foo.v1.1.0")]
    assert bundle.image == "file://bundles/foo/1.1.0"
    assert ("example.com", "v1", "Widget") in {(p.value["group"], p.value["version"], p.value["kind"])
                                               for p in bundle.properties if p.type == "olm.gvk"}
    assert (tmp_path / "bundles/foo/1.1.0/manifests/widgets.example.com.crd.yaml").is_file()
    with pytest.raises(CatalogError, match="is not a ConfigMap catalog: it has no packages"):
        configmap_source.read({"data": {"customResourceDefinitions": "", "clusterServiceVersions": ""}}, "ConfigMap x")


def helper(tmp_path: Path, name: str, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / f"docker-credential-{name}"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_credential_helpers_are_run_as_docker_runs_them(tmp_path, monkeypatch):
    asked = tmp_path / "asked"
    helper(tmp_path, "vault", f'read server; echo "$1 $server" > {asked}\n'
                              'echo \'{"ServerURL": "x", "Username": "robot", "Secret": "s3cret"}\'\n')
    helper(tmp_path, "store", 'echo "credentials not found in native keychain"; exit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credHelpers": {"registry.example.com:5000": "vault"}, "credsStore": "store",
                                  "auths": {"other.example.com": {}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(config))
    monkeypatch.setattr(auth, "_helper_answers", {})
    entry = auth.credentials("registry.example.com:5000")
    assert auth.basic(entry) == ("robot", "s3cret")
    assert asked.read_text() == "get registry.example.com:5000\n"   # the server on stdin, as docker passes it
    assert auth.credentials("other.example.com") is None             # the store has nothing: no credentials
    config.write_text(json.dumps({"credsStore": "missing"}))
    with pytest.raises(auth.CredentialError, match="docker-credential-missing is not on PATH"):
        auth.credentials("quay.io")


def test_pull_secrets_come_before_the_auth_files(tmp_path, monkeypatch):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"auths": {"quay.io": {"auth": base64.b64encode(b"file:one").decode()}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(config))
    inner = {"auths": {"https://quay.io/v1/": {"username": "secret", "password": "two"}}}
    secret = {"type": "kubernetes.io/dockerconfigjson",
              "data": {".dockerconfigjson": base64.b64encode(json.dumps(inner).encode()).decode()}}
    with auth.pull_secrets([("Secret ns/pull", auth.secret_config(secret, "Secret ns/pull"))]):
        assert auth.basic(auth.credentials("quay.io")) == ("secret", "two")
    assert auth.basic(auth.credentials("quay.io")) == ("file", "one")
    with pytest.raises(auth.CredentialError, match="Secret ns/x is not a pull secret"):
        auth.secret_config({"type": "Opaque", "data": {"token": "eA=="}}, "Secret ns/x")


def test_a_catalog_image_entry_takes_a_package_filter_and_mirrors_are_settings(tmp_path):
    from reconciler.repo import read_settings

    (tmp_path / "reconciler.yaml").write_text(
        "catalogs:\n  redhat: {image: registry.redhat.io/redhat/redhat-operator-index@sha256:" + "a" * 64
        + ", packages: [cert-manager]}\nmirrors:\n- {source: registry.redhat.io, mirrors: [m.local/rh]}\n")
    settings = read_settings(tmp_path)
    assert settings.catalogs["redhat"].packages == ("cert-manager",)
    assert [r.mirrors for r in settings.mirrors] == [("m.local/rh",)]
    for bad in ("catalogs: {community: {packages: [plumbus]}}",                    # a directory holds what it holds
                "catalogs: {c: {image: quay.io/x/y:1, packages: []}}",
                "catalogs: {c: {image: quay.io/x/y:1, packages: [Not_A_Name]}}"):
        (tmp_path / "reconciler.yaml").write_text(bad + "\n")
        with pytest.raises(InputError, match="packages must list package names of the catalog image"):
            read_settings(tmp_path)
    (tmp_path / "reconciler.yaml").write_text("mirrors: [{source: quay.io}]\n")
    with pytest.raises(InputError, match=r"mirrors\[0\].mirrors must list one or more mirrors of quay.io"):
        read_settings(tmp_path)
