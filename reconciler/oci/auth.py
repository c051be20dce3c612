"""Registry credentials as container tools find them: pull secrets given for the run, docker/podman auth files,
and the credential helpers those files name.

Order, first found wins: the pull secrets a command was given (a CatalogSource's ``spec.secrets``, a
``--pull-secret``), then each auth file in the order podman and docker read them ($REGISTRY_AUTH_FILE,
$DOCKER_CONFIG/config.json, ~/.docker/config.json). Within one file a ``credHelpers`` entry for the registry
comes first, then an ``auths`` entry, then the file's ``credsStore``, as docker reads them. A helper is run as
docker runs it: ``docker-credential-<name> get`` with the server address on standard input, answering
``{"Username": ..., "Secret": ...}``; "credentials not found" is no credentials, any other failure an error
naming the helper.

Credentials are looked up per registry host once per process (a helper may prompt a keychain or call a
cloud API), and never logged.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reconciler.errors import ReconcilerError

DOCKER_HUB_SERVER = "https://index.docker.io/v1/"   # the key docker writes and its helpers are asked for
HELPER_TIMEOUT = 30.0
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")

_lock = threading.Lock()
_extra: tuple[tuple[str, Mapping[str, Any]], ...] = ()   # (where it came from, its "auths" mapping), newest first
_blocks: list[tuple[object, tuple[tuple[str, Mapping[str, Any]], ...]]] = []
_helper_answers: dict[tuple[str, str], tuple[str, str] | None] = {}


class CredentialError(ReconcilerError):
    """Credentials for a registry could not be read."""


def auth_files() -> list[str]:
    """Credential files in the order container tools read them."""
    files = []
    if explicit := os.environ.get("REGISTRY_AUTH_FILE"):
        files.append(explicit)
    if docker := os.environ.get("DOCKER_CONFIG"):
        files.append(str(Path(docker) / "config.json"))
    files.append(str(Path.home() / ".docker" / "config.json"))
    return [f for f in files if Path(f).is_file()]


@contextmanager
def pull_secrets(secrets: list[tuple[str, Mapping[str, Any]]]) -> Iterator[None]:
    """Use these docker config documents (``(what, {"auths": ...})``, e.g. a Secret's ``.dockerconfigjson``) for
    the block, before the auth files."""
    global _extra
    token = object()
    with _lock:
        _blocks.append((token, tuple((what, doc.get("auths") or {}) for what, doc in secrets)))
        _extra = tuple(entry for _, entries in reversed(_blocks) for entry in entries)
    try:
        yield
    finally:
        with _lock:
            _blocks[:] = [b for b in _blocks if b[0] is not token]
            _extra = tuple(entry for _, entries in reversed(_blocks) for entry in entries)


def secret_config(secret: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The docker config a pull Secret holds (``kubernetes.io/dockerconfigjson``, or the older ``dockercfg``)."""
    data = secret.get("data") or {}
    kind = secret.get("type") or ""
    key = ".dockerconfigjson" if ".dockerconfigjson" in data else ".dockercfg" if ".dockercfg" in data else None
    if key is None:
        raise CredentialError(f"{what} is not a pull secret: it has no .dockerconfigjson (type {kind or 'unset'})",
                              hint="create it with `kubectl create secret docker-registry NAME --docker-server=... "
                                   "--docker-username=... --docker-password=...`")
    try:
        doc = json.loads(base64.b64decode(data[key]))
    except (ValueError, TypeError):
        raise CredentialError(f"{what}: {key} is not base64-encoded JSON") from None
    if not isinstance(doc, dict):
        raise CredentialError(f"{what}: {key} is not a JSON object")
    return doc if key == ".dockerconfigjson" else {"auths": doc}


def host_of(key: str) -> str:
    """The registry host an ``auths`` key names ("https://index.docker.io/v1/" -> "index.docker.io")."""
    return key.split("://", 1)[-1].split("/", 1)[0]


def credentials(registry: str) -> dict[str, Any] | None:
    """The ``auths`` entry (``{"auth": base64(user:password)}`` or ``{"username", "password"}``) to use for
    ``registry``, or None when nothing names it."""
    names = [registry, *(_DOCKER_HUB if registry in _DOCKER_HUB else ())]
    for _, auths in _extra:
        if (found := _lookup(auths, names)) is not None:
            return found
    for path in auth_files():
        try:
            doc = json.loads(Path(path).read_text())
            if not isinstance(doc, dict):
                raise ValueError
            auths = doc.get("auths") or {}
            helpers = doc.get("credHelpers") or {}
            if not isinstance(auths, dict) or not isinstance(helpers, dict):
                raise ValueError
        except (OSError, ValueError):
            raise CredentialError(f"cannot read registry credentials from {path}",
                                  hint="it must be a docker config.json: a JSON object with an 'auths' "
                                       "mapping") from None
        helper = next((helpers[n] for n in names if isinstance(helpers.get(n), str)), None)
        if helper:
            return _from_helper(helper, registry, path)
        if found := _lookup(auths, names):   # docker leaves an empty entry for what its credsStore holds
            return found
        if isinstance(store := doc.get("credsStore"), str) and store:
            answer = _from_helper(store, registry, path)
            if answer is not None:
                return answer
    return None


def _lookup(auths: Mapping[str, Any], names: list[str]) -> dict[str, Any] | None:
    by_host: dict[str, Any] = {}
    for key, entry in auths.items():
        by_host.setdefault(host_of(str(key)), entry)
    for name in names:
        if isinstance(by_host.get(name), dict):
            return dict(by_host[name])
    return None


def basic(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    """The user and password of an ``auths`` entry."""
    if entry.get("username") and entry.get("password") is not None:
        return str(entry["username"]), str(entry["password"])
    if entry.get("auth"):
        try:
            user, _, password = base64.b64decode(str(entry["auth"])).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return user, password
    return None


def _from_helper(name: str, registry: str, where: str) -> dict[str, Any] | None:
    server = DOCKER_HUB_SERVER if registry in _DOCKER_HUB else registry
    key = (name, server)
    with _lock:
        if key in _helper_answers:
            answer = _helper_answers[key]
            return None if answer is None else _entry(*answer)
    program = f"docker-credential-{name}"
    try:
        done = subprocess.run([program, "get"], input=server, capture_output=True, text=True,
                              timeout=HELPER_TIMEOUT)
    except FileNotFoundError:
        raise CredentialError(f"{where} names the credential helper {name!r} for {registry}, and {program} is "
                              f"not on PATH", hint=f"install {program}, or remove the helper from {where} and log in "
                                                   f"again") from None
    except subprocess.TimeoutExpired:
        raise CredentialError(f"the credential helper {program} did not answer for {registry} within "
                              f"{HELPER_TIMEOUT:.0f}s") from None
    answer: tuple[str, str] | None = None
    if done.returncode != 0:
        said = " ".join(done.stdout.split() + done.stderr.split())
        if "credentials not found" not in said.lower():
            raise CredentialError(f"the credential helper {program} failed for {registry} (exit "
                                  f"{done.returncode}): {said[:300]}",
                                  hint=f"run `echo {server} | {program} get` to see why")
    else:
        try:
            doc = json.loads(done.stdout)
            answer = (str(doc["Username"]), str(doc["Secret"]))
        except (ValueError, KeyError, TypeError):
            raise CredentialError(f"the credential helper {program} answered for {registry} with something that "
                                  "is not {\"Username\", \"Secret\"} JSON") from None
    with _lock:
        _helper_answers[key] = answer
    return None if answer is None else _entry(*answer)


def _entry(user: str, secret: str) -> dict[str, Any]:
    return {"auth": base64.b64encode(f"{user}:{secret}".encode()).decode()}
