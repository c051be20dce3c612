"""The local cluster's binaries, pinned by ``gomod/`` and ``kwok/``, built by ``reconciler.localcluster.gobuild``.

``gomod/`` pins Kubernetes (kube-apiserver, kube-controller-manager,
kube-scheduler) and etcd; ``kwok/`` pins kwok, which plays the kubelet for
simulated nodes, plus ``kwok-stages``, a few lines that print kwok's own
default node and pod lifecycle stages. A plain ``go build`` of a Kubernetes
command reports ``v0.0.0-master+$Format:%H$`` from /version, which clients
and tests rightly reject, so the build adds the version stamps Kubernetes' own
build scripts add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.localcluster.gobuild import GoTool, cache_dir, pinned, tail

GOMOD_DIR = Path(__file__).with_name("gomod")
KWOK_DIR = Path(__file__).with_name("kwok")
KUBERNETES_VERSION = pinned(GOMOD_DIR, "k8s.io/kubernetes")
ETCD_VERSION = pinned(GOMOD_DIR, "go.etcd.io/etcd/server/v3")
KWOK_VERSION = pinned(KWOK_DIR, "sigs.k8s.io/kwok")

_VERSION_PACKAGE = "k8s.io/component-base/version"
_MAJOR, _MINOR = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
_STAMPS = {"gitVersion": KUBERNETES_VERSION, "gitMajor": _MAJOR, "gitMinor": _MINOR, "gitTreeState": "clean"}
_KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

TOOL = GoTool(
    label="controlplane", version=KUBERNETES_VERSION, module_dir=GOMOD_DIR,
    packages=(*(f"k8s.io/kubernetes/cmd/{c}" for c in _KUBE_COMMANDS), "./etcd"),
    outputs=(*_KUBE_COMMANDS, "etcd"),
    ldflags=("-s", "-w", *(f"-X {_VERSION_PACKAGE}.{k}={v}" for k, v in _STAMPS.items())),
)
KWOK_TOOL = GoTool(
    label="kwok", version=KWOK_VERSION, module_dir=KWOK_DIR,
    packages=("sigs.k8s.io/kwok/cmd/kwok", "./kwok-stages"), outputs=("kwok", "kwok-stages"),
)

__all__ = ["ETCD_VERSION", "KUBERNETES_VERSION", "KWOK_VERSION", "Binaries", "binaries_dir", "cache_dir",
           "ensure_binaries", "tail"]


@dataclass(frozen=True)
class Binaries:
    """Paths of the local cluster's executables and the Kubernetes version they serve."""

    kube_apiserver: Path
    etcd: Path
    version: str
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kwok_stages: Path


def binaries_dir() -> Path:
    """Where the Kubernetes binaries for the current pins live (built or not)."""
    return TOOL.directory


def ensure_binaries(log: Callable[[str], object] = print) -> Binaries:
    """The cached binaries, built first when missing (a cold build takes minutes)."""
    paths = TOOL.ensure(log)
    kwok = KWOK_TOOL.ensure(log)
    return Binaries(kube_apiserver=paths["kube-apiserver"], etcd=paths["etcd"], version=KUBERNETES_VERSION,
                    kube_controller_manager=paths["kube-controller-manager"],
                    kube_scheduler=paths["kube-scheduler"], kwok=kwok["kwok"], kwok_stages=kwok["kwok-stages"])
