"""What the stages before the engine read of a cluster, as one value read once per run.

Verifying the source (what the cluster records as applied, against a
rollback), resolution (what is installed, the Kubernetes version) and the
approval stage ask the same cluster the same questions; ``ClusterFacts``
asks each once, lazily, and writes nothing. The engine reads the cluster
afresh when it plans: time passes between the two, and only its reads decide
what is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.cluster.status import objects as status_objects
from reconciler.model.lock import LockEntry

if TYPE_CHECKING:
    from reconciler.kube.client import Kube


class ClusterFacts:
    """The read-only facts of the cluster ``kube`` reaches, each asked when first needed."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._version: str | None = None
        self._records: dict[str, status_objects.Recorded] | None = None

    @property
    def version(self) -> str | None:
        """The cluster's Kubernetes version (``1.36.3``), as its API server says."""
        if self._version is None:
            self._version = str(self.kube.request("GET", "/version").get("gitVersion", "")).lstrip("v")
        return self._version or None

    @property
    def records(self) -> dict[str, status_objects.Recorded]:
        """The status objects of every reconciler instance on the cluster."""
        if self._records is None:
            self._records = status_objects.read_all(self.kube)
        return self._records

    def applied_revisions(self) -> list[str]:
        """Every revision any instance records as applied (what a rollback is judged against: the tree's own
        settings, its instance among them, are not trusted before it is verified)."""
        return [r.status.get("revision") or "" for r in self.records.values()]

    def installed(self, instance: str) -> dict[str, LockEntry]:
        """What ``instance`` has installed, per owner, as its status objects record it."""
        installed = {}
        for name, rec in self.records.items():
            b = rec.status.get("bundle") or {}
            if rec.instance == instance and b.get("name"):
                installed[name] = LockEntry(operator=name, package=b.get("package", ""), name=b["name"],
                                            version=b.get("version", ""), catalog=b.get("catalog", ""),
                                            channel=b.get("channel", ""), source=b.get("source", ""),
                                            digest=b.get("digest", ""))
        return installed
