"""Talking to the API server over urllib3 alone, for the kubeconfigs that need nothing more.

Importing the official client costs a short command a fifth of a second
(its API classes, its models and pydantic), while ``Kube`` uses two of its
methods: ``param_serialize`` (a URL, headers and a body) and ``call_api``
(send them). For a kubeconfig whose cluster is a server, a CA and TLS
options, and whose user is a client certificate, a bearer token (or token
file) or a user name and password, ``RestClient`` offers those two methods
itself, with the same TLS and authentication. Anything else (exec plugins,
auth-provider plugins, proxies, impersonation in the kubeconfig) returns
None from ``from_kubeconfig`` and the official client is used, so every
auth method it supports still works. In a pod the official client is used
too: it re-reads the rotating service account token.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

CLUSTER_FIELDS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                            "insecure-skip-tls-verify", "tls-server-name", "extensions"})
USER_FIELDS = frozenset({"client-certificate", "client-certificate-data", "client-key", "client-key-data",
                         "token", "tokenFile", "username", "password", "extensions"})


@dataclass(frozen=True)
class _Configuration:
    host: str


class _Response:
    """What ``Kube`` reads of a response: status, body and headers."""

    def __init__(self, raw: Any) -> None:
        self.status = raw.status
        self._raw = raw

    def read(self) -> bytes:
        return self._raw.data

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self._raw.headers.get(name, default)


class _Transport:
    def __init__(self, pool_manager: Any) -> None:
        self.pool_manager = pool_manager


class RestClient:
    """The part of ``kubernetes.client.ApiClient`` that ``Kube`` uses, with the same TLS and credentials."""

    def __init__(self, host: str, context: ssl.SSLContext, headers: dict[str, str], *, server_name: str | None = None,
                 pool_size: int = 8) -> None:
        import urllib3

        kw: dict[str, Any] = {"ssl_context": context} if host.startswith("https:") else {}
        if server_name:
            kw["server_hostname"] = server_name
        self.configuration = _Configuration(host.rstrip("/"))
        self.rest_client = _Transport(urllib3.PoolManager(num_pools=4, maxsize=pool_size, **kw))
        self._headers = headers

    def param_serialize(self, method: str, resource_path: str, query_params: list[tuple[str, str]] | None = None,
                        header_params: dict[str, str] | None = None, body: Any = None,
                        auth_settings: Any = None) -> tuple[str, str, dict[str, str], Any, None]:
        url = self.configuration.host + resource_path
        if query_params:
            url += "?" + urlencode(query_params, quote_via=quote)
        headers = {**(header_params or {}), **self._headers}
        if body is not None and not isinstance(body, (str, bytes)):
            body = json.dumps(body).encode("utf-8")   # as the official client sends a JSON body
        return method, url, headers, body, None

    def call_api(self, method: str, url: str, header_params: dict[str, str] | None = None, body: Any = None,
                 _request_timeout: tuple[float, float] | float | None = None) -> _Response:
        import urllib3

        timeout: Any = None
        if isinstance(_request_timeout, tuple):
            timeout = urllib3.Timeout(connect=_request_timeout[0], read=_request_timeout[1])
        elif _request_timeout is not None:
            timeout = urllib3.Timeout(total=_request_timeout)
        # no retries here: Kube decides what may be sent again (cluster/retry.py)
        return _Response(self.rest_client.pool_manager.request(method, url, headers=header_params, body=body,
                                                               timeout=timeout, retries=False, redirect=False))


def from_kubeconfig(config: dict[str, Any], context: dict[str, Any], pool_size: int) -> RestClient | None:
    """A client for ``context`` of a merged kubeconfig (paths absolute), or None when it needs the official one."""
    cluster = _entry(config, "clusters", "cluster", context.get("cluster"))
    user = _entry(config, "users", "user", context.get("user")) if context.get("user") else {}
    if cluster is None or user is None or set(cluster) - CLUSTER_FIELDS or set(user) - USER_FIELDS:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        return None
    if cluster.get("insecure-skip-tls-verify") is True:
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode("ascii"))
    elif cluster.get("certificate-authority"):
        tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
    else:
        tls = ssl.create_default_context()
    if user.get("client-certificate-data") or user.get("client-certificate"):
        _load_pair(tls, user)
    headers: dict[str, str] = {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(user["tokenFile"], encoding="utf-8") as f:
            token = f.read().strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user.get("username") and user.get("password"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    if server.startswith("http://") and headers:
        return None   # credentials in clear text: leave that decision to the official client
    return RestClient(server, tls, headers, server_name=cluster.get("tls-server-name"), pool_size=pool_size)


def _entry(config: dict[str, Any], section: str, key: str, name: Any) -> dict[str, Any] | None:
    for item in config.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(key)
            return value if isinstance(value, dict) else {}
    return None


def _load_pair(tls: ssl.SSLContext, user: dict[str, Any]) -> None:
    """The client certificate and key, from files or inline data (written to private files only long enough to
    load them: the ssl module reads a key pair from files)."""
    import tempfile

    written: list[str] = []
    try:
        pair = []
        for data_key, file_key in (("client-certificate-data", "client-certificate"), ("client-key-data", "client-key")):
            if user.get(data_key):
                fd, path = tempfile.mkstemp(prefix="reconciler-tls-")   # mode 0600
                written.append(path)
                with os.fdopen(fd, "wb") as f:
                    f.write(base64.b64decode(user[data_key]))
                pair.append(path)
            else:
                pair.append(user.get(file_key))
        tls.load_cert_chain(pair[0], pair[1])
    finally:
        for path in written:
            os.unlink(path)
