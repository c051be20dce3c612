"""A plain-HTTP proxy on loopback in front of the real API server that injects faults on request.

Like ``kubectl proxy``, it authenticates to the apiserver with the admin
client certificate and serves plain HTTP, so a client pointed at it talks to
the real API. A test arms faults (answer 429 or 503 instead of forwarding,
drop the connection before forwarding, or forward and then drop it) for the
next matching requests; everything is recorded so the test can see what the
client sent.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import yaml


@dataclass
class Fault:
    method: str
    path: str  # a substring of the request path
    kind: str  # "429", "503", "500", "drop-before", "drop-after"
    times: int = 1
    retry_after: str | None = None


class FaultProxy:
    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self._dir = tempfile.TemporaryDirectory(prefix="faultproxy-")
        cert, key = Path(self._dir.name, "client.crt"), Path(self._dir.name, "client.key")
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self.context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.context.load_cert_chain(cert, key)
        target = urlsplit(cluster["server"])
        self.upstream = (target.hostname, target.port)
        self.faults: list[Fault] = []
        self._outage: tuple[Callable[[str, str], bool], Callable[[], None]] | None = None
        self.down = threading.Event()
        self.log: list[tuple[str, str, str]] = []  # (method, path, what the proxy did)
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"proxy": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def arm(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)
            self.log.clear()

    def outage_after(self, trigger: Callable[[str, str], bool], action: Callable[[], None]) -> None:
        """After forwarding the first request ``trigger(method, path)`` accepts, run ``action`` (e.g. stop the
        API server), answer that request, and stop listening: later connections are refused, as by a server
        that is gone. The client's request waits meanwhile, so the outage falls at that exact point."""
        with self.lock:
            self._outage = (trigger, action)

    def _outage_now(self, method: str, path: str) -> Callable[[], None] | None:
        with self.lock:
            if self._outage is None or self.down.is_set() or not self._outage[0](method, path):
                return None
            self.down.set()
            return self._outage[1]

    def _stop_listening(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def seen(self, method: str, path: str) -> list[str]:
        """What happened to each matching request, in order."""
        return [what for m, p, what in self.log if m == method and path in p]

    def _take(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.method == method and fault.path in path and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._dir.cleanup()


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _handle(self) -> None:
        proxy = self.proxy
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = proxy._take(self.command, self.path)
        kind = fault.kind if fault else "forwarded"
        with proxy.lock:
            proxy.log.append((self.command, self.path, kind))
        if kind in ("429", "503", "500"):
            text = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests",' \
                   b'"message":"injected","code":' + kind.encode() + b"}"
            self.send_response(int(kind))
            if fault.retry_after is not None:
                self.send_header("Retry-After", fault.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        if kind == "drop-before":
            self._drop()
            return
        if proxy.down.is_set() and proxy._outage is not None:
            self._drop()  # a connection kept alive from before the outage
            return
        conn = http.client.HTTPSConnection(*proxy.upstream, context=proxy.context, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError:
            self._drop()  # the upstream is gone
            return
        finally:
            conn.close()
        if kind == "drop-after":
            self._drop()
            return
        outage = proxy._outage_now(self.command, self.path)
        if outage is not None:
            outage()
            self.close_connection = True
            threading.Thread(target=proxy._stop_listening, daemon=True).start()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if outage is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle
