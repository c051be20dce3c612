"""The CLI with no cluster configured: dry-run against an empty cluster, exit codes, error output."""

from __future__ import annotations

from io import StringIO

import pytest

from reconciler.cli.parser import main
from tests.unit.helpers import no_cluster, write  # noqa: F401 (fixture)
from tests.support.paths import EXAMPLE
from tests.support.repo import commit_all, init

EXPECTED_CHANGES = [
    "  + Namespace plumbus-system  would be created  [plumbus]",
    "  + CustomResourceDefinition.apiextensions.k8s.io plumbai.how.theydoit.com  would be created  [plumbus]",
    "  + ClusterRole.rbac.authorization.k8s.io plumbus.v1.1.0-plumbus-controller-af1045a6  would be created  [plumbus]",
    "  + ClusterRole.rbac.authorization.k8s.io plumbus.v1.1.0-plumbus-controller-bf3d272b  would be created  "
    "[plumbus]",
    "  + ClusterRoleBinding.rbac.authorization.k8s.io plumbus.v1.1.0-plumbus-controller-af1045a6  would be created  "
    "[plumbus]",
    "  + ClusterRoleBinding.rbac.authorization.k8s.io plumbus.v1.1.0-plumbus-controller-bf3d272b  would be created  "
    "[plumbus]",
    "  + ServiceAccount plumbus-system/plumbus-controller  would be created  [plumbus]",
    "  + Deployment.apps plumbus-system/plumbus-controller-manager  would be created  [plumbus]",
]


pytestmark = pytest.mark.usefixtures("no_cluster")


def run(*argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_dry_run_against_empty_cluster(example_repo, capsys):
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"Repository {example_repo.resolve()} at an unversioned tree (not a git repository)"
    assert ("  Operator plumbus: plumbus.v1.1.0 (package plumbus, version 1.1.0) from catalog community, "
            "channel stable -> namespace plumbus-system") in lines
    assert ("Lockfile olm.lock: would change; not written (a dry run writes nothing: add --write-lock to "
            "write it)") in lines
    assert not (example_repo / "olm.lock").exists()
    assert "Changes (dry-run against an empty cluster):" in lines
    assert any(line.startswith("  note: no cluster configured: compared against an empty cluster")
               for line in lines)
    changes = [line for line in lines if line.startswith("  + ")]
    assert changes == EXPECTED_CHANGES
    assert lines[-1] == "Summary: 8 created, 0 configured, 0 unchanged, 0 deleted, 0 skipped"
    assert capsys.readouterr().err == ""


def test_a_dry_run_shows_each_created_object_as_a_unified_diff(example_repo):
    code, out = run("reconcile", "--dry-run", str(example_repo))
    lines = out.splitlines()
    at = lines.index("  + Deployment.apps plumbus-system/plumbus-controller-manager  would be created  [plumbus]")
    body = lines[at + 1:]
    assert body[0].startswith("      @@ -0,0 +1,") and body[1:3] == ["      +apiVersion: apps/v1",
                                                                      "      +kind: Deployment"]
    namespace = lines.index("  + Namespace plumbus-system  would be created  [plumbus]")
    assert lines[namespace + 1:namespace + 6] == ["      @@ -0,0 +1,4 @@", "      +apiVersion: v1",
                                                  "      +kind: Namespace", "      +metadata:",
                                                  "      +  name: plumbus-system"]


def test_dry_run_writes_the_lockfile_only_when_asked(example_repo):
    assert not (example_repo / "olm.lock").exists()
    run("reconcile", "--dry-run", str(example_repo))
    assert not (example_repo / "olm.lock").exists()
    run("reconcile", "--dry-run", "--write-lock", str(example_repo))
    assert (example_repo / "olm.lock").read_bytes() == (EXAMPLE / "olm.lock").read_bytes()
    assert not list(example_repo.glob("*.tmp"))


def test_write_lock_needs_dry_run(example_repo, capsys):
    assert run("reconcile", "--write-lock", str(example_repo))[0] == 64
    assert "--write-lock goes with --dry-run" in capsys.readouterr().err


def test_second_dry_run_still_reports_changes(example_repo):
    assert run("reconcile", "--dry-run", "--write-lock", str(example_repo))[0] == 1
    lock = (example_repo / "olm.lock").read_bytes()
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 1  # nothing was applied: the (empty) cluster still differs
    assert "Lockfile olm.lock: unchanged" in out.splitlines()
    assert [line for line in out.splitlines() if line.startswith("  + ")] == EXPECTED_CHANGES
    assert (example_repo / "olm.lock").read_bytes() == lock


def test_a_downgrade_is_refused_by_the_upgrade_edges(example_repo, capsys):
    run("reconcile", "--dry-run", "--write-lock", str(example_repo))
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: "1.0.0"'))
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot all be satisfied" in err
    # without a cluster, what is installed is what olm.lock records, and the fact says so
    assert "Operator plumbus has plumbus.v1.1.0 installed (as olm.lock records it: no cluster was read), and " \
           "upgrades follow" in err and "allow only: plumbus.v1.1.0 (" in err
    assert "inputClass: force" in err
    assert "name: plumbus.v1.1.0" in (example_repo / "olm.lock").read_text()


def test_a_downgrade_can_be_reviewed_and_says_a_reconcile_refuses_it(example_repo):
    init(example_repo)
    run("reconcile", "--dry-run", "--write-lock", str(example_repo))
    commit_all(example_repo, "at 1.1.0")
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: "1.0.0"'))
    code, out = run("diff", str(example_repo), "--offline")
    assert code == 1, out
    assert "plumbus (Operator): downgraded plumbus.v1.1.0 -> plumbus.v1.0.0  [no upgrade edge: a reconcile " \
           "refuses it (upgrades follow the catalog's upgrade edges; inputClass: force moves it anywhere)]" in out
    assert "  + Deployment.apps plumbus-system/plumbus-controller  created" in out


def test_force_moves_the_lockfile_to_a_pinned_version(example_repo):
    run("reconcile", "--dry-run", "--write-lock", str(example_repo))
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: "1.0.0"')
                    .replace("inputClass: subscription", "inputClass: force"))
    code, out = run("reconcile", "--dry-run", "--write-lock", str(example_repo))
    assert code == 1
    assert "Lockfile olm.lock: written" in out
    assert "plumbus.v1.0.0 (package plumbus, version 1.0.0)" in out
    lock = (example_repo / "olm.lock").read_text()
    assert "name: plumbus.v1.0.0" in lock and "source: file://bundles/plumbus/1.0.0" in lock
    assert "Deployment.apps plumbus-system/plumbus-controller  would be created" in out


def test_without_dry_run_needs_a_cluster(example_repo, capsys):
    code, out = run("reconcile", str(example_repo))
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith("error: no cluster is configured")
    assert "--dry-run" in err and "reconciler cluster up" in err
    assert out == ""
    assert not (example_repo / "olm.lock").exists()  # refused before anything was written


def test_missing_kubeconfig_file(example_repo, capsys, tmp_path):
    code, _ = run("reconcile", "--dry-run", "--kubeconfig", str(tmp_path / "nope.yaml"), str(example_repo))
    assert code == 3
    assert f"kubeconfig {tmp_path / 'nope.yaml'} does not exist" in capsys.readouterr().err


def test_malformed_yaml_in_operators(example_repo, capsys):
    write(example_repo, "operators/broken.yaml", "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: [\n")
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: operators/broken.yaml: invalid YAML (line ")
    assert "hint: fix the YAML syntax" in err
    assert out == ""
    assert not (example_repo / "olm.lock").exists()


def test_unknown_package(example_repo, capsys):
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("package: plumbus", "package: plumbus-deluxe"))
    code, _ = run("reconcile", "--dry-run", str(example_repo))
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: operators/plumbus.yaml: Operator plumbus: "
                          "package 'plumbus-deluxe' not found in catalog 'community'")
    assert "hint: packages in community: plumbus" in err


def test_bad_declaration_exit_code(example_repo, capsys):
    write(example_repo, "operators/extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, _ = run("reconcile", "--dry-run", str(example_repo))
    assert code == 2
    assert "operators/extra.yaml: v1 ConfigMap is not a declaration here: file:// bundle content is a directory " \
           "of the repository, not a ConfigMap" in capsys.readouterr().err


def test_unsupported_bundle_exit_code(example_repo, capsys):
    csv = example_repo / "bundles/plumbus/1.1.0/manifests/plumbus.clusterserviceversion.yaml"
    csv.write_text(csv.read_text().replace("strategy: deployment", "strategy: helm"))
    code, _ = run("reconcile", "--dry-run", str(example_repo))
    assert code == 2
    assert "install strategy 'helm' is not supported" in capsys.readouterr().err


def test_empty_repository_nothing_to_do(tmp_path, capsys):
    root = tmp_path / "empty"
    root.mkdir()
    code, out = run("reconcile", "--dry-run", str(root))
    assert code == 0
    assert "No Operators declared." in out
    assert "  none" in out.splitlines()
    assert not (root / "olm.lock").exists()


def test_missing_repository(tmp_path, capsys):
    code, _ = run("reconcile", "--dry-run", str(tmp_path / "nope"))
    assert code == 2
    assert f"{tmp_path / 'nope'}: no such directory" in capsys.readouterr().err


def test_usage_errors_have_their_own_exit_code(capsys):
    for argv in (["reconcile"], ["reconcile", ".", "--no-such-flag"], ["no-such-command"]):
        with pytest.raises(SystemExit) as exc:
            main(argv, out=StringIO())
        assert exc.value.code == 64, argv
    assert "REPO" in capsys.readouterr().err


def test_an_unexpected_exception_is_one_line_and_exit_70(example_repo, capsys, monkeypatch):
    from reconciler import pipeline

    def broken(*args, **kwargs):
        raise KeyError("spec")
    monkeypatch.setattr(pipeline, "reconcile", broken)
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 70 and out == ""
    err = capsys.readouterr().err
    assert err.startswith("error: internal error: KeyError: 'spec'\n") and "Traceback" not in err


def test_a_dry_run_previews_an_operator_that_waits_for_approval(example_repo, capsys):
    """A pull request that adds an Operator: the plan shows what approving it installs, and the README's idiom
    (`--dry-run ... || [ $? -eq 1 ]`) holds."""
    import json
    import shutil

    shutil.rmtree(example_repo / "approvals")
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 1, out
    assert "plumbus: plumbus.v1.1.0 WAITS FOR APPROVAL" in out
    for expected in EXPECTED_CHANGES:
        assert expected.replace("would be created  [", "would be created once approved  [") in out.splitlines()
    assert "(8 of these wait for approval of plumbus: nothing of them is applied until approved)" in out
    code, out = run("reconcile", "--dry-run", "-o", "json", str(example_repo))
    assert code == 1
    doc = json.loads(out)
    assert doc["summary"]["waitingForApproval"] == 8 and doc["summary"]["created"] == 8
    assert all(c["waitsForApproval"] for c in doc["changes"])
    assert [a["operator"] for a in doc["approvals"] if not a["approved"]] == ["plumbus"]


def test_an_approved_dry_run_marks_nothing_as_waiting(example_repo, capsys):
    import json

    code, out = run("reconcile", "--dry-run", "-o", "json", str(example_repo))
    assert code == 1
    doc = json.loads(out)
    assert doc["summary"]["waitingForApproval"] == 0 and not any(c["waitsForApproval"] for c in doc["changes"])


def test_the_printed_approve_command_of_a_guardrail_violation_works_as_printed(example_repo, capsys):
    import shlex

    write(example_repo, "bundles/plumbus/1.1.0/manifests/admin-binding.yaml", """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: plumbus-is-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: plumbus-controller, namespace: plumbus-system}]
""")
    code, out = run("reconcile", str(example_repo), "--dry-run")
    assert code == 2, out
    hint = next(ln for ln in out.splitlines() if "approve with:" in ln)
    command = hint.split("approve with:", 1)[1].split("   (then commit", 1)[0]
    assert command.strip().endswith("plumbus --waive no-cluster-admin-binding"), hint
    argv = shlex.split(command)
    assert argv[0] == "reconciler"
    assert run(*argv[1:])[0] == 0, capsys.readouterr().err
    code, out = run("reconcile", str(example_repo), "--dry-run")
    assert code == 1 and "plumbus: plumbus.v1.1.0 approved" in out, out


def test_the_approval_line_names_the_bundle_as_the_catalog_and_lock_do(example_repo):
    """A rebuild named ``plumbus.v1.1.0-1`` (version 1.1.0+1) whose CSV keeps another name: approval speaks of the
    bundle the resolution chose, by the name olm.lock records, and `approve` binds that name."""
    import shutil

    catalog = next((example_repo / "catalogs" / "community").iterdir())
    text = catalog.read_text()
    catalog.write_text(text.replace("name: plumbus.v1.1.0\n", "name: plumbus.v1.1.0-1\n")
                       .replace("version: 1.1.0}", "version: 1.1.0+1}"))
    shutil.rmtree(example_repo / "approvals")
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert code == 1, out
    assert "  plumbus: plumbus.v1.1.0-1 WAITS FOR APPROVAL" in out, out
    assert run("approve", str(example_repo), "plumbus")[0] == 0
    assert "name: plumbus.v1.1.0-1" in (example_repo / "approvals" / "plumbus.yaml").read_text()
    code, out = run("reconcile", "--dry-run", str(example_repo))
    assert "  plumbus: plumbus.v1.1.0-1 approved" in out, out
