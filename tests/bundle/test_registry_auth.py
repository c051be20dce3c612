"""Registry credentials come from the usual docker config files; a registry that needs them says so."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from reconciler import oci
from tests.bundle.oci_registry import LOGIN

BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "gitops-repo" / "bundles" / "plumbus" / "1.0.0"


def _docker_config(directory: Path, host: str, user: str, password: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    (directory / "config.json").write_text(json.dumps({"auths": {host: {"auth": token}}}))


def test_push_and_pull_with_credentials_from_docker_config(tmp_path, monkeypatch, oci_registry_with_login,
                                                            oci_cache):
    reg = oci_registry_with_login
    _docker_config(tmp_path / "docker", reg.host, *LOGIN)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))          # no credentials from the real home
    layout = oci.build_layout(BUNDLE, tmp_path / "layout", {"test": "auth"})
    ref = reg.ref("private/plumbus", "v1.0.0")
    digest = oci.push_layout(layout.path, ref)
    assert oci.resolve(ref) == digest
    pulled = oci.pull(ref)
    assert pulled.labels == {"test": "auth"}
    assert (pulled.root / "manifests" / "plumbus.clusterserviceversion.yaml").is_file()


def test_registry_auth_file_takes_precedence(tmp_path, monkeypatch, oci_registry_with_login, oci_cache):
    reg = oci_registry_with_login
    _docker_config(tmp_path / "docker", reg.host, LOGIN[0], "wrong")
    auth_file = tmp_path / "auth.json"
    _docker_config(tmp_path / "podman", reg.host, *LOGIN)
    (tmp_path / "podman" / "config.json").rename(auth_file)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth_file))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    layout = oci.build_layout(BUNDLE, tmp_path / "layout", {})
    oci.push_layout(layout.path, reg.ref("private/precedence", "v1"))
    assert oci.resolve(reg.ref("private/precedence", "v1")).startswith("sha256:")


@pytest.mark.parametrize("password", [None, "wrong"])
def test_missing_or_wrong_credentials_are_a_clear_error(tmp_path, monkeypatch, oci_registry_with_login,
                                                        oci_cache, password):
    reg = oci_registry_with_login
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    if password is None:
        monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    else:
        _docker_config(tmp_path / "docker", reg.host, LOGIN[0], password)
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    with pytest.raises(oci.RegistryError) as err:
        oci.resolve(reg.ref("private/plumbus", "v1.0.0"))
    text = err.value.render()
    assert reg.host in text
    assert "401" in text or "unauthorized" in text.lower() or "credentials" in text.lower()
