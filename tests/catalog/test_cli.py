"""`reconciler catalog ...` end to end through the CLI entry point (no cluster needed)."""

from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path

import pytest

from reconciler import yamlio
from reconciler.catalog import load
from reconciler.cli.parser import main
from tests.catalog.helpers import CORPUS, bundle, channel, package
from tests.unit.helpers import write, write_docs


def run(*argv):
    out = io.StringIO()
    code = main(list(argv), out)
    return code, out.getvalue()


def demo_catalog(root):
    ch = channel(entries=[("demo.v1.0.0", None), ("demo.v1.1.0", "demo.v1.0.0"),
                          {"name": "demo.v1.2.0", "replaces": "demo.v1.1.0", "skipRange": ">=1.0.0 <1.2.0"}])
    gvk = {"type": "olm.gvk", "value": {"group": "demo.io", "kind": "Widget", "version": "v1"}}
    docs = [package(), ch, channel("fast", entries=[("demo.v1.2.0", None)])]
    for v in ("1.0.0", "1.1.0", "1.2.0"):
        props = [{"type": "olm.package", "value": {"packageName": "demo", "version": v}}]
        if v != "1.0.0":
            props.append(gvk)
        docs.append(bundle(f"demo.v{v}", version=v, props=props))
    docs.append({"schema": "olm.deprecations", "package": "demo",
                 "entries": [{"reference": {"schema": "olm.bundle", "name": "demo.v1.0.0"}, "message": "old"}]})
    write_docs(root, "demo/catalog.yaml", *docs)
    return root


def test_validate_valid(tmp_path):
    code, out = run("catalog", "validate", str(demo_catalog(tmp_path)))
    assert code == 0
    assert out == "1 package, 2 channels, 3 bundles: valid\n"


def test_validate_reports_every_problem_and_exits_1(tmp_path):
    write_docs(tmp_path, "a.yaml", package(default="fast"), channel(entries=[("demo.v1.0.0", None), ("x", None)]),
               bundle(version="1.0"))
    code, out = run("catalog", "validate", str(tmp_path))
    assert code == 1
    lines = [ln for ln in out.splitlines() if not ln.startswith("  hint:")]
    assert lines == [
        f"{tmp_path}/a.yaml: olm.package demo: default channel 'fast' of package 'demo' does not exist "
        f"[default-channel]",
        f"{tmp_path}/a.yaml: olm.channel stable: channel 'stable' lists bundle 'x', which is not in package 'demo' "
        f"[channel-entry-bundle]",
        f"{tmp_path}/a.yaml: olm.channel stable: channel 'stable' has 2 heads: demo.v1.0.0, x [channel-head]",
        f'{tmp_path}/a.yaml: olm.bundle demo.v1.0.0: olm.package property: version "1.0" is not a strict semantic '
        f"version [bundle-package-property]",
        "1 package, 1 channel, 1 bundle: 4 problems"]


def test_validate_json(tmp_path):
    write_docs(tmp_path, "a.yaml", package(default=None), channel(), bundle())
    code, out = run("catalog", "validate", "-o", "json", str(tmp_path))
    assert code == 1
    doc = json.loads(out)
    assert doc["valid"] is False
    assert doc["findings"] == [{"rule": "default-channel", "severity": "error", "path": f"{tmp_path}/a.yaml",
                                "blob": "olm.package demo", "message": "package 'demo' has no default channel",
                                "hint": "set defaultChannel to one of its channels"}]


def test_validate_missing_directory(tmp_path, capsys):
    code, _ = run("catalog", "validate", str(tmp_path / "nope"))
    assert code == 2
    assert "does not exist or is not a directory" in capsys.readouterr().err


def test_list_packages_table(tmp_path):
    code, out = run("catalog", "list", "packages", "-c", str(demo_catalog(tmp_path)))
    assert code == 0
    assert out.splitlines() == ["PACKAGE  DEFAULTCHANNEL  CHANNELS     BUNDLES  VERSION  DEPRECATED",
                                "demo     stable          fast,stable  3        1.2.0"]


def test_list_and_graph_take_the_directory_as_validate_does(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    demo_catalog(repo / "catalogs")
    write(repo, ".git/config", "[core]\n")   # what a repository's root holds besides its catalogs
    write(repo, "operators/op.yaml", "apiVersion: operators.coreos.com/v1\nkind: Operator\n")
    code, out = run("catalog", "list", "packages", str(repo / "catalogs"))
    assert code == 0 and out.splitlines()[1].split()[0] == "demo", out
    monkeypatch.chdir(repo)
    capsys.readouterr()
    assert run("catalog", "list", "packages") == (code, out)       # at a repository's root: its catalogs/
    code, graph = run("catalog", "graph", "demo", "--channel", "stable")
    assert code == 0 and "demo.v1.2.0" in graph
    assert capsys.readouterr().err == ""                          # no warning about .git/ or operators/
    assert run("catalog", "list", "packages", "catalogs", "-c", "elsewhere")[0] == 64


def test_list_bundles_filters_and_formats(tmp_path):
    demo_catalog(tmp_path)
    _, out = run("catalog", "list", "bundles", "-c", str(tmp_path), "--provides", "Widget", "-o", "json")
    assert [r["name"] for r in json.loads(out)] == ["demo.v1.1.0", "demo.v1.2.0"]
    _, out = run("catalog", "list", "bundles", "-c", str(tmp_path), "--channel", "fast", "-o", "yaml")
    rows = yamlio.load_one(out, "out")
    assert [(r["name"], r["channels"]) for r in rows] == [("demo.v1.2.0", ["fast", "stable"])]
    _, out = run("catalog", "list", "bundles", "-c", str(tmp_path), "--deprecated", "-o", "json")
    assert [(r["name"], r["deprecated"]) for r in json.loads(out)] == [("demo.v1.0.0", "old")]
    _, out = run("catalog", "list", "bundles", "-c", str(tmp_path), "--name", "demo.v1.[12]*", "--current", "-o",
                 "json")
    assert [r["name"] for r in json.loads(out)] == ["demo.v1.1.0", "demo.v1.2.0"]


def test_list_channels(tmp_path):
    _, out = run("catalog", "list", "channels", "-c", str(demo_catalog(tmp_path)), "-o", "json")
    assert [(r["channel"], r["head"], r["default"]) for r in json.loads(out)] == [
        ("fast", "demo.v1.2.0", False), ("stable", "demo.v1.2.0", True)]


def test_graph_mermaid(tmp_path):
    code, out = run("catalog", "graph", "demo", "-c", str(demo_catalog(tmp_path)), "--channel", "stable")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "graph LR"
    assert '  n0_demo_v1_0_0["demo.v1.0.0<br/>channel stable<br/>deprecated"]' in lines
    assert '  n2_demo_v1_2_0["demo.v1.2.0<br/>channel stable (head)"]' in lines
    assert "  n0_demo_v1_0_0 -->|replaces| n1_demo_v1_1_0" in lines
    assert "  n0_demo_v1_0_0 -.->|skipRange| n2_demo_v1_2_0" in lines
    assert "  n1_demo_v1_1_0 -.->|skipRange| n2_demo_v1_2_0" in lines
    assert "  class n0_demo_v1_0_0 deprecated" in lines


def test_graph_marks_the_installed_and_the_target_bundle(tmp_path):
    catalog = str(demo_catalog(tmp_path))
    (tmp_path / "olm.lock").write_text(
        "apiVersion: reconciler.dev/v1alpha1\nkind: Lock\nbundles:\n- operator: demo\n  package: demo\n"
        "  name: demo.v1.0.0\n  version: 1.0.0\n  catalog: c\n  channel: stable\n  source: file://x\n"
        "  digest: ''\n")
    code, out = run("catalog", "graph", "demo", "-c", catalog, "--channel", "stable",
                    "--lock", str(tmp_path / "olm.lock"), "--target", "demo.v1.2.0")
    assert code == 0, out
    lines = out.splitlines()
    assert '  n0_demo_v1_0_0["demo.v1.0.0<br/>installed<br/>channel stable<br/>deprecated"]' in lines
    assert '  n2_demo_v1_2_0["demo.v1.2.0<br/>target<br/>channel stable (head)"]' in lines
    assert "  class n0_demo_v1_0_0 installed" in lines and "  class n2_demo_v1_2_0 target" in lines
    _, dot = run("catalog", "graph", "demo", "-c", catalog, "--channel", "stable", "-f", "dot",
                 "--installed", "demo.v1.1.0")
    assert '"demo.v1.1.0" [label="demo.v1.1.0\\ninstalled\\nchannel stable", fillcolor="#dde8ff"' in dot


@pytest.mark.parametrize("flag", ["--installed", "--target"])
def test_graph_refuses_a_mark_on_a_bundle_the_package_lacks(tmp_path, capsys, flag):
    code, out = run("catalog", "graph", "demo", "-c", str(demo_catalog(tmp_path)), flag, "demo.v1.3.0")
    assert (code, out) == (2, "")
    err = capsys.readouterr().err
    assert f"{flag} demo.v1.3.0: no such bundle in package 'demo'" in err
    assert "hint: bundles of the package: demo.v1.0.0, demo.v1.1.0, demo.v1.2.0" in err


def test_graph_dot_and_unknown_names(tmp_path, capsys):
    demo_catalog(tmp_path)
    _, out = run("catalog", "graph", "demo", "-c", str(tmp_path), "-f", "dot")
    assert out.startswith('digraph "demo" {')
    # Two channels: each is a cluster of its own, with channel-qualified node ids.
    assert '  subgraph "cluster_stable" {' in out and '  subgraph "cluster_fast" {' in out
    assert '    "stable/demo.v1.1.0" -> "stable/demo.v1.2.0" [label="replaces", style=solid];' in out
    assert '"fast/demo.v1.1.0"' not in out and '"fast/demo.v1.2.0" [label="demo.v1.2.0\\nchannel fast (head)"' in out
    _, flat = run("catalog", "graph", "demo", "-c", str(tmp_path), "-f", "dot", "--group-by", "none")
    assert '  "demo.v1.1.0" -> "demo.v1.2.0" [label="replaces", style=solid];' in flat
    assert run("catalog", "graph", "ghost", "-c", str(tmp_path))[0] == 2
    assert "package 'ghost' is not in catalog" in capsys.readouterr().err
    assert run("catalog", "graph", "demo", "-c", str(tmp_path), "--channel", "beta")[0] == 2
    assert "package 'demo' has no channel 'beta'" in capsys.readouterr().err


def _dot_labels(text: str) -> dict[str, list[str]]:
    """Each DOT node's id and the lines of its label."""
    import re

    return {m[1]: m[2].split("\\n") for m in re.finditer(r'^\s*"([^"]+)" \[label="((?:[^"\\]|\\.)*)"', text, re.M)}


@pytest.mark.parametrize("argv, expected", [
    # two channels, one box each: a bundle drawn in both says in each which channel it is and whether it leads
    ((), {"stable/demo.v1.0.0": ["demo.v1.0.0", "channel stable", "deprecated"],
          "stable/demo.v1.1.0": ["demo.v1.1.0", "channel stable"],
          "stable/demo.v1.2.0": ["demo.v1.2.0", "channel stable (head)"],
          "fast/demo.v1.2.0": ["demo.v1.2.0", "channel fast (head)"]}),
    # one graph: every channel of the bundle
    (("--group-by", "none"), {"demo.v1.0.0": ["demo.v1.0.0", "channel stable", "deprecated"],
                              "demo.v1.1.0": ["demo.v1.1.0", "channel stable"],
                              "demo.v1.2.0": ["demo.v1.2.0", "channels fast (head), stable (head)"]}),
    # one channel asked for: no box at all, so only the label can say it
    (("--channel", "fast"), {"demo.v1.2.0": ["demo.v1.2.0", "channel fast (head)"]}),
])
def test_graph_dot_nodes_name_their_channel(tmp_path, argv, expected):
    code, out = run("catalog", "graph", "demo", "-c", str(demo_catalog(tmp_path)), "-f", "dot", *argv)
    assert code == 0
    assert _dot_labels(out) == expected


def test_graph_dot_names_the_channel_of_a_missing_and_a_collapsed_node(tmp_path):
    names = _long_package(tmp_path)
    _, out = run("catalog", "graph", "long", "-c", str(tmp_path), "--channel", "stable", "-f", "dot")
    labels = _dot_labels(out)
    fan = next(v for k, v in labels.items() if k.startswith("11 bundles skipped by"))
    assert fan[1:] == ["channel stable"]
    assert labels[names[-1]][1] == "channel stable (head)"
    write_docs(tmp_path / "gap", "gap/catalog.yaml", package("gap"),
               channel(pkg="gap", entries=[("gap.v1.1.0", "gap.v1.0.0")]),
               bundle("gap.v1.1.0", pkg="gap", version="1.1.0"))
    _, out = run("catalog", "graph", "gap", "-c", str(tmp_path / "gap"), "-f", "dot")
    assert _dot_labels(out)["gap.v1.0.0"] == ["gap.v1.0.0", "not in any channel"]


@pytest.mark.graphviz(missing=shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graph_svg(tmp_path):
    code, out = run("catalog", "graph", "demo", "-c", str(demo_catalog(tmp_path)), "-f", "svg")
    assert code == 0 and "<svg" in out and "demo.v1.2.0" in out


def test_graph_svg_without_dot_names_it(tmp_path, monkeypatch, capsys):
    demo_catalog(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert run("catalog", "graph", "demo", "-c", str(tmp_path), "-f", "svg")[0] == 2
    err = capsys.readouterr().err
    assert "Graphviz's `dot` program, which is not on PATH" in err and "--format mermaid" in err


def test_cache_makes_second_load_a_hit_and_sees_edits(tmp_path):
    demo_catalog(tmp_path)
    f = tmp_path / "demo" / "catalog.yaml"
    import os
    import time
    old = time.time() - 60
    os.utime(f, (old, old))
    first = load(tmp_path)
    second = load(tmp_path)
    assert not first.cached and second.cached
    assert second.catalog == first.catalog and second.findings == first.findings
    text = f.read_text().replace("defaultChannel: stable", "defaultChannel: fast")
    f.write_text(text)
    os.utime(f, (old, old))  # same mtime as before: only the content digest can tell
    third = load(tmp_path)
    assert not third.cached
    assert third.catalog.packages["demo"].default_channel == "fast"


def test_cache_sees_a_file_of_another_name_gain_catalog_blobs(tmp_path):
    demo_catalog(tmp_path)
    notes = tmp_path / "notes"
    notes.write_text("just notes\n")
    first, second = load(tmp_path), load(tmp_path)
    assert second.cached and second.findings == first.findings
    assert [f.message for f in first.findings] == ["not a .json, .yaml or .yml file; skipped"]
    notes.write_text(yamlio.dump_all([{"schema": "olm.package", "name": "extra", "defaultChannel": "stable"}]))
    third = load(tmp_path)
    assert not third.cached and "extra" in third.catalog.packages


def test_a_cache_entry_is_pickled_into_its_file_not_into_memory_first(tmp_path):
    """The pickle of a large catalog is written as it is made: a cold load that fills the cache never holds
    it whole beside the catalog (before: pickle.dumps, then write), and a warm load reads it as it unpickles."""
    import os
    import tracemalloc

    from reconciler.catalog import cache

    blobs = [{"schema": "olm.package", "name": f"p{i}", "defaultChannel": "stable"} for i in range(40)]
    blobs += [{"schema": "olm.channel", "package": f"p{i}", "name": "stable", "entries": [{"name": f"p{i}.v1.0.0"}]}
              for i in range(40)]
    blobs += [{"schema": "olm.bundle", "package": f"p{i}", "name": f"p{i}.v1.0.0", "image": f"example.com/p{i}:1",
               "properties": [{"type": "olm.package", "value": {"packageName": f"p{i}", "version": "1.0.0"}},
                              {"type": "example.com/notes",   # 340 kB that do not compress
                               "value": {"text": base64.b64encode(os.urandom(255_000)).decode()}}]}
              for i in range(40)]
    (tmp_path / "big").mkdir()
    for i, blob in enumerate(blobs):
        (tmp_path / "big" / f"{i:03d}.json").write_text(json.dumps(blob))
    plain = load(tmp_path, use_cache=False)
    shelved = plain.catalog.shelved()
    tracemalloc.start()
    try:
        cache.put("a" * 64, {"catalog": shelved, "findings": plain.findings}, None)
        written = tracemalloc.get_traced_memory()[1] / (1 << 20)
        tracemalloc.reset_peak()
        assert cache.get("a" * 64)["catalog"].bundles_of("p7") == plain.catalog.bundles_of("p7")
        read = tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()
    size = os.path.getsize(os.path.join(cache.directory(), "a" * 64 + ".pickle")) / (1 << 20)
    assert size > 10 and written < 2 and read < size + 2, (size, written, read)


def test_cache_entry_corrupt_is_a_miss(tmp_path, monkeypatch):
    from reconciler.catalog import cache
    demo_catalog(tmp_path)
    load(tmp_path)
    for p in Path(cache.directory()).glob("*.pickle"):
        p.write_bytes(b"not a pickle")
    again = load(tmp_path)
    assert not again.cached and "demo" in again.catalog.packages


@pytest.mark.corpus(missing=not (CORPUS / "operators").is_dir(), reason="../shared/corpus is absent")
def test_render_registry_v1_bundle_from_corpus():
    bundle_dir = CORPUS / "operators" / "ecr-secret-operator" / "0.6.0"
    code, out = run("catalog", "render", str(bundle_dir), "--image", "quay.io/x/ecr-bundle:v0.6.0")
    assert code == 0
    blob = json.loads(out)
    assert (blob["schema"], blob["name"], blob["package"]) == ("olm.bundle", "ecr-secret-operator.v0.6.0",
                                                               "ecr-secret-operator")
    types = [p["type"] for p in blob["properties"]]
    objects = types.index("olm.bundle.object")   # opm: sorted, then the manifests after the other properties
    assert types[:objects] == sorted(types[:objects]) and set(types[objects:]) == {"olm.bundle.object"}
    props = {p["type"]: p["value"] for p in blob["properties"]}
    assert props["olm.package"] == {"packageName": "ecr-secret-operator", "version": "0.6.0"}
    assert "olm.bundle.mediatype" not in props and "olm.csv.metadata" not in props   # as opm writes it
    kinds = {json.loads(base64.b64decode(p["value"]["data"]))["kind"] for p in blob["properties"]
             if p["type"] == "olm.bundle.object"}
    assert {"ClusterServiceVersion", "CustomResourceDefinition"} <= kinds
    code, out = run("catalog", "render", str(bundle_dir), "--image", "quay.io/x/ecr-bundle:v0.6.0", "--migrate")
    migrated = {p["type"]: p["value"] for p in json.loads(out)["properties"]}
    assert migrated["olm.csv.metadata"]["displayName"] == "ECR Secret Operator"
    assert "olm.bundle.object" not in migrated
    gvks = [p["value"] for p in blob["properties"] if p["type"] == "olm.gvk"]
    assert {"group": "ecr.mobb.redhat.com", "kind": "Secret", "version": "v1alpha1"} in gvks
    images = [r["image"] for r in blob["relatedImages"]]
    assert "quay.io/x/ecr-bundle:v0.6.0" in images and images == sorted(images)


def test_render_dependencies_and_properties(tmp_path):
    write(tmp_path, "metadata/annotations.yaml", """
        annotations:
          operators.operatorframework.io.bundle.mediatype.v1: registry+v1
          operators.operatorframework.io.bundle.package.v1: demo
        """)
    write(tmp_path, "metadata/dependencies.yaml", """
        dependencies:
          - type: olm.package
            value: {packageName: etcd, version: ">=0.9.0"}
          - type: olm.gvk
            value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}
          - type: olm.constraint
            value: {failureMessage: needs x, cel: {rule: "true"}}
          - type: olm.label
            value: {label: lts}
        """)
    write(tmp_path, "metadata/properties.yaml", """
        properties:
          - type: olm.label
            value: {label: stable}
        """)
    write(tmp_path, "manifests/csv.yaml", """
        apiVersion: operators.coreos.com/v1alpha1
        kind: ClusterServiceVersion
        metadata:
          name: demo.v1.0.0
          annotations:
            olm.properties: '[{"type":"example.com/x","value":1}]'
        spec:
          version: 1.0.0
          displayName: Demo
          customresourcedefinitions:
            required:
              - {name: backups.b.io, kind: Backup, version: v1}
          install:
            strategy: deployment
            spec:
              deployments:
                - name: d
                  spec: {template: {spec: {containers: [{name: m, image: quay.io/demo/op:1}]}}}
        """)
    write(tmp_path, "manifests/crd.yaml", """
        apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata: {name: widgets.demo.io}
        spec:
          group: demo.io
          names: {kind: Widget, plural: widgets}
          versions: [{name: v1}, {name: v2}]
        """)
    code, out = run("catalog", "render", str(tmp_path), "-o", "yaml")
    assert code == 0
    blob = yamlio.load_one(out, "out")
    assert [(p["type"], p["value"]) for p in blob["properties"] if p["type"] != "olm.bundle.object"] == [
        ("example.com/x", 1),
        ("olm.constraint", {"cel": {"rule": "true"}, "failureMessage": "needs x"}),
        ("olm.gvk", {"group": "demo.io", "kind": "Widget", "version": "v1"}),
        ("olm.gvk", {"group": "demo.io", "kind": "Widget", "version": "v2"}),
        ("olm.gvk.required", {"group": "b.io", "kind": "Backup", "version": "v1"}),
        ("olm.gvk.required", {"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}),
        ("olm.label", {"label": "stable"}),
        ("olm.label.required", {"label": "lts"}),   # a dependency: required, as OLM v0 reads it (opm: olm.label)
        ("olm.package", {"packageName": "demo", "version": "1.0.0"}),
        ("olm.package.required", {"packageName": "etcd", "versionRange": ">=0.9.0"}),
    ]
    assert blob["relatedImages"] == [{"name": "", "image": "quay.io/demo/op:1"}]


def test_render_plain_v0_needs_package_and_version(tmp_path, capsys):
    write(tmp_path, "manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert run("catalog", "render", str(tmp_path))[0] == 2
    assert "give its package and version" in capsys.readouterr().err
    code, out = run("catalog", "render", str(tmp_path), "--package", "p", "--version", "0.1.0")
    blob = json.loads(out)
    assert code == 0 and blob["name"] == "p.v0.1.0"
    assert {"type": "olm.bundle.mediatype", "value": "plain+v0"} in blob["properties"]


def test_render_k8s_v1_refuses_wildcard_rbac(tmp_path, capsys):
    write(tmp_path, "metadata/annotations.yaml", """
        annotations:
          operators.operatorframework.io.bundle.mediatype.v1: k8s+v1
          operators.operatorframework.io.bundle.package.v1: demo
        """)
    write(tmp_path, "metadata/olm.yaml", "name: demo.v1.0.0\nversion: 1.0.0\nminKubeVersion: 1.20.0\n"
                                         "installModes: [{type: AllNamespaces, supported: true}]\n")
    write(tmp_path, "manifests/deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
    write(tmp_path, "manifests/role.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                           "metadata: {name: r}\nrules: [{apiGroups: ['*'], resources: [pods]}]\n")
    write(tmp_path, "manifests/binding.yaml", "apiVersion: rbac.authorization.k8s.io/v1\n"
                                              "kind: ClusterRoleBinding\nmetadata: {name: r}\n"
                                              "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, "
                                              "name: r}\nsubjects: [{kind: ServiceAccount, name: default}]\n")
    assert run("catalog", "render", str(tmp_path))[0] == 2
    assert "wildcard" in capsys.readouterr().err
    (tmp_path / "manifests" / "role.yaml").unlink()
    (tmp_path / "manifests" / "binding.yaml").unlink()
    code, out = run("catalog", "render", str(tmp_path))
    blob = json.loads(out)
    assert code == 0 and blob["name"] == "demo.v1.0.0"
    assert {"type": "olm.bundle.mediatype", "value": "k8s+v1"} in blob["properties"]


def _long_package(root, count=12):
    """One package with ``count`` bundles in a replaces chain; the head skips every earlier one by skipRange."""
    names = [f"long.v1.{i}.0" for i in range(count)]
    entries = [(names[0], None)] + [(n, names[i]) for i, n in enumerate(names[1:-1])]
    entries.append({"name": names[-1], "replaces": names[-2], "skipRange": f">=1.0.0 <1.{count - 1}.0"})
    docs = [package("long", default="stable"), channel(pkg="long", entries=entries),
            channel("candidate", pkg="long", entries=[(names[-1], None)])]
    docs += [bundle(n, pkg="long", version=n.removeprefix("long.v")) for n in names]
    write_docs(root, "long/catalog.yaml", *docs)
    return names


def test_graph_of_a_long_package_collapses_fans_and_draws_a_window(tmp_path):
    names = _long_package(tmp_path)
    _, out = run("catalog", "graph", "long", "-c", str(tmp_path), "--channel", "stable")
    skip_edges = [ln for ln in out.splitlines() if "|skipRange|" in ln]
    assert len(skip_edges) == 1  # eleven skipRange edges drawn as one
    assert "11 bundles, 1.0.0 … 1.10.0, skipRange '>=1.0.0 <1.11.0'" in out
    _, full = run("catalog", "graph", "long", "-c", str(tmp_path), "--channel", "stable", "--fan", "0")
    assert len([ln for ln in full.splitlines() if "|skipRange|" in ln]) == 11

    _, window = run("catalog", "graph", "long", "-c", str(tmp_path), "--channel", "stable", "--since", "1.8.0",
                    "-f", "dot", "--fan", "0")
    drawn = {n for n in names if f'"{n}" [' in window}
    assert drawn == {"long.v1.8.0", "long.v1.9.0", "long.v1.10.0", "long.v1.11.0"}
    assert '"long.v1.7.0"' not in window  # no edge reaches out of the window


def test_graph_since_must_be_a_version(tmp_path, capsys):
    _long_package(tmp_path)
    assert run("catalog", "graph", "long", "-c", str(tmp_path), "--since", "one")[0] == 2
    assert "--since 'one' is not a semantic version" in capsys.readouterr().err
