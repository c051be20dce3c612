"""The design documents' declaration examples: accepted as written, or refused saying why.

The examples are read from ../shared/seeds (skipped when absent): each block
that starts at an ``apiVersion:`` or ``kind:`` line is one example, committed
to a repository of its own and read by the real repository reader. Every
example of the kinds below has its expected outcome in ``OUTCOMES``: what it
becomes (an Install, Instance or BundleDeployment is a declaration that
installs a bundle; a Bundle a named source; a ProvisionerClass a policy), or
the reason it is refused. ``tests/e2e/test_seed_kinds.py`` reconciles each
kind against the local cluster.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.repo import read_repository
from tests.seeds import SEEDS, margin_blocks

DECLARATION_KINDS = {"ProvisionerClass", "Install", "Bundle", "Instance", "BundleDeployment", "BundleInstance"}

# Each example's outcome: ("installs", kind, [(name, bundle references, class)]), ("bundle", name, refs, class),
# ("class", name, policy), or ("refused", a sentence of the message).
OUTCOMES = {
    "001-line177-Install": ("installs", "Install", [
        ("plumbus-plan-1", ("quay.io/howtheydoit/plum:latest",), None),     # the repository's class decides, but
        ("plumbus-plan-2", ("quay.io/howtheydoit/bus@sha256:def456...",), None)]),   # Unapproved: DenyAll
    # the document prints it with its indentation lost, so spec is written twice
    "002-line49-BundleInstance": ("refused", "duplicate key 'spec' (line 8); it is first set on line 5"),
    "003-line601-Bundle": ("bundle", "my-bundle", ("my-bundle@sha256:xyz123",), "core-rukpak-io-plain"),
    "003-line623-Bundle": ("bundle", "combo-tag-ref", ("git+https://github.com/operator-framework/combo@v0.0.2#",),
                           "core-rukpak-io-plain"),
    "003-line704-BundleDeployment": ("installs", "BundleDeployment", [
        ("my-bundle-deployment", ("my-bundle@sha256:xyz123",), "core-rukpak-io-plain")]),
    "004-line48-Bundle": ("bundle", "plumbus-operator.v0.9.3", ("file://content",), "deppy.resolveset"),
    "004-line71-Instance": ("installs", "Instance", [("resolved-654adh", ("file://content",), "olm.resolveset")]),
    "004-line102-ProvisionerClass": ("refused", "metadata.name '<good name>' is not a valid name"),
    "004-line124-Instance": ("refused", "spec.bundle is required"),   # "spec: # omitted": it shows the status
    # the Bundle is followed by the ConfigMap its volumeMounts name: content is a directory of the repository here
    "004-line166-Bundle": ("refused", "declarations.yaml (document 2): unknown declaration v1 ConfigMap"),
    "004-line231-ProvisionerClass": ("refused", "parameters.approval must be one of AllowAll, DenyAll, Android, "
                                                "UserPermission, not 'AllowAll | DenyAll | Android'"),
    "004-line253-ProvisionerClass": ("refused", "ProvisionerClass has no metadata.name"),   # parameters only
    "004-line486-Bundle": ("bundle", "etcd-operator.v0.9.3", ("docker://quay.io/etcd/bundle@sha256",), "olm.bundle"),
    # Instances that the document writes without a name are named after their Bundle
    "004-line505-Instance": ("installs", "Instance", [
        ("etcd-operator-v0-9-3", ("docker://quay.io/etcd/bundle@sha256",), "olm.bundle")]),
    "004-line532-ProvisionerClass": ("refused", "parameters.approval must be one of AllowAll, DenyAll, Android, "
                                                "UserPermission, not 'AllowAll | DenyAll | UserPermission'"),
    "004-line546-ProvisionerClass": ("refused", "ProvisionerClass has no metadata.name"),
    "004-line859-Instance": ("installs", "Instance", [
        ("etcd-operator-v0-9-3", ("docker://quay.io/etcd/bundle@sha256",), "olm.bundle")]),
    "004-line913-Instance": ("installs", "Instance", [
        ("etcd-operator", ("docker://quay.io/etcd/bundle@sha256",), "olm.bundle")]),
    # `olm.properties: -|` where `|-` was meant: not YAML as printed
    "004-line954-Bundle": ("refused", "declarations.yaml: invalid YAML (line 7"),
    "004-line1046-Instance": ("installs", "Instance", [("resolved-654adh", ("file://content",), "olm.resolveset")]),
}


def _examples() -> list:
    if not SEEDS.is_dir():
        return []
    found = []
    for path in sorted(SEEDS.glob("*.txt")):
        for line, block in margin_blocks(path.read_text(encoding="utf-8")):
            kind = re.search(r"^kind: *(\S+)", block, re.M)
            if kind and kind.group(1) in DECLARATION_KINDS:
                ident = f"{path.name[:3]}-line{line}-{kind.group(1)}"
                found.append(pytest.param(kind.group(1), block, ident, id=ident))
    return found


EXAMPLES = _examples()


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds is absent")
def test_every_example_has_an_outcome():
    kinds = {p.values[0] for p in EXAMPLES}
    assert {"ProvisionerClass", "Install", "Bundle", "Instance", "BundleDeployment"} <= kinds
    assert {p.values[2] for p in EXAMPLES} == set(OUTCOMES)


@pytest.mark.parametrize("kind, text, ident", EXAMPLES)
def test_seed_example(tmp_path: Path, kind: str, text: str, ident: str) -> None:
    (tmp_path / "declarations.yaml").write_text(text)
    outcome = OUTCOMES[ident]
    if outcome[0] == "refused":
        with pytest.raises(InputError) as err:
            read_repository(tmp_path)
        assert outcome[1] in err.value.render()
        assert err.value.path.startswith("declarations.yaml")
        return
    snapshot = read_repository(tmp_path)
    declared = [c for c in snapshot.provisioner_classes.values() if c.origin == "declarations.yaml"]
    if outcome[0] == "installs":
        assert [(d.kind, d.name, d.bundle.refs, d.provisioner_class) for d in snapshot.operators] == [
            (outcome[1], name, refs, cls) for name, refs, cls in outcome[2]]
        assert not snapshot.bundles and not declared
    elif outcome[0] == "bundle":
        (bundle,) = snapshot.bundles.values()
        assert (bundle.name, bundle.source.refs, bundle.source.bundle_class) == outcome[1:]
        assert snapshot.operators == () and not declared


def test_an_install_maps_its_namespaces_and_its_approval(tmp_path: Path) -> None:
    (tmp_path / "install.yaml").write_text(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata: {name: plumbus-plan}\nspec:\n"
        "  namespaces: [{from: default, to: operators}]\n  approval: Approved\n"
        "  content: [{type: ManifestImage, manifestImage: 'registry.example.com/plum@sha256:" + "0" * 64 + "'}]\n")
    (decl,) = read_repository(tmp_path).operators
    assert (decl.name, decl.kind, decl.approved, decl.manual_approval) == ("plumbus-plan", "Install", True, False)
    assert decl.install.namespace_map == (("default", "operators"),)
    assert decl.bundle.name == "plum"


def test_an_instance_refers_to_a_declared_bundle_and_takes_its_class(tmp_path: Path) -> None:
    (tmp_path / "bundle.yaml").write_text(
        "kind: Bundle\nmetadata: {name: etcd-operator.v0.9.3}\nspec: {class: deppy.resolveset, refs: "
        "[file://bundles/etcd]}\n")
    (tmp_path / "instance.yaml").write_text(
        "apiVersion: rukpak.io/v1\nkind: Instance\nmetadata: {name: etcd}\nspec:\n"
        "  selector: {matchLabels: {subscription: etcd-operator}}\n  bundle: {name: etcd-operator.v0.9.3}\n")
    (decl,) = read_repository(tmp_path).operators
    assert (decl.kind, decl.bundle.name, decl.bundle.refs, decl.provisioner_class) == (
        "Instance", "etcd-operator.v0.9.3", ("file://bundles/etcd",), "deppy.resolveset")
    (tmp_path / "bundle.yaml").unlink()
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    assert "instance.yaml: Instance etcd: spec.bundle names Bundle etcd-operator.v0.9.3, which no declaration " \
           "defines" in err.value.render()


@pytest.mark.parametrize("provisioner", ["<unique id>", "operators", "a b/c"])
def test_a_provisioner_class_with_a_placeholder_provisioner_is_refused(tmp_path: Path, provisioner: str) -> None:
    (tmp_path / "pc.yaml").write_text(f"apiVersion: rukpak.io/v1\nkind: ProvisionerClass\nmetadata: {{name: x}}\n"
                                      f"provisioner: '{provisioner}'\n")
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    assert f"provisioner {provisioner!r} is not a provisioner id (a domain, '/', a name)" in err.value.render()


def test_an_operator_cannot_choose_its_installer_service_account(tmp_path: Path) -> None:
    (tmp_path / "op.yaml").write_text(
        "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {name: plumbus}\nspec:\n"
        "  catalog: {name: community, package: plumbus}\n  install: {namespace: plumbus, serviceAccountName: admin}\n")
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    text = err.value.render()
    assert "op.yaml: Operator plumbus: spec.install.serviceAccountName cannot be chosen: each declaration is " \
           "applied as its own installer ServiceAccount, install-<name> in the installer namespace" in text
    assert "hint: remove spec.install.serviceAccountName" in text


def test_a_provisioner_class_with_another_api_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pc.yaml").write_text("apiVersion: example.com/v1\nkind: ProvisionerClass\nmetadata: {name: x}\n")
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    assert "pc.yaml: ProvisionerClass needs apiVersion rukpak.io/v1 or core.rukpak.io/v1alpha1, not example.com/v1" \
        in err.value.render()


@pytest.mark.parametrize("api_version", ["rukpak.io/v1", "core.rukpak.io/v1alpha1"])
def test_provisioner_classes_are_read_with_their_policy(tmp_path: Path, api_version: str) -> None:
    doc = f"apiVersion: {api_version}\nkind: ProvisionerClass\nmetadata: {{name: deny}}\nprovisioner: x/y\n" \
          f"parameters: {{approval: DenyAll, policy: strict}}\n"
    (tmp_path / "classes.yaml").write_text(doc + "---\n" + doc.replace("deny", "allow").replace("DenyAll", "AllowAll"))
    snapshot = read_repository(tmp_path)
    classes = snapshot.provisioner_classes
    assert (classes["deny"].approval, classes["deny"].origin, classes["deny"].ignored_parameters) == (
        "DenyAll", "classes.yaml", ("policy",))
    assert (classes["allow"].approval, classes["allow"].origin) == ("AllowAll", "classes.yaml (document 2)")
    assert classes["olm.resolveset"].approval == "Android"  # the defaults stay


@pytest.mark.parametrize("doc, message", [
    ("apiVersion: core.rukpak.io/v1alpha1\nkind: Bundle\nmetadata: {name: b}\nspec: {provisionerClassName: nope, "
     "source: {type: image, image: {ref: 'r.example.com/b@sha256:" + "0" * 64 + "'}}}\n",
     "Bundle b: class 'nope' names no ProvisionerClass"),
    ("kind: Bundle\nmetadata: {name: b}\nspec: {class: olm.bundle}\n",
     "Bundle b: spec needs refs (a list of bundle references) or source (image or git), and has neither"),
    ("kind: Bundle\nmetadata: {name: b}\nspec: {source: {type: git, git: {repository: 'https://g.example.com/r', "
     "ref: {tag: v1, commit: abc}}}}\n", "spec.source.git.ref needs exactly one of commit, tag or branch"),
    ("apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata: {name: p}\nspec: {content: [{type: "
     "RawManifests, manifests: []}]}\n", "spec.content[0].type 'RawManifests' is not supported"),
    ("apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata: {name: p}\nspec: {approval: Maybe, "
     "content: [{manifestImage: x}]}\n", "spec.approval must be Approved or Unapproved, not 'Maybe'"),
    ("apiVersion: operators.coreos.com/v1\nkind: Install\nmetadata: {name: p}\nspec: {}\n",
     "Install needs apiVersion operators.coreos.com/v2alpha1, not operators.coreos.com/v1"),
    ("kind: Bundle\nmetadata: {name: b}\nspec: {refs: [file://a]}\n---\nkind: Instance\nmetadata: {name: i}\n"
     "spec: {bundle: {name: b, spec: {refs: [file://other]}}}\n",
     "Instance i: spec.bundle embeds a spec for Bundle b, which declarations.yaml declares with other refs"),
    ("kind: Instance\nmetadata: {name: i}\nspec: {selector: {matchExpressions: [{key: app, operator: Near}]}, "
     "bundle: {name: b, spec: {refs: [file://a]}}}\n",
     "Instance i: spec.selector.matchExpressions[0].operator must be one of In, NotIn, Exists, DoesNotExist"),
    ("kind: Instance\nmetadata: {name: i}\nspec: {selector: {matchLabel: {app: x}}, "
     "bundle: {name: b, spec: {refs: [file://a]}}}\n", "Instance i: unknown field spec.selector.matchLabel"),
])
def test_direct_installs_that_cannot_work_are_refused_saying_why(tmp_path: Path, doc: str, message: str) -> None:
    (tmp_path / "declarations.yaml").write_text(doc)
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    assert message in err.value.render()


def test_a_seed_003_git_source_by_commit_is_a_pinned_git_reference(tmp_path: Path) -> None:
    commit = "3f2a" * 10
    (tmp_path / "bd.yaml").write_text(
        "apiVersion: core.rukpak.io/v1alpha1\nkind: BundleDeployment\nmetadata: {name: combo}\nspec:\n"
        "  provisionerClassName: core-rukpak-io-plain\n  template:\n    spec:\n      source:\n        type: git\n"
        f"        git: {{repository: 'https://github.com/operator-framework/combo', directory: manifests/, "
        f"ref: {{commit: {commit}}}}}\n")
    (decl,) = read_repository(tmp_path).operators
    assert decl.bundle.refs == (f"git+https://github.com/operator-framework/combo@{commit}#manifests",)
    assert decl.provisioner_class == "core-rukpak-io-plain"


@pytest.mark.parametrize("written, meant", [
    ("core.rukpak.io/plain", "core-rukpak-io-plain"),            # seed 002: the provisioner id as the class
    ("core.rukpak.io/converter", "core-rukpak-io-registry"),
    ("registry.v1", "registry.v1"),                              # seed 004's RukPak Bundle
    ("core-rukpak-io-plain", "core-rukpak-io-plain"),
])
def test_the_documents_names_of_rukpaks_classes_are_its_classes(tmp_path: Path, written: str, meant: str) -> None:
    (tmp_path / "declarations.yaml").write_text(
        "kind: Bundle\napiVersion: rukpak.io/v1\nmetadata: {name: plumbus-kjf122}\nspec:\n"
        f" class: {written}\n refs:\n - docker://quay.io/plumbus/bundle@sha256:{'a' * 64}\n---\n"
        "apiVersion: core.rukpak.io/v1alpha1\nkind: BundleDeployment\nmetadata: {name: combo}\nspec:\n"
        f"  provisionerClassName: {written}\n  template: {{spec: {{refs: [file://x]}}}}\n")
    snapshot = read_repository(tmp_path)
    assert snapshot.bundles["plumbus-kjf122"].source.bundle_class == meant
    (decl,) = snapshot.operators
    assert decl.provisioner_class == meant and meant in snapshot.provisioner_classes
    assert snapshot.provisioner_classes[meant].approval == "Android"


def test_a_helm_class_is_refused_saying_what_to_write_instead(tmp_path: Path) -> None:
    (tmp_path / "declarations.yaml").write_text(
        "kind: Instance\nmetadata: {name: chart}\nspec:\n  bundle: {name: b, spec: {class: helm.bundle, "
        "refs: [file://chart]}}\n")
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    text = err.value.render()
    assert "declarations.yaml: Instance chart: spec.bundle.spec.class 'helm.bundle' is not supported" in text
    assert "render the chart (helm template) into a plain+v0 bundle and use class core-rukpak-io-plain" in text
