"""The reconcile pipeline: repository -> catalogs -> resolution -> bundles -> manifests -> cluster -> status.

Each arrow is a call into one subpackage; this module only strings them
together, so the CLI and the in-cluster loop run exactly the same steps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from reconciler import yamlio
from reconciler.cli import progress
from reconciler.bundle import RenderedBundle, render
from reconciler.catalog import load_catalog
from reconciler.catalog.source import load_image_catalog
from reconciler.approve import Decision
from reconciler.approve.stage import CRD_SAFETY_WAIVER, approval_notes, approvals
from reconciler.cluster.apply import DesiredOperator, PendingOperator, SyncResult, sync
from reconciler.cluster.kube import Kube
from reconciler.bundle import source as bundle_source
from reconciler.cluster import status as status_objects
from reconciler.errors import CatalogError, LockfileError, ReconcilerError, ResolutionError
from reconciler.model.catalog import Catalog
from reconciler.model.declarations import OperatorDecl
from reconciler.model.kube import stamped
from reconciler.model.lock import LockEntry, Lockfile
from reconciler.model.fieldrules import DEFAULT_RULES
from reconciler.repo import RepoSnapshot, Settings, read_repository
from reconciler.repo.fleet import select_cluster, stage_holds
from reconciler.resolve import Resolution, ResolutionRequest, Resolver, SatResolver, Selection


@dataclass(frozen=True)
class Installed:
    """One Operator, Input or dependency after resolution and conversion."""

    selection: Selection
    bundle: RenderedBundle
    lock: LockEntry


@dataclass(frozen=True)
class Outcome:
    snapshot: RepoSnapshot
    installs: tuple[Installed, ...]
    lockfile: Lockfile
    lock_written: bool
    sync: SyncResult
    resolution: Resolution | None = None
    decisions: Mapping[str, Decision] = dataclasses.field(default_factory=dict)

    @property
    def pending(self) -> list[Decision]:
        return [d for d in self.decisions.values() if not d.approved]


def load_catalogs(snapshot: RepoSnapshot, operators: tuple[OperatorDecl, ...]) -> dict[str, Catalog]:
    """Every catalog of the repository, when anything needs resolving.

    All of them, not only those declarations name: an Input may ask for an
    API alone, and a dependency may be met from any catalog. A catalog is a
    directory under catalogs/, or an image named in reconciler.yaml.
    """
    if all(op.bundle is not None for op in operators):
        return {}
    settings = snapshot.settings.catalogs
    images = {n: c.image for n, c in settings.items() if c.image}
    both = sorted(set(images) & set(snapshot.catalog_dirs))
    if both:
        raise CatalogError(f"catalog {both[0]!r} is both a directory under catalogs/ and an image in "
                           f"reconciler.yaml", path="reconciler.yaml", hint="keep one source per catalog name")
    out = {}
    for name in sorted(set(snapshot.catalog_dirs) | set(images)):
        prio = settings[name].priority if name in settings else 0
        if name in images:
            out[name] = load_image_catalog(name, images[name], prio)
        else:
            out[name] = load_catalog(name, snapshot.catalog_dirs[name], f"catalogs/{name}", priority=prio)
    return out


def installed_state(snapshot: RepoSnapshot, kube: Kube | None) -> dict[str, LockEntry]:
    """What is installed, per owner: the cluster's status objects when a cluster is configured, else olm.lock.

    The cluster is the truth about itself: a lock rewritten by a tentative
    ``resolve`` must not make reverting look like a downgrade. Without a
    cluster the lock is the only record of what was installed.
    """
    if kube is None:
        return {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    installed = {}
    for name, rec in status_objects.read_all(kube, snapshot.settings.instance).items():
        b = rec.status.get("bundle") or {}
        if b.get("name"):
            installed[name] = LockEntry(operator=name, package=b.get("package", ""), name=b["name"],
                                        version=b.get("version", ""), catalog=b.get("catalog", ""),
                                        channel=b.get("channel", ""), source=b.get("source", ""),
                                        digest=b.get("digest", ""))
    return installed


def lock_pins(snapshot: RepoSnapshot, installed: Mapping[str, LockEntry]) -> dict[str, LockEntry]:
    """Locked bundles for owners with nothing installed: a committed lock is what a fresh cluster gets.

    Like package-lock.json, the lock is preferred while it still satisfies the
    declarations; a declaration it no longer satisfies resolves afresh.
    """
    locked = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    return {owner: e for owner, e in locked.items() if owner not in installed}


def check_lock_entries(snapshot: RepoSnapshot, catalogs: Mapping[str, Catalog],
                       pins: Mapping[str, LockEntry], installed: Mapping[str, LockEntry] | None = None) -> None:
    """Refuse a lockfile that was edited to point elsewhere, rather than silently rewriting it.

    Every entry's source must stay inside the repository when it is a path
    (``file://``, ``git+file://``). An entry of a declared owner (or of a
    dependency of one) must name a bundle its catalog has, with the source that
    catalog gives it: every entry about to be installed as a pin (nothing
    installed yet), and, given what the cluster has ``installed``, every entry
    that names another bundle than the installed one. An entry that names the
    installed bundle is left to resolution, which says what became of it.
    """
    if snapshot.lock is None:
        return
    where = snapshot.lock_file
    hint = ("olm.lock is written by the reconciler; restore it from git, or delete it and run `reconciler "
            "resolve` to write a fresh one, and review the diff")
    for e in snapshot.lock.entries:
        if _outside(e.source, snapshot.root):
            raise LockfileError(f"source {e.source!r} of bundle {e.name} lies outside the repository",
                                path=where, obj=f"entry {e.operator}", hint=hint)
    declared = {op.name for op in snapshot.operators}
    checked = dict(pins)
    for e in snapshot.lock.entries:
        have = (installed or {}).get(e.operator)
        if have is not None and (have.package, have.name) != (e.package, e.name):
            checked[e.operator] = e
    for owner, e in sorted(checked.items()):
        needed_by = {r for r in e.required_by.split(",") if r}
        if not e.catalog or (owner not in declared and not needed_by & declared):
            continue
        catalog = catalogs.get(e.catalog)
        bundle = catalog.bundle(e.package, e.name) if catalog is not None else None
        if catalog is None:
            problem = f"names catalog {e.catalog!r}, which the repository does not have"
        elif bundle is None:
            problem = f"names bundle {e.name} (package {e.package}), which catalog {e.catalog!r} does not have"
        elif bundle.image != e.source:
            problem = f"gives bundle {e.name} the source {e.source!r}, but catalog {e.catalog!r} gives {bundle.image!r}"
        else:
            continue
        raise LockfileError(problem, path=where, obj=f"entry {owner}", hint=hint)


def _outside(source: str, root: Path) -> bool:
    """Whether a path source (``file://`` directory, ``git+file://`` repository) leaves the repository."""
    top = root.resolve()
    if source.startswith(bundle_source.FILE_SCHEME):
        path = (top / source[len(bundle_source.FILE_SCHEME):].strip("/")).resolve()
    elif source.startswith(bundle_source.GIT_PREFIX + bundle_source.FILE_SCHEME):
        url = source[len(bundle_source.GIT_PREFIX):].partition("#")[0].rpartition("@")[0] or \
            source[len(bundle_source.GIT_PREFIX):].partition("#")[0]
        raw = url[len(bundle_source.FILE_SCHEME):]
        path = (Path(raw) if raw.startswith("/") else top / raw).resolve()
    else:
        return False
    return path != top and top not in path.parents


def held_bundles(holds: Mapping[str, frozenset[str]], installed: Mapping[str, LockEntry]) -> dict[str, frozenset[str]]:
    """What a later stage of a fleet may choose from each held package: the held bundles and the bundle the
    cluster runs (so that the upgrade edge from it to the promoted one is there)."""
    out = {pkg: set(names) for pkg, names in holds.items()}
    for e in installed.values():
        if e.package in out:
            out[e.package].add(e.name)
    return {pkg: frozenset(names) for pkg, names in out.items()}


def kubernetes_version(snapshot: RepoSnapshot, kube: Kube | None) -> str | None:
    if kube is not None:
        return str(kube.request("GET", "/version").get("gitVersion", "")).lstrip("v") or None
    return snapshot.settings.kubernetes_version


def resolve(snapshot: RepoSnapshot, kube: Kube | None = None, resolver: Resolver | None = None, *,
            catalogs: Mapping[str, Catalog] | None = None,
            holds: Mapping[str, frozenset[str]] | None = None) -> Resolution:
    """Resolve the snapshot's declarations (``catalogs``: already loaded for this repository, e.g. once for a
    fleet's clusters; ``holds``: what a fleet's stage allows instead of ``stage_holds``, for a promotion)."""
    progress.stage("loading catalogs")
    if catalogs is None:
        catalogs = load_catalogs(snapshot, snapshot.operators)
    progress.stage(f"resolving {len(snapshot.operators)} declaration(s)")
    semver = frozenset(n for n, c in snapshot.settings.catalogs.items() if c.upgrade_graph == "semver")
    installed = installed_state(snapshot, kube)
    holds = stage_holds(snapshot) if holds is None else holds   # a later stage of a fleet: what was promoted
    pins = lock_pins(snapshot, installed) if kube is not None else {}
    check_lock_entries(snapshot, catalogs, pins, installed if kube is not None else None)
    request = ResolutionRequest(snapshot.operators, catalogs, installed,
                                snapshot.input_classes, kubernetes_version(snapshot, kube), semver, pins=pins,
                                holds=held_bundles(holds, installed) if holds else {},
                                installed_from="" if kube is not None else snapshot.lock_file)
    return (resolver or SatResolver()).resolve(request)


def plan_lock(snapshot: RepoSnapshot, resolution: Resolution) -> Lockfile:
    """The lockfile a resolution implies, before any bundle is converted.

    Digests come from the previous lock when the bundle is unchanged, from a
    digest-pinned reference, or from a local bundle directory; other sources
    get theirs when the bundle is fetched. Owners held by a dry-run class keep
    their previous entry: what is installed for them does not change.
    """
    previous = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    entries = []
    for sel in resolution.selections:
        if not sel.apply:
            if sel.owner in previous:
                entries.append(previous[sel.owner])
            continue
        old = previous.get(sel.owner)
        digest = ""
        if old and (old.name, old.source) == (sel.bundle_name, sel.image):
            digest = old.digest
        elif "@sha256:" in sel.image:
            digest = "sha256:" + sel.image.rsplit("@sha256:", 1)[1]
        elif sel.image.startswith(bundle_source.FILE_SCHEME):
            digest = bundle_source.fetch(sel.image, snapshot.root).digest
        entries.append(LockEntry(operator=sel.owner, package=sel.package, name=sel.bundle_name,
                                 version=sel.version, catalog=sel.catalog, channel=sel.channel, source=sel.image,
                                 digest=digest, required_by=",".join(sel.required_by)))
    return Lockfile(tuple(sorted(entries)))


def repin_moved_tags(lockfile: Lockfile) -> tuple[Lockfile, tuple[str, ...]]:
    """Re-pin locked OCI tags that now name another image; what changed (or could not be checked), as notes.

    ``resolve`` is where pins are chosen, so it asks each tag's registry what
    the tag names now; ``reconcile`` keeps the locked digest and never moves
    with a tag on its own.
    """
    from reconciler import oci

    entries, notes = [], []
    for e in lockfile.entries:
        src = e.source
        tagged = e.digest and "@sha256:" not in src and ("://" not in src or src.startswith("docker://"))
        if not tagged:
            entries.append(e)
            continue
        try:
            now = oci.resolve(src[len("docker://"):] if src.startswith("docker://") else src)
        except (oci.RegistryError, ReconcilerError) as exc:
            notes.append(f"{e.operator}: could not check whether {src} still names {e.digest}: {exc}")
            entries.append(e)
            continue
        if now != e.digest:
            notes.append(f"{e.operator}: re-pinned {src}: the tag moved from {e.digest} to {now}")
            e = dataclasses.replace(e, digest=now)
        entries.append(e)
    return Lockfile(tuple(entries)), tuple(notes)


def check_locked(snapshot: RepoSnapshot, planned: Lockfile) -> None:
    """Refuse a stale lockfile, as `npm ci` does: the resolution must be exactly what is locked."""
    locked = {e.operator: e for e in snapshot.lock.entries} if snapshot.lock else {}
    fresh = {e.operator: e for e in planned.entries}
    problems = []
    for owner in sorted(set(locked) | set(fresh)):
        old, new = locked.get(owner), fresh.get(owner)
        if old is None:
            problems.append(f"{owner}: resolves to {new.name} but is not in the lockfile")
        elif new is None:
            problems.append(f"{owner}: locked to {old.name} but no longer declared")
        else:
            fields = [f for f in ("package", "name", "version", "catalog", "channel", "source")
                      if getattr(old, f) != getattr(new, f)]
            if not fields and old.digest and new.digest and old.digest != new.digest:
                fields.append("digest")
            if fields:
                problems.append(f"{owner}: locked to {old.name}, resolves to {new.name} "
                                f"(differs in {', '.join(fields)})")
    if problems:
        raise LockfileError("the lockfile is stale:\n  " + "\n  ".join(problems),
                            path=snapshot.lock_file,
                            hint="run `reconciler resolve` (or reconcile without --locked) and commit olm.lock")


def convert(snapshot: RepoSnapshot, resolution: Resolution, lock: Lockfile,
            kube: Kube | None = None, certificates=None) -> tuple[Installed, ...]:
    """Fetch and convert every bundle to apply; a locked digest must match the fetched content.

    With ``kube``, self-signed webhook certificates already in the cluster are
    reused until they near expiry, so a reconcile does not rotate them each time.
    ``certificates`` replaces the provider (a review reuses the other side's).
    """
    from reconciler.bundle.certs import SelfSignedProvider, cluster_lookup

    if certificates is None:
        certificates = SelfSignedProvider(lookup=cluster_lookup(kube) if kube is not None else None)
    planned = {e.operator: e for e in lock.entries}
    installs = []
    for sel in resolution.selections:
        if not sel.apply:
            continue
        progress.stage(f"converting {sel.bundle_name} for {sel.owner}")
        entry = planned[sel.owner]
        bundle = render(sel.image, snapshot.root, sel.install, snapshot.settings.default_install_namespace,
                        certificates, digest=entry.digest or None)
        if sel.package and bundle.package and bundle.package != sel.package:
            raise ResolutionError(f"bundle {sel.bundle_name} is listed in package {sel.package!r} but its "
                                  f"annotations say package {bundle.package!r}", path=sel.origin,
                                  obj=f"{sel.kind} {sel.owner}")
        if entry.digest and entry.digest != bundle.digest:
            raise LockfileError(f"the content of {sel.image} changed: locked {entry.digest}, fetched "
                                f"{bundle.digest}", path=snapshot.lock_file, obj=f"{sel.kind} {sel.owner}",
                                hint="bundles are immutable; publish a new version, or re-resolve if the "
                                     "change is intended")
        lock = dataclasses.replace(entry, package=entry.package or bundle.package,
                                   version=entry.version or bundle.version, digest=bundle.digest,
                                   mediatype=bundle.mediatype)
        installs.append(Installed(sel, bundle, lock))
    return tuple(installs)


def _unsafe_crds_allowed(inst: Installed, decision: Decision | None, decl) -> str:
    """CRD names whose unsafe replacement is accepted: the declaration's annotation, or every CRD of the
    bundle when its approval record waives the check (``reconciler approve --waive crd-upgrade-safety``)."""
    if decision is not None and CRD_SAFETY_WAIVER in decision.waived:
        return "*"
    return decl.allow_unsafe_crds if decl is not None else ""


def approval_condition(decision: Decision) -> dict[str, str]:
    """Seed 001's InstallPendingApproval; its reason says why it waits, or how it was approved."""
    return status_objects.condition("InstallPendingApproval", not decision.approved, decision.reason,
                                    decision.message)


def pending_state(installs: tuple[Installed, ...], decisions: Mapping[str, Decision]) -> tuple[PendingOperator, ...]:
    out = []
    for inst in installs:
        d = decisions.get(inst.selection.owner)
        if d is None or d.approved:
            continue
        bundle = {k: getattr(inst.lock, k) for k in ("name", "package", "version", "catalog", "channel",
                                                     "source", "digest")}
        out.append(PendingOperator(inst.selection.owner, _spec(inst), bundle,
                                   d.pending.to_list(), approval_condition(d)))
    return tuple(out)


def _spec(inst: Installed) -> dict:
    sel, decl = inst.selection, inst.selection.declaration
    spec: dict = {"source": {"path": sel.origin}, "kind": sel.kind, "package": inst.lock.package}
    if decl is not None and decl.catalog:
        spec["catalog"] = {"name": decl.catalog.name, "package": decl.catalog.package,
                           "channel": decl.catalog.channel or ""}
    if decl is not None and decl.version:
        spec["version"] = str(decl.version)
    if sel.required_by:
        spec["requiredBy"] = list(sel.required_by)
    if decl is not None and decl.delete_custom_resources:
        # recorded, so it still holds once the declaration is removed: at most this many custom resources
        spec["deleteCustomResources"] = decl.delete_custom_resources
    return spec


def desired_state(installs: tuple[Installed, ...], resolution: Resolution | None = None,
                  decisions: Mapping[str, Decision] | None = None, *, part_of: str = "",
                  preview: bool = False, settings: Settings | None = None) -> list[DesiredOperator]:
    """What to apply: every approved bundle (all of them when no decisions are given); with ``preview`` (a dry
    run), the bundles that wait for approval too, marked as waiting, so the plan shows what approving does.

    Objects are labelled with their Operator and, with ``part_of``, their instance's ApplySet id.
    """
    out = []
    for inst in installs:
        decision = (decisions or {}).get(inst.selection.owner)
        waiting = decision is not None and not decision.approved
        if waiting and not preview:
            continue
        sel = inst.selection
        decl = sel.declaration
        objects = tuple(stamped(obj, sel.owner, part_of) for obj in inst.bundle.objects)
        spec = _spec(inst)
        bundle = {k: getattr(inst.lock, k) for k in ("name", "package", "version", "catalog", "channel",
                                                     "source", "digest")}
        bundle["namespace"] = inst.bundle.namespace
        report, conditions = _report(sel, resolution)
        if decision is not None:
            conditions = (*conditions, approval_condition(decision))
        out.append(DesiredOperator(sel.owner, objects, (inst.bundle.namespace,), spec, bundle, report, conditions,
                                   installer=decision.granted if decision is not None else None,
                                   allow_unsafe_crds=_unsafe_crds_allowed(inst, decision, decl),
                                   metadata=inst.bundle.metadata, waiting=waiting,
                                   ignore=(*DEFAULT_RULES, *(settings.ignore_differences if settings else ()),
                                           *(decl.ignore_differences if decl else ())),
                                   create_only=(*(settings.create_only if settings else ()),
                                                *(decl.create_only if decl else ())),
                                   take_over=settings.take_over_managers if settings else ()))
    return out


def _report(sel: Selection, resolution: Resolution | None) -> tuple[dict, tuple[dict[str, str], ...]]:
    """What resolution says about an owner, in the shapes of the design documents' Operator and Input status."""
    report: dict = {}
    if sel.dependencies:
        report["dependencies"] = [{"bundle": b, "meets": need} for need, b in sel.dependencies]
    if sel.satisfies:
        report["satisfies"] = [{"bundle": b, "meets": need} for b, need in sel.satisfies]
    if sel.kind == "Dependency":
        return report, ()
    updates = [u for u in (resolution.updates if resolution else ()) if u.operator == sel.owner]
    report["updates"] = [{"catalog": u.catalog, "package": u.package, "channel": u.channel,
                          "options": list(u.options)} for u in updates]
    if updates:
        message = "updates need a change to the declaration: " + "; ".join(
            f"channel {u.channel}: {', '.join(u.options)}" for u in updates)
        cond = status_objects.condition("UpdateAvailable", True, "CrossChannelOrRangeUpdateFound", message)
    else:
        cond = status_objects.condition("UpdateAvailable", False, "NoUpdates",
                                        "no newer bundle outside the declaration's channel and version range")
    return report, (cond, *_deprecation_conditions(sel, resolution))


def _deprecation_conditions(sel: Selection, resolution: Resolution | None) -> tuple[dict[str, str], ...]:
    """operator-controller's deprecation conditions: one per scope, and Deprecated for any of them."""
    found = {d.scope: d for d in (resolution.deprecations if resolution else ()) if d.operator == sel.owner}
    out = []
    for scope, type_ in (("package", "PackageDeprecated"), ("channel", "ChannelDeprecated"),
                         ("bundle", "BundleDeprecated")):
        dep = found.get(scope)
        out.append(status_objects.condition(type_, dep is not None, "Deprecated" if dep else "NotDeprecated",
                                            f"{scope} {dep.name}: {dep.message}" if dep else
                                            f"the catalog does not deprecate this {scope}"))
    any_dep = [c["message"] for c in out if c["status"] == "True"]
    out.insert(0, status_objects.condition("Deprecated", bool(any_dep), "Deprecated" if any_dep else "NotDeprecated",
                                           "; ".join(any_dep) or "nothing chosen for this Operator is deprecated"))
    return tuple(out)


def write_lock(snapshot: RepoSnapshot, lockfile: Lockfile) -> bool:
    """Write olm.lock if its content changed; True when written."""
    text = lockfile.render()
    path: Path = snapshot.lock_path
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)   # a fleet cluster's clusters/<name>/
    yamlio.write_atomic(path, text)
    return True


@dataclass(frozen=True)
class Prepared:
    """Everything read, resolved and converted, before anything is written: what the loop keeps as last good."""

    snapshot: RepoSnapshot
    installs: tuple[Installed, ...]
    lockfile: Lockfile
    resolution: Resolution
    held: frozenset[str] = frozenset()   # owners whose input class only reports (dry-run): left untouched
    decisions: Mapping[str, Decision] = dataclasses.field(default_factory=dict)   # approval, per owner
    notes: tuple[str, ...] = ()   # what the run says beside its changes (approvals not committed)


def prepare(repo: str | Path, resolver: Resolver | None = None, *, revision: str | None = None,
            kube: Kube | None = None, locked: bool = False, identity: str | None = None,
            git_dir: Path | None = None, cluster: str | None = None,
            uncommitted_approvals: bool = False) -> Prepared:
    """Read, resolve and convert; nothing is written. ``kube`` is only read (installed state, version).

    ``revision`` names the commit when the tree is not a git working copy, ``identity`` and ``git_dir`` the
    repository it was taken from and where its history is (a fetched remote: ``repo/identity.py``);
    ``locked`` refuses a lockfile that the resolution does not reproduce; ``cluster`` names the cluster of a
    fleet repository (``repo/fleet.py``); ``uncommitted_approvals`` counts approvals not committed yet (a
    preview: a real apply counts only committed ones).
    """
    progress.stage(f"reading {repo}")
    snapshot = select_cluster(read_repository(repo), cluster)
    if revision is not None:
        snapshot = dataclasses.replace(snapshot, revision=revision)
    if identity is not None:
        snapshot = dataclasses.replace(snapshot, identity=snapshot.settings.repository or identity,
                                       git_dir=git_dir or snapshot.git_dir)
    resolution = resolve(snapshot, kube, resolver)
    planned = plan_lock(snapshot, resolution)
    if locked:
        check_locked(snapshot, planned)
    installs = convert(snapshot, resolution, planned, kube)
    converted = {i.lock.operator: i.lock for i in installs}
    lockfile = Lockfile(tuple(sorted(converted.get(e.operator, e) for e in planned.entries)))
    held = frozenset(s.owner for s in resolution.selections if not s.apply)
    return Prepared(snapshot, installs, lockfile, resolution, held,
                    approvals(snapshot, installs, kube, uncommitted=uncommitted_approvals),
                    approval_notes(snapshot, counted=uncommitted_approvals))


def apply(prepared: Prepared, kube: Kube | None, *, dry_run: bool, write_lockfile: bool = True,
          wait: float = 0.0, on_progress: Callable[[str], object] | None = None) -> Outcome:
    """Write olm.lock (unless told not to: a fetched remote tree is never written to) and sync.

    After applying, every Operator's components are judged (``cluster/wait.py``),
    waiting up to ``wait`` seconds for them to become healthy (0: judge once).
    """
    snapshot, installs, lockfile = prepared.snapshot, prepared.installs, prepared.lockfile
    written = write_lock(snapshot, lockfile) if write_lockfile else False
    progress.stage("comparing with the cluster (server-side dry run)" if dry_run and kube is not None else
                   "comparing with an empty cluster" if kube is None else "applying")

    def judge(desired: list[DesiredOperator]) -> dict:
        from reconciler.cluster.wait import wait_healthy

        assert kube is not None
        paths = {i.selection.owner: i.bundle.operand_conditions for i in installs}
        return wait_healthy(kube, {op.name: op.objects for op in desired}, timeout=wait, progress=on_progress,
                            operands=paths)

    from reconciler.cluster.applyset import Instance

    from reconciler.repo.identity import has_commit

    instance = Instance(snapshot.settings.instance, snapshot.settings.installer_namespace, snapshot.identity,
                        cluster=snapshot.cluster.name if snapshot.cluster else "",
                        knows_revision=lambda revision: has_commit(snapshot.git_dir, revision))
    desired = desired_state(installs, prepared.resolution, prepared.decisions, part_of=instance.id,
                            preview=dry_run, settings=snapshot.settings)
    adopted = {d.name: d.adopted_from for d in snapshot.operators if d.adopted_from}
    takeovers, steps = [], []
    if adopted and kube is not None:   # OLM v0 installs the repository adopted: adopt/takeover.py
        from reconciler.adopt import takeover

        takeovers = takeover.find(kube, desired, adopted)
        desired = takeover.adopting(desired, takeovers)
        steps = takeover.before(kube, takeovers, dry_run=dry_run)
    result = sync(kube, desired, dry_run=dry_run, allow_empty=snapshot.settings.allow_empty,
                  revision=snapshot.revision, held=prepared.held,
                  pending=() if dry_run else pending_state(installs, prepared.decisions),
                  installer_namespace=snapshot.settings.installer_namespace, judge=judge, instance=instance)
    if takeovers:
        assert kube is not None
        result.notes.extend(steps + takeover.after(kube, takeovers, desired, dry_run=dry_run))
    result.notes.extend(prepared.notes)
    return Outcome(snapshot, installs, lockfile, written, result, prepared.resolution, prepared.decisions)


def reconcile(repo: str | Path, kube: Kube | None, *, dry_run: bool, resolver: Resolver | None = None,
              locked: bool = False, write_lock: bool | None = None, wait: float = 0.0,
              on_progress: Callable[[str], object] | None = None, cluster: str | None = None) -> Outcome:
    """Prepare and apply once. A dry run writes nothing, olm.lock included, unless ``write_lock``."""
    prepared = prepare(repo, resolver, kube=kube, locked=locked, cluster=cluster, uncommitted_approvals=dry_run)
    if write_lock is None:
        write_lock = not dry_run
    return apply(prepared, kube, dry_run=dry_run, write_lockfile=write_lock and not locked, wait=wait,
                 on_progress=on_progress)
