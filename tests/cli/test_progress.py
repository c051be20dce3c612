"""Progress on a terminal (a real pseudo-terminal), and none on a pipe or with -q."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.e2e.support import managed

ROOT = Path(__file__).resolve().parents[2]


def _run_on_pty(*args: str, env: dict[str, str] | None = None, shared: bool = False) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe (or, ``shared``, on the same terminal,
    as in a shell); return (code, stdout, terminal)."""
    master, slave = pty.openpty()
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", *args], stdout=slave if shared else subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, env=environ)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=300), out, b"".join(chunks).decode().replace("\r\n", "\n")


def test_stages_and_applied_objects_on_a_terminal(control_plane, example_repo):
    import uuid

    from reconciler.kube.client import Kube
    from tests.loop.conftest import uninstall

    # A namespace of its own: namespaces are never pruned, and later tests expect to create plumbus-system.
    namespace = f"progress-{uuid.uuid4().hex[:8]}"
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("namespace: plumbus-system", f"namespace: {namespace}"))
    # Another namespace is another set of permissions: approve them, as a user would.
    assert subprocess.run([sys.executable, "-m", "reconciler", "approve", str(example_repo), "plumbus", "--offline"],
                          capture_output=True).returncode == 0
    kube = Kube(control_plane.admin_client())
    try:
        code, out, term = _run_on_pty("reconcile", str(example_repo), "--kubeconfig", str(control_plane.kubeconfig_path))
        assert code == 0, term
        lines = term.splitlines()
        stages = [ln.split("] ", 1)[1] for ln in lines if ln.startswith("[")]
        assert stages[:4] == [f"reading {example_repo}", "loading catalogs", "resolving 1 declaration",
                              "converting plumbus.v1.1.0 for plumbus"]
        assert stages[-1] == "applying"
        applied = [ln.split() for ln in lines if not ln.startswith("[")]
        assert ["created", "Deployment.apps", f"{namespace}/plumbus-controller-manager"] in applied
        assert "Summary: " in out and "[" not in out.split("Summary", 1)[0].splitlines()[0]  # stdout has no progress
    finally:
        uninstall(kube)
    assert managed(kube, "plumbus") == set()


def test_nothing_with_quiet_or_off_a_terminal(example_repo, tmp_path):
    env = {"KUBECONFIG": "", "HOME": str(tmp_path)}
    code, out, term = _run_on_pty("reconcile", str(example_repo), "--dry-run", "-q", env=env)
    assert code == 1 and "Summary:" in out
    assert term == ""
    proc = subprocess.run([sys.executable, "-m", "reconciler", "reconcile", str(example_repo), "--dry-run"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 1 and proc.stderr == ""
    code, _, term = _run_on_pty("reconcile", str(example_repo), "--dry-run", env=env)
    assert code == 1 and "loading catalogs" in term  # the same run on a terminal does show it


def test_verbose_off_a_terminal_logs_the_stages(example_repo, tmp_path):
    """A CI log is not a terminal: -v there logs each stage as an info line, where the terminal shows progress."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": "", "HOME": str(tmp_path)}
    for flag in ("-v", "-vv"):
        proc = subprocess.run([sys.executable, "-m", "reconciler", "reconcile", str(example_repo), "--dry-run", flag],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 1 and "Summary:" in proc.stdout
        logged = [ln.split(" reconciler.progress: ", 1)[1] for ln in proc.stderr.splitlines()
                  if " INFO reconciler.progress: " in ln]
        assert logged[:3] == [f"reading {example_repo}", "loading catalogs", "resolving 1 declaration"], proc.stderr
        assert "\r" not in proc.stderr and "\033" not in proc.stderr


def screen(transcript: str) -> list[str]:
    """The lines a terminal shows for ``transcript``: a carriage return goes back to the line's start and
    ``ESC [ K`` erases from the cursor to the line's end, as a VT100 does."""
    lines, line, col = [], [], 0
    i = 0
    while i < len(transcript):
        if transcript.startswith("\033[K", i):
            del line[col:]
            i += 3
            continue
        ch = transcript[i]
        if ch == "\n":
            lines.append("".join(line))
            line, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    lines.append("".join(line))
    return lines


def test_a_status_line_is_erased_before_anything_else_is_written():
    import io

    from reconciler.report.progress import TerminalProgress

    term = io.StringIO()
    progress = TerminalProgress(term)
    progress.status("waiting for 1 Operator: plumbus: Deployment plumbus-system/plumbus: updated replicas 0/1")
    progress.status("waiting for 1 Operator: plumbus: ready")
    progress.stage("judging health")
    progress.status("waiting again")
    progress.clear()
    term.write("Repository /src/gitops at 2ecf09f\n")   # what a command prints next on the same terminal
    shown = screen(term.getvalue())
    assert shown[-2] == "Repository /src/gitops at 2ecf09f", shown
    assert [ln for ln in shown if ln.strip()][0].endswith("] judging health"), shown
    progress.clear()   # nothing shown: nothing written
    assert term.getvalue().endswith("2ecf09f\n")


def test_the_report_starts_on_a_clean_line_after_waiting_for_the_rollout(control_plane, example_repo):
    import uuid

    from reconciler.kube.client import Kube
    from tests.loop.conftest import uninstall

    from reconciler import yamlio

    namespace = f"progress-{uuid.uuid4().hex[:8]}"
    decl = example_repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("namespace: plumbus-system", f"namespace: {namespace}"))
    # Pods no node can take: the rollout never ends, so the run waits (showing its status line) until --timeout.
    csv_file = next((example_repo / "bundles" / "plumbus" / "1.1.0" / "manifests").glob("*clusterserviceversion*"))
    csv = yamlio.read_all(csv_file)[0]
    for deployment in csv["spec"]["install"]["spec"]["deployments"]:
        deployment["spec"]["template"]["spec"]["nodeSelector"] = {"example.invalid/no-such-node": "true"}
    csv_file.write_text(yamlio.dump(csv))
    assert subprocess.run([sys.executable, "-m", "reconciler", "approve", str(example_repo), "plumbus", "--offline"],
                          capture_output=True).returncode == 0
    kube = Kube(control_plane.admin_client())
    try:
        code, _, transcript = _run_on_pty("reconcile", str(example_repo), "--timeout", "3s", "--kubeconfig",
                                          str(control_plane.kubeconfig_path), shared=True)
        assert code == 5, transcript   # not healthy in time: reported after the changes
        assert "waiting for 1 Operator" in transcript, "the run showed no status line: nothing to check"
        shown = screen(transcript)
        assert f"Repository {example_repo} at an unversioned tree (not a git repository)" in shown, shown
        assert not any("waiting for" in ln for ln in shown), shown   # erased, not continued by the report
    finally:
        uninstall(kube)
    assert managed(kube, "plumbus") == set()
