"""Every usage error is true of the arguments given: run each one as a user would meet it, and check that the
message names what was given and never asks for what was given already.

``CASES`` has one entry per ``raise UsageError(...)`` of the package (found in its source, so a new one without
a case here fails ``test_every_usage_error_has_a_case``), each with the command line that meets it.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.support import cli

ROOT = Path(__file__).resolve().parents[2]
GIT = ["-c", "user.name=Reader", "-c", "user.email=reader@example.invalid"]


def _fleet(tmp: Path, *, git: bool = True, stages: str | None = None) -> Path:
    root = tmp / "fleet"
    shutil.copytree(ROOT / "examples" / "fleet-repo", root)
    if stages is not None:
        settings = root / "reconciler.yaml"
        settings.write_text(settings.read_text().replace("stages: [dev, staging, prod]", stages))
    if stages == "stages: []":   # and no cluster names one
        for cluster in (root / "clusters").glob("*.yaml"):
            cluster.write_text(re.sub(r"\n\s*stage: \S+", "", cluster.read_text()))
    if git:
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), *GIT, "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), *GIT, "commit", "-qm", "a fleet"], check=True)
    return root


def _gitops(tmp: Path, *, git: bool = False) -> Path:
    root = tmp / "gitops"
    shutil.copytree(ROOT / "examples" / "gitops-repo", root)
    if git:
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), *GIT, "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), *GIT, "commit", "-qm", "example"], check=True)
    return root


REPOS = {
    "gitops": lambda tmp: _gitops(tmp),
    "gitops-git": lambda tmp: _gitops(tmp, git=True),
    "fleet": lambda tmp: _fleet(tmp),
    "fleet-no-git": lambda tmp: _fleet(tmp, git=False),
    "fleet-qa-stage": lambda tmp: _fleet(tmp, stages="stages: [dev, staging, qa, prod]"),
    "fleet-no-stages": lambda tmp: _fleet(tmp, stages="stages: []"),
    "catalog": lambda tmp: _gitops(tmp) / "catalogs" / "community",
}

# (the message's fixed start, as the source writes it, with {} for what is filled in), the repository, the
# command line (REPO stands for it), what the message must say, and what it must not.
CASES = [
    ("{} with --operator: -n/--namespace, --package and --freeze choose OLM installs", "gitops",
     ["adopt", "REPO", "--operator", "plumbus", "--package", "plumbus"],
     ["--package with --operator", "--operator compares one declared Operator"], ["--freeze with", "-n/--namespace with"]),
    ("--freeze changes the adopted Subscriptions, and --dry-run changes nothing", "gitops",
     ["adopt", "REPO", "--freeze", "--dry-run"], ["choose one", "review with --dry-run first"], []),
    ("--import-catalogs writes the catalogs before adopting, and --dry-run", "gitops",
     ["adopt", "REPO", "--import-catalogs", "--dry-run"], ["--dry-run writes nothing", "catalog import REPO"], []),
    ("say what to import: --image REF (an index image) or --catalog-source", "gitops", ["catalog", "import", "REPO"],
     ["say what to import", "kubectl get catalogsources -A"], []),
    ("--all imports every package; --package names some", "gitops",
     ["catalog", "import", "REPO", "--image", "registry.example.invalid/index:v1", "--all", "--package", "etcd"],
     ["give one of them"], []),
    ("{} {} must be NAMESPACE/NAME, each a Kubernetes name", "gitops",
     ["catalog", "import", "REPO", "--catalog-source", "redhat-operators"],
     ["--catalog-source 'redhat-operators' must be NAMESPACE/NAME", "openshift-marketplace/redhat-operators"], []),
    ("{} {} must be NAMESPACE/NAME, each a Kubernetes name", "gitops",
     ["catalog", "import", "REPO", "--image", "registry.example.invalid/index:v1", "--package", "etcd",
      "--pull-secret", "openshift-config/Pull_Secret"], ["--pull-secret 'openshift-config/Pull_Secret'"], []),
    ("{} {} must be NAMESPACE/NAME, each a Kubernetes name", "gitops",
     ["handback", "REPO", "--operator", "plumbus", "--source", "olm/a/b"],
     ["--source 'olm/a/b' must be NAMESPACE/NAME", "a CatalogSource"], []),
    ("no package to import: {}", "gitops", ["catalog", "import", "REPO", "--image", "registry.example.invalid/index:v1"],
     ["an index holds hundreds of packages", "--package NAME", "--all"], []),
    ("{} and --all are exclusive: --all approves", "gitops", ["approve", "REPO", "plumbus", "--all"],
     ["plumbus and --all are exclusive"], ["not both"]),
    ("name the Operators to approve, or pass --all", "gitops", ["approve", "REPO"],
     ["name the Operators to approve, or pass --all"], ["not both"]),
    ("two catalog directories given: {} and -c {}", "catalog",
     ["catalog", "list", "packages", "REPO", "-c", "other-dir"], ["two catalog directories given: ", "-c other-dir"], []),
    ("{} {} --trusted-keys: without trusted keys", "gitops",
     ["reconcile", "REPO", "--dry-run", "--verify-mode", "Tag"],
     ["--verify-mode Tag needs --trusted-keys"], ["--allow-rollback"]),
    ("--force needs --reason", "fleet", ["promote", "REPO", "--to", "staging", "--force"],
     ["--force needs --reason"], []),
    ("--to {} and --all are exclusive", "fleet", ["promote", "REPO", "--to", "staging", "--all"],
     ["--to staging and --all are exclusive"], ["say where to promote"]),
    ("say where to promote: --to STAGE, or --all", "fleet", ["promote", "REPO"],
     ["say where to promote: --to STAGE, or --all for every stage"], []),
    ("{} {} with --to STAGE: --all moves only what is ready", "fleet",
     ["promote", "REPO", "--all", "--operator", "plumbus"],
     ["--operator goes with --to STAGE"], ["--force"]),
    ("--branch commits on a new branch; --no-commit", "fleet",
     ["promote", "REPO", "--to", "staging", "--branch", "b", "--no-commit"], ["choose one"], []),
    ("--write-lock and --locked are exclusive", "gitops",
     ["reconcile", "REPO", "--dry-run", "--write-lock", "--locked"], ["--write-lock and --locked are exclusive"],
     ["only applies to --dry-run"]),
    ("--write-lock goes with --dry-run", "gitops", ["reconcile", "REPO", "--write-lock"],
     ["--write-lock goes with --dry-run"], ["--locked"]),
    ("--graph prints a Mermaid graph and -o {} a document", "gitops",
     ["resolve", "REPO", "--graph", "-o", "json", "--no-write"], ["-o json a document"], []),
    ("{} {} one cluster: add --cluster NAME", "fleet", ["resolve", "REPO", "--explain", "--no-write"],
     ["--explain explains one cluster: add --cluster NAME"], ["--graph"]),
    ("--only {}: no such Operator in {}", "gitops", ["update", "REPO", "--only", "nope"],
     ["--only nope: no such Operator", "plumbus"], []),
    ("--branch names the branch --apply commits on", "gitops", ["update", "REPO", "--branch", "b"],
     ["--branch names the branch --apply commits on", "add --apply"], []),
    ("--to {}: reconciler.yaml declares no stages", "fleet-no-stages", ["promote", "REPO", "--to", "qa"],
     ["declares no stages", "declare the stages"], []),
    ("stage {} has no clusters", "fleet-qa-stage", ["promote", "REPO", "--to", "qa"],
     ["stage qa has no clusters"], []),
    ("--operator {}: not placed on any cluster of stage {}", "fleet",
     ["promote", "REPO", "--to", "staging", "--operator", "nope"], ["--operator nope: not placed", "plumbus"], []),
    ("{} is the first stage", "fleet", ["promote", "REPO", "--to", "dev"], ["dev is the first stage"], []),
    ("--to {}: not a stage of reconciler.yaml (its stages: {})", "fleet", ["promote", "REPO", "--to", "qa"],
     ["--to qa: not a stage of reconciler.yaml (its stages: dev, staging, prod)", "add qa to stages"],
     ["declare the stages"]),
    ("--serve-catalog {}: not a catalog directory of a repository", "gitops",
     ["cluster", "up", "--with-olm", "--serve-catalog", "REPO"],
     ["not a catalog directory of a repository (REPO/catalogs/NAME)", "e.g. platform-repo/catalogs/community"], []),
    ("--openshift lays out OLM, and OLM runs only with --with-olm", None, ["cluster", "up", "--openshift"],
     ["--openshift lays out OLM", "cluster up --with-olm --openshift"], []),
    ("--name {}: a cluster name is lowercase", None, ["cluster", "kubeconfig", "--name", "Not_A_Name"],
     ["--name 'Not_A_Name'"], []),
    ("the repository is not in a git work tree, so {}", "fleet-no-git",
     ["promote", "REPO", "--to", "staging", "--force", "--reason", "r", "--branch", "b"],
     ["cannot be committed on a branch", "drop --branch"], ["hint: pass --no-commit"]),
    ("--branch {} is not a valid branch name", "fleet",
     ["promote", "REPO", "--to", "staging", "--force", "--reason", "r", "--branch", "a..b"],
     ["--branch 'a..b' is not a valid branch name", "check-ref-format"], []),
    ("this repository drives {}: {}", "fleet", ["reconcile", "REPO", "--dry-run"],
     ["this repository drives 4 clusters: say which with --cluster NAME", "dev, prod-eu, prod-us, staging"], []),
    ("this repository drives {}: say which with --cluster NAME", "fleet",
     ["approve", "REPO", "plumbus", "--cluster", "nope"], ["--cluster nope"], []),
    ("--cluster {}: no such cluster in {}/", "fleet", ["diff", "REPO", "--cluster", "nope", "--offline"],
     ["--cluster nope: no such cluster"], []),
    ("--cluster {}: this repository declares no clusters", "gitops",
     ["reconcile", "REPO", "--dry-run", "--cluster", "dev"], ["--cluster dev: this repository declares no clusters",
                                                               "leave --cluster out"], []),
    ("--base {} does not name a commit of {}", "gitops-git", ["diff", "REPO", "--base", "nope", "--offline"],
     ["--base 'nope' does not name a commit"], []),
]


# Usage errors only a cluster can meet (a name nothing on it has), each with the test that meets it.
MET_ELSEWHERE = {
    "{} {}: OLM runs no install of {} on this cluster": "tests/unit/adopt/test_adopt_selection.py",
}


def _sites() -> list[str]:
    """The fixed text of every UsageError the package raises, {} where its message is filled in."""
    out = []
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "UsageError" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.JoinedStr):
                    out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in arg.values))
                elif isinstance(arg, ast.Constant):
                    out.append(str(arg.value))
    return out


def test_every_usage_error_has_a_case():
    covered = [site for site, *_ in CASES]
    missing = [site for site in _sites() if not any(site.startswith(c) for c in covered) and site not in MET_ELSEWHERE]
    assert not missing, f"usage errors without a case in CASES: {missing}"
    for site, test in MET_ELSEWHERE.items():
        assert site in _sites(), f"{site!r} is no longer a usage error: drop it from MET_ELSEWHERE"
        fixed = max(site.split("{}"), key=len).strip()
        assert fixed in (ROOT / test).read_text(), f"{test} does not meet {site!r}"


def _asks_for_given(message: str, argv: list[str]) -> list[str]:
    """Flags the message asks to add, pass or give that the command line has already."""
    asked = re.findall(r"(?:add|pass|give|needs?|say which with|name the stage with)\s+(--[a-z-]+)", message)
    return [flag for flag in asked if flag in argv]


@pytest.mark.parametrize("site, repo, argv, said, unsaid", CASES, ids=[c[0][:48] for c in CASES])
def test_a_usage_error_is_true_of_the_arguments_given(site, repo, argv, said, unsaid, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    where = REPOS[repo](tmp_path) if repo else None
    args = [str(where) if a == "REPO" else a for a in argv]
    run = cli(*args, capsys=capsys)
    assert run.code == 64, f"{args}: {run.code}\n{run.out}{run.err}"
    message = run.err
    for text in said:
        assert text in message, message
    for text in unsaid:
        assert text not in message, message
    assert not _asks_for_given(message, argv), message
