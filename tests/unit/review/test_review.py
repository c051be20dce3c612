"""The review stage's pure functions: API removals, object diffs with masked Secrets, RBAC and CRD deltas,
upgrade edges and catalog deprecations."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.review import (
    SECRET_MASK, catalog_deprecations, crd_changes, object_changes, rbac_delta, upgrade_edge,
)
from reconciler.review import apis
from tests.unit.helpers import write


def _obj(api_version: str, kind: str, name: str, **extra) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **extra}


# API removals ----------------------------------------------------------------------------------------

def test_table_covers_every_removal_release_of_the_guide():
    releases = {a.removed_in for a in apis.table().values()}
    assert {"1.16", "1.22", "1.25", "1.26", "1.27", "1.29", "1.32"} <= releases
    psp = apis.table()[("policy", "v1beta1", "PodSecurityPolicy")]
    assert (psp.removed_in, psp.replacement) == ("1.25", "")
    fs = apis.table()[("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema")]
    assert (fs.deprecated_in, fs.removed_in, fs.replacement) == ("1.29", "1.32", "flowcontrol.apiserver.k8s.io/v1")


def test_check_is_per_minor_removed_then_deprecated():
    role = _obj("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "reader")
    current = _obj("rbac.authorization.k8s.io/v1", "ClusterRole", "fine")
    assert apis.check("op", [role, current], "1.16.3") == []
    [dep] = apis.check("op", [role, current], "v1.21.14+k3s1")
    assert (dep.status, dep.kube_version, dep.object.name) == ("deprecated", "1.21", "reader")
    [gone] = apis.check("op", [role], "1.22")
    assert gone.status == "removed" and "rbac.authorization.k8s.io/v1" in gone.describe()


def test_check_versions_looks_one_minor_ahead():
    pdb = _obj("policy/v1beta1", "PodDisruptionBudget", "pdb")
    found = apis.check_versions("op", [pdb], "1.24.2")
    assert [(f.kube_version, f.status) for f in found] == [("1.24", "deprecated"), ("1.25", "removed")]
    assert [(f.kube_version, f.status) for f in apis.check_versions("op", [pdb], "1.25")] == [("1.25", "removed")]
    assert [f.kube_version for f in apis.check_versions("op", [pdb], None)] == ["1.25"]


# Objects ---------------------------------------------------------------------------------------------

def test_secret_values_are_masked_with_a_fixed_mask():
    old = _obj("v1", "Secret", "creds", data={"password": "c2VjcmV0LW9uZQ==", "user": "YWRtaW4="})
    new = _obj("v1", "Secret", "creds", data={"password": "c2VjcmV0LXR3bw==", "user": "YWRtaW4="},
               metadata={"name": "creds", "labels": {"a": "b"}})
    [change] = object_changes([old], [new])
    text = "\n".join(change.diff)
    assert "c2VjcmV0" not in text and "YWRtaW4" not in text
    assert f"-  password: {SECRET_MASK} (before)" in change.diff
    assert f"+  password: {SECRET_MASK} (after)" in change.diff
    [created] = object_changes([], [_obj("v1", "Secret", "x", stringData={"token": "hunter2"})])
    assert created.action == "created" and "hunter2" not in "\n".join(created.diff)
    assert f"+  token: {SECRET_MASK}" in created.diff


def test_changed_objects_are_line_diffs_and_long_strings_diff_by_line():
    script = "\n".join(f"line {i}" for i in range(50)) + "\n"
    old = _obj("v1", "ConfigMap", "cm", data={"script": script})
    new = _obj("v1", "ConfigMap", "cm", data={"script": script.replace("line 25", "line twenty-five")})
    gone = _obj("v1", "ConfigMap", "gone")
    changes = object_changes([old, gone], [new, _obj("v1", "ConfigMap", "new")])
    assert [(c.ref.name, c.action) for c in changes] == [("cm", "changed"), ("gone", "deleted"), ("new", "created")]
    diff = changes[0].diff
    assert "-    line 25" in diff and "+    line twenty-five" in diff
    assert sum(1 for d in diff if d.startswith(("+", "-")) and not d.startswith(("+++", "---"))) == 2


def test_huge_object_diffs_are_bounded_with_a_note():
    old = _obj("v1", "ConfigMap", "big", data={f"k{i}": "a" for i in range(2000)})
    new = _obj("v1", "ConfigMap", "big", data={f"k{i}": "b" for i in range(2000)})
    [change] = object_changes([old], [new], max_lines=100)
    assert len(change.diff) == 101 and change.diff[-1].endswith("more diff lines not shown")


def test_rbac_delta_by_scope():
    def role(rules):
        return [_obj("rbac.authorization.k8s.io/v1", "ClusterRole", "r", rules=rules),
                _obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "r",
                     roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
                     subjects=[{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}])]
    old = role([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
    new = role([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    gained, lost = rbac_delta(old, new)
    assert [(r.resources, r.verbs) for r in gained.rules] == [(("secrets",), ("get",))]
    assert [(r.resources, r.verbs) for r in lost.rules] == [(("configmaps",), ("list",))]
    assert gained.describe()[0].strip() == "cluster-wide:"


# CRDs ------------------------------------------------------------------------------------------------

def _crd(versions, scope="Namespaced"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"scope": scope, "versions": [{"name": v, "served": True, "storage": i == 0}
                                                  for i, v in enumerate(versions)]}}


def test_crd_changes_verdicts():
    assert crd_changes(None, _crd(["v1"])) == ["CRD widgets.example.com: new, versions v1"]
    assert crd_changes(_crd(["v1"]), _crd(["v1"])) == []
    added = crd_changes(_crd(["v1"]), _crd(["v1", "v2"]))
    assert added == ["CRD widgets.example.com: version v2 added"]
    removed = crd_changes(_crd(["v1alpha1", "v1"]), _crd(["v1"]))
    assert any("UNSAFE: version v1alpha1 removed (it was the storage version)" in r for r in removed)
    assert any("storage version moves from v1alpha1 to v1" in r for r in removed)
    assert any("UNSAFE: scope changes from Namespaced to Cluster" in r
               for r in crd_changes(_crd(["v1"]), _crd(["v1"], scope="Cluster")))
    assert "no longer in the bundle" in crd_changes(_crd(["v1"]), None)[0]


def test_crd_changes_carry_the_upgrade_safety_verdict_of_the_schema():
    def schema(kind: str, required: list[str] | None = None) -> dict:
        crd = _crd(["v1"])
        body = {"type": "object", "properties": {"size": {"type": kind}}}
        if required:
            body["required"] = required
        crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object",
                                                                     "properties": {"spec": body}}}
        return crd
    retyped = crd_changes(schema("integer"), schema("string"))
    assert any("UNSAFE" in line and ".spec.size" in line and "integer to string" in line for line in retyped), retyped
    now_required = crd_changes(schema("integer"), schema("integer", ["size"]))
    assert any("UNSAFE" in line and "required" in line for line in now_required), now_required


# Catalog ---------------------------------------------------------------------------------------------

def _bundle(name, version):
    return f"""
---
schema: olm.bundle
package: p
name: {name}
image: example.com/p:{version}
properties:
  - type: olm.package
    value: {{packageName: p, version: {version}}}
"""


@pytest.fixture
def catalog(tmp_path: Path):
    write(tmp_path, "c/p.yaml", """
---
schema: olm.package
name: p
defaultChannel: stable
---
schema: olm.channel
package: p
name: stable
entries:
  - name: p.v1.0.0
  - name: p.v1.1.0
    replaces: p.v1.0.0
  - name: p.v1.2.0
    replaces: p.v1.1.0
    skips: [p.v1.0.0]
  - name: p.v1.3.0
    replaces: p.v1.2.0
    skipRange: ">=1.0.0 <1.3.0"
---
schema: olm.channel
package: p
name: fast
entries:
  - name: p.v2.0.0
---
schema: olm.deprecations
package: p
entries:
  - reference: {schema: olm.channel, name: fast}
    message: fast is retired
  - reference: {schema: olm.bundle, name: p.v1.1.0}
    message: p.v1.1.0 has a data-loss bug
""" + "".join(_bundle(f"p.v{v}", v) for v in ("1.0.0", "1.1.0", "1.2.0", "1.3.0", "2.0.0")))
    return load_catalog("c", tmp_path / "c", "catalogs/c")


def test_upgrade_edges(catalog):
    assert upgrade_edge(catalog, "p", "p.v1.0.0", "p.v1.1.0") == "replaces p.v1.0.0 (channel stable)"
    assert upgrade_edge(catalog, "p", "p.v1.0.0", "p.v1.2.0") == "skips p.v1.0.0 (channel stable)"
    assert upgrade_edge(catalog, "p", "p.v1.1.0", "p.v1.3.0").startswith("skipRange '>=1.0.0 <1.3.0'")
    assert upgrade_edge(catalog, "p", "p.v1.3.0", "p.v2.0.0") == "no upgrade edge"
    assert upgrade_edge(catalog, "p", "p.v1.3.0", "p.v2.0.0", forced=True).startswith("forced")
    assert upgrade_edge(catalog, "p", "p.v1.0.0", "p.v1.3.0", semver_mode=True).startswith("skipRange")
    assert upgrade_edge(None, "p", "p.v1.0.0", "p.v1.1.0") == "no upgrade edge"


def test_catalog_deprecations(catalog):
    assert catalog_deprecations(catalog, "p", "fast", "p.v2.0.0") == ["channel fast is deprecated: fast is retired"]
    assert catalog_deprecations(catalog, "p", "stable", "p.v1.1.0") == [
        "bundle p.v1.1.0 is deprecated: p.v1.1.0 has a data-loss bug"]
    assert catalog_deprecations(catalog, "p", "stable", "p.v1.3.0") == []


# Rendering -------------------------------------------------------------------------------------------

def _side(owners):
    from reconciler.review import Side
    return Side("base", owners)


def _owner(name, bundle, deps=(), objects=()):
    from reconciler.review import BundleInfo, Owner
    return Owner(name, "Operator", BundleInfo(bundle, bundle.rsplit(".v", 1)[-1], name, "c", "stable", "", ""),
                 tuple(deps), tuple(objects))


def test_markdown_draws_the_dependency_graph_only_when_dependencies_change():
    from reconciler.review import review
    from reconciler.review.render import as_document, as_markdown, as_text

    cm = _obj("v1", "ConfigMap", "cm")
    before = _side({"app": _owner("app", "app.v1.0.0", objects=[cm])})
    after = _side({"app": _owner("app", "app.v1.1.0", deps=[("package lib", "lib.v2.0.0")], objects=[cm]),
                   "lib": _owner("lib", "lib.v2.0.0")})
    r = review(before, after, kube_version="1.30.2")
    md = as_markdown(r)
    mermaid = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert '["app"] --> n1("app.v1.1.0")' in mermaid and 'n1 --> n2("lib.v2.0.0")' in mermaid
    assert "- added `lib.v2.0.0` (for package lib)" in md
    doc = as_document(r)
    assert doc["dependenciesChanged"] is True and doc["kubernetesVersion"] == "1.30"
    assert doc["nextKubernetesVersion"] == "1.31"
    assert [o["change"] for o in doc["operators"]] == ["upgraded", "added"]
    assert "\033[" in as_text(r, colour=True) and "\033[" not in as_text(r)
    same = review(after, after)
    assert not same.changed and "```mermaid" not in as_markdown(same)


def test_rewrite_declaration_changes_only_the_lines_it_must():
    from reconciler.review.updates import Proposal, rewrite_declaration, widened

    text = """# keep me
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: other
spec:
  catalog: {name: community, package: other}
---
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: app   # the app
spec:
  catalog:
    name: community
    package: app
    channel: stable
  version: ">=1.0.0 <2.0.0"
"""
    p = Proposal("app", "app", "app.v1.4.0", "1.4.0", "app.v2.1.0", "2.1.0", "mirror", "fast", "outside",
                 "replaces app.v1.4.0 (channel fast)", "major",
                 ("catalog community -> mirror", "channel stable -> fast", "version '>=1.0.0 <2.0.0' -> x"),
                 ">=2.1.0 <3.0.0")
    out = rewrite_declaration(text, "app", p, "community", "stable")
    assert "    name: mirror\n    package: app\n    channel: fast\n" in out
    assert 'version: ">=2.1.0 <3.0.0"' in out
    assert out.split("---")[0] == text.split("---")[0]   # the other document is untouched
    assert widened("0.3.1") == ">=0.3.1 <0.4.0"


def test_a_crd_schema_change_names_the_fields_it_touches():
    from reconciler.review import crd_changes

    def crd(props: dict) -> dict:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Thing", "plural": "things"},
                         "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                             "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}}

    old = crd({"mode": {"type": "string", "description": "how"}, "items": {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string"}}}}})
    new = crd({"mode": {"type": "string", "description": "how it runs", "enum": ["a", "b"]},
               "items": {"type": "array", "items": {"type": "object", "properties": {
                   "name": {"type": "string"}, "weight": {"type": "integer"}}}},
               "paused": {"type": "boolean"}})
    [line] = [ln for ln in crd_changes(old, new) if "schema of version v1" in ln]
    assert line == ("CRD things.example.com: the schema of version v1 changes: fields added: spec.items[].weight, "
                    "spec.paused; constraints changed: spec.mode (enum); descriptions changed: 1")


@pytest.mark.parametrize("declared, target, expected", [
    ("0.7.0", "0.7.1", "0.7.1"),            # a pin stays a pin, in the form it was written
    ("v0.7.0", "0.7.1", "v0.7.1"),
    ("=0.7.0", "0.8.0", "=0.8.0"),
    ("1.2.3", "2.0.0", "2.0.0"),
    (">=0.7.0 <0.7.1", "0.7.1", ">=0.7.1 <0.8.0"),   # a range that happens to hold one version is widened
    ("~1.2", "1.3.0", ">=1.3.0 <2.0.0"),
])
def test_a_pinned_version_stays_a_pin(declared, target, expected):
    from reconciler.model.semver_range import VersionRange
    from reconciler.review.updates import new_version_text

    assert new_version_text(declared, target, pinned=VersionRange.parse(declared).is_exact) == expected


def test_a_commit_that_only_approves_shows_the_approval_as_the_change(tmp_path, capsys, monkeypatch):
    """docs/review.md: the approval is what a reviewer of such a commit must see, not "No Operator changes"."""
    import json
    import re
    import shutil
    import subprocess

    from tests.docblocks import ROOT
    from tests.e2e.support import cli

    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops-repo", repo)
    git = ["git", "-C", str(repo), "-c", "user.name=R", "-c", "user.email=r@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "unapproved"], check=True)
    assert cli("approve", str(repo), "plumbus", "--offline", capsys=capsys).code == 0
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "approve plumbus"], check=True)
    run = cli("diff", str(repo), "--offline", capsys=capsys)
    assert run.code == 1, run.out + run.err
    said = (ROOT / "docs" / "review.md").read_text().split("(`change: approval`), from the base's decision to the "
                                                            "working tree's: `", 1)[1].split("`", 1)[0]
    assert said in run.out.splitlines(), run.out
    assert "No Operator changes" not in run.out
    (op,) = json.loads(cli("diff", str(repo), "--offline", "-o", "json", capsys=capsys).out)["operators"]
    assert (op["change"], op["approvalBefore"]["approved"], op["approval"]["approved"]) == ("approval", False, True)
    assert re.search(r"\| plumbus \| approval \| .* \| approved \|", cli("diff", str(repo), "--offline", "-o",
                                                                          "markdown", capsys=capsys).out)
    again = cli("diff", str(repo), "--offline", "--base", "HEAD", capsys=capsys)   # nothing since: no change
    assert again.code == 0 and "No Operator changes." in again.out, again.out
