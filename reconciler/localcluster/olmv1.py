"""OLM v1 (catalogd and operator-controller) beside a local control plane, pinned by ``olmv1/`` and built by ``gobuild``.

Both commands are built from the pinned ``github.com/operator-framework/operator-controller``
module with the build tag of its own release build (``containers_image_openpgp``:
no cgo gpgme) and run as processes against the local API server, out of cluster,
with ``--kubeconfig``. Their CRDs (ClusterCatalog, ClusterExtension, the standard
set) come from the same module (``helm/olmv1/base/*/crd/standard``).

What running out of cluster takes, and how it is done here:

* Both commands read the ServiceAccount token at the fixed path
  ``/var/run/secrets/kubernetes.io/serviceaccount/token`` at start-up (only its
  subject is used: whose pull secrets to read) and exit without it. Each runs in
  a private mount namespace (``unshare --mount``; ``--user --map-root-user`` when
  not root) in which a tmpfs there holds a TokenRequest token of its own
  ServiceAccount in ``olmv1-system``; the host's own file, if any, is hidden.
* catalogd serves catalog content over HTTPS on ``127.0.0.1`` (``--catalogs-server-addr``),
  and ``--external-address`` makes ``status.urls.base`` point there; operator-controller
  trusts its CA with ``--catalogd-cas-dir``. Both trust registries signed by the same CA
  with ``--pull-cas-dir`` (an HTTPS registry on loopback).
* catalogd's mutating webhook (it labels ClusterCatalogs with their name) is registered
  with a ``url`` on 127.0.0.1. Its port has no host flag: it listens on every interface.
* ``--system-namespace`` is given (it would be read from the pod's namespace file),
  and both caches live in the working directory.

No image of OLM v1 is pulled and no pod of its own runs; kwok runs the pods of what it installs.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import kubernetes.client
from kubernetes.client.rest import ApiException

from reconciler import yamlio
from reconciler.errors import ControlPlaneError
from reconciler.localcluster.gobuild import GoTool, pinned, tail
from reconciler.localcluster.pki import LoopbackTls
from reconciler.localcluster.plane import _client_from, _die_with_parent, _free_ports, _prctl

MODULE_DIR = Path(__file__).with_name("olmv1")
MODULE = "github.com/operator-framework/operator-controller"
OLMV1_VERSION = pinned(MODULE_DIR, MODULE)
NAMESPACE = "olmv1-system"
GROUP = "olm.operatorframework.io"
_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_START_TIMEOUT = 60.0

TOOL = GoTool(
    label="olmv1", version=OLMV1_VERSION, module_dir=MODULE_DIR,
    packages=(f"{MODULE}/cmd/catalogd", f"{MODULE}/cmd/operator-controller"),
    outputs=("catalogd", "operator-controller"),
    tags=("containers_image_openpgp",),
    ldflags=("-s", "-w", f"-X {MODULE}/internal/shared/version.version={OLMV1_VERSION}"),
    module_files=((MODULE, "helm/olmv1/base/*/crd/standard/*.yaml", "crds"),),
)


@dataclass(frozen=True)
class Olmv1Binaries:
    """The two OLM v1 executables, the directory of their CRDs and the version they come from."""

    catalogd: Path
    operator_controller: Path
    crds: Path
    version: str


def ensure_olmv1(log: Callable[[str], object] = print) -> Olmv1Binaries:
    """The cached OLM v1 build, built first when missing."""
    paths = TOOL.ensure(log)
    return Olmv1Binaries(catalogd=paths["catalogd"], operator_controller=paths["operator-controller"],
                         crds=TOOL.files_dir("crds"), version=OLMV1_VERSION)


def olmv1_present() -> bool:
    """Whether the OLM v1 build for the current pin is in the cache (no build is started)."""
    return TOOL.present()


class Olmv1:
    """catalogd and operator-controller running against the API server of ``kubeconfig``; a context manager.

    ``tls`` serves catalogd's catalog server and webhook; its CA is the one both trust for
    catalogd and for image registries, so an HTTPS registry on loopback serves with the same certificate.
    """

    def __init__(self, binaries: Olmv1Binaries, kubeconfig: Path, workdir: Path, tls: LoopbackTls,
                 log: Callable[[str], object] = lambda _: None) -> None:
        self.binaries, self.kubeconfig, self.workdir, self.tls, self._log = binaries, kubeconfig, workdir, tls, log
        self._procs: dict[str, subprocess.Popen] = {}
        self.catalog_address = ""

    def __enter__(self) -> Olmv1:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, timeout: float = _START_TIMEOUT) -> Olmv1:
        """Install the CRDs, namespace and ServiceAccounts, then start catalogd (and its webhook), then
        operator-controller; wait until each answers its health probe."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            with _client_from(self.kubeconfig) as api:
                tokens = self._install(api, timeout)
                catalog, probe, metrics, webhook = _free_ports(4)
                self.catalog_address = f"127.0.0.1:{catalog}"
                cache = self._fresh_dir("catalogd-cache")
                self._launch("catalogd", tokens["catalogd"], [
                    str(self.binaries.catalogd), f"--kubeconfig={self.kubeconfig}", f"--system-namespace={NAMESPACE}",
                    f"--catalogs-server-addr={self.catalog_address}", f"--external-address={self.catalog_address}",
                    f"--health-probe-bind-address=127.0.0.1:{probe}", f"--metrics-bind-address=127.0.0.1:{metrics}",
                    f"--webhook-server-port={webhook}", f"--tls-cert={self.tls.cert}", f"--tls-key={self.tls.key}",
                    f"--pull-cas-dir={self.tls.ca_dir}", f"--cache-dir={cache}"])
                self._wait_healthy("catalogd", probe, timeout)
                self._register_webhook(api, webhook)
                probe = _free_ports(1)[0]
                cache = self._fresh_dir("operator-controller-cache")
                self._launch("operator-controller", tokens["operator-controller"], [
                    str(self.binaries.operator_controller), f"--kubeconfig={self.kubeconfig}",
                    f"--system-namespace={NAMESPACE}", f"--health-probe-bind-address=127.0.0.1:{probe}",
                    f"--catalogd-cas-dir={self.tls.ca_dir}", f"--pull-cas-dir={self.tls.ca_dir}",
                    f"--cache-path={cache}"])
                self._wait_healthy("operator-controller", probe, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds, in reverse start order; always reaped."""
        for name, proc in reversed(list(self._procs.items())):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            self._log(f"stopped {name} (exit {proc.returncode})")
        self._procs.clear()

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # -- start-up steps -------------------------------------------------------------------------------

    def _install(self, api: kubernetes.client.ApiClient, timeout: float) -> dict[str, Path]:
        """CRDs (waiting until established), the namespace, and a token file per command."""
        ext = kubernetes.client.ApiextensionsV1Api(api)
        names = []
        for path in sorted(self.binaries.crds.glob("*.yaml")):
            for crd in yamlio.read_all(path):
                _create(ext.create_custom_resource_definition, crd)
                names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + timeout
        for name in names:
            while not any(c.type == "Established" and c.status == "True"
                          for c in ext.read_custom_resource_definition(name).status.conditions or []):
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"OLM v1's CRD {name} was not established in {timeout:.0f}s")
                time.sleep(0.1)
        core = kubernetes.client.CoreV1Api(api)
        _create(core.create_namespace, {"metadata": {"name": NAMESPACE}})
        tokens = {}
        for name, account in (("catalogd", "catalogd-controller-manager"),
                              ("operator-controller", "operator-controller-controller-manager")):
            _create(core.create_namespaced_service_account, NAMESPACE, {"metadata": {"name": account}})
            token = core.create_namespaced_service_account_token(
                account, NAMESPACE, {"spec": {"expirationSeconds": 86400}}).status.token
            directory = self.workdir / f"serviceaccount-{name}"
            directory.mkdir(exist_ok=True)
            (directory / "token").write_text(token)
            (directory / "namespace").write_text(NAMESPACE)
            tokens[name] = directory
        return tokens

    def _register_webhook(self, api: kubernetes.client.ApiClient, port: int) -> None:
        webhook = {
            "metadata": {"name": "catalogd-mutating-webhook-configuration"},
            "webhooks": [{
                "name": "inject-metadata-name.olm.operatorframework.io", "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/mutate-olm-operatorframework-io-v1-clustercatalog",
                    "caBundle": base64.b64encode(self.tls.ca_cert.read_bytes()).decode()},
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": ["clustercatalogs"]}]}]}
        admission = kubernetes.client.AdmissionregistrationV1Api(api)
        try:
            admission.create_mutating_webhook_configuration(webhook)
        except ApiException as exc:
            if exc.status != 409:
                raise
            admission.replace_mutating_webhook_configuration(webhook["metadata"]["name"], webhook)

    def _fresh_dir(self, name: str) -> Path:
        path = self.workdir / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        return path

    def _launch(self, name: str, token_dir: Path, args: list[str]) -> None:
        self._log(f"starting {name}")
        with open(self.log_path(name), "ab") as out:
            self._procs[name] = subprocess.Popen(
                _with_service_account(token_dir, args), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=None if _prctl is None else _die_with_parent)

    def _wait_healthy(self, name: str, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self._procs[name]
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with code {proc.returncode} during start-up; "
                                        f"the end of {self.log_path(name)}:\n{tail(self.log_path(name))}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{name} did not become healthy in {timeout:.0f}s; "
                                        f"the end of {self.log_path(name)}:\n{tail(self.log_path(name))}")
            time.sleep(0.2)


def _with_service_account(token_dir: Path, args: list[str]) -> list[str]:
    """``args`` run in a private mount namespace where the ServiceAccount directory holds ``token_dir``'s files.

    A tmpfs goes over the deepest directory of that path which exists (on most hosts /run, where
    /var/run points), so nothing of the host is written and the host's own token, if any, is hidden.
    """
    target = Path(_SA_DIR)
    mount_point = next(p for p in (target, *target.parents) if p.exists())
    script = (f'set -e; mount -t tmpfs tmpfs "{os.path.realpath(mount_point)}"; mkdir -p "{_SA_DIR}"; '
              f'cp "{token_dir}/token" "{token_dir}/namespace" "{_SA_DIR}/"; exec "$@"')
    unshare = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        unshare[1:1] = ["--user", "--map-root-user"]
    return [*unshare, "--", "sh", "-c", script, "sh", *args]


def _create(call: Callable[..., object], *args: object) -> None:
    try:
        call(*args)
    except ApiException as exc:
        if exc.status != 409:
            raise
