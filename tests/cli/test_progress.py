"""Progress on a terminal (a real pseudo-terminal), and none on a pipe or with -q."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import EXAMPLE, managed

ROOT = Path(__file__).resolve().parents[2]


def _run_on_pty(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal and stdout on a pipe; return (code, stdout, terminal)."""
    master, slave = pty.openpty()
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", *args], stdout=subprocess.PIPE,
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
    out = proc.stdout.read().decode()
    return proc.wait(timeout=300), out, b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    shutil.copytree(EXAMPLE, path, ignore=shutil.ignore_patterns("olm.lock"))
    return path


def test_stages_and_applied_objects_on_a_terminal(control_plane, repo):
    import uuid

    from reconciler.cluster.kube import Kube
    from tests.loop.conftest import uninstall

    # A namespace of its own: namespaces are never pruned, and later tests expect to create plumbus-system.
    namespace = f"progress-{uuid.uuid4().hex[:8]}"
    decl = repo / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace("namespace: plumbus-system", f"namespace: {namespace}"))
    # Another namespace is another set of permissions: approve them, as a user would.
    assert subprocess.run([sys.executable, "-m", "reconciler", "approve", str(repo), "plumbus", "--offline"],
                          capture_output=True).returncode == 0
    kube = Kube(control_plane.admin_client())
    try:
        code, out, term = _run_on_pty("reconcile", str(repo), "--kubeconfig", str(control_plane.kubeconfig_path))
        assert code == 0, term
        lines = term.splitlines()
        stages = [ln.split("] ", 1)[1] for ln in lines if ln.startswith("[")]
        assert stages[:4] == [f"reading {repo}", "loading catalogs", "resolving 1 declaration(s)",
                              "converting plumbus.v1.1.0 for plumbus"]
        assert stages[-1] == "applying"
        applied = [ln.split() for ln in lines if not ln.startswith("[")]
        assert ["created", "Deployment.apps", f"{namespace}/plumbus-controller-manager"] in applied
        assert "Summary: " in out and "[" not in out.split("Summary", 1)[0].splitlines()[0]  # stdout has no progress
    finally:
        uninstall(kube)
    assert managed(kube, "plumbus") == set()


def test_nothing_with_quiet_or_off_a_terminal(repo, tmp_path):
    env = {"KUBECONFIG": "", "HOME": str(tmp_path)}
    code, out, term = _run_on_pty("reconcile", str(repo), "--dry-run", "-q", env=env)
    assert code == 1 and "Summary:" in out
    assert term == ""
    proc = subprocess.run([sys.executable, "-m", "reconciler", "reconcile", str(repo), "--dry-run"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 1 and proc.stderr == ""
    code, _, term = _run_on_pty("reconcile", str(repo), "--dry-run", env=env)
    assert code == 1 and "loading catalogs" in term  # the same run on a terminal does show it
