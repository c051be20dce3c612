"""Errors name the object that causes them: the catalog file and the bundle whose reference is wrong, the
Operator whose bundle has no manifests, the kubeconfig file and context of an API server that does not answer
(and say why in words, never an HTTP library's)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from tests.e2e.support import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops-repo", root)
    (root / "olm.lock").unlink()
    return root


def test_a_bundle_reference_outside_the_repository_names_the_catalog_file_and_the_bundle(repo, capsys):
    catalog = repo / "catalogs" / "community" / "plumbus.yaml"
    catalog.write_text(catalog.read_text().replace("file://bundles/plumbus/1.1.0", "file://../../etc"))
    run = cli("reconcile", str(repo), "--dry-run", capsys=capsys)
    assert run.code == 2, run.out + run.err
    assert run.err.startswith("error: catalogs/community/plumbus.yaml: bundle plumbus.v1.1.0 of catalog community "
                              "(for Operator plumbus): bundle reference 'file://../../etc' points outside the "
                              "repository"), run.err
    assert "hint: bundle directories must live inside the repository" in run.err


def test_a_bundle_without_manifests_names_the_operator_and_says_what_to_do(repo, capsys):
    bundle = repo / "bundles" / "plumbus" / "1.1.0"
    (bundle / "manifests").rename(bundle / "yaml")
    run = cli("reconcile", str(repo), "--dry-run", capsys=capsys)
    assert run.code == 2, run.out + run.err
    assert ("catalogs/community/plumbus.yaml: bundle plumbus.v1.1.0 of catalog community (for Operator plumbus): "
            "file://bundles/plumbus/1.1.0: bundle has no manifests/ directory (it has metadata/, yaml/)") in run.err
    assert "hint: a bundle keeps its manifests (the CSV, CRDs, ...) in manifests/: move them there" in run.err


def test_an_api_server_that_does_not_answer_names_the_kubeconfig_and_its_context(repo, tmp_path, capsys):
    with socket.socket() as s:   # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "dead.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- {name: c, cluster: {server: \"https://127.0.0.1:%d\", "
        "insecure-skip-tls-verify: true}}\nusers:\n- {name: u, user: {token: t}}\ncontexts:\n"
        "- {name: staging, context: {cluster: c, user: u}}\ncurrent-context: staging\n" % port)
    for command in (["reconcile", str(repo), "--dry-run"], ["status"], ["adopt", str(repo), "--dry-run"]):
        run = cli(*command, "--kubeconfig", str(kubeconfig), capsys=capsys)
        assert run.code == 3, run.out + run.err
        assert f"cannot reach the API server at https://127.0.0.1:{port}" in run.err
        assert "nothing accepts connections there (is the cluster running?)" in run.err, run.err
        assert "HTTPSConnection" not in run.err and "Errno" not in run.err   # no library's words
        assert (f"hint: check that the cluster of context 'staging' in {kubeconfig} is running and reachable "
                f"(`kubectl --kubeconfig {kubeconfig} --context staging version`)") in run.err, run.err
