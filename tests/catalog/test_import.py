"""`catalog import` of index images from a real registry on loopback; a catalog image read through a package
filter; registry mirrors with the source registry stopped; credentials from a credential helper."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from reconciler import oci, yamlio
from reconciler.catalog.source import CONFIGS_LABEL, load_image_catalog
from reconciler.cli.parser import main
from reconciler.errors import CatalogError
from tests.bundle.oci_registry import LOGIN, oci_registry_with_login, start_registry  # noqa: F401
from tests.support.repo import example_copy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo"
CSV = yamlio.read_all(EXAMPLE / "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml")[0]


def package_blobs(name: str, versions: tuple[str, ...], image: str = "quay.io/org/{p}-bundle:v{v}") -> list[dict]:
    out = [{"schema": "olm.package", "name": name, "defaultChannel": "stable"},
           {"schema": "olm.channel", "package": name, "name": "stable",
            "entries": [{"name": f"{name}.v{v}", **({"replaces": f"{name}.v{versions[i - 1]}"} if i else {})}
                        for i, v in enumerate(versions)]}]
    for v in versions:
        out.append({"schema": "olm.bundle", "name": f"{name}.v{v}", "package": name,
                    "image": image.format(p=name, v=v),
                    "properties": [{"type": "olm.package", "value": {"packageName": name, "version": v}}]})
    return out


def push_index(tmp_path: Path, registry, repository: str, tag: str, packages: dict[str, tuple[str, ...]],
               top_level: dict[str, tuple[str, ...]] | None = None) -> str:
    """An index image: configs/<package>/catalog.json for each package (``top_level`` ones in one file at the
    top of configs/, as some indexes keep them)."""
    fs = tmp_path / f"{repository.replace('/', '-')}-{tag}-fs"
    shutil.rmtree(fs, ignore_errors=True)
    for name, versions in packages.items():
        (fs / "configs" / name).mkdir(parents=True)
        (fs / "configs" / name / "catalog.json").write_text(
            "\n".join(json.dumps(b) for b in package_blobs(name, versions)) + "\n")
    if top_level:
        (fs / "configs").mkdir(parents=True, exist_ok=True)
        (fs / "configs" / "index.json").write_text("\n".join(json.dumps(b) for name, versions in top_level.items()
                                                             for b in package_blobs(name, versions)) + "\n")
    shutil.rmtree(tmp_path / f"{repository.replace('/', '-')}-{tag}-layout", ignore_errors=True)
    layout = oci.build_layout(fs, tmp_path / f"{repository.replace('/', '-')}-{tag}-layout",
                              {CONFIGS_LABEL: "/configs"})
    ref = registry.ref(repository, tag)
    oci.push_layout(layout.path, ref)
    return ref


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


INDEX = {"alpha-operator": ("1.0.0", "1.1.0"), "beta-operator": ("0.1.0",), "gamma": ("2.0.0",),
         "delta-controller": ("3.0.0",), "epsilon": ("1.0.0",), "zeta-operator": ("0.9.0",)}


def test_import_named_packages_then_again_after_the_index_changed(tmp_path, oci_registry):
    ref = push_index(tmp_path, oci_registry, "index/community", "v1", INDEX)
    repo = tmp_path / "repo"
    repo.mkdir()
    code, out = cli("catalog", "import", str(repo), "--image", ref, "--package", "alpha-operator",
                    "--package", "gamma")
    assert code == 0, out
    digest = oci.resolve(ref)
    assert f"catalogs/community from {ref} ({digest})" in out
    assert "+ package alpha-operator: 2 bundles" in out and "+ package gamma: 1 bundle" in out
    assert sorted(p.name for p in (repo / "catalogs/community").iterdir()) == [
        ".indexignore", "alpha-operator", "gamma", "import.yaml"]
    code, out = cli("catalog", "validate", str(repo / "catalogs/community"))
    assert code == 0 and "2 packages, 2 channels, 3 bundles: valid" in out, out

    # The index moves on: alpha gets 1.2.0 and loses 1.0.0; a later import says so, and keeps both packages.
    changed = dict(INDEX, **{"alpha-operator": ("1.1.0", "1.2.0")})
    push_index(tmp_path, oci_registry, "index/community", "v1", changed)
    code, out = cli("catalog", "import", str(repo), "--image", ref, "--dry-run")
    assert code == 1, out
    assert "~ package alpha-operator: + alpha-operator.v1.2.0, - alpha-operator.v1.0.0" in out
    assert f", was {digest}" in out and "would write catalogs/community/alpha-operator/catalog.json" in out
    code, out = cli("catalog", "import", str(repo), "--image", ref)
    assert code == 0, out
    record = yamlio.load_one((repo / "catalogs/community/import.yaml").read_text(), "import.yaml")
    assert sorted(record["packages"]) == ["alpha-operator", "gamma"]
    assert record["source"] == {"image": ref, "digest": oci.resolve(ref)}


def test_a_filtered_import_unpacks_only_the_packages_asked_for(tmp_path, oci_registry):
    ref = push_index(tmp_path, oci_registry, "index/filtered", "v1", INDEX)
    repo = tmp_path / "repo"
    repo.mkdir()
    assert cli("catalog", "import", str(repo), "--image", ref, "--name", "c", "--package", "epsilon")[0] == 0
    trees = list((Path(os.environ["RECONCILER_CACHE_DIR"]) / "oci" / "trees").iterdir())
    (tree,) = [t for t in trees if t.name.startswith(oci.resolve(ref).partition(":")[2])]
    assert sorted(p.name for p in (tree / "root").iterdir()) == ["epsilon"]   # nothing else was written
    assert sorted(json.loads((tree / "tree.json").read_text())["names"]) == sorted(INDEX)


def test_an_unfiltered_import_takes_every_package_and_a_top_level_file_is_split(tmp_path, oci_registry):
    ref = push_index(tmp_path, oci_registry, "index/all", "v1", {"alpha-operator": ("1.0.0",)},
                     top_level={"one": ("1.0.0",), "two": ("2.0.0",)})
    repo = tmp_path / "repo"
    repo.mkdir()
    code, out = cli("catalog", "import", str(repo), "--image", ref, "--name", "everything", "--all")
    assert code == 0, out
    assert sorted(p.name for p in (repo / "catalogs/everything").iterdir() if p.is_dir()) == [
        "alpha-operator", "one", "two"]


def test_a_package_the_index_lacks_lists_the_near_names(tmp_path, oci_registry):
    ref = push_index(tmp_path, oci_registry, "index/near", "v1", INDEX)
    repo = tmp_path / "repo"
    repo.mkdir()
    code, out = cli("catalog", "import", str(repo), "--image", ref, "--package", "alpha")
    assert code == 2
    with pytest.raises(CatalogError) as info:
        load_image_catalog("c", ref, packages=("betta-operator",))
    assert info.value.message == "catalogs.c.packages: the image has no package betta-operator"
    assert info.value.hint == "betta-operator: did you mean beta-operator, zeta-operator, alpha-operator?"
    assert not (repo / "catalogs").exists()


def test_an_image_that_is_not_a_catalog_says_so(tmp_path, oci_registry, capsys):
    layout = oci.build_layout(EXAMPLE / "bundles/plumbus/1.1.0", tmp_path / "bundle-layout",
                              {"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1"})
    ref = oci_registry.ref("bundles/not-a-catalog", "v1")
    oci.push_layout(layout.path, ref)
    repo = tmp_path / "repo"
    repo.mkdir()
    code, _ = cli("catalog", "import", str(repo), "--image", ref, "--package", "plumbus")
    err = capsys.readouterr().err
    assert code == 2
    assert "the image is not a catalog: it has no /configs directory holding a file-based catalog; it is a bundle " \
           "image" in err, err


def test_an_unreachable_registry_is_named_in_our_words(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # nothing listens there once the socket is closed
    repo = tmp_path / "repo"
    repo.mkdir()
    code, _ = cli("catalog", "import", str(repo), "--image", f"127.0.0.1:{port}/index:v1", "--package", "x")
    err = capsys.readouterr().err
    assert code == 2
    assert f"cannot reach registry 127.0.0.1:{port} for 127.0.0.1:{port}/index:v1: the connection was refused" in err
    assert "urllib3" not in err and "HTTPConnection" not in err and "Max retries" not in err, err


def test_a_name_that_cannot_be_looked_up_is_said_so(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    # an empty label: refused before any lookup is sent, and said in our words, not the HTTP library's
    code, _ = cli("catalog", "import", str(repo), "--image", "registry..invalid/index:v1", "--package", "x")
    err = capsys.readouterr().err
    assert code == 2
    assert ("cannot reach registry registry..invalid for registry..invalid/index:v1: registry..invalid is not a host "
            "name that can be looked up") in err, err
    assert "urllib3" not in err and "LocationParseError" not in err and "label empty" not in err, err


def test_a_catalog_image_entry_with_a_package_filter_resolves(tmp_path, oci_registry, monkeypatch):
    ref = push_index(tmp_path, oci_registry, "index/pinned", "v1", INDEX)
    pinned = f"{ref.rsplit(':', 1)[0]}@{oci.resolve(ref)}"
    catalog = load_image_catalog("community", pinned, packages=("alpha-operator", "gamma"))
    assert sorted(catalog.packages) == ["alpha-operator", "gamma"]
    top = push_index(tmp_path, oci_registry, "index/pinned-top", "v1", {}, top_level=INDEX)
    assert sorted(load_image_catalog("community", top, packages=("gamma",)).packages) == ["gamma"]


# --------------------------------------------------------------------------------------------------------------
# Mirrors: the source registry stopped, the mirror serving


def test_resolve_reconcile_and_import_pull_through_a_mirror(request, tmp_path, monkeypatch):
    from bench.peers import stop
    from bench.peers.registry import registry_binary

    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binary = registry_binary(log=print)
    source_proc, source = start_registry(binary, tmp_path / "source")
    mirror_proc, mirror = start_registry(binary, tmp_path / "mirror")
    try:
        bundle_ref = {}
        for reg, prefix in ((source, "operators"), (mirror, "mirrored/operators")):
            layout = oci.build_layout(EXAMPLE / "bundles/plumbus/1.1.0", tmp_path / f"b-{reg.host}", {})
            oci.push_layout(layout.path, reg.ref(f"{prefix}/plumbus-bundle", "v1.1.0"))
            bundle_ref[reg.host] = reg.ref(f"{prefix}/plumbus-bundle", "v1.1.0")
        catalog = yamlio.read_all(EXAMPLE / "catalogs/community/plumbus.yaml")
        for blob in catalog:
            if blob.get("schema") == "olm.bundle":
                blob["image"] = f"{source.host}/operators/plumbus-bundle:v{blob['name'].split('.v', 1)[1]}"
        catalog = [b for b in catalog if b.get("schema") != "olm.bundle" or b["name"] == "plumbus.v1.1.0"]
        for blob in catalog:
            if blob.get("schema") == "olm.channel":
                blob["entries"] = [{"name": "plumbus.v1.1.0"}]
        fs = tmp_path / "index-fs"
        (fs / "configs/plumbus").mkdir(parents=True)
        (fs / "configs/plumbus/catalog.yaml").write_text(yamlio.dump_all(catalog))
        for reg, prefix in ((source, "catalogs"), (mirror, "mirrored/catalogs")):
            layout = oci.build_layout(fs, tmp_path / f"i-{reg.host}", {CONFIGS_LABEL: "/configs"})
            oci.push_layout(layout.path, reg.ref(f"{prefix}/index", "v1"))
    finally:
        stop(source_proc)   # from here on only the mirror serves
    try:
        repo = example_copy(tmp_path / "repo", lock=False)
        shutil.rmtree(repo / "catalogs")
        index = source.ref("catalogs/index", "v1")
        settings = yamlio.read_all(repo / "reconciler.yaml")[0] or {}
        settings["catalogs"] = {"community": {"image": index, "packages": ["plumbus"]}}
        settings["mirrors"] = [{"source": source.host, "mirrors": [f"{mirror.host}/mirrored"]}]
        (repo / "reconciler.yaml").write_text(yamlio.dump(settings))
        monkeypatch.setenv("KUBECONFIG", "")
        monkeypatch.setenv("HOME", str(tmp_path))
        code, out = cli("resolve", str(repo), "-o", "json")
        assert code == 0, out
        lock = yamlio.read_all(repo / "olm.lock")[0]
        (entry,) = lock["bundles"]
        assert entry["source"] == f"{source.host}/operators/plumbus-bundle:v1.1.0"   # the source, never the mirror
        assert mirror.host not in (repo / "olm.lock").read_text()

        code, out = cli("reconcile", str(repo), "--dry-run")
        assert code == 1, out
        assert "Deployment.apps plumbus-system/plumbus-controller-manager" in out, out   # the bundle was pulled

        imported = tmp_path / "imported"
        imported.mkdir()
        (imported / "reconciler.yaml").write_text(yamlio.dump({"mirrors": settings["mirrors"]}))
        code, out = cli("catalog", "import", str(imported), "--image", index, "--package", "plumbus")
        assert code == 0, out
        record = yamlio.load_one((imported / "catalogs/index/import.yaml").read_text(), "import.yaml")
        assert record["source"]["image"] == index

        # Without the mirror the source is asked, and it is gone.
        (imported / "reconciler.yaml").write_text("")
        code, _ = cli("catalog", "import", str(imported), "--image", index, "--package", "plumbus", "--name", "other")
        assert code == 2
    finally:
        stop(mirror_proc)


# --------------------------------------------------------------------------------------------------------------
# Credentials from a credential helper, as docker runs it


def test_a_credential_helper_logs_in_to_the_registry(tmp_path, monkeypatch, oci_registry_with_login):
    from reconciler.oci import auth

    reg = oci_registry_with_login
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-fixture"
    helper.write_text("#!/bin/sh\nread server\n"
                      f'if [ "$1" = get ] && [ "$server" = "{reg.host}" ]; then\n'
                      f'  echo \'{{"ServerURL": "{reg.host}", "Username": "{LOGIN[0]}", "Secret": "{LOGIN[1]}"}}\'\n'
                      "else echo 'credentials not found in native keychain'; exit 1; fi\n")
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "config.json").write_text(json.dumps({"credsStore": "fixture"}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.setattr(auth, "_helper_answers", {})
    ref = push_index(tmp_path, reg, "private/index", "v1", {"gamma": ("2.0.0",)})   # the push logs in through it
    repo = tmp_path / "repo"
    repo.mkdir()
    code, out = cli("catalog", "import", str(repo), "--image", ref, "--package", "gamma")
    assert code == 0, out
    token = base64.b64encode(f"{LOGIN[0]}:{LOGIN[1]}".encode()).decode()
    assert token not in out
