"""A real OCI registry (CNCF distribution, built from the pin in bench/peers/registry) on loopback.

Import the ``oci_registry`` fixture into a conftest to use it elsewhere::

    from tests.bundle.oci_registry import oci_registry  # noqa: F401

It is session-scoped: one registry with a temporary storage directory,
stopped when the session ends. Tests isolate themselves by repository name.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.wait import wait_until


@dataclass(frozen=True)
class Registry:
    host: str          # "127.0.0.1:PORT", the registry part of an image reference
    storage: Path
    https: bool = False

    def ref(self, repository: str, tag: str = "latest") -> str:
        return f"{self.host}/{repository}:{tag}"

    @property
    def url(self) -> str:
        return f"{'https' if self.https else 'http'}://{self.host}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_registry(binary: Path, workdir: Path, login: tuple[str, str] | None = None,
                   tls: tuple[Path, Path, Path] | None = None) -> tuple[subprocess.Popen[bytes], Registry]:
    """Start a registry; with ``login`` it requires that user and password (htpasswd, bcrypt); with ``tls``
    (certificate, key, CA that signed it) it serves HTTPS."""
    storage = workdir / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    config = workdir / "config.yml"
    auth = ""
    if login is not None:
        import bcrypt

        htpasswd = workdir / "htpasswd"
        htpasswd.write_text(f"{login[0]}:{bcrypt.hashpw(login[1].encode(), bcrypt.gensalt()).decode()}\n")
        auth = f"auth: {{htpasswd: {{realm: test, path: {htpasswd}}}}}\n"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {storage}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: test-only"
        + (f", tls: {{certificate: {tls[0]}, key: {tls[1]}}}" if tls else "") + "}\n" + auth)
    log = open(workdir / "registry.log", "wb")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}
    proc = subprocess.Popen([str(binary), "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)
    log.close()
    reg = Registry(f"127.0.0.1:{port}", storage, https=tls is not None)
    context = ssl.create_default_context(cafile=str(tls[2])) if tls else None
    _until_serving(proc, reg, workdir / "registry.log", context, login is not None)
    return proc, reg


def _until_serving(proc: subprocess.Popen[bytes], reg: Registry, log: Path, context: ssl.SSLContext | None = None,
                   login: bool = False) -> None:
    """Wait until the registry answers /v2/ (with 401 when it asks for the ``login`` it was given)."""
    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"the registry exited with code {proc.returncode}:\n" + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"{reg.url}/v2/", timeout=2, context=context) as resp:
                return resp.status == 200
        except urllib.error.HTTPError as exc:
            return exc.code == 401 and login   # up, and asking for the login it was given

    try:   # not listening yet: the connection is refused
        wait_until(answers, f"the registry at {reg.url} to answer /v2/", timeout=30, every=0.05,
                   ignoring=OSError, diagnose=lambda: "its log:\n" + log.read_text()[-3000:])
    except BaseException:
        proc.kill()
        raise


@contextlib.contextmanager
def running_registry(request: pytest.FixtureRequest, workdir: Path,
                     login: tuple[str, str] | None = None) -> Iterator[Registry]:
    """A registry for the duration of the block (built into the cache first), always stopped afterwards."""
    from bench.peers import stop
    from bench.peers.registry import registry_binary

    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binary = registry_binary(log=print)
    proc, reg = start_registry(binary, workdir, login)
    try:
        yield reg
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def oci_registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A distribution registry on a free loopback port, built into the cache on first use."""
    with running_registry(request, tmp_path_factory.mktemp("oci-registry")) as reg:
        yield reg


LOGIN = ("reconciler", "s3cret-for-tests")


@pytest.fixture(scope="session")
def oci_registry_with_login(request: pytest.FixtureRequest,
                            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A registry that requires the user and password in ``LOGIN`` (HTTP basic auth)."""
    with running_registry(request, tmp_path_factory.mktemp("oci-registry-login"), LOGIN) as reg:
        yield reg


def start_referrers_registry(binary: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], Registry]:
    """Start go-containerregistry's registry with the OCI 1.1 referrers API (``bench/peers/ggcrregistry``), which
    the distribution registry does not serve; its blobs under ``workdir``."""
    (workdir / "blobs").mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(workdir / "registry.log", "wb")
    proc = subprocess.Popen([str(binary), "-address", f"127.0.0.1:{port}", "-blobs", str(workdir / "blobs")],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    reg = Registry(f"127.0.0.1:{port}", workdir / "blobs")
    _until_serving(proc, reg, workdir / "registry.log")
    return proc, reg


@pytest.fixture(scope="session")
def referrers_registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A registry serving the referrers API: cosign v3 lists its signatures there through the API, not a tag."""
    from bench.peers import stop
    from bench.peers.ggcrregistry import ggcrregistry_binary

    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        binary = ggcrregistry_binary(log=print)
    proc, reg = start_referrers_registry(binary, tmp_path_factory.mktemp("referrers-registry"))
    try:
        yield reg
    finally:
        stop(proc)
