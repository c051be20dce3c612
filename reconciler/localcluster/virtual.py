"""More clusters on one control plane: extra kube-apiservers that share its etcd under their own prefix.

A fleet's tests and benchmarks need several clusters; a full control plane
each (etcd, controllers, kwok) costs hundreds of megabytes and tens of
seconds. A *virtual cluster* is one more kube-apiserver on the same etcd with
its own ``--etcd-prefix``: a real API server with its own objects, RBAC and
discovery, starting in seconds, reached with the same certificates. By default
it runs no controllers, so its Deployments never roll out (an Operator there
stays Progressing), which is what a test of "this stage is not healthy" wants.
``watch_cache=False`` trims its memory further, for a fleet of many.

``workloads=True`` makes it a cluster whose workloads really roll out, at
the least cost that does it for real: a kube-controller-manager running only
the controllers a rollout needs (Deployments, ReplicaSets, the default
ServiceAccount that admits pods, node lifecycle, namespace deletion and
owner-reference cascades), a kube-scheduler, and kwok playing the kubelet of its own
simulated nodes. A Deployment there becomes available when its pods are
scheduled and kwok reports them Ready; one whose pods no node can take (a
nodeSelector no node matches) stays unavailable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from reconciler.errors import ControlPlaneError

from .build import tail
from .pki import issue_client_cert
from .plane import ADMIN_USER, ControlPlane, _die_with_parent, _free_ports, _get, _prctl, _write_kubeconfig, _b64


LEAN_APIS = ("api/v1", "apps/v1", "rbac.authorization.k8s.io/v1", "apiextensions.k8s.io/v1",
             "admissionregistration.k8s.io/v1", "apiregistration.k8s.io/v1", "coordination.k8s.io/v1",
             "authorization.k8s.io/v1", "authentication.k8s.io/v1", "events.k8s.io/v1", "policy/v1",
             "discovery.k8s.io/v1", "networking.k8s.io/v1", "scheduling.k8s.io/v1", "storage.k8s.io/v1",
             "node.k8s.io/v1", "certificates.k8s.io/v1", "batch/v1", "autoscaling/v2")
# What a rollout needs of kube-controller-manager; the rest of its controllers cost memory and do nothing here.
# The node-lifecycle controller lifts the not-ready taint a new node is admitted with, once kwok reports it Ready.
ROLLOUT_CONTROLLERS = ("deployment-controller", "replicaset-controller", "serviceaccount-controller",
                       "node-lifecycle-controller", "namespace-controller", "garbage-collector-controller")
_WORKLOAD_PROCESSES = ("kube-controller-manager", "kube-scheduler", "kwok")   # in start order
# The flags each of them takes from the plane and that must name this cluster instead.
_OWN_FLAGS = ("--kubeconfig=", "--secure-port=", "--cert-dir=", "--config=")
# The plane's argument builders issue certificates and write files of one name: one cluster at a time.
_ARGS_LOCK = threading.Lock()


class VirtualCluster:
    """A kube-apiserver of its own on ``plane``'s etcd, under the key prefix ``/clusters/<name>``."""

    def __init__(self, plane: ControlPlane, name: str, *, watch_cache: bool = True, lean: bool = False,
                 workloads: bool = False, gogc: int = 25) -> None:
        self.plane, self.name, self.watch_cache, self.lean, self.workloads = plane, name, watch_cache, lean, workloads
        self.gogc = gogc   # a lean server's Go GC target (GOGC): smaller heaps, more collection
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._workload_procs: dict[str, subprocess.Popen] = {}
        self.log_path = plane.state_dir / f"kube-apiserver-{name}.log"
        self.kubeconfig_path = plane.state_dir / "kubeconfigs" / f"virtual-{name}.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _args(self) -> list[str]:
        args = self.plane._apiserver_args()
        # No audit log: the plane's records what deploy/'s ServiceAccount does there (tests/incluster); a fleet's
        # loops act as that same account, and would fill it (and spend their API servers' CPU) with theirs.
        args = [a for a in args if not a.startswith(("--secure-port=", "--cert-dir=", "--audit-"))]
        args += [f"--secure-port={self.port}", f"--etcd-prefix=/clusters/{self.name}",
                 f"--cert-dir={self.plane.state_dir / 'pki' / ('virtual-' + self.name)}"]
        if not self.watch_cache:
            args += ["--watch-cache=false"]
        if self.lean:   # only the API groups the reconciler uses: far less memory for a fleet of many
            # kube-scheduler waits for the dynamic-resource API before it schedules anything
            groups = LEAN_APIS + (("resource.k8s.io/v1",) if self.workloads else ())
            args += ["--runtime-config=api/all=false," + ",".join(f"{g}=true" for g in groups),
                     "--enable-priority-and-fairness=false"]
        return args

    def start(self, timeout: float = 60.0) -> VirtualCluster:
        if self._proc is not None and self._proc.poll() is None:
            raise ControlPlaneError(f"virtual cluster {self.name} is already running")
        if not self.port:
            self.port = _free_ports(1)[0]
        # A smaller heap (GOGC=25 by default) for many idle servers. No GOMEMLIMIT: a limit below a server's live
        # heap (about 180 MiB) makes Go's collector run without pause, 15% of a core per idle server.
        env = {**os.environ, "GOGC": str(self.gogc)} if self.lean else None
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self._args(), cwd=self.plane.state_dir, stdin=subprocess.DEVNULL, env=env,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=None if _prctl is None else _die_with_parent)
        pki = self.plane._pki
        cert = pki.client_cert(ADMIN_USER)
        self.kubeconfig_path.parent.mkdir(exist_ok=True)
        _write_kubeconfig(self.kubeconfig_path, self.server, pki.ca_cert, ADMIN_USER, {
            "client-certificate-data": _b64(Path(cert).read_bytes()),
            "client-key-data": _b64(Path(pki.client_key(ADMIN_USER)).read_bytes())})
        deadline = time.monotonic() + timeout
        context = self.plane._admin_ssl_context()
        while _get(f"{self.server}/readyz", context) != b"ok":
            if self._proc.poll() is not None:
                raise ControlPlaneError(f"kube-apiserver of virtual cluster {self.name} exited with code "
                                        f"{self._proc.returncode}; the end of {self.log_path}:\n{tail(self.log_path)}")
            if time.monotonic() > deadline:
                self.stop()
                raise ControlPlaneError(f"virtual cluster {self.name} was not ready within {timeout:.0f}s; the end "
                                        f"of {self.log_path}:\n{tail(self.log_path)}")
            time.sleep(0.1)
        if self.workloads:
            try:
                self._start_workloads(deadline)
            except BaseException:
                self.stop()
                raise
        return self

    def _start_workloads(self, deadline: float) -> None:
        """Its controller-manager, scheduler and kwok, then its nodes; wait until pods would be admitted and run."""
        plane = self.plane
        kwok_config = self._log_of("kwok").with_suffix(".yaml")
        with _ARGS_LOCK:
            own = {
                "kube-controller-manager": [
                    a for a in plane._controller_manager_args() if not a.startswith(_OWN_FLAGS)]
                + [f"--controllers={','.join(ROLLOUT_CONTROLLERS)}", "--secure-port=0",
                   f"--kubeconfig={self._component_kubeconfig('system:kube-controller-manager')}"],
                "kube-scheduler": [a for a in plane._scheduler_args() if not a.startswith(_OWN_FLAGS)]
                + ["--secure-port=0", f"--kubeconfig={self._component_kubeconfig('system:kube-scheduler')}"],
                "kwok": [a for a in plane._kwok_args() if not a.startswith(_OWN_FLAGS)]
                + [f"--config={kwok_config}",
                   f"--kubeconfig={self._component_kubeconfig('system:kwok', ['system:masters'])}"],
            }
            shutil.copyfile(plane.state_dir / "kwok.yaml", kwok_config)
        for name in _WORKLOAD_PROCESSES:
            with open(self._log_of(name), "ab") as log:
                self._workload_procs[name] = subprocess.Popen(
                    own[name], cwd=plane.state_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, preexec_fn=None if _prctl is None else _die_with_parent)
        plane._create_nodes(self.server)
        for what, ready in (("its kwok nodes Ready", lambda: plane._nodes_ready(self.server)),
                            ("its default ServiceAccount", lambda: plane._default_service_account_exists(self.server))):
            while not ready():
                for name, proc in self._workload_procs.items():
                    if proc.poll() is not None:
                        raise ControlPlaneError(f"{name} of virtual cluster {self.name} exited with code "
                                                f"{proc.returncode}; the end of {self._log_of(name)}:\n"
                                                f"{tail(self._log_of(name))}")
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"virtual cluster {self.name}: no sign of {what} in time; the end of "
                                            f"{self._log_of('kube-controller-manager')}:\n"
                                            f"{tail(self._log_of('kube-controller-manager'))}")
                time.sleep(0.1)

    def _log_of(self, process: str) -> Path:
        return self.plane.state_dir / f"{process}-{self.name}.log"

    def _component_kubeconfig(self, user: str, groups: list[str] | None = None) -> Path:
        """A kubeconfig for one of its components' identities, pointing at this cluster's API server."""
        pki = self.plane._pki
        cert, key = issue_client_cert(pki, user, groups or [])
        path = self.kubeconfig_path.with_name(f"virtual-{self.name}-{user.replace(':', '-')}.kubeconfig")
        _write_kubeconfig(path, self.server, pki.ca_cert, user, {
            "client-certificate-data": _b64(cert.read_bytes()), "client-key-data": _b64(key.read_bytes())})
        return path

    def stop(self, grace: float = 10.0) -> None:
        """Stop its processes (API server last); its objects stay in etcd, and ``start`` serves them again on the
        same port."""
        procs = [self._workload_procs.pop(n) for n in reversed(_WORKLOAD_PROCESSES) if n in self._workload_procs]
        for proc in [*procs, self._proc]:
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def admin_client(self):  # noqa: ANN201 - a kubernetes.client.ApiClient
        from .plane import _client_from

        return _client_from(self.kubeconfig_path)

    def rss_bytes(self) -> int:
        """Its API server's resident memory, for the benchmark's report (0 when not running)."""
        return rss_of(self._proc)

    def rss_by_process(self) -> dict[str, int]:
        """The resident memory of each of its processes (API server and, with workloads, the rest)."""
        return {"kube-apiserver": rss_of(self._proc),
                **{name: rss_of(proc) for name, proc in self._workload_procs.items()}}

    def processes(self) -> dict[str, subprocess.Popen]:
        """Its running processes by name: the API server and, with workloads, the rest."""
        return {name: proc for name, proc in {"kube-apiserver": self._proc, **self._workload_procs}.items()
                if proc is not None}


def rss_of(proc: subprocess.Popen | None) -> int:
    """A running process's resident memory in bytes, 0 when it is not running."""
    if proc is None or proc.poll() is not None:
        return 0
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_of(proc: subprocess.Popen | None) -> float:
    """A running process's CPU time so far (user and system) in seconds, 0 when it is not running."""
    if proc is None or proc.poll() is not None:
        return 0.0
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kubeconfig_with_contexts(path: Path, clusters: dict[str, tuple[str, Path]]) -> Path:
    """One kubeconfig with a context per cluster, named as given: ``{context: (server, kubeconfig it is in)}``.

    Fleet-wide commands read each cluster through its context; this merges the admin kubeconfigs of a plane
    and its virtual clusters into that shape.
    """
    import yaml

    merged: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for context, (_, source) in sorted(clusters.items()):
        doc = yaml.safe_load(Path(source).read_text())
        cluster, user = doc["clusters"][0], doc["users"][0]
        merged["clusters"].append({"name": context, "cluster": cluster["cluster"]})
        merged["users"].append({"name": context, "user": user["user"]})
        merged["contexts"].append({"name": context, "context": {"cluster": context, "user": context}})
    merged["current-context"] = sorted(clusters)[0] if clusters else ""
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    return path
