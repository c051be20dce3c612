"""The flow of `reconciler adopt`: what OLM runs, written into the repository.

For every install OLM v0 made (``olmv0.survey``: a Subscription and its CSV)
and every ClusterExtension OLM v1 installed (``olmv1.survey``) the repository
gains three things, and the cluster is only read (OLM v0's words below; a
ClusterExtension's declaration keeps its channel and version range, and its
approval's evidence is the ClusterExtension and its ServiceAccount):

* an Operator declaration, named after the package, meaning what the Subscription meant: its package
  and channel, the namespace it runs in and the namespaces its OperatorGroup
  targets, and, for ``installPlanApproval: Manual``, ``approval: Manual``
  (which holds every upgrade until it is approved, as OLM held its
  InstallPlans). The version policy is the Subscription's: no
  ``spec.version``, so the declaration follows its channel along the upgrade
  edges, one at a time, as the Subscription did; the lock pins what runs
  until the next ``reconciler resolve`` moves it (docs/migration.md);
* the lock entry of exactly the bundle that runs, found in the repository's
  catalogs by name and checked by content (version and the Deployments'
  images); a catalog without it is a reason to leave the install, with the
  command that adds it;
* an approval of the permissions the bundle needs, marked ``adopted`` with
  the evidence (the CSV and the permissions it holds): taking over what runs
  is not an escalation, and the approval policy acts on the next change.

The work is done in a scratch copy of the repository, resolved and converted
there as ``reconcile`` would (``pipeline.prepare``, reading the cluster only),
and only then copied into the repository: a refusal half-way writes nothing,
and ``--dry-run`` shows the same files without writing them.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.adopt import olmv0, olmv1, proxy
from reconciler.adopt.olmv0 import Install, Unmapped, csv_images
from reconciler.adopt.olmv1 import Extension
from reconciler.errors import ClusterError, DeclarationError
from reconciler.model.declarations import ANNOTATION_ADOPTED_FROM as ADOPTED_FROM

DECLARATIONS_DIR = "operators"


Adoptable = Install | Extension   # an OLM v0 install or an OLM v1 ClusterExtension


@dataclass(frozen=True)
class Adopted:
    install: Adoptable
    operator: str
    bundle: str
    catalog: str
    files: tuple[str, ...]     # repository-relative paths written (or that would be)


@dataclass(frozen=True)
class Selection:
    """Which installs to adopt: those in ``namespaces`` and of ``packages`` (each empty: all). The others are left
    to OLM, untouched, and listed as such."""

    namespaces: frozenset[str] = frozenset()
    packages: frozenset[str] = frozenset()

    def wants(self, namespace: str, package: str) -> bool:
        return (not self.namespaces or namespace in self.namespaces) and \
            (not self.packages or not package or package in self.packages)

    def check(self, installs: list[Adoptable], unmapped: list[Unmapped]) -> None:
        """Refuse a package or namespace that nothing on the cluster has: a typo would adopt nothing, silently."""
        from reconciler.errors import UsageError

        for asked, have, flag in ((self.packages, {i.package for i in installs} | {u.package for u in unmapped},
                                   "--package"),
                                  (self.namespaces, {i.namespace for i in installs} | {u.namespace for u in unmapped},
                                   "--namespace")):
            missing = sorted(asked - have)
            if missing:
                import difflib

                near = sorted({n for m in missing for n in difflib.get_close_matches(m, sorted(have - {""}), 3)})
                raise UsageError(f"{flag} {', '.join(missing)}: OLM runs no install of "
                                 f"{'that package' if flag == '--package' else 'that namespace'} on this cluster",
                                 hint=(f"did you mean {', '.join(near)}? " if near else "")
                                 + f"what OLM runs: {', '.join(sorted(have - {''})) or 'nothing'}")


@dataclass
class Adoption:
    adopted: list[Adopted] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)   # path -> new content
    platform: list[Unmapped] = field(default_factory=list)    # OLM's own components: never adopted, not a failure
    # left to OLM as asked (--namespace, --package): installs, and those that would have been left with a reason
    unselected: list[Adoptable | Unmapped] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)            # what --freeze did, one line each

    def counts(self) -> dict[str, Any]:
        """How many installs had each outcome, and the installs not adopted by reason (``Unmapped.code``)."""
        by_reason: dict[str, int] = {}
        for u in self.unmapped:
            by_reason[u.code] = by_reason.get(u.code, 0) + 1
        return {"adopted": len(self.adopted), "notAdopted": len(self.unmapped), "platform": len(self.platform),
                "notSelected": len(self.unselected), "notAdoptedByReason": dict(sorted(by_reason.items()))}


def adopt(repo: str | Path, kube: Any, *, dry_run: bool, select: Selection = Selection(),
          freeze: bool = False) -> Adoption:
    """Read OLM's installs and write (unless ``dry_run``) declarations, lock entries and approvals, for those
    ``select`` chooses; ``freeze`` then sets the adopted Subscriptions to Manual approval (``freeze_subscriptions``)."""
    from reconciler.repo import read_repository

    root = Path(repo).resolve()
    found = survey(kube)
    select.check(found.installs, found.unmapped)
    chosen = [i for i in found.installs if select.wants(i.namespace, i.package)]
    needed = olmv0.needed_by_olm([i for i in chosen if isinstance(i, Install)], found.view)
    needs = {u.what for u in needed}
    installs = proxy.recorded(kube, [i for i in chosen if i.where not in needs])   # OLM's proxy variables kept
    result = Adoption(unmapped=[u for u in found.unmapped if select.wants(u.namespace, u.package)] + needed,
                      platform=list(found.platform),
                      unselected=[i for i in [*found.installs, *found.unmapped]
                                  if not select.wants(i.namespace, i.package)])
    snapshot = read_repository(root)
    names = _names(installs)
    plans: list[tuple[Adoptable, str, dict]] = []
    for inst in installs:
        doc = declaration(inst, names[id(inst)], inst.catalog)
        plans.append((inst, names[id(inst)], doc))
    # read (and checked) whatever is adopted: an invalid catalog is the repository's error, said as one (exit 2),
    # even when no install could be adopted for another reason
    catalogs = _catalogs(snapshot, [d for _, _, d in plans])
    if not plans:
        return result
    with tempfile.TemporaryDirectory(prefix="reconciler-adopt-") as scratch:
        work = Path(scratch) / "repo"
        shutil.copytree(root, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        lock_entries = []
        for inst, name, doc in plans:
            bundle, catalog, why = find_bundle(catalogs, inst, doc)
            if bundle is None:
                result.unmapped.append(why)
                continue
            refused = _converts(bundle, work, inst, snapshot, catalog)
            if refused is not None:
                result.unmapped.append(refused)
                continue
            doc["spec"] = _with_catalog(doc["spec"], catalog, _channel(inst, bundle, catalogs[catalog]))
            path = _place_declaration(snapshot, name, doc, inst)
            if path is not None:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                yamlio.write_atomic(work / path, _declaration_text(inst, doc))
            lock_entries.append((inst, name, bundle, catalog, path))
        lock_entries = _still_adoptable(lock_entries, found.view, result)
        if not lock_entries:
            return result
        _write_lock(snapshot, work, [(name, b, catalogs[c], inst) for inst, name, b, c, _ in lock_entries])
        _write_approvals(snapshot, work, kube, [(inst, name) for inst, name, *_ in lock_entries])
        for inst, name, bundle, catalog, path in lock_entries:
            files = tuple(p for p in (path, snapshot.lock_file, f"approvals/{name}.yaml") if p)
            result.adopted.append(Adopted(inst, name, bundle.name, catalog, files))
        for rel in sorted({p for a in result.adopted for p in a.files}):
            new = (work / rel).read_text()
            old = (root / rel).read_text() if (root / rel).is_file() else None
            if new != old:
                result.files[rel] = new
    if not dry_run:
        for rel, text in result.files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            yamlio.write_atomic(root / rel, text)
        if freeze:
            result.frozen = freeze_subscriptions(kube, [a.install for a in result.adopted], found.view)
    return result


def _still_adoptable(entries: list, view: olmv0.ClusterView, result: Adoption) -> list:
    """``entries`` (install, name, bundle, catalog, path) less those an install that stays with OLM needs, until
    none does: an install left because its bundle is not in a catalog stays with OLM as surely as one not
    selected, and what it needs stays with it."""
    while True:
        needed = olmv0.needed_by_olm([e[0] for e in entries if isinstance(e[0], Install)], view)
        if not needed:
            return entries
        result.unmapped.extend(needed)
        gone = {u.what for u in needed}
        entries = [e for e in entries if e[0].where not in gone]


def freeze_subscriptions(kube: Any, installs: list[Adoptable], view: olmv0.ClusterView) -> list[str]:
    """``adopt --freeze``: each adopted Subscription set to Manual approval, so OLM installs no upgrade of it
    while the adoption is reviewed (the takeover then deletes it). OLM plans a namespace's Subscriptions in one
    InstallPlan, Manual when any of them is, so the others of the namespace wait too: each line says which."""
    info = kube.resource(olmv0.KINDS["Subscription"], "Subscription")
    lines = []
    for inst in installs:
        if not isinstance(inst, Install) or inst.subscription["spec"].get("installPlanApproval") == "Manual":
            continue
        name = inst.subscription["metadata"]["name"]
        kube.request("PATCH", info.path(inst.namespace, name), body={"spec": {"installPlanApproval": "Manual"}},
                     content_type="application/merge-patch+json", obj=inst.where)
        others = sorted(o["metadata"]["name"] for o in view.of("Subscription", inst.namespace)
                        if o["metadata"]["name"] != name and (o.get("spec") or {}).get("installPlanApproval") != "Manual"
                        and not any(a.where == f"Subscription {inst.namespace}/{o['metadata']['name']}"
                                    for a in installs))
        also = (f"; OLM now also holds the upgrades of {', '.join(others)} in {inst.namespace} (it plans a namespace's "
                "Subscriptions together)") if others else ""
        lines.append(f"froze {inst.where}: installPlanApproval Manual, so OLM installs no upgrade until the takeover"
                     f"{also}; undo with `kubectl patch subscription {name} -n {inst.namespace} --type merge -p "
                     "'{\"spec\":{\"installPlanApproval\":\"Automatic\"}}'`")
    return lines


@dataclass(frozen=True)
class Found:
    """What OLM runs on a cluster: the installs that map, those that do not, OLM's own components, and OLM v0's
    objects as read (what else a decision needs of them: who stays with OLM)."""

    installs: list[Adoptable]
    unmapped: list[Unmapped]
    platform: tuple[Unmapped, ...]
    view: olmv0.ClusterView


def survey(kube: Any) -> Found:
    """Every install of OLM v0 and OLM v1 the cluster runs, and those that cannot be mapped; a cluster that runs
    neither is an error saying so. A package both install is left to both."""
    v0, v1 = olmv0.serves(kube), olmv1.serves(kube)
    if not v0 and not v1:
        raise ClusterError("the cluster runs no OLM: it serves neither OLM v0's Subscription "
                           f"({olmv0.KINDS['Subscription']}) nor OLM v1's ClusterExtension "
                           f"({olmv1.API_VERSION})", obj=kube.server,
                           hint="adopt reads the installs OLM made; check --kubeconfig/--context name the cluster "
                                "that runs OLM (`kubectl get subscriptions,clusterextensions -A` lists them)")
    view = olmv0.read_cluster(kube) if v0 else olmv0.ClusterView({})
    old = olmv0.survey(view) if v0 else olmv0.Survey()
    new = olmv1.survey(olmv1.read_cluster(kube)) if v1 else olmv1.Survey()
    installs: list[Adoptable] = [*old.installs, *new.installs]
    unmapped = [*old.unmapped, *new.unmapped]
    by_package: dict[str, list[Adoptable]] = {}
    for inst in installs:
        by_package.setdefault(inst.package, []).append(inst)
    twice = {id(i) for members in by_package.values() if len(members) > 1 for i in members}
    for inst in installs:
        if id(inst) in twice:
            others = ", ".join(o.where for o in by_package[inst.package] if o is not inst)
            unmapped.append(Unmapped("PackageTwice", inst.where,
                                     f"package {inst.package} is installed by OLM v0 and OLM v1 "
                                     f"({others} too); the reconciler installs a package once per cluster",
                                     "uninstall one of them in OLM and adopt again"))
    return Found([i for i in installs if id(i) not in twice], unmapped, old.platform, view)


def declaration(inst: Adoptable, name: str, catalog: str) -> dict:
    """The Operator declaration meaning what ``inst``'s Subscription or ClusterExtension meant (catalog filled in
    when found)."""
    install: dict[str, Any] = {"namespace": inst.namespace, "targetNamespaces": list(inst.target_namespaces)}
    meta = {"name": name, "annotations": {ADOPTED_FROM: inst.adopted_from}}
    config = {"config": inst.config} if inst.config else {}
    if inst.manual:   # the v1 shape has no approval field; v2alpha1 holds every upgrade until approved
        source: dict[str, Any] = {"package": inst.package, "ref": {"name": catalog}, "approval": "Manual"}
        if inst.channel:
            source["channel"] = inst.channel
        return {"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": meta,
                "spec": {"updates": {"type": "CatalogSource", "catalogSource": source}, "install": install, **config}}
    selector: dict[str, Any] = {"name": catalog, "package": inst.package}
    if inst.channel:
        selector["channel"] = inst.channel
    version = {"version": inst.version_range} if inst.version_range else {}
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": meta,
            "spec": {"catalog": selector, **version, "install": install, **config}}


def _with_catalog(spec: dict, catalog: str, channel: str | None) -> dict:
    if "catalog" in spec:
        return dict(spec, catalog=dict(spec["catalog"], name=catalog, **({"channel": channel} if channel else {})))
    source = spec["updates"]["catalogSource"]
    return dict(spec, updates=dict(spec["updates"], catalogSource=dict(source, ref={"name": catalog})))


def _channel(inst: Adoptable, bundle: Any, catalog: Any) -> str | None:
    """The channel a declaration without one would not follow: a ClusterExtension that names no channel takes
    bundles from any, a declaration from the package's default one; when the bundle that runs is not in the
    default channel, the declaration names the first channel (by name) that has it."""
    if inst.channel or isinstance(inst, Install):
        return inst.channel
    package = catalog.packages.get(inst.package)
    having = sorted(c.name for c in catalog.channels_of(inst.package)
                    if any(e.name == bundle.name for e in c.entries))
    if not having or (package is not None and package.default_channel in having):
        return None
    return having[0]


def _names(installs: list[Adoptable]) -> dict[int, str]:
    """Each install's Operator name: its package (``survey`` leaves a package installed twice to OLM)."""
    return {id(i): i.package for i in installs}


def _catalogs(snapshot: Any, docs: list[dict]) -> dict:
    from reconciler import pipeline
    from reconciler.model.declarations import Origin, parse_operator

    decls = tuple(parse_operator(doc, Origin(f"{DECLARATIONS_DIR}/{doc['metadata']['name']}.yaml")) for doc in docs)
    return pipeline.load_catalogs(snapshot, decls, always=True)


def find_bundle(catalogs: dict, inst: Adoptable, doc: dict) -> tuple[Any, str, Unmapped | None]:
    """The catalog bundle that runs: same package and name, same version and Deployment images.

    The catalog named like the CatalogSource is asked first, then every other
    one; a bundle of that name whose content differs is reported, not taken.
    """
    from reconciler.model.catalog import embedded_csv
    from reconciler.model.properties import PROP_BUNDLE_OBJECT

    wanted = inst.catalog
    order = sorted(catalogs, key=lambda n: (n != wanted, n))
    live_version = inst.version
    live_images = inst.images
    differing = []
    for name in order:
        bundle = catalogs[name].bundle(inst.package, inst.bundle_name)
        if bundle is None:
            continue
        csv = embedded_csv(bundle.properties_of(PROP_BUNDLE_OBJECT))
        if str(bundle.version) != live_version.lstrip("v"):
            differing.append(f"catalogs/{name} has version {bundle.version}, the cluster runs {live_version}")
        elif csv is not None and csv_images(csv) != live_images:
            differing.append(f"catalogs/{name} has other Deployment images ({', '.join(sorted(csv_images(csv)))})")
        elif csv is None and bundle.related_images and not live_images <= set(bundle.related_images):
            differing.append(f"catalogs/{name} lists other related images")
        else:
            return bundle, name, None
    if differing:
        return None, "", Unmapped("BundleDiffers", inst.where,
                                  f"the repository's bundle {inst.bundle_name} is not what runs: "
                                  + "; ".join(differing), inst.catalog_hint(wanted))
    return None, "", Unmapped("BundleNotInCatalog", inst.where,
                              f"no catalog of the repository has bundle {inst.bundle_name} of package "
                              f"{inst.package}" + ("" if catalogs else " (the repository has no catalogs)"),
                              inst.catalog_hint(wanted))


def _converts(bundle: Any, work: Path, inst: Adoptable, snapshot: Any, catalog: str) -> Unmapped | None:
    """Why the reconciler could not install ``bundle`` as OLM did (None when it can): taking over what it cannot
    reproduce would break what runs. A bundle its catalog requires signed is verified before it is read."""
    from reconciler.bundle import render
    from reconciler.bundle.installed import verify_catalog_bundle
    from reconciler.errors import ReconcilerError
    from reconciler.model.declarations import InstallSettings
    from reconciler.model.deployconfig import DeploymentConfig

    verified = verify_catalog_bundle(snapshot, catalog, bundle.name, bundle.image, where={"obj": inst.where})
    try:
        rendered = render(bundle.image, work, InstallSettings(inst.namespace, inst.target_namespaces,
                                                              config=DeploymentConfig.of(inst.config)),
                          snapshot.settings.default_install_namespace, digest=verified)
    except ReconcilerError as exc:
        return Unmapped("NotConvertible", inst.where,
                        f"the reconciler cannot install bundle {bundle.name} as OLM did: {exc.message}",
                        exc.hint or "leave it to OLM, or install another version of the package")
    if isinstance(inst, Extension) and any(_webhook(o) for o in rendered.objects):
        return Unmapped("WebhooksLeftToOLMv1", inst.where,
                        f"bundle {bundle.name} serves admission or conversion webhooks, whose "
                        "certificates operator-controller has cert-manager (or OpenShift's service CA) make and mount "
                        "its own way: taking it over would change the pod template and restart the operator",
                        "leave it to OLM v1")
    return None


def _webhook(obj: dict) -> bool:
    """Whether ``obj`` makes the API server call the operator: an admission webhook, or a CRD's conversion one."""
    if obj.get("kind") in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        return True
    return obj.get("kind") == "CustomResourceDefinition" and \
        ((obj.get("spec") or {}).get("conversion") or {}).get("strategy") == "Webhook"


def _place_declaration(snapshot: Any, name: str, doc: dict, inst: Adoptable) -> str | None:
    """Where the declaration goes: a new file, or None when the repository already declares the same thing.

    A declaration of the same name or package that means something else
    (another channel, namespace, target namespaces, spec.config or approval) is a
    conflict the user resolves: adopting over it would lose one of the two.
    """
    from reconciler.model.declarations import Origin, parse_operator

    path = f"{DECLARATIONS_DIR}/{name}.yaml"
    mine = parse_operator(doc, Origin(path))
    for decl in snapshot.operators:
        if decl.name != name and decl.package != inst.package:
            continue
        if decl.package == inst.package and decl.install.namespace not in (None, inst.namespace) \
                and decl.name != name:
            continue   # the same package elsewhere: another install, not this one
        differ = [what for what, a, b in (
            ("package", decl.package, mine.package),
            ("catalog", decl.catalog.name if decl.catalog else None, mine.catalog.name if mine.catalog else None),
            ("channel", decl.catalog.channel if decl.catalog else None, mine.catalog.channel if mine.catalog else None),
            ("install namespace", decl.install.namespace, mine.install.namespace),
            ("target namespaces", decl.install.target_namespaces, mine.install.target_namespaces),
            ("spec.config", decl.install.config, mine.install.config),
            ("version", str(decl.version) if decl.version else None, str(mine.version) if mine.version else None),
            ("approval", "Manual" if decl.manual_approval else "Automatic",
             "Manual" if mine.manual_approval else "Automatic")) if a != b]
        if differ:
            raise DeclarationError(
                f"Operator {decl.name} already declares package {decl.package or '?'} differently from what "
                f"{inst.where} runs ({', '.join(differ)})", path=str(decl.origin),
                hint=f"make the declaration mean what runs ({_describe(mine)}) or remove it, then adopt again; "
                     f"adopt never overwrites a declaration")
        return None
    if snapshot.lock and (old := snapshot.lock.for_operator(name)) is not None and old.name != inst.bundle_name:
        raise DeclarationError(f"olm.lock pins {old.name} for Operator {name}, but {inst.where} runs "
                               f"{inst.bundle_name}", path=snapshot.lock_file,
                               hint=f"remove the entry for {name} from olm.lock (or the declaration that made it) "
                                    f"and adopt again")
    return path


def _describe(decl: Any) -> str:
    targets = decl.install.target_namespaces
    return (f"package {decl.package}, channel {decl.catalog.channel or 'default'}, namespace "
            f"{decl.install.namespace}, target namespaces {list(targets) if targets else 'all'}")


def _declaration_text(inst: Adoptable, doc: dict) -> str:
    return inst.header() + yamlio.dump(doc)


def _write_lock(snapshot: Any, work: Path, entries: list) -> None:
    """The repository's lockfile (``snapshot.lock_file``) in the scratch copy ``work``, with an entry pinning each
    adopted bundle; entries of the bundles already pinned are kept as they are."""
    from reconciler.bundle import source as bundle_source
    from reconciler.lock import write_lock
    from reconciler.model.lock import LockEntry, Lockfile

    kept = {e.operator: e for e in (snapshot.lock.entries if snapshot.lock else ())}
    for name, bundle, catalog, inst in entries:
        old = kept.get(name)
        image = bundle.image
        if old is not None and (old.name, old.source) == (bundle.name, image):
            continue
        digest = ""
        if "@sha256:" in image:
            digest = "sha256:" + image.rsplit("@sha256:", 1)[1]
        elif image.startswith(bundle_source.FILE_SCHEME):
            digest = bundle_source.fetch(image, work).digest
        kept[name] = LockEntry(operator=name, package=bundle.package, name=bundle.name, version=str(bundle.version),
                               catalog=catalog.name,
                               channel=_channel(inst, bundle, catalog) or _default_channel(bundle, catalog),
                               source=image, digest=digest)
    write_lock(dataclasses.replace(snapshot, root=work), Lockfile(tuple(sorted(kept.values()))))


def _record_dependents(snapshot: Any, work: Path, resolved: Any) -> None:
    """Each lock entry's ``required_by`` as the resolution records it: an adopted Operator that another's bundle
    needs (a dependency OLM installed) is pinned as what that Operator requires, so ``reconcile`` finds the lock
    it would write."""
    from reconciler.lock import write_lock
    from reconciler.model.lock import Lockfile

    scratch = dataclasses.replace(snapshot, root=work)
    written = Lockfile.parse(scratch.lock_path.read_text())
    by_bundle = {(e.operator, e.name): e.required_by for e in resolved.entries}
    write_lock(scratch, Lockfile(tuple(dataclasses.replace(e, required_by=by_bundle.get((e.operator, e.name),
                                                                                         e.required_by))
                                       for e in written.entries)))


def _default_channel(bundle: Any, catalog: Any) -> str:
    package = catalog.packages.get(bundle.package)
    return (package.default_channel if package else None) or ""


def _write_approvals(snapshot: Any, work: Path, kube: Any, adopted: list[tuple[Adoptable, str]]) -> None:
    """Approve, for each adopted Operator, the permissions its bundle needs, with the CSV (or the
    ClusterExtension) as evidence."""
    from reconciler import pipeline
    from reconciler.approve.records import add_approval
    from reconciler.model.approvals import ApprovedBundle
    from reconciler.repo import read_records

    prepared = pipeline.prepare(work, kube, preview=True)
    _record_dependents(snapshot, work, prepared.lockfile)
    for inst, name in adopted:
        d = prepared.decisions.get(name)
        if d is None:
            continue
        add_approval(work, read_records(work).get(name), name,
                     ApprovedBundle(d.bundle, d.digest, d.required.all, d.waived, inst.evidence))
