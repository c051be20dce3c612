"""The ``dry-run-next`` input class: what would be installed, and would it still work, one minor later.

Resolution already assumes the next Kubernetes minor for such declarations;
this adds the API check at that minor on the chosen bundle's rendered
objects, and says which version was assumed. Nothing is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.errors import ReconcilerError
from reconciler.review.apis import ApiFinding, check, check_versions, next_minor


@dataclass(frozen=True)
class NextMinorCheck:
    owner: str
    bundle: str
    assumed: str | None                  # the Kubernetes minor assumed ("1.22"); None when unknown
    findings: tuple[ApiFinding, ...]
    error: str = ""                      # the bundle could not be rendered

    def to_dict(self) -> dict:
        doc = {"operator": self.owner, "bundle": self.bundle, "assumedKubernetesVersion": self.assumed,
               "apiRemovals": [f.to_dict() for f in self.findings]}
        if self.error:
            doc["error"] = self.error
        return doc

    def describe(self) -> list[str]:
        where = (f"assuming Kubernetes {self.assumed} (the cluster's next minor)" if self.assumed else
                 "Kubernetes version unknown (set kubernetesVersion in reconciler.yaml or name a cluster): "
                 "every listed API is reported at the release that removes it")
        head = f"  {self.owner} (dry-run-next, {self.bundle}): API check {where}:"
        if self.error:
            return [head, f"    not checked: {self.error}"]
        if not self.findings:
            return [head, "    no object uses an API deprecated or removed there"]
        return [head] + [f"    ! {f.describe()}" for f in self.findings]


def next_minor_checks(snapshot, resolution) -> list[NextMinorCheck]:  # noqa: ANN001 - RepoSnapshot, Resolution
    """One check per declaration whose input class looks one Kubernetes minor ahead."""
    from reconciler.bundle import render

    out = []
    assumed = next_minor(resolution.kube_version) if resolution.kube_version else None
    for sel in resolution.selections:
        decl = sel.declaration
        cls = snapshot.input_classes.get(decl.input_class) if decl is not None else None
        if cls is None or not cls.next_kube_minor:
            continue
        try:
            bundle = render(sel.image, snapshot.root, sel.install, snapshot.settings.default_install_namespace)
        except ReconcilerError as exc:
            out.append(NextMinorCheck(sel.owner, sel.bundle_name, assumed, (), exc.message.splitlines()[0]))
            continue
        found = check(sel.owner, bundle.objects, assumed) if assumed else check_versions(sel.owner, bundle.objects,
                                                                                          None)
        out.append(NextMinorCheck(sel.owner, sel.bundle_name, assumed, tuple(found)))
    return out
