"""Why an API server could not be reached, in words: never the HTTP library's own text.

The cause is looked for among the exceptions a failure was raised from (urllib3 keeps the socket's error as
``reason``): a refused connection, no answer in time, a host name that does not resolve, a TLS handshake
that fails. ``Kube.request`` says it in its error, and ``fleet status`` turns it into a row's reason.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

REFUSED, TIMEOUT, UNKNOWN_HOST, TLS, OTHER = "refused", "timeout", "unknown-host", "tls", "other"
WORDS = {REFUSED: "nothing accepts connections there (is the cluster running?)",
         TIMEOUT: "it did not answer in time (a firewall, or a cluster that is down?)",
         UNKNOWN_HOST: "its host name does not resolve (a typo in the kubeconfig, or a name known only inside "
                       "another network?)",
         TLS: "the TLS handshake failed: its certificate is not the one the kubeconfig trusts, or it is not a TLS "
              "server",
         OTHER: "the connection failed"}


def cause(exc: BaseException) -> str:
    """The kind of failure behind ``exc``: REFUSED, TIMEOUT, UNKNOWN_HOST, TLS or OTHER."""
    import urllib3

    found = causes(exc)
    for e in found:   # the socket's own error first: urllib3 files a refused connection under its timeouts
        if isinstance(e, (ssl.SSLError, urllib3.exceptions.SSLError)):
            return TLS
        if isinstance(e, socket.gaierror) or "Name or service not known" in str(e) or \
                "nodename nor servname" in str(e):
            return UNKNOWN_HOST
        if isinstance(e, ConnectionRefusedError) or "Connection refused" in str(e):
            return REFUSED
    for e in found:
        if isinstance(e, (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.ReadTimeoutError,
                          TimeoutError, socket.timeout)):
            return TIMEOUT
    return OTHER


def unreached(exc: BaseException) -> str:
    """Why the server behind ``exc`` was not reached, as a sentence."""
    return WORDS[cause(exc)]


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or wraps."""
    out: list[BaseException] = []
    todo: list[Any] = [exc]
    while todo and len(out) < 20:
        e = todo.pop()
        if not isinstance(e, BaseException) or any(e is o for o in out):
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]
    return out
