"""Hostile inputs as data: one folder per case, each run through the real CLI in its own process.

Each ``tests/hostile/<case>/case.yaml`` says how to build a repository from
the example (examples/gitops-repo) and, where it names one, a real bundle of
the corpus (copied into the repository at test time, never committed), which
operations make it hostile, and what must come out: the exit code and a
fragment of the one error line. The CLI runs in a subprocess, so a crash of
the interpreter (a C stack overflow) fails the case instead of the test run.

Case keys: ``what`` (one line), ``corpus`` (``operator/version``, installed as
Operator ``hostile`` from ``bundles/hostile``), ``ops`` (below), ``args``
(default ``--dry-run``; ``{case}`` is the case folder), ``command`` (the
whole command line instead of ``reconcile {repo}`` and ``args``, e.g.
``[resolve, "{repo}", --offline]`` or ``[bundle, render, "{repo}/bundles/hostile"]``), ``cluster`` (run
against the test control plane; a refused run must leave every object of the
cluster as it was, but for Operator ``hostile``'s status object, and removing
the Operator must leave nothing), ``exit`` and ``message`` (in
the one ``error:`` line; for exit 0 or 1, input that only looks hostile, in
the output; with ``violation: true``, a guardrail violation, exit 2 with no
error line: the Operator is held back and the output says why).

Operations: ``write`` (a file with ``text``), ``remove`` (a file or a directory), ``set``/``delete``
(a field, by dotted path, of the documents of ``kind`` in the files matching
a glob), ``symlink`` (``to`` may name ``{outside}``, a directory beside the
repository), ``outside`` (a file there), ``fifo``, ``nested`` (``depth``
nested ``[``), ``alias_bomb`` (a ``size``-character scalar aliased ``count``
times), ``bytes`` (a file of raw bytes: ``hex``, or ``text`` with ``prefix_hex``
before it), ``reencode`` (an existing file, with a ``bom`` and ``crlf`` line
ends), ``big`` (a file of ``size`` bytes), ``hardlink`` (to a file
``outside``), ``files`` (``count`` small files in a directory), ``raw_name`` (a file with ``text`` in that directory,
named by the bytes ``hex``, which need not be UTF-8), ``dirs`` (``depth`` directories one in another, and a file).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import yamlio
from tests.support.repo import example_copy
from tests.support.parts import not_tested

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "operators"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus/operators")
CASES = sorted(p.name for p in HERE.iterdir() if (p / "case.yaml").is_file())

HOSTILE_DECLARATION = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: hostile
spec:
  bundle:
    name: hostile
    spec:
      refs: ["file://bundles/hostile"]
  install:
    namespace: hostile-system
  provisionerClassName: hostile-allow-all
---
# The hostile bundle is approved, so that it reaches every later stage.
apiVersion: rukpak.io/v1
kind: ProvisionerClass
metadata:
  name: hostile-allow-all
provisioner: operators.coreos.com/operators
parameters:
  approval: AllowAll
"""


def load_case(name: str) -> dict:
    return yamlio.load_one(yamlio.read_text(HERE / name / "case.yaml"), f"{name}/case.yaml", strict=True)


def build(case: dict, name: str, tmp: Path, deep: list[Path] | None = None) -> Path:
    """The case's repository under ``tmp``; the deepest directory of each ``dirs`` operation is added to ``deep``."""
    deep = [] if deep is None else deep
    repo, outside = tmp / "repo", tmp / "outside"
    example_copy(repo)
    outside.mkdir()
    if case.get("corpus"):
        source = CORPUS / case["corpus"]
        if not source.is_dir():
            not_tested("corpus", f"no corpus bundle {case['corpus']}")
        shutil.copytree(source, repo / "bundles" / "hostile")
        (repo / "operators" / "hostile.yaml").write_text(HOSTILE_DECLARATION)
    subst = {"{outside}": str(outside), "{case}": str(HERE / name), "{repo}": str(repo)}

    def fill(text: str) -> str:
        for key, value in subst.items():
            text = text.replace(key, value)
        return text

    for op in case.get("ops") or []:
        if "write" in op:
            target = repo / op["write"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fill(op["text"]))
        elif "remove" in op:
            target = repo / op["remove"]
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
        elif "set" in op or "delete" in op:
            _edit(repo, op)
        elif "symlink" in op:
            link = repo / op["symlink"]
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.exists() or link.is_symlink():
                shutil.rmtree(link) if link.is_dir() and not link.is_symlink() else link.unlink()
            link.symlink_to(fill(op["to"]))
        elif "outside" in op:
            target = outside / op["outside"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fill(op["text"]))
        elif "fifo" in op:
            os.mkfifo(repo / op["fifo"])
        elif "nested" in op:
            depth = op["depth"]
            (repo / op["nested"]).write_text(op.get("prefix", "") + "[" * depth + "]" * depth + "\n")
        elif "alias_bomb" in op:
            refs = ", ".join(["*big"] * op["count"])
            (repo / op["alias_bomb"]).write_text(
                f"apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: bomb\n"
                f"  annotations:\n    big: &big {'x' * op['size']}\nspec:\n  constraints: [{refs}]\n")
        elif "bytes" in op:
            target = repo / op["bytes"]
            target.parent.mkdir(parents=True, exist_ok=True)
            data = bytes.fromhex(op["hex"]) if "hex" in op else bytes.fromhex(op.get("prefix_hex", "")) + fill(
                op["text"]).encode()
            target.write_bytes(data)
        elif "reencode" in op:
            target = repo / op["reencode"]
            text = target.read_text()
            if op.get("crlf"):
                text = text.replace("\n", "\r\n")
            target.write_bytes((b"\xef\xbb\xbf" if op.get("bom") else b"") + text.encode())
        elif "big" in op:
            with open(repo / op["big"], "wb") as file:
                file.write(op.get("prefix", "").encode())
                file.truncate(op["size"])
        elif "hardlink" in op:
            link = repo / op["hardlink"]
            link.unlink(missing_ok=True)
            os.link(outside / op["to"], link)
        elif "files" in op:
            directory = repo / op["files"]
            directory.mkdir(parents=True, exist_ok=True)
            for index in range(op["count"]):
                (directory / f"f{index:06}.yaml").write_text(fill(op.get("text", "# empty\n")))
        elif "dirs" in op:
            here = repo / op["dirs"]
            here.mkdir(parents=True, exist_ok=True)
            for _ in range(op["depth"]):   # one level at a time: pathlib's mkdir(parents=True) recurses
                here = here / "d"
                here.mkdir()
            (here / "f.yaml").write_text(fill(op.get("text", "# deep\n")))
            deep.append(here)
        elif "raw_name" in op:
            directory = os.fsencode(repo / op["raw_name"])
            with open(os.path.join(directory, bytes.fromhex(op["hex"])), "w") as file:
                file.write(fill(op["text"]))
        else:
            raise AssertionError(f"{name}: unknown operation {op}")
    return repo


def _remove_deep(deepest: list[Path]) -> None:
    """Remove directories nested too deeply for shutil.rmtree (which recurses), from the bottom up."""
    for here in deepest:
        for child in here.iterdir():
            child.unlink()
        while here.name == "d":
            here.rmdir()
            here = here.parent


def _edit(repo: Path, op: dict) -> None:
    files = sorted(repo.glob(op["file"]))
    assert files, f"no file matches {op['file']}"
    hit = False
    for file in files:
        docs = yamlio.load_all(file.read_text(), str(file))
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != op["kind"]:
                continue
            *parents, last = (op.get("set") or op.get("delete")).split(".")
            node = doc
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
            key = int(last) if isinstance(node, list) else last
            if "set" in op:
                node[key] = op["value"]
            else:
                del node[key]
            hit = True
        file.write_text(yamlio.dump_all(docs))
    assert hit, f"no {op['kind']} in {op['file']}"


def run_cli(argv: list[str], tmp: Path, kubeconfig: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp / "home"), RECONCILER_BUNDLE_CACHE="off")
    if kubeconfig:
        argv = [*argv, "--kubeconfig", kubeconfig]
    return subprocess.run([sys.executable, "-m", "reconciler", *argv], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp, stdin=subprocess.DEVNULL)


def _params() -> list:
    return [pytest.param(n, marks=pytest.mark.cluster) if load_case(n).get("cluster") else n for n in CASES]


@pytest.mark.parametrize("name", _params())
def test_hostile_input(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    case = load_case(name)
    deep: list[Path] = []
    request.addfinalizer(lambda: _remove_deep(deep))
    repo = build(case, name, tmp_path, deep)
    argv = case.get("command") or ["reconcile", "{repo}", *case.get("args", ["--dry-run"])]
    argv = [a.replace("{case}", str(HERE / name)).replace("{repo}", str(repo)) for a in argv]
    kube = None
    kubeconfig = None
    if case.get("cluster"):
        plane = request.getfixturevalue("control_plane")
        from reconciler.kube.client import Kube

        kube = Kube(plane.admin_client())
        kubeconfig = str(plane.kubeconfig_path)
        from tests.e2e.support import cluster_state

        before = cluster_state(kube, except_operator="hostile")
    result = run_cli(argv, tmp_path, kubeconfig)
    assert result.returncode >= 0, f"the process died of signal {-result.returncode}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case["exit"], f"exit {result.returncode}, expected {case['exit']}:\n{result.stderr}"
    if case["exit"] in (0, 1):  # input that looks hostile but is valid: read as any other
        assert case["message"] in result.stdout, result.stdout
        return
    if case.get("violation"):  # held back by a guardrail: said in the approval section, not as an error
        assert case["message"] in result.stdout and "error:" not in result.stderr, result.stdout + result.stderr
        return
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert case["message"] in result.stderr, result.stderr
    if kube is not None:
        from reconciler.cluster.status import objects as status_objects
        from reconciler.cluster.ownership import Request, sync
        from tests.e2e.support import managed, wait_unchanged

        # A refused run leaves the cluster as it was, but for the refused Operator's status object.
        wait_unchanged(kube, before, except_operator="hostile")

        left = managed(kube, "hostile")
        recorded = status_objects.read_all(kube).get("hostile")
        inventory = {f"{r.kind} {r.namespace}/{r.name}".replace(" /", " ")
                     for r in (recorded.inventory if recorded else ())}
        assert left <= inventory, f"written but not recorded: {sorted(left - inventory)}"
        others = frozenset(status_objects.read_all(kube)) - {"hostile"}
        sync(kube, Request([], dry_run=False, allow_empty=True, held=others))
        assert managed(kube, "hostile") == set(), "removing the Operator left objects of the hostile bundle"
