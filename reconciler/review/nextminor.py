"""The ``dry-run-next`` input class: what would be installed, and would it still work, one minor later.

Resolution already assumes the next Kubernetes minor for such declarations;
this adds the API check at that minor on the chosen bundle's rendered
objects, says which version was assumed, and shows what would change: the
objects of the bundle installed now (as the lockfile records it) compared with
the chosen bundle's, by the review's own object diff (Secret data redacted).
Nothing is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.errors import ReconcilerError
from reconciler.review.compare import ObjectChange, object_changes, secret_lookup
from reconciler.review.apis import ApiFinding, check, check_versions, next_minor


@dataclass(frozen=True)
class NextMinorCheck:
    owner: str
    bundle: str
    assumed: str | None                  # the Kubernetes minor assumed ("1.22"); None when unknown
    findings: tuple[ApiFinding, ...]
    error: str = ""                      # the bundle could not be rendered
    installed: str | None = None         # the bundle olm.lock records for the owner; None when none is
    objects: tuple[ObjectChange, ...] = ()   # what would change, from the installed bundle's objects
    installed_error: str = ""            # the installed bundle could not be rendered to compare with
    lock_file: str = "olm.lock"          # the lockfile that records the installed bundle
    max_openshift: str = ""              # the bundle's olm.maxOpenShiftVersion ("" when it declares none)
    openshift: str | None = None         # the OpenShift release it is checked against; None when unknown

    def to_dict(self) -> dict:
        from reconciler.review.render import object_document

        doc = {"operator": self.owner, "bundle": self.bundle, "assumedKubernetesVersion": self.assumed,
               "apiRemovals": [f.to_dict() for f in self.findings], "installed": self.installed,
               "objects": [object_document(o) for o in self.objects]}
        if self.max_openshift:
            from reconciler.bundle.openshift import blocks

            doc["maxOpenShiftVersion"] = self.max_openshift
            doc["openshift"] = {"version": self.openshift,
                                "blocksNextMinor": blocks(self.max_openshift, self.openshift) if self.openshift else ""}
        if self.error:
            doc["error"] = self.error
        if self.installed_error:
            doc["installedError"] = self.installed_error
        return doc

    def describe(self) -> list[str]:
        from reconciler.review.render import object_lines, objects_summary

        where = (f"assuming Kubernetes {self.assumed} (the cluster's next minor)" if self.assumed else
                 "Kubernetes version unknown (set kubernetesVersion in reconciler.yaml or name a cluster): "
                 "every listed API is reported at the release that removes it")
        head = f"  {self.owner} (dry-run-next, {self.bundle}): API check {where}:"
        if self.error:
            return [head, f"    not checked: {self.error}"]
        lines = [head]
        if not self.findings:
            lines.append("    no object uses an API deprecated or removed there")
        lines += [f"    ! {f.describe()}" for f in self.findings]
        lines += self.openshift_lines()
        against = f"{self.installed}, installed per {self.lock_file}" if self.installed else "nothing installed"
        if self.installed_error:
            return lines + [f"  {self.owner}: objects not compared with {self.installed}: {self.installed_error}"]
        if not self.objects:
            return lines + [f"  {self.owner}: no object would change ({against})"]
        lines.append(f"  {self.owner}: objects that would change ({against}): {objects_summary(self.objects)}")
        return lines + object_lines(self.objects, "    ")


    def openshift_lines(self) -> list[str]:
        """OpenShift's gate: the bundle's olm.maxOpenShiftVersion against the cluster's next OpenShift minor."""
        if not self.max_openshift:
            return []
        from reconciler.bundle.openshift import blocks, next_minor as next_openshift

        if self.openshift is None:
            return [f"    olm.maxOpenShiftVersion {self.max_openshift}: OpenShift version unknown (set openshiftVersion "
                    f"in reconciler.yaml, or name an OpenShift cluster) to check it against the next minor"]
        why = blocks(self.max_openshift, self.openshift)
        if why:
            return [f"    ! {why}"]
        nxt = next_openshift(self.openshift)
        return [f"    olm.maxOpenShiftVersion {self.max_openshift}: allows OpenShift "
                f"{'.'.join(map(str, nxt)) if nxt else 'next'}, the minor after {self.openshift}"]


def next_minor_checks(snapshot, resolution, openshift: str | None = None) -> list[NextMinorCheck]:  # noqa: ANN001
    """One check per declaration whose input class looks one Kubernetes minor ahead (``snapshot`` a RepoSnapshot,
    ``resolution`` its Resolution), its bundle's OpenShift gate checked against ``openshift`` (the cluster's
    release), else ``openshiftVersion`` of reconciler.yaml."""
    openshift = openshift or snapshot.settings.openshift_version
    from reconciler.bundle import render
    from reconciler.bundle.certs import SelfSignedProvider

    out = []
    assumed = next_minor(resolution.kube_version) if resolution.kube_version else None
    locked = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    default_ns = snapshot.settings.default_install_namespace
    for sel in resolution.selections:
        decl = sel.declaration
        cls = snapshot.input_classes.get(decl.input_class) if decl is not None else None
        if cls is None or not cls.next_kube_minor:
            continue
        entry = locked.get(sel.owner)
        before, before_error = (), ""
        if entry is not None:
            try:
                before = render(entry.source, snapshot.root, sel.install, default_ns,
                                digest=entry.digest or None).objects
            except ReconcilerError as exc:
                before_error = exc.message.splitlines()[0]
        try:   # the installed bundle's webhook certificates are reused: an unchanged webhook is no change
            bundle = render(sel.image, snapshot.root, sel.install, default_ns,
                            SelfSignedProvider(lookup=secret_lookup(before)))
        except ReconcilerError as exc:
            out.append(NextMinorCheck(sel.owner, sel.bundle_name, assumed, (), exc.message.splitlines()[0]))
            continue
        found = check(sel.owner, bundle.objects, assumed) if assumed else check_versions(sel.owner, bundle.objects,
                                                                                          None)
        changes = () if before_error else tuple(object_changes(before, bundle.objects))
        out.append(NextMinorCheck(sel.owner, sel.bundle_name, assumed, tuple(found),
                                  installed=entry.name if entry is not None else None, objects=changes,
                                  installed_error=before_error, lock_file=snapshot.lock_file,
                                  max_openshift=str(bundle.metadata.get("maxOpenShiftVersion") or ""),
                                  openshift=openshift))
    return out
