"""How ``Kube`` reaches an API server: one small interface, ``Transport``, and its two implementations.

``Kube`` asks a transport to ``send`` one request (method, path, query, headers, body, timeout) and reads
the ``Response`` (status, body, headers); retries, errors, discovery and paging are ``Kube``'s.

* ``RestClient`` speaks HTTP over urllib3 alone, for a kubeconfig whose cluster is a server, a CA and TLS
  options, and whose user is a client certificate, a bearer token (or token file) or a user name and
  password (``from_kubeconfig``). Importing the official client costs a short command a fifth of a second
  (its API classes, its models and pydantic), which this avoids.
* ``OfficialClient`` sends through the official client's ``ApiClient`` (its ``param_serialize`` and
  ``call_api``, which fill in its authentication), for everything else: exec plugins, auth-provider
  plugins, proxies, impersonation in the kubeconfig, and a pod's service account, whose rotating token it
  re-reads. Every auth method the official client supports still works.

Both keep a connection pool wide enough for every worker of ``Kube`` (no connection is thrown away).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode

CLUSTER_FIELDS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                            "insecure-skip-tls-verify", "tls-server-name", "extensions"})
USER_FIELDS = frozenset({"client-certificate", "client-certificate-data", "client-key", "client-key-data",
                         "token", "tokenFile", "username", "password", "extensions"})

Query = list[tuple[str, str]]
Timeout = tuple[float, float]   # (connect, read) seconds


@dataclass(frozen=True)
class Response:
    """What a transport returns: the status, the body, and a header lookup (case-insensitive)."""

    status: int
    data: bytes
    header: Callable[[str], str | None]


class Transport(Protocol):
    """One API server, reached with one identity.

    ``send``'s ``body`` is bytes or text sent as given, or, for a JSON content type, an object the transport
    encodes as JSON. Only failures to reach the server raise (urllib3's errors); any status is a response.
    """

    host: str

    def send(self, method: str, path: str, *, query: Query, headers: dict[str, str], body: Any,
             timeout: Timeout) -> Response: ...


class RestClient:
    """A ``Transport`` over urllib3 with the kubeconfig's TLS and credentials."""

    def __init__(self, host: str, context: ssl.SSLContext, headers: dict[str, str], *, server_name: str | None = None,
                 pool_size: int = 8) -> None:
        import urllib3

        kw: dict[str, Any] = {"ssl_context": context} if host.startswith("https:") else {}
        if server_name:
            kw["server_hostname"] = server_name
        self.host = host.rstrip("/")
        self._pool = urllib3.PoolManager(num_pools=4, maxsize=pool_size, **kw)
        self._headers = headers

    def send(self, method: str, path: str, *, query: Query, headers: dict[str, str], body: Any,
             timeout: Timeout) -> Response:
        import urllib3

        url = self.host + path
        if query:
            url += "?" + urlencode(query, quote_via=quote)
        if body is not None and not isinstance(body, (str, bytes)):
            body = json.dumps(body).encode("utf-8")   # as the official client sends a JSON body
        # no retries here: Kube decides what may be sent again (kube/retry.py)
        raw = self._pool.request(method, url, headers={**headers, **self._headers}, body=body,
                                 timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]), retries=False,
                                 redirect=False)
        return Response(raw.status, raw.data or b"", raw.headers.get)


class OfficialClient:
    """A ``Transport`` over the official client's ``ApiClient`` (any kubeconfig it reads, or a pod's service
    account). A client whose pool is narrower than ``pool_size`` is replaced by one built from a copy of its
    configuration with a wide enough pool; the caller's is left as it was."""

    def __init__(self, api: Any, pool_size: int) -> None:
        if (api.configuration.connection_pool_maxsize or 1) < pool_size:
            from kubernetes import client as k8s_client

            configuration = copy.deepcopy(api.configuration)
            configuration.connection_pool_maxsize = pool_size
            api = k8s_client.ApiClient(configuration)
        self.api = api
        self.host = api.configuration.host

    def send(self, method: str, path: str, *, query: Query, headers: dict[str, str], body: Any,
             timeout: Timeout) -> Response:
        _, url, headers, body, _ = self.api.param_serialize(method, path, query_params=query, header_params=headers,
                                                            body=body, auth_settings=["BearerToken"])
        raw = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
        data = raw.read()
        return Response(raw.status, data if isinstance(data, bytes) else (data or "").encode("utf-8"),
                        lambda name: raw.getheader(name))


def transport(api: Any, pool_size: int) -> Transport:
    """``api`` as a transport: a ``RestClient`` (or any transport) as it is, an official ``ApiClient`` wrapped."""
    return api if callable(getattr(api, "send", None)) and hasattr(api, "host") else OfficialClient(api, pool_size)


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
