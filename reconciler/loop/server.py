"""The loop's HTTP endpoints: ``/healthz``, ``/readyz``, ``/metrics`` and the push webhook ``/hook``.

Standard library HTTP server on its own threads: the endpoints are tiny and
must answer while a reconcile is running. Metrics are rendered by
prometheus-client from the loop's registry.

``/hook`` only triggers a reconcile; it never carries desired state, so the
payload is not parsed. It is accepted when it is signed with the shared
secret, as GitHub (``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>``,
or the legacy ``X-Hub-Signature: sha1=<HMAC-SHA1>``), Bitbucket Cloud and
Bitbucket Data Center (``X-Hub-Signature: sha256=...``) and Gitea/Forgejo
(``X-Gitea-Signature``, bare hex) do, or when it carries the secret as
GitLab's ``X-Gitlab-Token``. Comparisons are constant-time, and the body is
bounded. On a standby replica (leader election) the hook is recorded for the
leader through ``loop/relay.py`` instead of being dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reconciler.errors import InputError

if TYPE_CHECKING:
    from reconciler.loop.runner import Loop
    from reconciler.loop.relay import HookRelay

log = logging.getLogger("reconciler.server")
MAX_HOOK_BODY = 10 * 1024 * 1024


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


_DIGESTS = {"sha256": hashlib.sha256, "sha1": hashlib.sha1}


def verify(secret: bytes, body: bytes, headers: dict[str, str]) -> bool:
    sig = (headers.get("x-hub-signature-256") or headers.get("x-gitea-signature")
           or headers.get("x-hub-signature") or "").strip()
    if sig:
        algorithm, sep, digest = sig.partition("=")
        if not sep:
            algorithm, digest = "sha256", sig  # Gitea sends the bare hex digest
        if algorithm not in _DIGESTS:
            return False
        expected = hmac.new(secret, body, _DIGESTS[algorithm]).hexdigest()
        return hmac.compare_digest(digest.lower().encode(), expected.encode())
    token = headers.get("x-gitlab-token")
    if token is not None:
        return hmac.compare_digest(token.encode(), secret)
    return False


class Server:
    """Serves the endpoints on ``host:port`` (port 0 picks a free one) until ``stop()``."""

    def __init__(self, loop: Loop, host: str = "0.0.0.0", port: int = 8080, hook_secret: bytes | None = None,
                 relay: HookRelay | None = None) -> None:
        self.loop = loop
        self.hook_secret = hook_secret
        self.relay = relay
        handler = type("Handler", (_Handler,), {"server_ref": self})
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:   # the port taken, the address not this host's, or a privileged port
            raise InputError(f"cannot listen on {host or '0.0.0.0'}:{port} (--listen): {exc.strerror or exc}",
                             hint="another process may hold the port (`ss -ltnp` shows which); choose another "
                                  "with --listen HOST:PORT, or stop that process") from None
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    server_ref: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        loop = self.server_ref.loop
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            ok = loop.running and not loop.stopping
            self._send(200 if ok else 503, b"ok\n" if ok else b"stopping\n")
        elif path == "/readyz":
            last = loop.last
            retry = loop.retry_in
            body = {"ready": loop.ready, "leader": loop.elector.leading if loop.elector else None,
                    "applied": loop.applied_revision,
                    "last": {"outcome": last.outcome, "revision": last.revision, "error": last.error} if last else None,
                    "failures": loop.failures, "retryInSeconds": round(retry, 1) if retry is not None else None}
            self._send(200 if loop.ready else 503, json.dumps(body).encode() + b"\n", "application/json")
        elif path == "/metrics":
            self._send(200, generate_latest(loop.metrics.registry), CONTENT_TYPE_LATEST)
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != "/hook":
            self._send(404, b"not found\n")
            return
        secret = self.server_ref.hook_secret
        if secret is None:
            self._send(404, b"the webhook is not enabled (no secret configured)\n")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, b"Content-Length required\n")
            return
        if length < 0 or length > MAX_HOOK_BODY:
            self._send(413, b"payload too large\n")
            self.close_connection = True
            return
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if not verify(secret, body, headers):
            log.warning("webhook from %s refused: bad or missing signature", self.address_string())
            self._send(401, b"bad or missing signature\n")
            return
        event = (headers.get("x-github-event") or headers.get("x-gitlab-event") or headers.get("x-gitea-event")
                 or headers.get("x-event-key") or "push")[:64]
        loop, relay = self.server_ref.loop, self.server_ref.relay
        if relay is not None and loop.elector is not None and not loop.elector.leading:
            from reconciler.errors import ClusterError

            try:
                request = relay.record(event)
            except ClusterError as exc:
                log.error("webhook %s: cannot record it for the leader: %s", event, exc.message)
                self._send(503, b"this replica is not the leader and cannot pass the hook on; retry\n")
                return
            log.info("webhook %s recorded for the leader as %s", event, request)
            self._send(202, b"recorded for the leader\n")
            return
        loop.trigger(f"webhook {event}")
        self._send(202, b"reconcile triggered\n")
