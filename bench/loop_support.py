"""Shared parts of the loop benchmarks: a control plane, a repository of N operators, a request counter."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pygit2

from reconciler.localcluster import ControlPlane, ensure_binaries
from reconciler.kube.client import Kube

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gitops-repo"
# Approved as a class: the benchmarks measure reconciling, not waiting for an approval.
ALLOW_ALL = """apiVersion: rukpak.io/v1
kind: ProvisionerClass
metadata:
  name: bench-allow-all
provisioner: operators.coreos.com/operators
parameters:
  approval: AllowAll
"""


def start_plane() -> ControlPlane:
    plane = ControlPlane(Path(tempfile.mkdtemp(prefix="bench-plane-")), ensure_binaries(log=print))
    plane.start()
    return plane


class CountingKube(Kube):
    """Counts requests by kind: reads, dry-run writes (validated, never stored) and real writes."""

    def __init__(self, api: Any) -> None:
        super().__init__(api)
        self.counts: Counter[str] = Counter()

    def request(self, method: str, path: str, *, query=None, **kw):
        dry = any(k == "dryRun" for k, _ in (query or []))
        self.counts["read" if method == "GET" else "dry-run" if dry else "write"] += 1
        return super().request(method, path, query=query, **kw)


def make_repo(path: Path, operators: int) -> pygit2.Repository:
    """The example's plumbus 1.1.0 bundle copied into ``operators`` distinct packages (own CRD group, names)."""
    src = EXAMPLE / "bundles" / "plumbus" / "1.1.0"
    (path / "operators").mkdir(parents=True)
    catalog = []
    for i in range(operators):
        name = f"plumbus{i:02d}"

        def rename(text: str) -> str:
            return (text.replace("plumbai", f"plumbai{i:02d}").replace("how.theydoit.com", f"p{i:02d}.theydoit.com")
                    .replace("plumbus", name))

        for f in src.rglob("*"):
            if f.is_file():
                dest = path / "bundles" / name / rename(f.relative_to(src).as_posix())
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(rename(f.read_text()))
        catalog.append(f"""---
schema: olm.package
name: {name}
defaultChannel: stable
---
schema: olm.channel
package: {name}
name: stable
entries:
  - name: {name}.v1.1.0
---
schema: olm.bundle
package: {name}
name: {name}.v1.1.0
image: file://bundles/{name}
properties:
  - type: olm.package
    value: {{packageName: {name}, version: 1.1.0}}
""")
        (path / "operators" / f"{name}.yaml").write_text(f"""apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: {name}
spec:
  catalog: {{name: community, package: {name}, channel: stable}}
  provisionerClassName: bench-allow-all
""")
    (path / "operators" / "provisioner-class.yaml").write_text(ALLOW_ALL)
    (path / "catalogs" / "community").mkdir(parents=True)
    (path / "catalogs" / "community" / "catalog.yaml").write_text("".join(catalog))
    repo = pygit2.init_repository(str(path), initial_head="main")
    commit(repo, "operators")
    return repo


def commit(repo: pygit2.Repository, message: str) -> str:
    index = repo.index
    index.add_all()
    index.write()
    sig = pygit2.Signature("Bench", "bench@example.invalid")
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, index.write_tree(), parents))


def allow_all(path: Path) -> None:
    """Every bundle of the repository at ``path`` approved (the example ships unapproved): a benchmark measures
    the reconcile, not the approval."""
    (path / "operators" / "provisioner-class.yaml").write_text(ALLOW_ALL)
    settings = path / "reconciler.yaml"
    settings.write_text(settings.read_text() + "provisionerClassName: bench-allow-all\n")


def copy_example(path: Path) -> pygit2.Repository:
    shutil.copytree(EXAMPLE, path, ignore=shutil.ignore_patterns("olm.lock"))
    allow_all(path)
    repo = pygit2.init_repository(str(path), initial_head="main")
    commit(repo, "example")
    return repo


def status_revision(kube: Kube, name: str) -> str | None:
    info = kube.resource("reconciler.dev/v1alpha1", "Operator")
    obj = kube.get(info, "", name) if info else None
    st = (obj or {}).get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions", []))
    return st.get("revision") if ready else None
