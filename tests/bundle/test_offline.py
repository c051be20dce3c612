"""`--offline` means no network at all: the command runs in a child whose every socket is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import oci
from tests.unit.helpers import write, write_docs

ROOT = Path(__file__).resolve().parents[2]

# The command in a fresh interpreter with an audit hook that refuses to create any socket and counts the tries.
CHILD = """
import sys
tries = []
def refuse(event, args):
    if event in ("socket.__new__", "socket.connect", "socket.getaddrinfo"):
        tries.append(event)
        raise OSError("no network in an offline run")
sys.addaudithook(refuse)
from reconciler.cli.parser import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write(f"\\nSOCKETS {len(tries)} CODE {code}\\n")
"""


def _offline(args: list[str], env: dict[str, str]) -> tuple[int, int, str, str]:
    """Exit code, socket attempts, stdout and stderr of ``reconciler ARGS`` with sockets refused."""
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    tail = proc.stderr.rsplit("\nSOCKETS ", 1)[-1].split()
    assert "CODE" in tail, proc.stderr
    return int(tail[-1]), int(tail[0]), proc.stdout, proc.stderr


@pytest.fixture
def repo(tmp_path: Path, oci_registry) -> Path:
    """A catalog whose bundle is an image on the loopback registry, named by a tag."""
    src = tmp_path / "src"
    write(src, "manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gizmo, namespace: gizmo}\n"
                                    "data: {a: '1'}\n")
    write(src, "metadata/annotations.yaml",
          "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n")
    ref = oci_registry.ref("offline/gizmo-bundle", "v1.0.0")
    oci.push_layout(oci.build_layout(src, tmp_path / "layout", {}).path, ref)
    root = tmp_path / "repo"
    write_docs(root, "catalogs/community/catalog.yaml",
               {"schema": "olm.package", "name": "gizmo", "defaultChannel": "stable"},
               {"schema": "olm.channel", "package": "gizmo", "name": "stable", "entries": [{"name": "gizmo.v1.0.0"}]},
               {"schema": "olm.bundle", "package": "gizmo", "name": "gizmo.v1.0.0", "image": ref,
                "properties": [{"type": "olm.package", "value": {"packageName": "gizmo", "version": "1.0.0"}},
                               {"type": "olm.bundle.mediatype", "value": "plain+v0"}]})
    write_docs(root, "operators/gizmo.yaml", {"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
                                              "metadata": {"name": "gizmo"},
                                              "spec": {"catalog": {"name": "community", "package": "gizmo"},
                                                       "install": {"namespace": "gizmo"}}})
    return root


def _env(tmp_path: Path, cache: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "KUBECONFIG": "", "HOME": str(home), "RECONCILER_CACHE_DIR": str(tmp_path / cache),
            "RECONCILER_OCI_CACHE_DIR": str(tmp_path / cache / "oci")}


def test_offline_resolve_opens_no_socket_and_judges_from_the_lock_and_cache(tmp_path, repo):
    env = _env(tmp_path, "cache")
    online = subprocess.run([sys.executable, "-m", "reconciler", "resolve", str(repo), "-o", "json"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert online.returncode == 0, online.stderr
    judged = json.loads(online.stdout)
    assert [a["approved"] for a in judged["approvals"]] == [False] and "approvalsNotEvaluated" not in judged

    code, sockets, out, err = _offline(["resolve", str(repo), "--offline", "-o", "json", "--no-write"], env)
    assert (code, sockets) == (0, 0), err
    doc = json.loads(out)
    assert "approvalsNotEvaluated" not in doc, doc
    assert doc["approvals"] == judged["approvals"] and doc["bundles"] == judged["bundles"]


def test_offline_with_nothing_cached_says_what_it_could_not_evaluate(tmp_path, repo):
    code, sockets, out, err = _offline(["resolve", str(repo), "--offline", "-o", "json", "--no-write"],
                                       _env(tmp_path, "empty-cache"))
    assert (code, sockets) == (0, 0), err
    doc = json.loads(out)
    assert doc["approvals"] == [] and doc["approvalsNotEvaluated"].startswith("offline: resolving the tag would "
                                                                              "need the network")
