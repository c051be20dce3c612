"""A fleet rollout on live clusters, for the tests and ``bench.fleet_rollout``.

Every member of the fleet is a simulated cluster whose workloads really roll
out (``VirtualCluster(workloads=True)``: its own API server on the shared
etcd, controller-manager, scheduler and kwok nodes), and runs its own
``reconciler watch URL`` process the way ``deploy/remote`` runs it: deploy/base
applied to the cluster, the process authenticated as the ``reconciler``
ServiceAccount, ``RECONCILER_CLUSTER`` naming the cluster, leader election,
``/hook`` behind a secret and the git token from a file. Every loop follows
one repository served by a real git server on loopback (smart HTTP, Basic
authentication); a commit is announced to the loops by a signed push hook, as
a forge would, and polling remains the fallback.

The team's side is the CLI, run as a team runs it: ``resolve`` before a
commit, ``promote`` and ``fleet status`` through a kubeconfig with a context
per cluster. ``FleetCommands`` is the one place that spells those two
commands and reads their output. What the clusters run is read from each
cluster itself (its Operator status objects and Deployments), never from the
repository.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.cluster.status import objects as status_objects
from reconciler.kube.client import Kube
from reconciler.localcluster.plane import ControlPlane, _die_with_parent, _prctl, _write_kubeconfig
from reconciler.localcluster.virtual import VirtualCluster, cpu_of, kubeconfig_with_contexts, rss_of
from reconciler.loop.server import signature
from tests.loop.gitserver import GitHttpServer
from tests.support.repo import commit_all, git, init
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
INSTANCE = "rollout"
OPERATOR, NAMESPACE = "widget", "widget-system"
GIT_USER, GIT_TOKEN, HOOK_SECRET = "reconciler", "rollout-token", "rollout-hook-secret"
# A label no simulated node carries: a Deployment that asks for it is never scheduled, so never available.
UNSCHEDULABLE = {"widget.example.com/hardware": "absent"}


@dataclass(frozen=True)
class Member:
    """A cluster of the fleet: its name, stage and labels (``env`` is the stage)."""

    name: str
    stage: str
    region: str = "eu"

    def declaration(self) -> str:
        return (f"apiVersion: reconciler.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: {self.name}\n"
                f"  labels: {{env: {self.stage}, region: {self.region}}}\n"
                f"spec:\n  kubernetesVersion: \"1.36\"\n  stage: {self.stage}\n")


@dataclass(frozen=True)
class Seen:
    """One Operator as a cluster reports it: the bundle it runs, Ready or not, and the revision applied."""

    bundle: str
    ready: bool
    reason: str = ""
    revision: str = ""


def members(count: int, stages: tuple[str, ...] = ("dev", "staging", "prod")) -> list[Member]:
    """``count`` clusters spread over the stages, the later stages never smaller than the earlier ones; regions
    alternate within a stage (``dev-1``, ``staging-1``, ``staging-2``, ``prod-1`` ... for four)."""
    sizes = [count // len(stages)] * len(stages)
    for i in range(count - sum(sizes)):
        sizes[len(stages) - 1 - i % len(stages)] += 1
    return [Member(f"{stage}-{i + 1}", stage, ("eu", "us")[i % 2])
            for stage, size in zip(stages, sizes) for i in range(size)]


@dataclass
class FleetCommands:
    """``promote`` and ``fleet status`` as a team runs them, and how their output is read."""

    root: Path
    kubeconfig: Path

    def promote(self, stage: str, *extra: str) -> subprocess.CompletedProcess:
        return run_cli("promote", str(self.root), "--to", stage, "--soak", "0", "--kubeconfig", str(self.kubeconfig),
                       *extra)

    def status(self) -> tuple[int, dict]:
        """(exit code, the document of ``fleet status -o json``)."""
        done = run_cli("fleet", "status", str(self.root), "--kubeconfig", str(self.kubeconfig), "-o", "json")
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}

    @staticmethod
    def rows(doc: dict) -> dict[str, dict]:
        """The clusters of a status document by name: reachable, error and the Operators' cells by name."""
        return {c["name"]: {"reachable": c["reachable"], "error": c.get("error", ""),
                            "operators": {op["operator"]: op for op in c.get("operators", [])}}
                for c in doc.get("clusters", [])}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "KUBECONFIG": ""}, check=False)


@dataclass
class _Live:
    member: Member
    cluster: VirtualCluster
    loop_kubeconfig: Path | None = None
    kube: Kube | None = None   # the harness's own reader, with short timeouts
    port: int = 0
    loop: subprocess.Popen | None = None
    log: Path | None = None


@dataclass
class LiveFleet:
    """The fleet, its repository (a working tree served over HTTP) and one loop per cluster; ``close`` stops all."""

    plane: ControlPlane
    workdir: Path
    fleet: list[Member]
    poll: float = 30.0
    interval: float = 300.0
    parallel: int = 4
    gogc: int = 100   # each simulated API server's GOGC (VirtualCluster): Go's default, less collection under load
    log_level: str = "info"   # each loop's --log-level (debug: every API request it makes, in its log)
    live: dict[str, _Live] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.repo = self.workdir / "served" / "fleet"
        self.server: GitHttpServer | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.committed_at = 0.0   # time.monotonic() of the last commit (a release's or a promotion's)
        self.loops_started_at = 0.0
        self.commands = FleetCommands(self.repo, self.workdir / "fleet.kubeconfig")

    @property
    def url(self) -> str:
        return f"{self.server.url}/fleet/.git"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> LiveFleet:
        """The repository at widget 1.0.0 everywhere (gizmo on the eu clusters), every cluster and its loop."""
        self._write_repository()
        self.server = GitHttpServer(self.repo.parent, username=GIT_USER, password=GIT_TOKEN).start()
        git(self.repo, "remote", "add", "origin", self.url)
        # The clusters' processes die with the thread that started them: these threads live until close().
        self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="fleet-cluster")
        try:
            list(self._pool.map(self._start_cluster, self.fleet))
            kubeconfig_with_contexts(self.commands.kubeconfig, {
                n: (lv.cluster.server, lv.cluster.kubeconfig_path) for n, lv in self.live.items()})
            for lv in self.live.values():
                self._start_loop(lv)
            self.loops_started_at = time.monotonic()
            self._until_listening()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for lv in self.live.values():
            _stop(lv.loop)
        with ThreadPoolExecutor(self.parallel) as pool:
            list(pool.map(lambda lv: lv.cluster.stop(), self.live.values()))
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    def _start_cluster(self, member: Member) -> None:
        cluster = VirtualCluster(self.plane, member.name, watch_cache=False, lean=True, workloads=True,
                                 gogc=self.gogc)
        lv = _Live(member, cluster.start(timeout=180))
        self.live[member.name] = lv
        kube = Kube(cluster.admin_client())
        for doc in deploy_objects("base"):
            kube.apply(kube.require_resource(doc), doc, field_manager="rollout-harness", dry_run=False)
        lv.loop_kubeconfig = self._service_account_kubeconfig(lv, kube)

    def _service_account_kubeconfig(self, lv: _Live, kube: Kube) -> Path:
        """A kubeconfig for the reconciler ServiceAccount of deploy/base, as its pod would authenticate."""
        info = kube.resource("v1", "ServiceAccount")
        token = kube.request("POST", info.path("reconciler-system", "reconciler") + "/token",
                             body={"spec": {"expirationSeconds": 86400}})["status"]["token"]
        path = self.workdir / "loops" / lv.member.name / "kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_kubeconfig(path, lv.cluster.server, self.plane._pki.ca_cert, "system:serviceaccount:reconciler-system:"
                          "reconciler", {"token": token})
        return path

    def _start_loop(self, lv: _Live) -> None:
        """``reconciler watch`` with deploy/remote's arguments, as the cluster's reconciler pod runs it."""
        home = self.workdir / "loops" / lv.member.name
        (home / "token").write_text(GIT_TOKEN + "\n")
        (home / "hook").write_text(HOOK_SECRET + "\n")
        lv.port = lv.port or _free_port(avoid={other.port for other in self.live.values()})
        lv.log = home / "watch.log"
        with lv.log.open("ab") as log:
            lv.loop = subprocess.Popen(
                [sys.executable, "-m", "reconciler", "watch", self.url, "--branch=main", f"--poll={self.poll:g}",
                 f"--interval={self.interval:g}", f"--listen=127.0.0.1:{lv.port}", "--leader-elect",
                 f"--identity={lv.member.name}-reconciler-0", f"--cache-dir={home / 'cache'}",
                 f"--git-username={GIT_USER}", f"--git-token-file={home / 'token'}",
                 f"--hook-secret-file={home / 'hook'}", f"--kubeconfig={lv.loop_kubeconfig}",
                 f"--log-level={self.log_level}"],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=None if _prctl is None else _die_with_parent,
                env={**os.environ, "RECONCILER_CLUSTER": lv.member.name, "PYTHONUNBUFFERED": "1", "KUBECONFIG": ""})

    def _until_listening(self, timeout: float = 180.0) -> None:
        """Every loop serving its port. The port is picked free and released before the loop binds it, so another
        process (an outgoing connection's ephemeral port, a server started meanwhile) may take it in between:
        that loop, which exits saying it cannot listen, starts again on another port. A port counts as the loop's
        when its process is alive and a loop's health endpoint answers there (no two loops are given one port),
        never merely because something accepts connections on it."""
        waiting = list(self.live.values())

        def listening() -> bool:
            for lv in list(waiting):
                if lv.loop is not None and lv.loop.poll() is None and _serves_health(lv.port):
                    waiting.remove(lv)
                elif lv.loop is not None and lv.loop.poll() is not None:
                    log = lv.log.read_text(errors="replace") if lv.log else ""
                    if f"cannot listen on 127.0.0.1:{lv.port}" not in log:
                        raise AssertionError(f"the loop of {lv.member.name} exited with code {lv.loop.returncode}; "
                                             f"its log {lv.log}:\n{log[-2000:]}")
                    lv.port = 0
                    self._start_loop(lv)
            return not waiting

        wait_until(listening, "every loop to listen", timeout=timeout, every=0.2,
                   diagnose=lambda: f"not listening: {[lv.member.name for lv in waiting]}; "
                                    f"logs under {self.workdir / 'loops'}")

    def stop_cluster(self, name: str) -> None:
        """The cluster goes down (API server, controllers, nodes); its loop keeps trying, as a pod that lost its
        API server does."""
        self.live[name].cluster.stop()

    def start_cluster(self, name: str) -> None:
        self._pool.submit(self.live[name].cluster.start, timeout=180).result()

    # -- the repository --------------------------------------------------------------------

    def _write_repository(self) -> None:
        root = self.repo
        root.mkdir(parents=True)
        (root / "reconciler.yaml").write_text(f"instance: {INSTANCE}\nstages: [dev, staging, prod]\n")
        (root / "clusters").mkdir()
        for m in self.fleet:
            (root / "clusters" / f"{m.name}.yaml").write_text(m.declaration())
        (root / "operators").mkdir()
        (root / "operators" / f"{OPERATOR}.yaml").write_text(
            f"apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: {OPERATOR}\nspec:\n"
            f"  catalog: {{name: community, package: {OPERATOR}, channel: stable}}\n"
            f"  version: \">=1.0.0 <2.0.0\"\n  install: {{namespace: {NAMESPACE}}}\n")
        (root / "operators" / "gizmo.yaml").write_text(
            "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: gizmo\nspec:\n"
            "  catalog: {name: community, package: gizmo, channel: stable}\n  install: {namespace: gizmo-system}\n"
            "  placement:\n    clusterSelector: {matchLabels: {region: eu}}\n")
        _bundle(root, "gizmo", "1.0.0", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gizmo, namespace: "
                "gizmo-system}\ndata: {mode: edge}\n")
        self._add_version("1.0.0")
        self._resolve()
        init(self.repo)
        self.commit("widget 1.0.0 on every cluster, gizmo on the eu clusters")

    def _add_version(self, version: str, *, unschedulable: bool = False) -> None:
        _bundle(self.repo, OPERATOR, version, _deployment(version, unschedulable))

    def release(self, version: str, *, unschedulable: bool = False) -> str:
        """A new widget in the catalog, ``resolve`` and ``approve`` run, committed: the first stage takes it."""
        self._add_version(version, unschedulable=unschedulable)
        self._resolve()
        return self.commit(f"widget {version}" + (" (needs hardware no node has)" if unschedulable else ""))

    def _resolve(self) -> None:
        """``resolve``, then ``approve --all``: the team has reviewed what the new bundle may do."""
        for command in (("resolve",), ("approve", "--all")):
            done = run_cli(command[0], str(self.repo), *command[1:])
            if done.returncode != 0:
                raise AssertionError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")

    def commit(self, message: str) -> str:
        commit_all(self.repo, message)
        self.committed_at = time.monotonic()
        head = self.head()
        self.notify()
        return head

    def promote(self, stage: str) -> subprocess.CompletedProcess:
        """``promote --to STAGE --soak 0``; a promotion that committed is announced to the loops."""
        before = self.head()
        done = self.commands.promote(stage)
        if self.head() != before:
            self.committed_at = time.monotonic()
            self.notify()
        return done

    def head(self) -> str:
        return git(self.repo, "rev-parse", "HEAD")

    def locked(self, cluster: str) -> str:
        path = self.repo / "clusters" / cluster / "olm.lock"
        return path.read_text() if path.exists() else ""

    def notify(self) -> None:
        """A signed push hook to every loop, as the forge sends on a push (a loop that misses it polls)."""
        body = b'{"ref": "refs/heads/main"}'
        headers = {"X-Hub-Signature-256": signature(HOOK_SECRET.encode(), body), "X-GitHub-Event": "push",
                   "Content-Type": "application/json"}

        def send(lv: _Live) -> None:
            request = urllib.request.Request(f"http://127.0.0.1:{lv.port}/hook", data=body, headers=headers)
            try:
                urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10).read()
            except (urllib.error.URLError, OSError):
                pass   # a loop that is not listening yet finds the commit on its next poll

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(send, [lv for lv in self.live.values() if lv.loop and lv.loop.poll() is None]))

    # -- what the clusters say -------------------------------------------------------------

    def observe(self, name: str) -> dict[str, Seen] | None:
        """The Operators a cluster reports (None when it cannot be read)."""
        lv = self.live[name]
        try:
            lv.kube = lv.kube or Kube(lv.cluster.admin_client(), attempts=1, timeout=(2.0, 5.0))
            recorded = status_objects.read_all(lv.kube, INSTANCE)
        except Exception:   # noqa: BLE001 - a cluster that is down reads as None
            return None
        return {op: _seen(rec) for op, rec in recorded.items()}

    def deployment(self, name: str, deployment: str = OPERATOR, namespace: str = NAMESPACE) -> dict | None:
        kube = Kube(self.live[name].cluster.admin_client())
        return kube.get(kube.resource("apps/v1", "Deployment"), namespace, deployment)

    def wait_converged(self, names: list[str], bundle: str, *, ready: bool = True, timeout: float = 300.0,
                       operator: str = OPERATOR, since: float | None = None, every: float = 0.5
                       ) -> dict[str, float]:
        """Wait until every named cluster reports ``operator`` at ``bundle`` (Ready, unless ``ready`` is False);
        the seconds from ``since`` (default: now) at which each was first seen so. Fails naming the clusters that
        did not, and what they report, after the bound (which is generous: not a timing assertion).

        Each cluster's status objects are watched (a list, then a watch from its resourceVersion), so a change
        is seen when the API server sends it, and an observer of 30 clusters adds no polling load to them; a
        cluster that cannot be read is tried again every ``every`` seconds.
        """
        since = time.monotonic() if since is None else since
        seen: dict[str, float] = {}
        last: dict[str, object] = {}
        changed = threading.Condition()
        done = threading.Event()

        def report(name: str, records: dict[str, Seen] | None) -> None:
            got = (records or {}).get(operator)
            with changed:
                last[name] = got
                if name not in seen and got is not None and got.bundle == bundle and (got.ready or not ready):
                    seen[name] = time.monotonic() - since
                    changed.notify_all()

        for name in names:
            threading.Thread(target=self._follow, args=(name, report, done, every), daemon=True,
                             name=f"watch-{name}").start()
        deadline = time.monotonic() + timeout
        try:
            with changed:
                while len(seen) < len(names):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        missing = {n: last.get(n) for n in names if n not in seen}
                        raise AssertionError(f"not every cluster reached {operator} {bundle}"
                                             f"{' Ready' if ready else ''} within {timeout:.0f}s: {missing}; "
                                             f"loop logs under {self.workdir / 'loops'}")
                    changed.wait(remaining)
                return dict(seen)
        finally:
            done.set()

    def _follow(self, name: str, report, done: threading.Event, every: float) -> None:
        """Report cluster ``name``'s Operators (``Seen`` by name, None while it cannot be read) on every change
        until ``done``."""
        from kubernetes import client, watch

        group, version = status_objects.API_VERSION.split("/")
        records: dict[str, Seen] = {}
        version_seen = ""
        api = None
        while not done.is_set():
            try:
                api = api or client.CustomObjectsApi(self.live[name].cluster.admin_client())
                if not version_seen:
                    listing = api.list_cluster_custom_object(group, version, status_objects.PLURAL,
                                                             _request_timeout=(2, 5))
                    records = {r.name: _seen(r) for r in map(status_objects.record_of, listing.get("items") or [])
                               if r.instance == INSTANCE}
                    version_seen = listing["metadata"]["resourceVersion"]
                    report(name, dict(records))
                # Short watches, resumed from the last version seen: the thread notices ``done`` within seconds.
                for event in watch.Watch().stream(api.list_cluster_custom_object, group, version,
                                                  status_objects.PLURAL, resource_version=version_seen,
                                                  timeout_seconds=3, allow_watch_bookmarks=True,
                                                  _request_timeout=(2, 10)):
                    obj = event.get("raw_object") or event.get("object") or {}
                    if event.get("type") == "ERROR":   # the version is too old: list again
                        version_seen = ""
                        break
                    version_seen = (obj.get("metadata") or {}).get("resourceVersion") or version_seen
                    if event.get("type") == "BOOKMARK":
                        continue
                    rec = status_objects.record_of(obj)
                    if rec.instance != INSTANCE:
                        continue
                    if event.get("type") == "DELETED":
                        records.pop(rec.name, None)
                    else:
                        records[rec.name] = _seen(rec)
                    report(name, dict(records))
                    if done.is_set():
                        break
            except Exception:   # noqa: BLE001 - a cluster that is down reads as None, and is tried again
                version_seen = ""
                report(name, None)
                done.wait(every)

    def memory(self) -> tuple[list[int], list[int]]:
        """(resident bytes per cluster, its processes summed; resident bytes per loop process)."""
        clusters = [sum(lv.cluster.rss_by_process().values()) for lv in self.live.values()]
        loops = [rss_of(lv.loop) for lv in self.live.values()]
        return clusters, loops

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by each kind of process of the fleet, summed over the clusters: their API
        servers, controller-managers, schedulers and kwok, their loops, the shared etcd, and this process (which
        watches every cluster while it waits) with the commands it ran and waited for."""
        out: dict[str, float] = {}
        for lv in self.live.values():
            for name, proc in lv.cluster.processes().items():
                out[name] = out.get(name, 0.0) + cpu_of(proc)
            out["loop"] = out.get("loop", 0.0) + cpu_of(lv.loop)
        out["etcd"] = cpu_of(self.plane._procs.get("etcd"))
        own = os.times()
        out["harness"] = own.user + own.system
        out["commands"] = own.children_user + own.children_system
        return out

    def logged(self, name: str, text: str) -> bool:
        """Whether cluster ``name``'s loop has written ``text`` to its log."""
        log = self.live[name].log
        return bool(log and log.exists() and text in log.read_text(errors="replace"))

    def names(self, stage: str) -> list[str]:
        return [m.name for m in self.fleet if m.stage == stage]


def _seen(rec: status_objects.Recorded) -> Seen:
    ready = next((c for c in rec.status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return Seen(((rec.status.get("bundle") or {}).get("name") or ""), ready.get("status") == "True",
                str(ready.get("reason") or ""), str(rec.status.get("revision") or ""))


def deploy_objects(variant: str) -> list[dict]:
    """The objects of one deploy/ variant, following its kustomization's resources."""
    from reconciler import yamlio

    out = []
    kustomization = yamlio.read_all(DEPLOY / variant / "kustomization.yaml")[0]
    for res in kustomization["resources"]:
        path = DEPLOY / variant / res
        if path.is_dir():
            out += deploy_objects(path.relative_to(DEPLOY).as_posix())
        else:
            out += [d for d in yamlio.read_all(path) if d]
    return out


def _bundle(root: Path, package: str, version: str, manifest: str) -> None:
    """A plain+v0 bundle in the repository and its entry in the community catalog (upgrading the newest)."""
    manifests = root / "bundles" / package / version / "manifests"
    manifests.mkdir(parents=True)
    (manifests / f"{package}.yaml").write_text(manifest)
    catalog = root / "catalogs" / "community" / f"{package}.yaml"
    catalog.parent.mkdir(parents=True, exist_ok=True)
    import yaml

    docs = [d for d in yaml.safe_load_all(catalog.read_text()) if d] if catalog.exists() else [
        {"schema": "olm.package", "name": package, "defaultChannel": "stable"},
        {"schema": "olm.channel", "package": package, "name": "stable", "entries": []}]
    channel = next(d for d in docs if d["schema"] == "olm.channel")
    entry = {"name": f"{package}.v{version}"}
    if channel["entries"]:
        entry["replaces"] = channel["entries"][-1]["name"]
    channel["entries"].append(entry)
    docs.append({"schema": "olm.bundle", "name": f"{package}.v{version}", "package": package,
                 "image": f"file://bundles/{package}/{version}",
                 "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}},
                                {"type": "olm.bundle.mediatype", "value": "plain+v0"}]})
    catalog.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def _deployment(version: str, unschedulable: bool) -> str:
    import yaml

    pod: dict = {"containers": [{"name": OPERATOR, "image": f"registry.example.invalid/widget:{version}"}]}
    if unschedulable:
        pod["nodeSelector"] = dict(UNSCHEDULABLE)
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": OPERATOR, "namespace": NAMESPACE},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": OPERATOR}},
                 "template": {"metadata": {"labels": {"app": OPERATOR, "version": version}}, "spec": pod}}},
        sort_keys=False)


def _free_port(avoid: set[int] = frozenset()) -> int:
    import socket

    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


def _serves_health(port: int) -> bool:
    """Whether a loop's ``/healthz`` answers on ``port`` (another kind of server there does not count)."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"http://127.0.0.1:{port}/healthz", timeout=2.0) as answer:
            return answer.read() in (b"ok\n", b"stopping\n")
    except urllib.error.HTTPError as exc:
        return exc.code == 503 and exc.read() == b"stopping\n"
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return False


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
