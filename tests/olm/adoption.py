"""What the adoption tests share: corpus bundles installed by a real OLM v0, and a repository of their catalog.

Each case is one OLM v0 install in a namespace of its own (a CatalogSource,
an OperatorGroup for its mode and a Subscription); the repository holds its
own rendering of the same bundles, each pointing at its copy under bundles/.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import kubernetes.client

from reconciler.localcluster import ControlPlane
from tests.olm.support import CORPUS, WAIT, get, olm_logs, uncaptured, write_catalog_of
from tests.support.repo import commit_all
from tests.support.wait import wait_until

GROUP = "operators.coreos.com"
SUFFIX = uuid.uuid4().hex[:6]


class Case:
    """One OLM v0 install, in a namespace of its own (``namespace``: in that one, which it watches). A
    ``dependency_of`` case is not subscribed to: OLM installs it in its dependent's
    namespace to satisfy the dependent's bundle, under a Subscription it makes itself, named as OLM names those
    (package, ``channel``, catalog and its namespace)."""

    def __init__(self, bundle: str, csv: str, mode: str, approval: str = "Automatic", config: dict | None = None,
                 orphan: bool = False, dependency_of: Case | None = None, channel: str = "",
                 namespace: str = "") -> None:
        self.bundle, self.csv, self.mode, self.approval, self.config = bundle, csv, mode, approval, config
        self.source: Path | None = None   # the bundle's directory when it is not the corpus's ``bundle``
        self.orphan, self.dependency_of = orphan, dependency_of
        self.package = bundle.split("/")[0]
        self.namespace = namespace or (dependency_of.namespace if dependency_of else f"adopt-{mode.lower()}-{SUFFIX}")
        self.watched = f"adopt-watched-{SUFFIX}" if mode == "SingleNamespace" and not namespace else self.namespace
        self.subscription = f"{self.package}-{channel}-corpus-{self.namespace}" if dependency_of else self.package

    @property
    def path(self) -> Path:
        """The bundle's directory."""
        return self.source or CORPUS / "operators" / self.bundle

    @property
    def targets(self) -> list[str] | None:
        return None if self.mode.startswith("AllNamespaces") else [self.watched]


def custom(api) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


def subscribe(api, case: Case, address: str) -> None:
    if case.dependency_of:
        return   # OLM subscribes to it
    core = kubernetes.client.CoreV1Api(api)
    for ns in {case.namespace, case.watched}:
        core.create_namespace({"metadata": {"name": ns}})
    c = custom(api)
    c.create_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "catalogsources", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "CatalogSource", "metadata": {"name": "corpus"},
        "spec": {"sourceType": "grpc", "address": address}})
    group: dict = {"apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "group"}, "spec": {}}
    if case.targets is not None:
        group["spec"]["targetNamespaces"] = case.targets
    c.create_namespaced_custom_object(GROUP, "v1", case.namespace, "operatorgroups", group)
    spec = {"name": case.package, "source": "corpus", "sourceNamespace": case.namespace,
            "installPlanApproval": case.approval}
    if case.config:
        spec["config"] = case.config
    c.create_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "subscriptions", {
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "Subscription", "metadata": {"name": case.package},
        "spec": spec})


def settle(api, case: Case, plane: ControlPlane) -> None:
    """Approve a Manual install's first plan, then wait for the CSV and for the Subscription to record it."""
    if case.approval == "Manual":
        def waiting() -> str | None:
            ref = ((get(api, case.namespace, "subscriptions", case.subscription) or {}).get("status") or {}).get(
                "installPlanRef")
            return ref and ref["name"]
        plan = wait_until(waiting, f"{case.package}'s InstallPlan", timeout=WAIT, every=0.5, diagnose=olm_logs(plane))
        custom(api).patch_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "installplans", plan,
                                                   {"spec": {"approved": True}})

    def succeeded() -> bool:
        csv = get(api, case.namespace, "clusterserviceversions", case.csv) or {}
        sub = get(api, case.namespace, "subscriptions", case.subscription) or {}
        return (csv.get("status") or {}).get("phase") == "Succeeded" and \
            bool((sub.get("status") or {}).get("installedCSV"))
    wait_until(succeeded, f"{case.csv} Succeeded", timeout=WAIT, every=0.5, diagnose=olm_logs(plane))
    # catalog-operator may execute the plan for a while after the CSV succeeds, writing its objects (and a
    # dependency's Subscription) again, and adopt leaves such an install: what runs is settled once it is Complete
    sub = get(api, case.namespace, "subscriptions", case.subscription) or {}
    plan = ((sub.get("metadata") or {}).get("annotations") or {}).get("olm.generated-by") or \
        ((sub.get("status") or {}).get("installPlanRef") or {}).get("name")
    if plan:
        wait_until(lambda: plan_complete(plane, plan), f"InstallPlan {plan} Complete, as catalog-operator sees it",
                   timeout=600, every=0.5, diagnose=olm_logs(plane))
    if case.config and case.config.get("env"):
        # olm-operator writes a Subscription's spec.config into the Deployments on a later sync than the one
        # that makes the CSV Succeeded: what runs is what OLM made of the overrides only once they are there.
        def overridden() -> bool:
            deployments = kubernetes.client.AppsV1Api(api).list_namespaced_deployment(
                case.namespace, label_selector=f"olm.owner={case.csv}").items
            return bool(deployments) and all(
                d.status.observed_generation == d.metadata.generation
                and all(any(e.name == want["name"] and e.value == want.get("value") for e in c.env or [])
                        for c in d.spec.template.spec.containers for want in case.config["env"])
                for d in deployments)
        wait_until(overridden, f"{case.csv}'s Deployments carrying the Subscription's spec.config", timeout=WAIT,
                   every=0.5, diagnose=olm_logs(plane))
    if case.orphan:
        custom(api).delete_namespaced_custom_object(GROUP, "v1alpha1", case.namespace, "subscriptions",
                                                    case.subscription)


def plan_complete(plane: ControlPlane, plan: str) -> bool:
    """Whether catalog-operator's last sync of the InstallPlan found it Complete in its cache.

    The API can say Complete while a sync that read the plan as Installing
    from the informer's cache is still executing it (writing its objects
    again); syncs of one plan run one at a time, so once a sync starts from
    Complete (it logs the phase it read), none is executing it any more.
    """
    log = (plane.state_dir / "catalog-operator.log").read_text(errors="replace")
    syncs = [line for line in log.splitlines() if "msg=syncing" in line and f" ip={plan} " in line]
    return bool(syncs) and syncs[-1].rstrip().endswith("phase=Complete")


def make_repo(path: Path, cases: list[Case], catalog: str = "corpus") -> Path:
    """A git repository with catalogs/<catalog>: the same bundles rendered with file://bundles/... images."""
    path.mkdir()
    for case in cases:
        shutil.copytree(case.path, path / "bundles" / case.bundle)
    write_catalog_of([c.path for c in cases], path / "catalogs" / catalog,
                     image=lambda d: f"file://bundles/{d.parent.name}/{d.name}", by_opm=False)
    commit_all(path, "catalogs")
    return path


def shell(kubeconfig: Path, cwd: Path):
    """``run(line, code=0)``: a documented line run by bash in ``cwd`` as a reader would (the cluster in
    $KUBECONFIG, this Python's ``reconciler`` on PATH, a git identity), asserting its exit code; its stdout."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(line: str, code: int = 0) -> str:
        done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == code, f"{line}\n{done.stdout}{done.stderr}"
        return done.stdout
    run.env = env   # type: ignore[attr-defined]
    return run


def killed(argv: list[str], seconds: float, when=lambda: True) -> int | None:
    """Run the CLI and SIGKILL it once ``when()`` holds, ``seconds`` later; its exit code if it finished first,
    else None."""
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while proc.poll() is None and not when():
        time.sleep(0.05)
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def reconciler(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=600)




@contextmanager
def installed_by_olm(request, plane: ControlPlane, directory: Path, cases: list[Case]) -> Iterator[None]:
    """Every case installed by OLM v0 from one catalog served by opm (a CatalogSource per namespace)."""
    from bench.peers import opm

    with uncaptured(request):
        opm.opm_binary(log=print)
    write_catalog_of([c.path for c in cases], directory / "catalog")
    with opm.serve(directory / "catalog", directory / "serve") as address, plane.admin_client() as api:
        for case in cases:
            subscribe(api, case, address)
        for case in cases:
            settle(api, case, plane)
        yield
