"""Run a small Kubernetes cluster as local processes and hand out clients for it.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as in a
real cluster; kwok plays the kubelet for a few simulated nodes. So objects are
stored, validated, admitted and authorised exactly as in a real cluster, and
workloads behave like workloads: Deployments are scheduled and their pods
become Running and Ready (no container runs: kwok writes the pod status),
ReplicaSets, EndpointSlices and ServiceAccounts are maintained, namespaces
finish deleting and owner references cascade. A pod that cannot be scheduled
(e.g. a nodeSelector no node matches) stays Pending, which is how tests
exercise unhealthy workloads.

Each process runs in its own session (process group) with stdout and stderr in
a log file in the state directory; errors quote the tail of that log. Ports
are picked free on 127.0.0.1 just before launch; if another process grabs one
in between, the start is retried on new ports.

All state lives in one directory, described by ``state.json`` (pids, ports,
binaries), so that another process can find and stop a detached cluster.

On request (``olm=``, or ``start_olm`` on a running plane) OLM v0's
olm-operator and catalog-operator run beside them as two more processes of
the plane (``olmv0``): recorded, watched and stopped as the others are.
"""

from __future__ import annotations

import base64
import ctypes
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import kubernetes.client
import kubernetes.config
import yaml
from kubernetes.client.rest import ApiException

from reconciler.errors import ControlPlaneError

from . import olmv0
from .build import Binaries, ensure_binaries, tail
from .olmv0 import OlmBinaries
from .pki import Pki, create_pki, issue_client_cert, slug

ADMIN_USER = "reconciler-admin"
# Inside loopback: when the API server calls an admission webhook or an
# aggregated APIService through its Service's cluster IP, that address must
# never leave the machine (10.0.0.0/24 would be routed off it).
SERVICE_CLUSTER_IP_RANGE = "127.0.100.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
# Pod addresses kwok hands out. Only data: nothing dials a pod (webhooks and
# APIServices are called through their Service's loopback cluster IP), and
# loopback itself is refused in EndpointSlices, so an address range reserved
# for benchmarking networks (RFC 2544) is used.
CLUSTER_CIDR = "198.18.0.0/16"
# The simulated nodes: enough for spreading and anti-affinity, cheap to keep alive.
NODE_COUNT = 3
NODE_PREFIX = "kwok-node-"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Stages beside kwok's defaults: how a pod annotated reconciler.dev/simulate fails (docs/health.md).
SIMULATED_FAILURES = Path(__file__).with_name("simulated-failures.yaml")

_ETCD, _APISERVER = "etcd", "kube-apiserver"
_CONTROLLER_MANAGER, _SCHEDULER, _KWOK = "kube-controller-manager", "kube-scheduler", "kwok"
_PROCESSES = (_ETCD, _APISERVER, _CONTROLLER_MANAGER, _SCHEDULER, _KWOK)   # in start order
_CATALOG_OPERATOR, _OLM_OPERATOR = "catalog-operator", "olm-operator"
_OLM_PROCESSES = (_CATALOG_OPERATOR, _OLM_OPERATOR)                          # started after the others, on request
_STATE_FILE = "state.json"
_CATALOG_PREFIX = "opm-serve-"   # not "catalog-": catalog-operator is one of OLM's processes
_ADMIN_KUBECONFIG = "admin.kubeconfig"
_KWOK_CONFIG = "kwok.yaml"
# The API server's audit log records every request of deploy/'s ServiceAccount (and nobody else's): what the
# in-cluster deployment actually does with its RBAC (tests/incluster derive deploy/'s rules from it).
DEPLOYED_USER = "system:serviceaccount:reconciler-system:reconciler"
_AUDIT_POLICY, _AUDIT_LOG = "audit-policy.yaml", "audit.log"
# Everything start() creates in the state directory; reset() removes exactly these,
# the state file first so that an interrupted reset leaves no record pointing at nothing.
_CATALOGS = "catalogs"   # the catalogs served to OLM (``serve_catalog``): opm-serve-NAME processes, their files
_OWNED = (_STATE_FILE, "pki", "etcd-data", "kubeconfigs", _CATALOGS,
          *(f"{name}.log" for name in _PROCESSES + _OLM_PROCESSES),
          _ADMIN_KUBECONFIG, _KWOK_CONFIG, _AUDIT_POLICY, _AUDIT_LOG)
_PORT_ATTEMPTS = 3
_OLM_TIMEOUT = 120.0   # for OLM's CRDs and its first act, beyond the rest of the plane's start-up
_POLL = 0.1
_PR_SET_PDEATHSIG = 1
# Looked up now: between fork and exec the child must not load libraries.
_prctl = ctypes.CDLL(None).prctl if sys.platform == "linux" else None
_PROCFS = Path("/proc/self/cmdline").exists()


class _PortTaken(Exception):
    """A process lost the race for a port picked free a moment earlier."""


class ControlPlane:
    """etcd, kube-apiserver, controller-manager, scheduler and kwok on loopback, with an admin kubeconfig.

    ``detached=False`` (tests) ties the processes to the calling thread: on
    Linux they get SIGKILL if it dies, so even a killed test run leaves
    nothing behind. Start it from a thread that outlives the cluster.
    ``detached=True`` (the CLI) lets them outlive the process that started
    them; ``ControlPlane.attach`` finds them again.
    """

    def __init__(self, state_dir: Path | str | None = None, binaries: Binaries | None = None, *,
                 detached: bool = False, log: Callable[[str], object] = lambda _: None,
                 olm: OlmBinaries | None = None, olm_interval: float | None = None, openshift: bool = False) -> None:
        self._owns_state_dir = state_dir is None
        self.olm_interval = olm_interval   # seconds between OLM's full resyncs; None: OLM's defaults (5 and 15 min)
        # OLM laid out as OpenShift lays it out (``olmv0.install``): its global catalog namespace (catalog-operator's
        # --namespace, where served catalogs go) is openshift-marketplace, and openshift-operators is there
        self.openshift = openshift
        self.state_dir = Path(tempfile.mkdtemp(prefix="reconciler-cluster-") if state_dir is None
                              else state_dir).resolve()
        self._binaries = binaries
        self._olm = olm
        self._detached = detached
        self._log = log
        self._procs: dict[str, subprocess.Popen] = {}
        self.pids: dict[str, int] = {}
        self.ports: dict[str, int] = {}
        self.served: dict[str, dict[str, str]] = {}   # catalog name -> its opm, address, source directory

    @classmethod
    def attach(cls, state_dir: Path | str, log: Callable[[str], object] = lambda _: None) -> ControlPlane:
        """The control plane described by ``state_dir/state.json``, possibly started elsewhere."""
        state_dir = Path(state_dir)
        try:
            state = json.loads((state_dir / _STATE_FILE).read_text())
        except FileNotFoundError:
            raise ControlPlaneError(f"no control plane state in {state_dir}",
                                    hint="run `reconciler cluster up`") from None
        except ValueError as exc:
            raise ControlPlaneError(f"{state_dir / _STATE_FILE} is corrupt: {exc}",
                                    hint="run `reconciler cluster down` to clear it") from None
        try:
            binaries = Binaries(**{k: Path(v) if k != "version" else v for k, v in state["binaries"].items()})
        except TypeError:
            raise ControlPlaneError(f"{state_dir / _STATE_FILE} was written by another version of the reconciler",
                                    hint="run `reconciler cluster down`, then `reconciler cluster up`") from None
        olm = state.get("olm")
        plane = cls(state_dir, binaries, detached=True, log=log,
                    olm=OlmBinaries(**{k: Path(v) if k != "version" else v for k, v in olm.items()}) if olm else None,
                    olm_interval=state.get("olmInterval"), openshift=bool(state.get("openshift")))
        plane.pids, plane.ports = state["pids"], state["ports"]
        plane.served = state.get("catalogs") or {}
        return plane

    # -- addresses -------------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports[_APISERVER]}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / _ADMIN_KUBECONFIG

    @property
    def audit_log(self) -> Path:
        """JSON lines, one audit event (level Metadata) per request of deploy/'s ServiceAccount."""
        return self.state_dir / _AUDIT_LOG

    @property
    def version(self) -> str:
        return self._binaries.version if self._binaries else ""

    @property
    def olm_catalog_namespace(self) -> str:
        """OLM's global catalog namespace, where ``serve_catalog`` registers its CatalogSources."""
        return olmv0.OPENSHIFT_CATALOGS if self.openshift else olmv0.NAMESPACE

    @property
    def olm_version(self) -> str:
        """The version of OLM v0 this plane runs, or "" when it runs none."""
        return self._olm.version if self._olm else ""

    @property
    def _pki(self) -> Pki:
        return Pki(self.state_dir / "pki")

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> ControlPlane:
        """Start every process on fresh state; wait until the API serves and the nodes are Ready."""
        if self.pids:
            raise ControlPlaneError(f"the control plane in {self.state_dir} is already started")
        if self._binaries is None:
            self._binaries = ensure_binaries(self._log)
        deadline = time.monotonic() + timeout
        for attempt in itertools.count(1):
            self.reset()
            self.state_dir.mkdir(parents=True, exist_ok=True)
            create_pki(self._pki.directory)
            self.ports = dict(zip(("etcd-client", "etcd-peer", _APISERVER, _CONTROLLER_MANAGER, _SCHEDULER),
                                  _free_ports(5)))
            self.write_kubeconfig(self.kubeconfig_path, ADMIN_USER, ["system:masters"])
            try:
                self._launch(_ETCD, self._etcd_args())
                self._wait(_ETCD, self._etcd_healthy, deadline)
                self._launch(_APISERVER, self._apiserver_args())
                self._wait(_APISERVER, self._apiserver_ready, deadline)
                self._wait(_APISERVER, self._default_namespace_exists, deadline)
                # The other three only talk to the API server: start them together.
                self._launch(_CONTROLLER_MANAGER, self._controller_manager_args())
                self._launch(_SCHEDULER, self._scheduler_args())
                self._launch(_KWOK, self._kwok_args())
                self._create_nodes()
                self._wait(_KWOK, self._nodes_ready, deadline)
                self._wait(_CONTROLLER_MANAGER, self._default_service_account_exists, deadline)
                if self._olm is not None:
                    self._start_olm(time.monotonic() + _OLM_TIMEOUT)
            except _PortTaken:
                self._terminate_all()
                if attempt == _PORT_ATTEMPTS:
                    raise ControlPlaneError(
                        f"could not find free ports after {attempt} attempts") from None
                self._log("a port was taken by another process; retrying on new ports")
                continue
            except BaseException:
                self._terminate_all()
                raise
            self._log(f"control plane {self.version} ready at {self.server}")
            return self

    def start_olm(self, olm: OlmBinaries, timeout: float = _OLM_TIMEOUT) -> None:
        """Add OLM v0 to this running plane (its CRDs, namespace and two operators); wait until it acts."""
        if self._olm is not None and all(self._alive(name) for name in _OLM_PROCESSES):
            raise ControlPlaneError(f"OLM {self._olm.version} already runs on the control plane in {self.state_dir}")
        self._olm = olm
        try:
            self._start_olm(time.monotonic() + timeout)
        except BaseException:
            for name in _OLM_PROCESSES:
                if name in self.pids:
                    self._terminate(name, 10.0)
                    del self.pids[name]
                    self._procs.pop(name, None)
            self._olm = None
            self._write_state()
            raise

    def _start_olm(self, deadline: float) -> None:
        self._log(f"installing OLM {self._olm.version}'s CRDs")
        with self.admin_client() as api:
            olmv0.install(api, self._olm, timeout=max(deadline - time.monotonic(), 1.0), openshift=self.openshift)
            kubeconfig = self.write_kubeconfig(self._kubeconfigs_dir() / "olm.kubeconfig", "system:olm",
                                               ["system:masters"])
            self._launch(_CATALOG_OPERATOR, olmv0.catalog_operator_args(self._olm, kubeconfig, self.olm_interval,
                                                                       self.olm_catalog_namespace))
            self._launch(_OLM_OPERATOR, olmv0.olm_operator_args(self._olm, self.olm_interval),
                         olmv0.olm_operator_env(kubeconfig))
            self._wait(_OLM_OPERATOR, lambda: olmv0.olm_operator_acted(api), deadline)
        self._log(f"OLM {self._olm.version} is running (namespace {olmv0.NAMESPACE}"
                  + (f"; laid out as OpenShift: catalogs in {olmv0.OPENSHIFT_CATALOGS}, {olmv0.OPENSHIFT_OPERATORS} "
                     f"under OperatorGroup {olmv0.GLOBAL_GROUP}" if self.openshift else "") + ")")

    def serve_catalog(self, catalog_dir: Path, opm: Path, timeout: float = 60.0) -> dict[str, str]:
        """Serve the repository catalog in ``catalog_dir`` to OLM: rendered for it (``catalogs.py``), by ``opm
        serve`` on loopback as a process of the plane, registered as the CatalogSource named after the catalog
        in OLM's namespace. Serving a catalog of that name again replaces it. Returns what it serves."""
        from reconciler.localcluster import catalogs
        from reconciler.model.kube import is_dns1123_label

        if self._olm is None:
            raise ControlPlaneError("--serve-catalog serves a catalog to OLM, and the local cluster runs no OLM",
                                    hint="add --with-olm")
        name = catalog_dir.resolve().name
        if not is_dns1123_label(name):
            raise ControlPlaneError(f"catalog {name!r} cannot name a CatalogSource (lowercase letters, digits "
                                    f"and '-')", path=str(catalog_dir), hint="rename the catalog's directory")
        process = f"{_CATALOG_PREFIX}{name}"
        files = self.state_dir / _CATALOGS / name
        bundles = catalogs.write_for_olm(catalog_dir, files / "catalog", self._log)
        if process in self.pids:   # the catalog's content may have changed: served anew
            self._terminate(process, 10.0)
            del self.pids[process]
            self._procs.pop(process, None)
        (files / "tmp").mkdir(parents=True, exist_ok=True)
        log = self.state_dir / f"{process}.log"
        for attempt in itertools.count(1):
            (port,) = _free_ports(1)
            address = f"127.0.0.1:{port}"
            self.served[name] = {"opm": str(opm), "address": address, "source": str(catalog_dir.resolve())}
            # opm listens on the port of every interface (it has no host flag); its profiling port is off, and
            # its cache and termination log stay in the state directory.
            self._launch(process, [str(opm), "serve", str(files / "catalog"), "-p", str(port), "--pprof-addr=",
                                   "-t", str(files / "termination.log")], {"TMPDIR": str(files / "tmp")})
            try:
                self._wait(process, lambda: b"serving registry" in log.read_bytes(), time.monotonic() + timeout)
                break
            except _PortTaken:
                self._procs.pop(process, None)
                del self.pids[process]
                if attempt == _PORT_ATTEMPTS:
                    raise ControlPlaneError(f"could not find a free port for catalog {name}") from None
        with self.admin_client() as api:
            source = catalogs.catalog_source(name, self.olm_catalog_namespace, address, str(catalog_dir))
            objects = kubernetes.client.CustomObjectsApi(api)
            try:
                objects.create_namespaced_custom_object(olmv0.CRD_GROUP, "v1alpha1", self.olm_catalog_namespace,
                                                        "catalogsources", source, _preload_content=False)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                objects.patch_namespaced_custom_object(olmv0.CRD_GROUP, "v1alpha1", self.olm_catalog_namespace,
                                                       "catalogsources", name, source, _preload_content=False)
        self._log(f"serving catalog {name} ({catalog_dir}, {bundles} bundle{'' if bundles == 1 else 's'} with "
                  f"their objects inline) to OLM as CatalogSource {self.olm_catalog_namespace}/{name} at {address}")
        self._write_state()
        return self.served[name]

    def stop(self, grace: float = 10.0) -> None:
        """Terminate both processes (SIGTERM, SIGKILL after ``grace`` seconds) and wait for them."""
        self._terminate_all(grace)
        if self._owns_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def stop_apiserver(self, grace: float = 10.0) -> None:
        """Stop kube-apiserver alone, as an outage or an upgrade of the API server would; etcd keeps the state."""
        self._terminate(_APISERVER, grace)

    def start_apiserver(self, timeout: float = 90.0) -> None:
        """Start kube-apiserver again on its port and state, after ``stop_apiserver``; wait until it is ready."""
        if self._alive(_APISERVER):
            raise ControlPlaneError("kube-apiserver is already running")
        self._launch(_APISERVER, self._apiserver_args())
        self._wait(_APISERVER, self._apiserver_ready, time.monotonic() + timeout)

    def reset(self) -> None:
        """Remove everything start() writes to the state directory, and nothing else."""
        for log in self.state_dir.glob(f"{_CATALOG_PREFIX}*.log") if self.state_dir.is_dir() else ():
            log.unlink(missing_ok=True)
        for name in _OWNED:
            path = self.state_dir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def running(self) -> bool:
        """True if every recorded process is alive (and is still the binary started)."""
        return bool(self.pids) and all(self._alive(name) for name in self._names())

    def _names(self) -> tuple[str, ...]:
        """The processes this plane runs, in start order."""
        return _PROCESSES + (_OLM_PROCESSES if self._olm is not None else ())

    def healthy(self) -> bool:
        """True if every process is alive and the apiserver reports ready."""
        return self.running() and self._apiserver_ready()

    def __enter__(self) -> ControlPlane:
        return self if self.pids else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- clients -----------------------------------------------------------------------------

    def admin_client(self) -> kubernetes.client.ApiClient:
        """A new client authenticated as a member of system:masters."""
        return _client_from(self.kubeconfig_path)

    def write_kubeconfig(self, path: Path | str, user: str,
                         groups: list[str] | tuple[str, ...] = ()) -> Path:
        """Write a kubeconfig for a client-certificate identity, e.g. for the CLI under test."""
        path = Path(path)
        cert, key = issue_client_cert(self._pki, user, list(groups))
        _write_kubeconfig(path, self.server, self._pki.ca_cert, user, {
            "client-certificate-data": _b64(cert.read_bytes()),
            "client-key-data": _b64(key.read_bytes()),
        })
        return path

    def client_cert_identity(self, user: str, groups: list[str] | tuple[str, ...] = ()
                             ) -> kubernetes.client.ApiClient:
        """A client for ``user`` in ``groups``; it can do only what RBAC grants it."""
        path = self.write_kubeconfig(self._kubeconfigs_dir() / f"user-{slug(user)}.kubeconfig",
                                     user, groups)
        return _client_from(path)

    def service_account_client(self, namespace: str, name: str,
                               expiration_seconds: int = 3600) -> kubernetes.client.ApiClient:
        """A client using a TokenRequest token for ``namespace/name``, creating the SA if needed.

        The namespace must exist. Tokens are signed by the apiserver itself.
        """
        return _client_from(self.service_account_kubeconfig(namespace, name, expiration_seconds))

    def service_account_kubeconfig(self, namespace: str, name: str, expiration_seconds: int = 3600) -> Path:
        """A kubeconfig holding a TokenRequest token for ``namespace/name`` (the SA is created if needed), as a
        pod of that ServiceAccount would be given: for the CLI under test acting as it."""
        with self.admin_client() as admin:
            core = kubernetes.client.CoreV1Api(admin)
            try:
                core.create_namespaced_service_account(
                    namespace, {"metadata": {"name": name}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
            request = core.create_namespaced_service_account_token(
                name, namespace, {"spec": {"expirationSeconds": expiration_seconds}})
        path = self._kubeconfigs_dir() / f"sa-{slug(namespace)}-{slug(name)}.kubeconfig"
        user = f"system:serviceaccount:{namespace}:{name}"
        _write_kubeconfig(path, self.server, self._pki.ca_cert, user,
                          {"token": request.status.token})
        return path

    # -- processes ---------------------------------------------------------------------------

    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.ports['etcd-client']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            str(self._binaries.etcd),
            "--name=reconciler",
            f"--data-dir={self.state_dir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            # The peer port is unused by a one-member cluster, but etcd listens on it
            # anyway (default 2380, which would collide between two clusters).
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=reconciler={peer}",
            # Throwaway data: skipping fsync makes writes, and so every test, faster.
            "--unsafe-no-fsync=true",
        ]

    def _apiserver_args(self) -> list[str]:
        pki = self._pki
        return [
            str(self._binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd-client']}",
            "--bind-address=127.0.0.1",
            # The bootstrap controller publishes this address in the "kubernetes"
            # Endpoints; without it the apiserver picks the host's first interface.
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports[_APISERVER]}",
            f"--cert-dir={pki.directory}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.client_ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            # Operators routinely ship privileged pods; without this their specs are rejected.
            "--allow-privileged=true",
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
        ]

    def _audit_policy(self) -> Path:
        """The policy file, written when missing or different; atomically, since API servers of virtual clusters
        started at once read it while another's arguments are built."""
        path = self.state_dir / _AUDIT_POLICY
        text = yaml.safe_dump({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": [DEPLOYED_USER]}, {"level": "None"}]})
        if not path.exists() or path.read_text() != text:
            partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            partial.write_text(text)
            os.replace(partial, path)
        return path

    def _controller_manager_args(self) -> list[str]:
        pki = self._pki
        kubeconfig = self.write_kubeconfig(self._kubeconfigs_dir() / f"{_CONTROLLER_MANAGER}.kubeconfig",
                                           "system:kube-controller-manager")
        return [
            str(self._binaries.kube_controller_manager),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[_CONTROLLER_MANAGER]}",
            f"--cert-dir={self._component_dir(_CONTROLLER_MANAGER)}",
            # One instance: skipping the election saves its lease period at start-up.
            "--leader-elect=false",
            # Each controller acts as its own ServiceAccount, bound by the bootstrap RBAC roles.
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--cluster-cidr={CLUSTER_CIDR}",
            # kwok assigns pod addresses itself; nodes need no podCIDR.
            "--allocate-node-cidrs=false",
        ]

    def _scheduler_args(self) -> list[str]:
        kubeconfig = self.write_kubeconfig(self._kubeconfigs_dir() / f"{_SCHEDULER}.kubeconfig",
                                           "system:kube-scheduler")
        return [
            str(self._binaries.kube_scheduler),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[_SCHEDULER]}",
            f"--cert-dir={self._component_dir(_SCHEDULER)}",
            "--leader-elect=false",
        ]

    def _kwok_args(self) -> list[str]:
        kubeconfig = self.write_kubeconfig(self._kubeconfigs_dir() / f"{_KWOK}.kubeconfig",
                                           "system:kwok", ["system:masters"])
        stages = subprocess.run([str(self._binaries.kwok_stages)], check=True, capture_output=True).stdout
        # kwok's own stages, then the failures a pod can be annotated to simulate (reconciler.dev/simulate)
        (self.state_dir / _KWOK_CONFIG).write_bytes(stages.rstrip(b"\n") + b"\n---\n" + SIMULATED_FAILURES.read_bytes())
        return [
            str(self._binaries.kwok),
            f"--kubeconfig={kubeconfig}",
            f"--config={self.state_dir / _KWOK_CONFIG}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--cidr={CLUSTER_CIDR}",
            "--node-ip=127.0.0.1",
            # The nodes' heartbeat is their Lease (the heartbeat stage only refreshes their status every
            # 10 minutes): without it they turn NotReady after the grace period and their pods with them.
            "--node-lease-duration-seconds=40",
        ]

    def _create_nodes(self, server: str | None = None) -> None:
        """Register the simulated nodes, as a kubelet registers itself; kwok then keeps them Ready."""
        for index in range(NODE_COUNT):
            name = f"{NODE_PREFIX}{index}"
            node = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", "type": "kwok"}},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                           "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
            }
            _post(f"{server or self.server}/api/v1/nodes", node, self._admin_ssl_context())

    def _launch(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self._log(f"starting {name}")
        with open(self.state_dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                args, cwd=self.state_dir, env={**os.environ, **env} if env else None,
                stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=None if self._detached or _prctl is None else _die_with_parent)
        self._procs[name], self.pids[name] = proc, proc.pid
        self._write_state()

    def _wait(self, name: str, ready: Callable[[], bool], deadline: float) -> None:
        """Poll ``ready`` until it holds; fail early if a process has exited."""
        while True:
            for proc_name, proc in self._procs.items():
                if proc.poll() is not None:
                    self._exited(proc_name, proc.returncode)
            if ready():
                return
            if time.monotonic() > deadline:
                log = self.state_dir / f"{name}.log"
                raise ControlPlaneError(
                    f"{name} did not become ready in time; the end of {log}:\n{tail(log)}",
                    hint="on a slow or busy machine, start with a longer timeout")
            time.sleep(_POLL)

    def _exited(self, name: str, code: int) -> None:
        log = self.state_dir / f"{name}.log"
        # OLM's operators listen on fixed ports for metrics and go on without them, so they never lost a race.
        if name not in _OLM_PROCESSES and "address already in use" in log.read_text(errors="replace"):
            raise _PortTaken(name)
        raise ControlPlaneError(f"{name} exited with code {code} during start-up; "
                                f"the end of {log}:\n{tail(log)}")

    def _terminate_all(self, grace: float = 10.0) -> None:
        # In reverse start order: stopping a process's server under it only floods its log with errors.
        for name in [n for n in self.pids if n.startswith(_CATALOG_PREFIX)] + list(reversed(_PROCESSES +
                                                                                            _OLM_PROCESSES)):
            if name in self.pids:
                self._terminate(name, grace)
        self._procs.clear()
        self.pids.clear()

    def _terminate(self, name: str, grace: float) -> None:
        pid = self.pids[name]
        if not self._alive(name):
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while self._alive(name):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            else:
                return
        raise ControlPlaneError(f"{name} (pid {pid}) survived SIGKILL")

    def _alive(self, name: str) -> bool:
        """Whether the process is still running, guarding against reuse of a stale pid."""
        if name in self._procs:
            return self._procs[name].poll() is None
        pid = self.pids.get(name)
        if pid is None:
            return False
        if not _PROCFS:  # macOS: the best available answer is "some process has this pid"
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            return True
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            return False
        if name.startswith(_CATALOG_PREFIX):
            binary = (self.served.get(name[len(_CATALOG_PREFIX):]) or {}).get("opm")
        else:
            binary = getattr(self._olm if name in _OLM_PROCESSES else self._binaries, name.replace("-", "_"), None)
        if binary is None:
            return False
        # A zombie has an empty command line, which rightly counts as not running.
        return cmdline.split(b"\0", 1)[0] == os.fsencode(binary)

    # -- readiness ---------------------------------------------------------------------------

    def _etcd_healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.ports['etcd-client']}/health"
        body = _get(url, None)
        return body is not None and json.loads(body).get("health") == "true"

    def _apiserver_ready(self) -> bool:
        return _get(f"{self.server}/readyz", self._admin_ssl_context()) == b"ok"

    def _default_namespace_exists(self) -> bool:
        url = f"{self.server}/api/v1/namespaces/default"
        return _get(url, self._admin_ssl_context()) is not None

    def _nodes_ready(self, server: str | None = None) -> bool:
        body = _get(f"{server or self.server}/api/v1/nodes", self._admin_ssl_context())
        if body is None:
            return False
        ready = [n for n in json.loads(body).get("items", [])
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])]
        return len(ready) >= NODE_COUNT

    def _default_service_account_exists(self, server: str | None = None) -> bool:
        """The serviceaccounts controller runs: pods in new namespaces will be admitted."""
        url = f"{server or self.server}/api/v1/namespaces/default/serviceaccounts/default"
        return _get(url, self._admin_ssl_context()) is not None

    def _admin_ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self._pki.ca_cert)
        context.load_cert_chain(self._pki.client_cert(ADMIN_USER), self._pki.client_key(ADMIN_USER))
        return context

    # -- files -------------------------------------------------------------------------------

    def _kubeconfigs_dir(self) -> Path:
        directory = self.state_dir / "kubeconfigs"
        directory.mkdir(exist_ok=True)
        return directory

    def _component_dir(self, name: str) -> Path:
        """Where a component keeps the self-signed serving certificate it makes for itself."""
        directory = self._pki.directory / name
        directory.mkdir(exist_ok=True)
        return directory

    def _write_state(self) -> None:
        state = {"version": self.version, "pids": self.pids, "ports": self.ports,
                 "binaries": {k: str(v) for k, v in asdict(self._binaries).items()},
                 "olm": {k: str(v) for k, v in asdict(self._olm).items()} if self._olm else None,
                 "catalogs": self.served, "olmInterval": self.olm_interval, "openshift": self.openshift}
        tmp = self.state_dir / f".{_STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_dir / _STATE_FILE)


def _free_ports(count: int) -> list[int]:
    """Distinct ports that are free on 127.0.0.1 right now (bound together, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _get(url: str, context: ssl.SSLContext | None) -> bytes | None:
    """The body of a 200 response, or None if the server is not (yet) answering with one."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=2) as response:
            return response.read().strip()
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _post(url: str, body: dict, context: ssl.SSLContext) -> None:
    """Create an object; one that already exists is fine."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=10) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise ControlPlaneError(f"creating {body['kind']} {body['metadata']['name']} failed: "
                                    f"HTTP {exc.code}: {exc.read()[:500]!r}") from None


def _die_with_parent() -> None:
    """In the child before exec: ask the kernel for SIGKILL when the parent thread dies."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _client_from(kubeconfig: Path) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig),
                                                    persist_config=False)


def _write_kubeconfig(path: Path, server: str, ca_cert: Path, user: str, credentials: dict) -> None:
    """A self-contained kubeconfig (certificates inlined), private to the current user."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "reconciler-local", "cluster": {
            "server": server, "certificate-authority-data": _b64(ca_cert.read_bytes())}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "reconciler-local",
                      "context": {"cluster": "reconciler-local", "user": user}}],
        "current-context": "reconciler-local",
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
