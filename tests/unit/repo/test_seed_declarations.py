"""The design documents' examples: accepted as written, or refused saying what to write instead.

The examples are read from ../shared/seeds (skipped when absent): every YAML block of every document
(``tests/seeds.py`` finds them) is committed to a repository of its own and read by the real repository reader.
Each has its expected outcome in ``OUTCOMES``: what it becomes (an Operator or Input a declaration resolved
against a catalog; an Install, Instance or BundleDeployment a declaration that installs a bundle; a Bundle a
named source), or the sentence it is refused with. Where the refusal says what to write instead and that is
mechanical (quote a value, ``|-`` for ``-|``, a whole digest for a placeholder), ``FIXES`` writes it and the
example is read again: what the refusal asks for must then work. docs/declarations.md has the table of kinds;
``tests/e2e/test_seed_kinds.py`` reconciles each kind against the local cluster, and
``tests/cli/test_no_internal_error.py`` runs every example through every command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.repo import read_repository
from tests.seeds import SEEDS, all_blocks
from tests.support.parts import not_tested

COMMUNITY = ("community", "plumbus")
DIGEST = "sha256:" + "0123456789abcdef" * 4
PLACEHOLDER = "is not an image digest (sha256: and 64 hex digits)"
NOT_WHOLE = "not a declaration: every document needs apiVersion and kind\n  hint: this is part of an object"
QUOTE_IT = "hint: a value that starts with '>' begins a block scalar; quote it: \">= 1.20\""
ALTERNATIVES = "lists the choices; pick one"

# Each example's outcome: ("installs", kind, [(name, bundle references, class)]), ("bundle", name, refs, class),
# ("resolves", [(kind, name, (catalog, package), input class)]), or ("refused", a sentence of the message).
OUTCOMES = {
    # the fenced ```yaml block holds two objects as one document
    "000-line107-part": ("refused", "duplicate key 'name' (line 12); it is first set on line 1"),
    "001-line82-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "subscription")]),
    "001-line177-Install": ("refused", "Install plumbus-plan: spec.content[1].manifestImage "
                                       "'quay.io/howtheydoit/bus@sha256:def456...': 'sha256:def456...' " + PLACEHOLDER),
    "001-line277-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line288-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line334-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line365-part": ("refused", NOT_WHOLE + " (updates)"),
    # who may install from a catalog is who may commit to the repository
    "001-line383-Role": ("refused", "rbac.authorization.k8s.io/v1 Role is not a declaration here: the reconciler "
                                    "derives RBAC from approvals"),
    "001-line420-part": ("refused", NOT_WHOLE + " (conditions)"),
    "001-line431-part": ("refused", NOT_WHOLE + " (conditions)"),
    "001-line442-part": ("refused", NOT_WHOLE + " (a list)"),
    "001-line458-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line470-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line486-part": ("refused", NOT_WHOLE + " (status)"),
    "001-line497-part": ("refused", NOT_WHOLE + " (spec)"),
    "001-line506-part": ("refused", NOT_WHOLE + " (a list)"),
    "001-line516-part": ("refused", NOT_WHOLE + " (conditions)"),
    "001-line540-part": ("refused", NOT_WHOLE + " (content)"),
    # the document prints it with its indentation lost, so spec is written twice
    "002-line49-BundleInstance": ("refused", "duplicate key 'spec' (line 8); it is first set on line 5"),
    "003-line601-Bundle": ("refused", "Bundle my-bundle: spec.source.image.ref 'my-bundle@sha256:xyz123': "
                                      "'sha256:xyz123' " + PLACEHOLDER),
    "003-line623-Bundle": ("bundle", "combo-tag-ref", ("git+https://github.com/operator-framework/combo@v0.0.2#",),
                           "core-rukpak-io-plain"),
    "003-line704-BundleDeployment": ("refused", "BundleDeployment my-bundle-deployment: "
                                                "spec.template.spec.source.image.ref 'my-bundle@sha256:xyz123'"),
    "004-line48-Bundle": ("bundle", "plumbus-operator.v0.9.3", ("file://content",), "deppy.resolveset"),
    "004-line71-Instance": ("installs", "Instance", [("resolved-654adh", ("file://content",), "olm.resolveset")]),
    "004-line102-ProvisionerClass": ("refused", "metadata.name '<good name>' is not a valid name"),
    "004-line124-Instance": ("refused", "spec.bundle is required: an Instance installs the Bundle it names\n"
                                        "  hint: write spec.bundle.name"),   # "spec: # omitted": it shows the status
    # the Bundle is followed by the ConfigMap its volumeMounts name: content is a directory of the repository here
    "004-line166-Bundle": ("refused", "declarations.yaml (document 2): v1 ConfigMap is not a declaration here"),
    "004-line231-ProvisionerClass": ("refused", "parameters.approval must be one of AllowAll, DenyAll, Android, "
                                                "UserPermission, not 'AllowAll | DenyAll | Android'"),
    "004-line253-ProvisionerClass": ("refused", "ProvisionerClass has no metadata.name\n  hint: name the class"),   # parameters only
    # its status lists constraints in flow mappings, one of them with a brace missing
    "004-line266-Input": ("refused", "invalid YAML (line 56, column 7): did not find expected ',' or '}'"),
    "004-line348-InputClass": ("refused", QUOTE_IT),
    "004-line372-InputClass": ("refused", QUOTE_IT),
    "004-line389-InputClass": ("refused", QUOTE_IT),
    "004-line406-InputClass": ("refused", QUOTE_IT),
    "004-line486-Bundle": ("refused", "Bundle etcd-operator.v0.9.3: spec.refs[0] "
                                      "'docker://quay.io/etcd/bundle@sha256': 'sha256' " + PLACEHOLDER),
    "004-line505-Instance": ("refused", "spec.bundle.spec.refs[0] 'docker://quay.io/etcd/bundle@sha256'"),
    "004-line532-ProvisionerClass": ("refused", "parameters.approval must be one of AllowAll, DenyAll, Android, "
                                                "UserPermission, not 'AllowAll | DenyAll | UserPermission'"),
    "004-line546-ProvisionerClass": ("refused", "ProvisionerClass has no metadata.name"),
    # it writes version twice to show that it may also be a range
    "004-line561-Operator": ("refused", "duplicate key 'version' (line 36); it is first set on line 33"),
    "004-line770-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "force")]),
    "004-line790-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line809-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line827-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "subscription")]),
    "004-line845-Operator": ("refused", "Operator plumbus: spec.bundle.spec.refs[0] "
                                        "'docker://quay.io/etcd/bundle@sha256'"),
    "004-line859-Instance": ("refused", "spec.bundle.spec.refs[0] 'docker://quay.io/etcd/bundle@sha256'"),
    "004-line880-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line899-Operator": ("refused", "Operator plumbus: spec.bundle.spec.refs[0]"),
    "004-line913-Instance": ("refused", "Instance etcd-operator: spec.bundle.spec.refs[0]"),
    "004-line934-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "force")]),
    "004-line954-Bundle": ("refused", "invalid YAML (line 7, column 16): mapping values are not allowed in this "
                                      "context\n  hint: '-|' is not a block scalar indicator; write '|-'"),
    "004-line976-Input": ("refused", "invalid YAML (line 32, column 7): did not find expected ',' or '}'"),
    "004-line1046-Instance": ("installs", "Instance", [("resolved-654adh", ("file://content",), "olm.resolveset")]),
    "004-line1095-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "dry-run")]),
    # "results in": the Input printed on one line, which is not YAML
    "004-line1111-part": ("refused", "invalid YAML (line 1, column 30): mapping values are not allowed"),
    "004-line1126-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line1140-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line1155-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
    "004-line1169-Operator": ("resolves", [("Operator", "plumbus", COMMUNITY, "minimal-version")]),
}

# What a refusal asks to write, written: (the change, the outcome then). A placeholder digest made whole; the
# InputClasses with their ranges quoted are the built-in ones (minimal-version as printed says force: true, which
# the built-in is not, and is refused saying so); '-|' written '|-' (its class is seed 004's registry.v1).
_WHOLE_DIGESTS = (r"@sha256(:[0-9a-z]*(\.\.\.)?)?$", "@" + DIGEST)
_QUOTED = (r"(value: )(>= [0-9.]+)", r'\1"\2"')
_CLOSED = (r'("kind": "Grumbo"}})$', r"\1}")
FIXES = {
    "001-line177-Install": ((_WHOLE_DIGESTS,), ("installs", "Install", [
        ("plumbus-plan-1", ("quay.io/howtheydoit/plum:latest",), None),     # the repository's class decides, but
        ("plumbus-plan-2", ("quay.io/howtheydoit/bus@" + DIGEST,), None)])),   # Unapproved: DenyAll
    "003-line601-Bundle": ((_WHOLE_DIGESTS,), ("bundle", "my-bundle", ("my-bundle@" + DIGEST,),
                                               "core-rukpak-io-plain")),
    "003-line704-BundleDeployment": ((_WHOLE_DIGESTS,), ("installs", "BundleDeployment", [
        ("my-bundle-deployment", ("my-bundle@" + DIGEST,), "core-rukpak-io-plain")])),
    "004-line348-InputClass": ((_QUOTED,), ("class", "subscription")),
    "004-line372-InputClass": ((_QUOTED,), ("class", "force")),
    "004-line389-InputClass": ((_QUOTED,), ("refused", "InputClass minimal-version is built in, and this definition "
                                                    "changes it: parameters.force is true, built in false")),
    # two classes printed as one document: a document marker between them
    "004-line406-InputClass": ((_QUOTED, (r"^(?=kind: InputClass\napiVersion: deppy.io/v1\nmetadata:\n  name: "
                                          r"dry-run-next)", "---\n")), ("class", "dry-run", "dry-run-next")),
    "004-line486-Bundle": ((_WHOLE_DIGESTS,), ("bundle", "etcd-operator.v0.9.3", (
        "docker://quay.io/etcd/bundle@" + DIGEST,), "olm.bundle")),
    # the brace closed, the Input's status is ignored (the cluster's to write), and its rego constraint refused
    "004-line266-Input": ((_CLOSED,), ("refused", "Input plumbus: spec.constraints[4]: olm.rego constraints are not "
                                                  "supported\n  hint: write the rule in CEL")),
    "004-line976-Input": ((_CLOSED,), ("resolves", [("Input", "plumbus", COMMUNITY, "subscription")])),
    # Instances that the document writes without a name are named after their Bundle
    "004-line505-Instance": ((_WHOLE_DIGESTS,), ("installs", "Instance", [
        ("etcd-operator-v0-9-3", ("docker://quay.io/etcd/bundle@" + DIGEST,), "olm.bundle")])),
    "004-line859-Instance": ((_WHOLE_DIGESTS,), ("installs", "Instance", [
        ("etcd-operator-v0-9-3", ("docker://quay.io/etcd/bundle@" + DIGEST,), "olm.bundle")])),
    "004-line913-Instance": ((_WHOLE_DIGESTS,), ("installs", "Instance", [
        ("etcd-operator", ("docker://quay.io/etcd/bundle@" + DIGEST,), "olm.bundle")])),
    "004-line954-Bundle": (((r"-\|", "|-"), _WHOLE_DIGESTS), ("bundle", "plumbus-kjf122", (
        "docker://quay.io/plumbus/bundle@" + DIGEST,), "registry.v1")),
}


def _kind(text: str) -> str:
    found = re.search(r"^kind: *(\S+)", text, re.M)
    return found.group(1) if found else "part"


BLOCKS = {f"{ident}-{_kind(text)}": text for ident, text in all_blocks().items()}


@pytest.mark.seeds(missing=not SEEDS.is_dir(), reason="../shared/seeds is absent")
def test_every_example_has_an_outcome():
    kinds = {ident.rsplit("-", 1)[1] for ident in BLOCKS}
    assert {"Operator", "Install", "Input", "InputClass", "ProvisionerClass", "Bundle", "Instance",
            "BundleDeployment"} <= kinds
    assert set(BLOCKS) == set(OUTCOMES) and set(FIXES) <= set(OUTCOMES)


def _read(tmp_path: Path, text: str, outcome: tuple) -> None:
    (tmp_path / "declarations.yaml").write_text(text)
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
    elif outcome[0] == "resolves":
        assert [(d.kind, d.name, (d.catalog.name, d.catalog.package), d.input_class)
                for d in snapshot.operators] == outcome[1]
    else:   # a built-in InputClass written out: the built-in, unchanged
        from reconciler.model.declarations import BUILTIN_INPUT_CLASSES

        for name in outcome[1:]:
            assert snapshot.input_classes[name] is BUILTIN_INPUT_CLASSES[name]
        assert snapshot.operators == ()


@pytest.mark.parametrize("ident", sorted(OUTCOMES))
def test_seed_example(tmp_path: Path, ident: str) -> None:
    if ident not in BLOCKS:
        not_tested("seeds", "../shared/seeds is absent")
    _read(tmp_path, BLOCKS[ident], OUTCOMES[ident])


@pytest.mark.parametrize("ident", sorted(FIXES))
def test_a_seed_example_written_as_its_refusal_says_works(tmp_path: Path, ident: str) -> None:
    if ident not in BLOCKS:
        not_tested("seeds", "../shared/seeds is absent")
    changes, outcome = FIXES[ident]
    fixed = BLOCKS[ident]
    for pattern, replacement in changes:
        fixed = re.sub(pattern, replacement, fixed, flags=re.M)
    assert fixed != BLOCKS[ident]
    _read(tmp_path, fixed, outcome)


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
     "Instance i: spec.selector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist"),
    ("kind: Instance\nmetadata: {name: chart}\nspec:\n  bundle: {name: b, spec: {class: helm.bundle, refs: "
     "[file://chart]}}\n", "Instance chart: spec.bundle.spec.class 'helm.bundle' is not supported\n  hint: Helm "
     "charts are not installed by the reconciler (seed 004 names helm.bundle for a Helm provisioner); render the "
     "chart (helm template) into a plain+v0 bundle and use class core-rukpak-io-plain"),
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

