"""The kube-apiserver and etcd binaries pinned by ``gomod/``, built by ``reconciler.gobuild``.

A plain ``go build`` of kube-apiserver reports ``v0.0.0-master+$Format:%H$``
from /version, which clients and tests rightly reject, so the build adds the
version stamps Kubernetes' own build scripts add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.gobuild import GoTool, cache_dir, pinned, tail

GOMOD_DIR = Path(__file__).with_name("gomod")
KUBERNETES_VERSION = pinned(GOMOD_DIR, "k8s.io/kubernetes")
ETCD_VERSION = pinned(GOMOD_DIR, "go.etcd.io/etcd/server/v3")

_VERSION_PACKAGE = "k8s.io/component-base/version"
_MAJOR, _MINOR = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
_STAMPS = {"gitVersion": KUBERNETES_VERSION, "gitMajor": _MAJOR, "gitMinor": _MINOR, "gitTreeState": "clean"}

TOOL = GoTool(
    label="controlplane", version=KUBERNETES_VERSION, module_dir=GOMOD_DIR,
    packages=("k8s.io/kubernetes/cmd/kube-apiserver", "./etcd"), outputs=("kube-apiserver", "etcd"),
    ldflags=("-s", "-w", *(f"-X {_VERSION_PACKAGE}.{k}={v}" for k, v in _STAMPS.items())),
)

__all__ = ["ETCD_VERSION", "KUBERNETES_VERSION", "Binaries", "binaries_dir", "cache_dir", "ensure_binaries",
           "tail"]


@dataclass(frozen=True)
class Binaries:
    """Paths of the two control-plane executables and the Kubernetes version they serve."""

    kube_apiserver: Path
    etcd: Path
    version: str


def binaries_dir() -> Path:
    """Where the binaries for the current pins live (built or not)."""
    return TOOL.directory


def ensure_binaries(log: Callable[[str], object] = print) -> Binaries:
    """The cached binaries, built first when missing (a cold build takes minutes)."""
    paths = TOOL.ensure(log)
    return Binaries(kube_apiserver=paths["kube-apiserver"], etcd=paths["etcd"], version=KUBERNETES_VERSION)
