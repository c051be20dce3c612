"""`reconciler bundle build|render|validate`, OCI image sources, and plain+v0 layout errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from reconciler import oci
from reconciler.bundle import render
from reconciler.cli.parser import main
from reconciler.model.declarations import InstallSettings
from tests.bundle.test_golden import _webhook_csv
from tests.unit.helpers import crd_doc, csv_doc, write, write_bundle, write_docs

EXAMPLE_BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo" / "bundles" / "plumbus" / "1.1.0"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


def _bundle(tmp_path: Path, csv=None, *extra) -> Path:
    write_bundle(tmp_path, "demo", csv if csv is not None else csv_doc(), crd_doc(), *extra,
                 annotations={"operators.operatorframework.io.bundle.channels.v1": "stable",
                              "operators.operatorframework.io.bundle.channel.default.v1": "stable"})
    return tmp_path / "demo"


def test_build_push_pull_and_render_from_the_registry(tmp_path, oci_registry, oci_cache):
    src = _bundle(tmp_path)
    tag = oci_registry.ref("bundles/demo", "v0.1.0")
    rc, out = run("bundle", "build", str(src), "--tag", tag, "--layout", str(tmp_path / "layout"))
    assert rc == 0, out
    digest = out.strip().rsplit("@", 1)[1]
    assert out.strip() == f"pushed {tag}@{digest}"
    assert oci.resolve(tag) == digest
    image = oci.pull(tag, tmp_path / "pulled")
    assert image.labels == {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": "demo",
        "operators.operatorframework.io.bundle.channels.v1": "stable",
        "operators.operatorframework.io.bundle.channel.default.v1": "stable",
    }
    assert sorted(p.relative_to(image.root).as_posix() for p in image.root.rglob("*") if p.is_file()) == [
        "manifests/demo.clusterserviceversion.yaml", "manifests/extra-0.yaml", "metadata/annotations.yaml"]
    # the layout on disk is a valid OCI layout naming the pushed manifest
    index = json.loads((tmp_path / "layout" / "index.json").read_text())
    assert index["manifests"][0]["digest"] == digest
    # an image source renders exactly like the directory it was built from, pinned by the image digest
    from_image = render(tag, tmp_path, InstallSettings("ns"), "operators")
    from_dir = render("file://demo", tmp_path, InstallSettings("ns"), "operators")
    assert from_image.objects == from_dir.objects
    assert from_image.digest == digest and from_dir.digest != digest
    rc, out = run("bundle", "render", f"{oci_registry.host}/bundles/demo@{digest}", "-o", "json")
    assert rc == 0 and [o["kind"] for o in json.loads(out)["items"]][:2] == ["CustomResourceDefinition",
                                                                            "ServiceAccount"]


def test_build_refuses_an_invalid_bundle(tmp_path, capsys):
    src = _bundle(tmp_path, csv_doc(modes=()))
    rc, out = run("bundle", "build", str(src), "--tag", "127.0.0.1:1/x:y", "--layout", str(tmp_path / "l"),
                  "--no-push")
    assert rc == 2 and out == ""
    assert "no install mode" in capsys.readouterr().err
    assert not (tmp_path / "l").exists()


def test_build_layout_only(tmp_path):
    src = _bundle(tmp_path)
    rc, out = run("bundle", "build", str(src), "--tag", "example.com/x:y", "--layout", str(tmp_path / "l"),
                  "--no-push")
    assert rc == 0 and out.startswith(f"built {tmp_path / 'l'} (sha256:")


def test_render_prints_yaml_for_the_requested_install(tmp_path):
    src = _bundle(tmp_path)
    rc, out = run("bundle", "render", str(src), "--namespace", "ops", "--watch-namespace", "team-a")
    assert rc == 0
    from reconciler import yamlio
    docs = yamlio.load_all(out, "stdout")
    roles = [d for d in docs if d["kind"] == "Role"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["ops", "team-a"]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["metadata"]["annotations"] == {"olm.targetNamespaces": "team-a",
                                                                  "olm.operatorNamespace": "ops"}


def test_render_all_namespaces_with_empty_watch_namespace(tmp_path):
    rc, out = run("bundle", "render", str(_bundle(tmp_path)), "--watch-namespace", "", "-o", "json")
    assert rc == 0 and not [o for o in json.loads(out)["items"] if o["kind"] == "Role"]


def test_render_webhooks_with_cert_manager(tmp_path):
    rc, out = run("bundle", "render", str(_bundle(tmp_path, _webhook_csv())), "--cert-provider", "cert-manager",
                  "-o", "json")
    kinds = {o["kind"] for o in json.loads(out)["items"]}
    assert rc == 0 and {"Issuer", "Certificate", "ValidatingWebhookConfiguration"} <= kinds


def test_render_unsupported_bundle_exits_2_with_one_line(tmp_path, capsys):
    src = _bundle(tmp_path, None, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    rc, out = run("bundle", "render", str(src))
    err = capsys.readouterr().err
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: manifests/extra-1.yaml: file://demo: Pod in API group core is not an object a "
                          "registry+v1 bundle may carry (hint: the bundle format allows")


def test_render_missing_source(tmp_path, capsys):
    rc, _ = run("bundle", "render", str(tmp_path / "nope"))
    assert rc == 2 and "neither a bundle directory nor an image reference" in capsys.readouterr().err


def test_validate(tmp_path, capsys):
    rc, out = run("bundle", "validate", str(_bundle(tmp_path)))
    assert rc == 0 and out.startswith("valid registry+v1 bundle demo.v0.1.0 0.1.0 (sha256:")
    bad = tmp_path / "bad"
    write_bundle(tmp_path, "bad", csv_doc(webhookdefinitions=[{"type": "Nope", "generateName": "x"}]))
    rc, out = run("bundle", "validate", str(bad))
    assert rc == 2 and "spec.webhookdefinitions[0] (x) has type 'Nope'" in capsys.readouterr().err


def test_validate_json_and_the_install_it_checks(tmp_path, capsys):
    src = str(_bundle(tmp_path))
    rc, out = run("bundle", "validate", src, "-o", "json", "-n", "team-a", "--watch-namespace", "team-a")
    assert rc == 0, capsys.readouterr().err
    doc = json.loads(out)
    assert {k: doc[k] for k in ("valid", "mediatype", "name", "version", "namespace", "targetNamespaces")} == {
        "valid": True, "mediatype": "registry+v1", "name": "demo.v0.1.0", "version": "0.1.0",
        "namespace": "team-a", "targetNamespaces": ["team-a"]}
    assert doc["digest"].startswith("sha256:") and doc["warnings"] == []
    assert {"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
            "name": "widgets.demo.example.com"} in doc["objects"]
    assert all(o.get("namespace") in (None, "team-a") for o in doc["objects"])
    # the text form says the same install
    rc, out = run("bundle", "validate", src, "--namespace", "team-a")
    assert rc == 0 and out.rstrip().endswith("objects for namespace team-a")
    # an invalid bundle is still a document on stdout (and one line on stderr), exit 2
    write_bundle(tmp_path, "bad", csv_doc(webhookdefinitions=[{"type": "Nope", "generateName": "x"}]))
    rc, out = run("bundle", "validate", str(tmp_path / "bad"), "-o", "json")
    doc = json.loads(out)
    assert rc == 2 and doc["valid"] is False and "has type 'Nope'" in doc["error"]["message"]
    assert set(doc["error"]) == {"message", "file", "object", "hint"}
    assert capsys.readouterr().err.count("\n") == 1


def test_unknown_image_is_a_one_line_error(oci_registry, oci_cache, capsys):
    rc, _ = run("bundle", "render", oci_registry.ref("missing/bundle", "v1"))
    err = capsys.readouterr().err
    assert rc == 2 and "HTTP 404" in err and err.count("\n") == 1


# --- plain+v0 layouts: each forbidden one has its own message ------------------------------------


def _plain(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    (root / "manifests").mkdir(parents=True)
    return root


@pytest.mark.parametrize("setup, message", [
    (lambda r: None, "a plain+v0 bundle needs at least one object in manifests/"),
    (lambda r: write(r, "manifests/notes.txt", "hi"),
     "plain+v0 manifests/ may only hold YAML or JSON manifests, but it holds manifests/notes.txt"),
    (lambda r: write(r, "manifests/sub/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
     "manifests must be flat, but manifests/sub is a directory"),
    (lambda r: write(r, "manifests/a.yaml", "a: [\n"), "invalid YAML"),
    (lambda r: write(r, "manifests/a.yaml", "kind: ConfigMap\n"), "every manifest needs apiVersion and kind"),
])
def test_plain_v0_forbidden_layouts(tmp_path, capsys, setup, message):
    root = _plain(tmp_path)
    setup(root)
    rc, _ = run("bundle", "validate", str(root))
    assert rc == 2 and message in capsys.readouterr().err


def test_plain_v0_without_manifests_directory(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    rc, _ = run("bundle", "validate", str(tmp_path / "plain"))
    assert rc == 2 and "bundle has no manifests/ directory" in capsys.readouterr().err


def test_plain_v0_valid(tmp_path):
    root = _plain(tmp_path)
    write_docs(root, "manifests/cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    rc, out = run("bundle", "validate", str(root))
    assert rc == 0 and out.startswith("valid plain+v0 bundle plain (sha256:")


def test_an_independent_oci_client_pulls_the_built_image(tmp_path, oci_registry):
    """crane (go-containerregistry), not the client we push with, reads the labels and the files."""
    import subprocess
    import tarfile

    from bench.peers.crane import crane_binary

    crane = str(crane_binary())
    tag = oci_registry.ref("bundles/example-plumbus", "v1.1.0")
    rc, _ = run("bundle", "build", str(EXAMPLE_BUNDLE), "--tag", tag, "--layout", str(tmp_path / "layout"))
    assert rc == 0
    config = json.loads(subprocess.run([crane, "config", "--insecure", tag], check=True, capture_output=True,
                                       text=True).stdout)
    labels = config["config"]["Labels"]
    assert labels["operators.operatorframework.io.bundle.mediatype.v1"] == "registry+v1"
    assert labels["operators.operatorframework.io.bundle.package.v1"] == "plumbus"
    assert labels["operators.operatorframework.io.bundle.manifests.v1"] == "manifests/"
    assert labels["operators.operatorframework.io.bundle.metadata.v1"] == "metadata/"
    exported = tmp_path / "fs.tar"
    subprocess.run([crane, "export", "--insecure", tag, str(exported)], check=True, capture_output=True)
    with tarfile.open(exported) as tar:
        names = {m.name.lstrip("./") for m in tar.getmembers() if m.isfile()}
    assert {f.relative_to(EXAMPLE_BUNDLE).as_posix() for f in EXAMPLE_BUNDLE.rglob("*") if f.is_file()} <= names
