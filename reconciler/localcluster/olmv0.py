"""OLM v0 (olm-operator and catalog-operator) on the local cluster, pinned by ``olm/`` and built by ``gobuild``.

OLM v0 is what most clusters run today, so tests, demos and benchmarks need the
real one beside the reconciler, not an imitation. Its two commands are built
from the pinned ``github.com/operator-framework/operator-lifecycle-manager``
module (``go install …@version`` is refused for it, so ``olm/``'s go.mod
requires it and its tools.go imports both commands) and run as processes of
the control plane, as kwok does (``plane``). Its CRDs come from the same
module (``deploy/chart/crds``), copied into the build's cache directory, so a
running cluster never reads the Go module cache.

No image is pulled and no pod of OLM's own runs: catalogs are served by ``opm
serve`` on loopback and registered as CatalogSources with ``spec.address``,
and bundles whose objects are inline in the catalog (``olm.bundle.object``)
need no unpack job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import kubernetes.client
from kubernetes.client.rest import ApiException

from reconciler import yamlio
from reconciler.errors import ControlPlaneError
from reconciler.localcluster.gobuild import GoTool, pinned

MODULE_DIR = Path(__file__).with_name("olm")
MODULE = "github.com/operator-framework/operator-lifecycle-manager"
OLM_VERSION = pinned(MODULE_DIR, MODULE)
# Where both operators keep their state, and the global catalog namespace (OLM's own default).
NAMESPACE = "olm"
OPERATOR_GROUP = "olm-operators"
CRD_GROUP = "operators.coreos.com"
# OpenShift's layout (``ControlPlane(openshift=True)``): its global catalog namespace, where its CatalogSources
# are, and the namespace of its AllNamespaces OperatorGroup, where most operators are installed.
OPENSHIFT_CATALOGS = "openshift-marketplace"
OPENSHIFT_OPERATORS, GLOBAL_GROUP = "openshift-operators", "global-operators"

TOOL = GoTool(
    label="olm", version=OLM_VERSION, module_dir=MODULE_DIR,
    packages=(f"{MODULE}/cmd/olm", f"{MODULE}/cmd/catalog"), outputs=("olm", "catalog"),
    ldflags=("-s", "-w", f"-X {MODULE}/pkg/version.OLMVersion={OLM_VERSION.lstrip('v')}"),
    module_files=((MODULE, "deploy/chart/crds/*.yaml", "crds"),
                  (MODULE, "deploy/upstream/quickstart/olm.yaml", "quickstart")),
)


@dataclass(frozen=True)
class OlmBinaries:
    """The two OLM executables, the directory of its CRDs and the version they come from."""

    olm_operator: Path
    catalog_operator: Path
    crds: Path
    version: str


def ensure_olm(log: Callable[[str], object] = print) -> OlmBinaries:
    """The cached OLM build, built first when missing (a cold build takes about ten minutes on two cores)."""
    paths = TOOL.ensure(log)
    return OlmBinaries(olm_operator=paths["olm"], catalog_operator=paths["catalog"], crds=TOOL.files_dir("crds"),
                       version=OLM_VERSION)


def packageserver(binaries: OlmBinaries) -> list[dict]:
    """OLM's own packageserver as the pinned module's quickstart installs it: its ClusterServiceVersion (labelled
    ``olm.version``, in OLM's namespace, under its OperatorGroup) and the ServiceAccount, ClusterRole and binding
    that CSV's permissions name. Nothing serves its API on the local cluster (kwok runs no container), so OLM keeps
    it InstallWaiting and discovery of its group fails, unless something answers there
    (tests/olm/served.py does)."""
    wanted = {("ServiceAccount", "olm-operator-serviceaccount"),
              ("ClusterRole", "system:controller:operator-lifecycle-manager"),
              ("ClusterRoleBinding", "olm-operator-binding-olm"), ("ClusterServiceVersion", "packageserver")}
    path = binaries.crds.parent / "quickstart" / "olm.yaml"
    found = [d for d in yamlio.read_all(path) if isinstance(d, dict)
             and (d.get("kind"), (d.get("metadata") or {}).get("name")) in wanted]
    if len(found) != len(wanted):
        raise ControlPlaneError(f"OLM's quickstart ({path}) no longer holds its packageserver as expected",
                                path=str(path))
    for doc in found:
        if doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = NAMESPACE
    return found


def olm_present() -> bool:
    """Whether the OLM build for the current pin is in the cache (no build is started)."""
    return TOOL.present()


def catalog_operator_args(binaries: OlmBinaries, kubeconfig: Path, interval: float | None = None,
                          catalog_namespace: str = NAMESPACE) -> list[str]:
    """``interval``: seconds between catalog-operator's full resyncs (``--interval``; its default, 15 minutes,
    when None). ``catalog_namespace``: OLM's global catalog namespace, whose CatalogSources every namespace's
    Subscriptions resolve from (``olm`` upstream; OpenShift's is ``openshift-marketplace``)."""
    return [str(binaries.catalog_operator), f"--kubeconfig={kubeconfig}", f"--namespace={catalog_namespace}",
            *_interval(interval)]


def olm_operator_args(binaries: OlmBinaries, interval: float | None = None) -> list[str]:
    """``interval``: seconds between olm-operator's full resyncs (``--interval``, with OLM's 20% jitter; its
    default, 5 minutes, when None)."""
    # It reads $KUBECONFIG (olm_operator_env); an empty status name: there is no OpenShift ClusterOperator to write.
    return [str(binaries.olm_operator), f"--namespace={NAMESPACE}", "--writeStatusName=", *_interval(interval)]


def _interval(seconds: float | None) -> list[str]:
    return [] if seconds is None else [f"--interval={seconds:g}s"]


def olm_operator_env(kubeconfig: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(kubeconfig), "OPERATOR_NAMESPACE": NAMESPACE, "OPERATOR_NAME": "olm-operator"}


def install(api: kubernetes.client.ApiClient, binaries: OlmBinaries, timeout: float = 60.0, *,
            openshift: bool = False) -> None:
    """OLM's CRDs (waiting until they are established), its namespace and the OperatorGroup of that namespace;
    ``openshift``: OpenShift's catalog namespace too, and its ``openshift-operators`` under ``global-operators``
    (an AllNamespaces OperatorGroup).

    What exists already is left as it is, so OLM can be added to a running cluster again after a restart.
    """
    def create(call: Callable[..., object], *args: object) -> None:
        try:
            call(*args, _preload_content=False)   # the reply is not read back into the client's model classes
        except ApiException as exc:
            if exc.status != 409:
                raise

    ext = kubernetes.client.ApiextensionsV1Api(api)
    names = []
    for path in sorted(binaries.crds.glob("*.yaml")):
        for crd in yamlio.read_all(path):
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition":
                create(ext.create_custom_resource_definition, crd)
                names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for name in names:
        while not _established(json.loads(ext.read_custom_resource_definition(name, _preload_content=False).data)):
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"OLM's CRD {name} was not established in {timeout:.0f}s")
            time.sleep(0.1)
    create(kubernetes.client.CoreV1Api(api).create_namespace, {"metadata": {"name": NAMESPACE}})
    create(kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object,
           CRD_GROUP, "v1", NAMESPACE, "operatorgroups",
           {"apiVersion": f"{CRD_GROUP}/v1", "kind": "OperatorGroup",
            "metadata": {"name": OPERATOR_GROUP, "namespace": NAMESPACE},
            "spec": {"targetNamespaces": [NAMESPACE]}})
    if openshift:
        for namespace in (OPENSHIFT_CATALOGS, OPENSHIFT_OPERATORS):
            create(kubernetes.client.CoreV1Api(api).create_namespace, {"metadata": {"name": namespace}})
        create(kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object,
               CRD_GROUP, "v1", OPENSHIFT_OPERATORS, "operatorgroups",
               {"apiVersion": f"{CRD_GROUP}/v1", "kind": "OperatorGroup",
                "metadata": {"name": GLOBAL_GROUP, "namespace": OPENSHIFT_OPERATORS}, "spec": {}})


def olm_operator_acted(api: kubernetes.client.ApiClient) -> bool:
    """olm-operator has synced and acted: the OperatorGroup of OLM's namespace lists its target namespace."""
    try:
        group = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            CRD_GROUP, "v1", NAMESPACE, "operatorgroups", OPERATOR_GROUP)
    except ApiException:
        return False
    return NAMESPACE in ((group.get("status") or {}).get("namespaces") or [])


def _established(crd: dict) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
