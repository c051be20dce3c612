"""Reading a GitOps repository: declarations, settings, lockfile, layout rules."""

from __future__ import annotations

import pytest

from tests.unit.helpers import operator_doc, write, write_docs
from reconciler.errors import DeclarationError, InputError, LockfileError
from reconciler.model.declarations import CatalogSelector, InstallSettings, Origin
from reconciler.repo import CatalogSettings, Settings, read_repository
from tests.support.paths import EXAMPLE
from tests.support.repo import commit_all, example_copy


def read_error(root, cls=InputError) -> InputError:
    with pytest.raises(cls) as err:
        read_repository(root)
    return err.value


def test_reads_the_example():
    snap = read_repository(EXAMPLE)
    assert snap.root == EXAMPLE.resolve()
    assert snap.settings == Settings(default_install_namespace="operators")
    assert [op.name for op in snap.operators] == ["plumbus"]
    op = snap.operators[0]
    assert op.origin == Origin("operators/plumbus.yaml", 0)
    assert op.catalog == CatalogSelector("community", "plumbus", "stable", None)
    assert str(op.version) == ">=1.0.0 <2.0.0"
    assert op.install == InstallSettings(namespace="plumbus-system")
    assert snap.catalog_dirs == {"community": EXAMPLE.resolve() / "catalogs" / "community"}
    assert snap.lock is not None
    entry = snap.lock.for_operator("plumbus")
    assert entry.name == "plumbus.v1.1.0" and entry.source == "file://bundles/plumbus/1.1.0"
    assert snap.lock_path == EXAMPLE.resolve() / "olm.lock"


def test_unversioned_copy_has_no_revision(tmp_path):
    snap = read_repository(example_copy(tmp_path / "repo"))
    assert snap.revision is None


def test_missing_directory(tmp_path):
    err = read_error(tmp_path / "nope")
    assert err.message == "repository directory does not exist"
    assert err.path == str(tmp_path / "nope")


def test_empty_repository(tmp_path):
    snap = read_repository(tmp_path)
    assert snap.operators == () and snap.catalog_dirs == {} and snap.lock is None
    assert snap.settings == Settings()


def test_operators_sorted_and_found_anywhere_outside_reserved_dirs(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write_docs(repo, "teams/b/ops.yml", operator_doc("zeta"), operator_doc("alpha"))
    snap = read_repository(repo)
    assert [op.name for op in snap.operators] == ["alpha", "plumbus", "zeta"]
    alpha = next(op for op in snap.operators if op.name == "alpha")
    assert alpha.origin == Origin("teams/b/ops.yml", 1)


def test_non_declaration_yaml_errors_with_ignore_hint(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "docs/values.yaml", "replicas: 3\n")
    err = read_error(repo, DeclarationError)
    assert err.path == "docs/values.yaml"
    assert "not a declaration" in err.message and "apiVersion and kind" in err.message
    assert "ignore:" in err.hint and "reconciler.yaml" in err.hint


def test_non_mapping_document_is_not_a_declaration(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "operators/list.yaml", "- a\n- b\n")
    err = read_error(repo, DeclarationError)
    assert err.path == "operators/list.yaml" and "not a declaration" in err.message


def test_ignore_globs_in_settings(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "docs/values.yaml", "replicas: 3\n")
    write(repo, "kustomize/base/kustomization.yaml", "resources: []\n")
    write(repo, "reconciler.yaml", """\
        defaultInstallNamespace: operators
        ignore:
          - docs/*.yaml
          - kustomize/*
        """)
    snap = read_repository(repo)
    assert snap.settings.ignore == ("docs/*.yaml", "kustomize/*")
    assert [op.name for op in snap.operators] == ["plumbus"]


def test_ignore_does_not_hide_other_files(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "docs/values.yaml", "replicas: 3\n")
    write(repo, "reconciler.yaml", "ignore: ['other/*']\n")
    assert read_error(repo).path == "docs/values.yaml"


def test_unknown_kind_errors(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "operators/sub.yaml", """\
        apiVersion: operators.coreos.com/v1alpha1
        kind: Subscription
        metadata: {name: plumbus}
        """)
    err = read_error(repo, DeclarationError)
    assert err.path == "operators/sub.yaml"
    assert err.message == "unknown declaration operators.coreos.com/v1alpha1 Subscription"
    assert "operators.coreos.com/v1" in err.hint and "ignore:" in err.hint


def test_operator_with_unknown_api_version_errors(tmp_path):
    repo = example_copy(tmp_path / "repo")
    doc = operator_doc("other")
    doc["apiVersion"] = "operators.coreos.com/v3"
    write_docs(repo, "operators/other.yaml", doc)
    err = read_error(repo, DeclarationError)
    assert err.message == "unknown declaration operators.coreos.com/v3 Operator"


def test_duplicate_operator_names_both_files(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write_docs(repo, "operators/zz-again.yaml", operator_doc("plumbus"))
    err = read_error(repo, DeclarationError)
    assert err.message == "Operator plumbus is declared twice"
    assert err.path == "operators/zz-again.yaml"
    assert "operators/plumbus.yaml" in err.hint


def test_duplicate_in_one_file_names_documents(tmp_path):
    repo = tmp_path / "r"
    write_docs(repo, "ops.yaml", operator_doc("a"), operator_doc("a"))
    err = read_error(repo, DeclarationError)
    assert err.path == "ops.yaml (document 2)"
    assert err.hint == ("Operator a is also declared in ops.yaml; Operators, Inputs, Installs, Instances and "
                        "BundleDeployments share one namespace of names")


@pytest.mark.parametrize("api_version", ["deppy.io/v1", "depster.io/v1"])
def test_input_and_input_class_are_read(tmp_path, api_version):
    repo = example_copy(tmp_path / "repo")
    write(repo, "inputs/x.yaml", f"""
        apiVersion: {api_version}
        kind: InputClass
        metadata: {{name: careful}}
        parameters:
          minimalVersion: true
          constraints:
          - type: minKubeVersion
            value: ">= 1.25"
        ---
        apiVersion: {api_version}
        kind: Input
        metadata: {{name: grumbo}}
        spec:
          inputClass: careful
          constraints:
          - type: olm.catalog
            value: {{name: community, package: grumbo, channel: stable}}
          - type: olm.gvk
            value: {{group: how.theydoit.com, version: v1alpha1, kind: Plumbus}}
        """)
    snap = read_repository(repo)
    grumbo = next(d for d in snap.operators if d.name == "grumbo")
    assert (grumbo.kind, grumbo.input_class, grumbo.package) == ("Input", "careful", "grumbo")
    assert [c.type for c in grumbo.constraints] == ["olm.gvk"]
    careful = snap.input_classes["careful"]
    assert careful.minimal_version and not careful.force
    assert set(snap.input_classes) >= {"subscription", "force", "minimal-version", "dry-run", "dry-run-next"}


@pytest.mark.parametrize("doc, message", [
    ("apiVersion: deppy.io/v1\nkind: Input\nmetadata: {name: x}\nspec: {}\n",
     "spec.constraints must list at least one constraint"),
    ("apiVersion: deppy.io/v1\nkind: Input\nmetadata: {name: x}\nspec:\n  constraints:\n"
     "  - {type: olm.wish, value: 1}\n", "spec.constraints[0]: unknown constraint type 'olm.wish'"),
    ("apiVersion: deppy.io/v1\nkind: Input\nmetadata: {name: x}\nspec:\n  constraints:\n"
     "  - type: olm.constraint\n    value: {cel: {rule: 'properties.exists(p,'}}\n",
     "does not compile"),
    ("apiVersion: deppy.io/v1\nkind: InputClass\nmetadata: {name: subscription}\n",
     "InputClass subscription is built in, and this definition changes it: parameters.constraints are none"),
    ("apiVersion: deppy.io/v1\nkind: InputClass\nmetadata: {name: c}\nparameters:\n  constraints:\n"
     "  - {type: maxKubeVersion, value: '1.30'}\n", "InputClass constraint type 'maxKubeVersion' is not supported"),
    ("apiVersion: deppy.io/v1\nkind: Input\nmetadata: {name: x}\nspec:\n  inputClass: nightly\n"
     "  constraints:\n  - {type: olm.name, value: plumbus.v1.0.0}\n", "input class 'nightly' does not exist"),
])
def test_bad_inputs_and_classes(tmp_path, doc, message):
    repo = example_copy(tmp_path / "repo")
    write(repo, "inputs/x.yaml", doc)
    err = read_error(repo, DeclarationError)
    assert err.path == "inputs/x.yaml"
    assert message in err.message


def test_hidden_files_and_dirs_skipped(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, ".github/workflows/ci.yaml", "on: push\njobs: {}\n")
    write(repo, "operators/.draft.yaml", "not: a declaration\n")
    write(repo, "teams/.hidden/x.yaml", "nope: 1\n")
    snap = read_repository(repo)
    assert [op.name for op in snap.operators] == ["plumbus"]


def test_non_yaml_files_skipped(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "README.md", "# repo\n")
    write(repo, "operators/notes.txt", "key: value\n")
    assert [op.name for op in read_repository(repo).operators] == ["plumbus"]


def test_catalogs_and_bundles_not_read_as_declarations(tmp_path):
    repo = example_copy(tmp_path / "repo")
    # the example's catalogs/ and bundles/ hold FBC blobs and bundle manifests
    write(repo, "catalogs/other/pkg.yaml", "schema: olm.package\nname: other\n")
    snap = read_repository(repo)
    assert [op.name for op in snap.operators] == ["plumbus"]
    assert sorted(snap.catalog_dirs) == ["community", "other"]


def test_nested_dirs_named_catalogs_are_read(tmp_path):
    # only the top-level catalogs/ and bundles/ are reserved
    repo = example_copy(tmp_path / "repo")
    write(repo, "teams/catalogs/x.yaml", "schema: olm.package\nname: other\n")
    assert read_error(repo).path == "teams/catalogs/x.yaml"


def test_hidden_catalog_dirs_are_not_catalogs(tmp_path):
    repo = example_copy(tmp_path / "repo")
    (repo / "catalogs" / ".cache").mkdir()
    (repo / "catalogs" / "README.md").write_text("x")
    assert sorted(read_repository(repo).catalog_dirs) == ["community"]


def test_settings_are_read(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", """\
        defaultInstallNamespace: team-ops
        allowEmpty: true
        catalogs:
          community: {priority: 10}
          other:
        """)
    settings = read_repository(repo).settings
    assert settings.default_install_namespace == "team-ops"
    assert settings.allow_empty is True
    assert settings.catalogs == {"community": CatalogSettings(10), "other": CatalogSettings(0)}


@pytest.mark.parametrize("text, message", [
    ("- a\n", "settings must be a mapping"),
    ("defaultNamespace: x\n", "unknown setting 'defaultNamespace'"),
    ("defaultInstallNamespace: Bad_NS\n", "defaultInstallNamespace 'Bad_NS' is not a valid namespace name"),
    ("defaultInstallNamespace: 3\n", "defaultInstallNamespace 3 is not a valid namespace name"),
    ("allowEmpty: 'yes'\n", "allowEmpty must be true or false"),
    ("ignore: docs/*\n", "ignore must be a list of glob patterns"),
    ("ignore: [1]\n", "ignore must be a list of glob patterns"),
    ("catalogs: {community: {priority: high}}\n", "catalogs.community.priority must be an integer"),
])
def test_bad_settings(tmp_path, text, message):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", text)
    err = read_error(repo)
    assert err.path == "reconciler.yaml"
    assert err.message == message


def test_unknown_setting_hint_lists_known(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", "ignored: []\n")
    assert read_error(repo).hint == (
        "known settings: allowEmpty, catalogs, createOnly, defaultInstallNamespace, ignore, ignoreDifferences, "
        "installerNamespace, instance, kubernetesVersion, mirrors, openshiftVersion, provisionerClassName, repository, "
        "stages, takeOverManagers")


@pytest.mark.parametrize("value", ["Team_A", "", 7, "x" * 41])
def test_instance_must_be_a_short_name(tmp_path, value):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", f"instance: {value!r}\n" if isinstance(value, str) else f"instance: {value}\n")
    err = read_error(repo)
    assert err.path == "reconciler.yaml" and "instance" in err.message and "instance:" in err.hint


def test_instance_defaults_to_default(tmp_path):
    from reconciler.repo import read_repository

    repo = example_copy(tmp_path / "repo")
    assert read_repository(repo).settings.instance == "default"
    write(repo, "reconciler.yaml", "instance: team-a\n")
    assert read_repository(repo).settings.instance == "team-a"


@pytest.mark.parametrize("text", [
    "catalogs: [community]\n",
    "catalogs: {community: 10}\n",
    "catalogs: community\n",
])
def test_malformed_catalog_settings_are_input_errors(tmp_path, text):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", text)
    err = read_error(repo)
    assert err.path == "reconciler.yaml"
    assert "catalogs" in err.message


def test_invalid_yaml_in_settings(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "reconciler.yaml", "ignore: [\n")
    err = read_error(repo)
    assert err.path == "reconciler.yaml" and "invalid YAML" in err.message


def test_invalid_yaml_in_a_declaration_names_the_file(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write(repo, "operators/broken.yaml", "apiVersion: operators.coreos.com/v1\nkind: [Operator\n")
    err = read_error(repo)
    assert err.path == "operators/broken.yaml"
    assert "invalid YAML (line" in err.message


def test_declaration_error_carries_repository_relative_path(tmp_path):
    repo = example_copy(tmp_path / "repo")
    write_docs(repo, "operators/bad.yaml", operator_doc("bad", catalog={"name": "community"}))
    err = read_error(repo, DeclarationError)
    assert err.render().startswith("operators/bad.yaml: Operator bad: spec.catalog.package is required")


def test_malformed_lockfile(tmp_path):
    repo = example_copy(tmp_path / "repo")
    (repo / "olm.lock").write_text("kind: Something\n")
    err = read_error(repo, LockfileError)
    assert err.path == "olm.lock"
    assert "not a lockfile" in err.message


def test_empty_lockfile_is_an_empty_lock(tmp_path):
    repo = example_copy(tmp_path / "repo")
    (repo / "olm.lock").write_text("")
    assert read_repository(repo).lock.entries == ()


def test_git_revision_and_dirty_state(tmp_path):
    repo = example_copy(tmp_path / "repo")
    commit = commit_all(repo, "initial")
    assert read_repository(repo).revision == commit
    # rewriting the lockfile does not make the tree dirty
    (repo / "olm.lock").write_text((repo / "olm.lock").read_text() + "\n")
    assert read_repository(repo).revision == commit
    decl = repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("channel: stable", "channel: stable  # pinned"))
    assert read_repository(repo).revision == f"{commit}-dirty"


def test_git_revision_of_a_subdirectory_ignores_changes_elsewhere(tmp_path):
    mono = tmp_path / "mono"
    repo = example_copy(mono / "gitops")
    write(mono, "app/main.txt", "v1\n")
    commit = commit_all(mono, "initial")
    write(mono, "app/main.txt", "v2\n")
    assert read_repository(repo).revision == commit
    write(repo, "operators/new.yaml", "")
    assert read_repository(repo).revision == f"{commit}-dirty"


@pytest.mark.parametrize("text", ["", "# nothing set yet\n", "---\n# defaultInstallNamespace: operators\n"])
def test_empty_or_comment_only_settings_are_no_settings(tmp_path, text):
    (tmp_path / "reconciler.yaml").write_text(text)
    assert read_repository(tmp_path).settings == Settings()
