"""kubeconfig as kubectl reads it: $KUBECONFIG lists merged, unknown contexts named, -n from the context.

Real kubeconfig files on disk, pointing at the real local control plane (and
at a closed loopback port where a file must lose).
"""

from __future__ import annotations

import base64
import socket
from pathlib import Path

import pytest
import yaml

from reconciler.kube.client import Kube, load_api_client
from reconciler.kube.kubeconfig import load_kubeconfig
from tests.e2e.support import cli

pytestmark = pytest.mark.cluster


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{s.getsockname()[1]}"


def _split_admin(control_plane, directory: Path, context: str, *, current: str | None = None,
                 server: str | None = None, namespace: str | None = None) -> Path:
    """The admin kubeconfig rewritten with its certificates in files beside it, named relatively."""
    admin = yaml.safe_load(control_plane.kubeconfig_path.read_text())
    directory.mkdir(parents=True, exist_ok=True)
    cluster = admin["clusters"][0]["cluster"]
    user = admin["users"][0]["user"]
    for name, field in (("ca.crt", cluster), ("client.crt", user), ("client.key", user)):
        key = {"ca.crt": "certificate-authority-data", "client.crt": "client-certificate-data",
               "client.key": "client-key-data"}[name]
        (directory / name).write_bytes(base64.b64decode(field.pop(key)))
    cluster["certificate-authority"] = "ca.crt"
    user["client-certificate"] = "client.crt"
    user["client-key"] = "client.key"
    if server:
        cluster["server"] = server
    ctx = {"cluster": f"{context}-cluster", "user": f"{context}-user"}
    if namespace:
        ctx["namespace"] = namespace
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": f"{context}-cluster", "cluster": cluster}],
              "users": [{"name": f"{context}-user", "user": user}],
              "contexts": [{"name": context, "context": ctx}]}
    if current:
        config["current-context"] = current
    path = directory / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def _cli(*args: str, capsys) -> tuple[int, str, str]:
    return cli(*args, capsys=capsys)


def test_context_from_the_second_file_of_kubeconfig(control_plane, tmp_path, monkeypatch, example_repo, capsys):
    first = _split_admin(control_plane, tmp_path / "a", "elsewhere", current="elsewhere", server=_closed_port())
    second = _split_admin(control_plane, tmp_path / "b", "plane", current="plane")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    monkeypatch.chdir(tmp_path)  # relative certificate paths must resolve against each file, not the cwd

    merged = load_kubeconfig()
    assert merged.files == (str(first), str(second))
    assert merged.contexts == ["elsewhere", "plane"]
    assert merged.current_context == "elsewhere"  # the first file that sets it wins

    code, out, err = _cli("reconcile", str(example_repo), "--dry-run", "--context", "plane", capsys=capsys)
    assert code == 1, err  # changes found by a dry run against the real cluster
    assert f"server-side dry-run against {control_plane.server}" in out

    # Without --context the first file's current-context is used: its server is closed.
    code, _, err = _cli("reconcile", str(example_repo), "--dry-run", capsys=capsys)
    assert code == 3 and "cannot reach the API server" in err


def test_first_file_to_define_a_name_wins(control_plane, tmp_path, monkeypatch):
    good = _split_admin(control_plane, tmp_path / "good", "shared")
    bad = _split_admin(control_plane, tmp_path / "bad", "shared", current="shared", server=_closed_port())
    monkeypatch.setenv("KUBECONFIG", f"{good}:{bad}")
    api = load_api_client()
    assert api.host == control_plane.server
    assert Kube(api).request("GET", "/version")["major"]
    monkeypatch.setenv("KUBECONFIG", f"{bad}:{good}")
    assert load_api_client().host != control_plane.server


def test_unknown_context_is_named_with_the_files_and_the_choices(control_plane, tmp_path, monkeypatch, example_repo, capsys):
    first = _split_admin(control_plane, tmp_path / "a", "alpha", current="alpha")
    second = _split_admin(control_plane, tmp_path / "b", "beta")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    code, _, err = _cli("reconcile", str(example_repo), "--dry-run", "--context", "gamma", capsys=capsys)
    assert code == 3
    assert "context 'gamma' (given by --context) is not defined" in err
    assert str(first) in err and str(second) in err
    assert "available contexts: alpha, beta" in err
    assert "cannot reach" not in err

    # A current-context that no file defines is reported the same way.
    lonely = tmp_path / "lonely"
    lonely.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "nowhere"}))
    monkeypatch.setenv("KUBECONFIG", f"{lonely}:{second}")
    code, _, err = _cli("resolve", str(example_repo), "--no-write", capsys=capsys)
    assert code == 3 and "context 'nowhere' (named by current-context) is not defined" in err


def test_missing_kubeconfig_files(tmp_path, monkeypatch, example_repo, capsys):
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'x'}:{tmp_path / 'y'}")
    code, _, err = _cli("reconcile", str(example_repo), "--dry-run", capsys=capsys)
    assert code == 3 and "none of the files in $KUBECONFIG exists" in err
    code, _, err = _cli("reconcile", str(example_repo), "--dry-run", "--kubeconfig", str(tmp_path / "z"), capsys=capsys)
    assert code == 3 and f"kubeconfig {tmp_path / 'z'} does not exist" in err


def test_namespace_defaults_to_the_contexts(control_plane, tmp_path, monkeypatch):
    path = _split_admin(control_plane, tmp_path / "a", "team", current="team", namespace="team-ns")
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert load_kubeconfig().namespace() == "team-ns"
    assert load_kubeconfig(str(path)).namespace("team") == "team-ns"
    from reconciler.cli.parser import build_parser
    from reconciler.commands.watch import _lease_namespace

    args = build_parser().parse_args(["watch", "repo"])
    assert _lease_namespace(args) == "team-ns"
    args = build_parser().parse_args(["watch", "repo", "-n", "mine"])
    assert _lease_namespace(args) == "mine"
    args = build_parser().parse_args(["watch", "repo", "-n", "mine", "--lease-namespace", "lease"])
    assert _lease_namespace(args) == "lease"


def _identity(kube: Kube) -> str:
    review = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return review["status"]["userInfo"]["username"]


def test_certificates_tokens_and_passwords_need_no_official_client(control_plane, tmp_path):
    """Client certificates (inline or in files), a token or a token file: urllib3 alone, the same identity."""
    from reconciler.kube.rest import RestClient

    inline = load_api_client(str(control_plane.kubeconfig_path))
    files = load_api_client(str(_split_admin(control_plane, tmp_path / "files", "files", current="files")))
    assert isinstance(inline, RestClient) and isinstance(files, RestClient)
    assert _identity(Kube(inline)) == _identity(Kube(files)) == "reconciler-admin"
    admin = Kube(inline)
    token = admin.request("POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 600}})["status"]["token"]
    config = yaml.safe_load(control_plane.kubeconfig_path.read_text())
    config["users"][0]["user"] = {"tokenFile": "token"}
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "token-config").write_text(yaml.safe_dump(config))
    by_token = load_api_client(str(tmp_path / "token-config"))
    assert isinstance(by_token, RestClient)
    assert _identity(Kube(by_token)) == "system:serviceaccount:default:default"


def test_both_transports_answer_alike_and_the_official_one_gets_a_wide_pool(control_plane):
    """The same requests through urllib3 alone and through the official client: the same answers (a JSON body
    encoded by each, an apply body as given, an error status as a response), and an official client with a
    narrow pool is given a wide one without the caller's own being touched."""
    from kubernetes import client as k8s_client

    from reconciler.kube.client import WORKERS, ApiError
    from reconciler.kube.rest import OfficialClient, RestClient

    light = load_api_client(str(control_plane.kubeconfig_path))
    official = control_plane.admin_client()
    narrow = official.configuration.connection_pool_maxsize
    assert isinstance(light, RestClient) and isinstance(official, k8s_client.ApiClient) and narrow < WORKERS
    kubes = [Kube(light), Kube(official)]
    assert isinstance(kubes[1].transport, OfficialClient)
    assert kubes[1].transport.api.configuration.connection_pool_maxsize == WORKERS
    assert official.configuration.connection_pool_maxsize == narrow
    answers = []
    for i, kube in enumerate(kubes):
        info = kube.resource("v1", "ConfigMap")
        assert info is not None
        applied = kube.apply(info, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": f"transport-{i}", "namespace": "default"},
                                    "data": {"text": "plain, ünïcode and 𝄞"}}, field_manager="test", dry_run=False)
        with pytest.raises(ApiError) as missing:
            kube.request("GET", info.path("default", "no-such-config-map"))
        answers.append((_identity(kube), applied["data"], missing.value.status))
    assert answers[0] == answers[1] == ("reconciler-admin", {"text": "plain, ünïcode and 𝄞"}, 404)


def test_an_exec_plugin_is_left_to_the_official_client(control_plane, tmp_path):
    from kubernetes.client import ApiClient

    config = yaml.safe_load(control_plane.kubeconfig_path.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true",
                                           "interactiveMode": "Never"}}
    (tmp_path / "exec-config").write_text(yaml.safe_dump(config))
    assert isinstance(load_api_client(str(tmp_path / "exec-config")), ApiClient)


def test_a_reconcile_against_a_cluster_imports_no_official_client(control_plane, example_repo, tmp_path, monkeypatch):
    from tests.cli.test_startup import _cli_modules

    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    code, out, modules = _cli_modules("reconcile", "--dry-run", str(example_repo), "--kubeconfig",
                                      str(control_plane.kubeconfig_path))
    assert code == 1 and "server-side dry-run" in out, out
    assert "kubernetes" not in modules
