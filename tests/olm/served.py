"""An aggregated API answered where its APIService sends the API server, as the operator's pod would answer it;
and an operator bundle that serves one, built from OLM's packageserver (``apiservice_bundle``).

kwok runs no container, so nothing listens behind a Service: an APIService
whose Service has no server stays ``Available=False``, OLM v0 keeps its CSV
``InstallWaiting`` ("apiServices not installed"), and discovery of its group
fails for every client. ``Served`` plays the pod's part for one APIService:
it listens on the Service's cluster IP and port (inside 127.0.100.0/24, so on
this machine: ``reconciler.localcluster.plane.SERVICE_CLUSTER_IP_RANGE``),
with the serving certificate OLM issued into the Secret the pod mounts, and
answers discovery of the group and version (and an empty list of each
resource). The API server's availability check and discovery go through it
as they would through the operator; nothing else is served.

The certificate is read once: whoever rotates it (OLM, or the reconciler
after a takeover) must keep what the pod was given, and a changed one makes
the API unavailable, which the tests see.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

import kubernetes.client
from kubernetes.client.rest import ApiException

from reconciler.localcluster import olmv0
from tests.olm.support import write_bundle

PACKAGES = "packages.operators.coreos.com"   # the packageserver's API group


class Served:
    """``with Served(api, "v1.packages.example.com", resources):`` serves that APIService until the block ends;
    ``resources`` are (plural, kind, namespaced) of its group and version, as its CSV lists them."""

    def __init__(self, api, name: str, resources: list[tuple[str, str, bool]]) -> None:
        self.api, self.name, self.resources = api, name, resources
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="served-")

    def ready(self) -> bool:
        """Whether the APIService, its Service and the serving Secret OLM made for it are there (then it starts
        serving at once)."""
        if self._server is not None:
            return True
        try:
            spec = kubernetes.client.ApiregistrationV1Api(self.api).read_api_service(self.name).spec
            ref = spec.service
            service = kubernetes.client.CoreV1Api(self.api).read_namespaced_service(ref.name, ref.namespace)
            secret = kubernetes.client.CoreV1Api(self.api).read_namespaced_secret(f"{ref.name}-cert", ref.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        if not (secret.data or {}).get("tls.crt") or not service.spec.cluster_ip:
            return False
        cert, key = Path(self._dir.name) / "tls.crt", Path(self._dir.name) / "tls.key"
        cert.write_bytes(base64.b64decode(secret.data["tls.crt"]))
        key.write_bytes(base64.b64decode(secret.data["tls.key"]))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._start((service.spec.cluster_ip, int(ref.port or 443)), context, spec.group, spec.version)
        return True

    def _start(self, address: tuple[str, int], context: ssl.SSLContext, group: str, version: str) -> None:
        resources = self.resources
        documents = _discovery(group, version, resources)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:   # noqa: N802 (http.server's name)
                path = self.path.split("?")[0].rstrip("/")
                body = documents.get(path) or _empty_list(path, group, version, resources)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "application/json")
                data = json.dumps(body or {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                           "reason": "NotFound", "code": 404}).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(address, Handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=f"served-{self.name}", daemon=True)
        self._thread.start()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._dir.cleanup()


def _discovery(group: str, version: str, resources: list[tuple[str, str, bool]]) -> dict[str, dict]:
    group_version = f"{group}/{version}"
    listed = {"groupVersion": group_version, "version": version}
    return {
        f"/apis/{group}/{version}": {
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                           "verbs": ["get", "list"]} for plural, kind, namespaced in resources]},
        f"/apis/{group}": {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [listed],
                           "preferredVersion": listed},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1",
                  "groups": [{"name": group, "versions": [listed], "preferredVersion": listed}]},
        "/healthz": {"status": "ok"}, "/readyz": {"status": "ok"},
    }


def _empty_list(path: str, group: str, version: str, resources: list[tuple[str, str, bool]]) -> dict | None:
    """An empty list for a list of one of the resources (cluster-wide or in a namespace), else None."""
    parts = path.split("/")
    if parts[:4] != ["", "apis", group, version]:
        return None
    rest = parts[4:]
    plural = rest[-1] if len(rest) in (1, 3) and (len(rest) == 1 or rest[0] == "namespaces") else None
    for name, kind, _ in resources:
        if name == plural:
            return {"kind": f"{kind}List", "apiVersion": f"{group}/{version}", "metadata": {}, "items": []}
    return None


class Unserved(threading.Thread):
    """``with Unserved(plane, names) as watch:`` reads the APIServices ``names`` every 0.1 s while the block runs;
    ``watch.seen``: each (time, name, why) one was absent or not Available."""

    def __init__(self, plane, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.plane, self.names = plane, names
        self.seen: list[tuple[float, str, str]] = []
        self.done = threading.Event()

    def run(self) -> None:
        with self.plane.admin_client() as api:
            registration = kubernetes.client.ApiregistrationV1Api(api)
            while not self.done.wait(0.1):
                for name in self.names:
                    try:
                        status = registration.read_api_service(name).status
                    except ApiException as exc:
                        if exc.status != 404:
                            raise
                        self.seen.append((time.time(), name, "absent"))
                        continue
                    available = [c for c in status.conditions or [] if c.type == "Available"]
                    if not available or available[0].status != "True":
                        self.seen.append((time.time(), name, available[0].message if available else "no condition"))

    def __enter__(self) -> Unserved:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def apiservice_bundle(olm: olmv0.OlmBinaries, directory: Path, package: str, group: str) -> Path:
    """``directory/package/<version>``: a registry+v1 bundle of OLM's packageserver CSV as its quickstart ships it
    (``olmv0.packageserver``), made an install. The corpus has no bundle that serves an APIService, and this is
    the one real CSV at hand that does. OLM's platform label and namespace come off; it is named ``package``
    (its Deployment too: OLM names an APIService's Service, and the RoleBinding and ClusterRoleBinding it makes
    for it, after the Deployment alone, so two CSVs serving from one Deployment name fight over them, OLM itself
    too); its API group, and the rules naming it, become ``group``, so it claims nothing of OLM's own. Its pod,
    permissions, install modes and containerPort are as they are."""
    csv = copy.deepcopy(next(d for d in olmv0.packageserver(olm) if d["kind"] == "ClusterServiceVersion"))
    version = csv["spec"]["version"]
    csv["metadata"] = {"name": f"{package}.v{version}"}
    for api in csv["spec"]["apiservicedefinitions"]["owned"]:
        api["group"], api["deploymentName"] = group, package
    (deployment,) = csv["spec"]["install"]["spec"]["deployments"]
    deployment["name"] = package
    for permission in csv["spec"]["install"]["spec"].get("clusterPermissions") or []:
        for rule in permission["rules"]:
            rule["apiGroups"] = [group if g == PACKAGES else g for g in rule["apiGroups"]]
    return write_bundle(directory / package / version, package,
                        {f"{package}.clusterserviceversion.yaml": csv})
