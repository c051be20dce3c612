"""A real Kubernetes API server on the local machine, for tests and for trying things out.

Design decisions:

* Real binaries, not a fake: kube-apiserver and etcd, so validation, admission,
  RBAC, server-side apply and conflicts behave as on a production cluster;
  kube-controller-manager and kube-scheduler, so workloads roll out,
  namespaces finish deleting and owner references cascade; and kwok, which
  plays the kubelet for a few simulated nodes (see ``plane``), so health
  can be judged on real workload status without running containers.
* Built from source with Go (``build``), pinned by ``gomod/`` and ``kwok/``
  (go.mod and go.sum), cached per user and per pin. No release download to verify.
* A fresh PKI per start (``pki``): a serving CA, a client CA whose
  certificates carry the user (CN) and groups (O), and a service-account
  signing key, so tests can use restricted identities as well as the admin.
* OLM v0 on request (``olmv0``): olm-operator and catalog-operator, pinned
  by ``olm/``, run as two more processes of the plane.
* Two ways to run it: attached to the calling process for pytest
  (``ControlPlane``, a context manager) and detached for the CLI
  (``cluster_up``/``cluster_down``/``cluster_kubeconfig``), recorded in a
  state file so a later command finds it.
"""

from .build import ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION, Binaries, cache_dir, ensure_binaries
from .detached import cluster_down, cluster_kubeconfig, cluster_up, default_state_dir, named_state_dir
from .olmv0 import OLM_VERSION, OlmBinaries, ensure_olm
from .plane import ControlPlane

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "OLM_VERSION",
    "Binaries",
    "ControlPlane",
    "OlmBinaries",
    "cache_dir",
    "cluster_down",
    "cluster_kubeconfig",
    "cluster_up",
    "default_state_dir",
    "ensure_binaries",
    "ensure_olm",
    "named_state_dir",
]
