"""`reconciler adopt`: write into the repository what OLM v0 runs, so that git describes the cluster as it is.

For every install OLM v0 made (``olmv0.survey``) the repository gains three
things, and the cluster is only read:

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
from reconciler.adopt.olmv0 import (Install, Unmapped, csv_permissions, dependency_of, install_mode, read_cluster,
                                    survey)
from reconciler.errors import DeclarationError
from reconciler.model.declarations import ANNOTATION_ADOPTED_FROM as ADOPTED_FROM

DECLARATIONS_DIR = "operators"


@dataclass(frozen=True)
class Adopted:
    install: Install
    operator: str
    bundle: str
    catalog: str
    files: tuple[str, ...]     # repository-relative paths written (or that would be)


@dataclass
class Adoption:
    adopted: list[Adopted] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)   # path -> new content


def adopt(repo: str | Path, kube: Any, *, dry_run: bool) -> Adoption:
    """Read OLM v0's installs and write (unless ``dry_run``) declarations, lock entries and approvals."""
    from reconciler.repo import read_repository

    root = Path(repo).resolve()
    view = read_cluster(kube)
    found = survey(view)
    result = Adoption(unmapped=list(found.unmapped))
    snapshot = read_repository(root)
    names = _names(found.installs)
    plans: list[tuple[Install, str, dict]] = []
    for inst in found.installs:
        doc = declaration(inst, names[id(inst)], _catalog_name(inst))
        plans.append((inst, names[id(inst)], doc))
    if not plans:
        return result
    catalogs = _catalogs(snapshot, [d for _, _, d in plans])
    with tempfile.TemporaryDirectory(prefix="reconciler-adopt-") as scratch:
        work = Path(scratch) / "repo"
        shutil.copytree(root, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        lock_entries = []
        for inst, name, doc in plans:
            bundle, catalog, why = find_bundle(catalogs, inst, doc)
            if bundle is None:
                result.unmapped.append(why)
                continue
            refused = _converts(bundle, work, inst, snapshot)
            if refused is not None:
                result.unmapped.append(refused)
                continue
            doc["spec"] = _with_catalog(doc["spec"], catalog)
            path = _place_declaration(snapshot, name, doc, inst)
            if path is not None:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                yamlio.write_atomic(work / path, _declaration_text(inst, doc))
            lock_entries.append((inst, name, bundle, catalog, path))
        if not lock_entries:
            return result
        _write_lock(snapshot, work, [(name, b, catalogs[c], inst) for inst, name, b, c, _ in lock_entries])
        _write_approvals(work, kube, [(inst, name) for inst, name, *_ in lock_entries])
        for inst, name, bundle, catalog, path in lock_entries:
            files = tuple(p for p in (path, "olm.lock", f"approvals/{name}.yaml") if p)
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
    return result


def declaration(inst: Install, name: str, catalog: str) -> dict:
    """The Operator declaration meaning what ``inst``'s Subscription meant (catalog filled in when found)."""
    install: dict[str, Any] = {"namespace": inst.namespace, "targetNamespaces": list(inst.target_namespaces)}
    meta = {"name": name, "annotations": {ADOPTED_FROM: f"olm-v0/{inst.namespace}/{inst.subscription['metadata']['name']}"}}
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
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": meta,
            "spec": {"catalog": selector, "install": install, **config}}


def _with_catalog(spec: dict, catalog: str) -> dict:
    if "catalog" in spec:
        return dict(spec, catalog=dict(spec["catalog"], name=catalog))
    source = spec["updates"]["catalogSource"]
    return dict(spec, updates=dict(spec["updates"], catalogSource=dict(source, ref={"name": catalog})))


def _names(installs: tuple[Install, ...]) -> dict[int, str]:
    """Each install's Operator name: its package (``survey`` leaves a package installed twice to OLM)."""
    return {id(i): i.package for i in installs}


def _catalog_name(inst: Install) -> str:
    return inst.catalog_source["metadata"]["name"]


def _catalogs(snapshot: Any, docs: list[dict]) -> dict:
    from reconciler import pipeline
    from reconciler.model.declarations import Origin, parse_operator

    decls = tuple(parse_operator(doc, Origin(f"{DECLARATIONS_DIR}/{doc['metadata']['name']}.yaml")) for doc in docs)
    return pipeline.load_catalogs(snapshot, decls)


def find_bundle(catalogs: dict, inst: Install, doc: dict) -> tuple[Any, str, Unmapped | None]:
    """The catalog bundle that is the running CSV: same package and name, same version and Deployment images.

    The catalog named like the CatalogSource is asked first, then every other
    one; a bundle of that name whose content differs is reported, not taken.
    """
    from reconciler.model.catalog import embedded_csv
    from reconciler.model.properties import PROP_BUNDLE_OBJECT

    wanted = _catalog_name(inst)
    order = sorted(catalogs, key=lambda n: (n != wanted, n))
    live_version = str(inst.csv["spec"].get("version") or "")
    live_images = _images(inst.csv)
    differing = []
    for name in order:
        bundle = catalogs[name].bundle(inst.package, inst.csv_name)
        if bundle is None:
            continue
        csv = embedded_csv(bundle.properties_of(PROP_BUNDLE_OBJECT))
        if str(bundle.version) != live_version.lstrip("v"):
            differing.append(f"catalogs/{name} has version {bundle.version}, the cluster runs {live_version}")
        elif csv is not None and _images(csv) != live_images:
            differing.append(f"catalogs/{name} has other Deployment images ({', '.join(sorted(_images(csv)))})")
        elif csv is None and bundle.related_images and not live_images <= set(bundle.related_images):
            differing.append(f"catalogs/{name} lists other related images")
        else:
            return bundle, name, None
    source = inst.catalog_source
    from reconciler.adopt.olmv0 import describe_source
    if differing:
        return None, "", Unmapped(inst.where, f"the repository's bundle {inst.csv_name} is not what runs: "
                                  + "; ".join(differing),
                                  "put the catalog the cluster installed from into the repository "
                                  f"(`opm render {describe_source(source)}`), then adopt again")
    return None, "", Unmapped(inst.where, f"no catalog of the repository has bundle {inst.csv_name} of package "
                              f"{inst.package}" + ("" if catalogs else " (the repository has no catalogs)"),
                              f"add the catalog the CatalogSource {source['metadata']['namespace']}/"
                              f"{source['metadata']['name']} serves: `opm render {describe_source(source)} -o yaml "
                              f"> catalogs/{wanted}/catalog.yaml`, then adopt again")


def _converts(bundle: Any, work: Path, inst: Install, snapshot: Any) -> Unmapped | None:
    """Why the reconciler could not install ``bundle`` as OLM did (None when it can): taking over what it cannot
    reproduce would break what runs."""
    from reconciler.bundle import render
    from reconciler.errors import ReconcilerError
    from reconciler.model.declarations import InstallSettings
    from reconciler.model.deployconfig import DeploymentConfig

    try:
        render(bundle.image, work, InstallSettings(inst.namespace, inst.target_namespaces,
                                                   config=DeploymentConfig.of(inst.config)),
               snapshot.settings.default_install_namespace)
    except ReconcilerError as exc:
        return Unmapped(inst.where, f"the reconciler cannot install bundle {bundle.name} as OLM did: {exc.message}",
                        exc.hint or "leave it to OLM, or install another version of the package")
    return None


def _images(csv: dict) -> set[str]:
    strategy = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    return {c.get("image", "") for d in strategy.get("deployments") or []
            for c in (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []}


def _place_declaration(snapshot: Any, name: str, doc: dict, inst: Install) -> str | None:
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
            ("approval", "Manual" if decl.manual_approval else "Automatic",
             "Manual" if mine.manual_approval else "Automatic")) if a != b]
        if differ:
            raise DeclarationError(
                f"Operator {decl.name} already declares package {decl.package or '?'} differently from what "
                f"{inst.where} runs ({', '.join(differ)})", path=str(decl.origin),
                hint=f"make the declaration mean what runs ({_describe(mine)}) or remove it, then adopt again; "
                     f"adopt never overwrites a declaration")
        return None
    if snapshot.lock and (old := snapshot.lock.for_operator(name)) is not None and old.name != inst.csv_name:
        raise DeclarationError(f"olm.lock pins {old.name} for Operator {name}, but {inst.where} runs "
                               f"{inst.csv_name}", path=snapshot.lock_file,
                               hint=f"remove the entry for {name} from olm.lock (or the declaration that made it) "
                                    f"and adopt again")
    return path


def _describe(decl: Any) -> str:
    targets = decl.install.target_namespaces
    return (f"package {decl.package}, channel {decl.catalog.channel or 'default'}, namespace "
            f"{decl.install.namespace}, target namespaces {list(targets) if targets else 'all'}")


def _declaration_text(inst: Install, doc: dict) -> str:
    mode = install_mode(inst.namespace, inst.target_namespaces)
    generated = ""
    if inst.generated_by:
        generated = (f"# OLM made that Subscription for a dependency{dependency_of(inst)} (InstallPlan "
                     f"{inst.generated_by}).\n# Declared on its own as OLM kept it: it stays when what needed it "
                     "goes. Without this file the resolver\n# keeps it as a dependency of what needs it, "
                     "under the same Operator name.\n")
    held = ""
    if inst.held_by:
        held = (f"# approval: Manual although its Subscription was Automatic: the Manual Subscription "
                f"{inst.namespace}/{inst.held_by}\n# held it, since OLM v0 plans every Subscription of a namespace "
                "in one InstallPlan, Manual when one\n# of them is. Declare it Automatic if its upgrades should "
                "not wait for approval.\n")
    own = inst.subscription["spec"].get("installPlanApproval") or "Automatic"
    return (f"# Adopted from OLM v0: {inst.where} ({mode}, installPlanApproval "
            f"{own}), running {inst.csv_name}.\n" + generated + held +
            "# No spec.version: it follows its channel along the upgrade edges as the Subscription did;\n"
            "# olm.lock pins the bundle that runs.\n" + yamlio.dump(doc))


def _write_lock(snapshot: Any, work: Path, entries: list) -> None:
    from reconciler.bundle import source as bundle_source
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
                               catalog=catalog.name, channel=inst.channel or _default_channel(bundle, catalog),
                               source=image, digest=digest)
    yamlio.write_atomic(work / "olm.lock", Lockfile(tuple(sorted(kept.values()))).render())


def _record_dependents(work: Path, resolved: Any) -> None:
    """Each lock entry's ``required_by`` as the resolution records it: an adopted Operator that another's bundle
    needs (a dependency OLM installed) is pinned as what that Operator requires, so ``reconcile`` finds the lock
    it would write."""
    from reconciler.model.lock import Lockfile

    written = Lockfile.parse((work / "olm.lock").read_text())
    by_bundle = {(e.operator, e.name): e.required_by for e in resolved.entries}
    entries = tuple(dataclasses.replace(e, required_by=by_bundle.get((e.operator, e.name), e.required_by))
                    for e in written.entries)
    yamlio.write_atomic(work / "olm.lock", Lockfile(entries).render())


def _default_channel(bundle: Any, catalog: Any) -> str:
    package = catalog.packages.get(bundle.package)
    return (package.default_channel if package else None) or ""


def _write_approvals(work: Path, kube: Any, adopted: list[tuple[Install, str]]) -> None:
    """Approve, for each adopted Operator, the permissions its bundle needs, with the CSV as evidence."""
    from reconciler import pipeline
    from reconciler.approve.records import add_approval
    from reconciler.model.approvals import ApprovedBundle
    from reconciler.repo import read_records

    prepared = pipeline.prepare(work, kube=kube, uncommitted_approvals=True)
    _record_dependents(work, prepared.lockfile)
    for inst, name in adopted:
        d = prepared.decisions.get(name)
        if d is None:
            continue
        evidence = {"from": "OLM v0", "clusterServiceVersion": inst.csv_name, "namespace": inst.namespace,
                    **csv_permissions(inst.csv)}
        add_approval(work, read_records(work).get(name), name,
                     ApprovedBundle(d.bundle, d.digest, d.required.all, d.waived, evidence))
