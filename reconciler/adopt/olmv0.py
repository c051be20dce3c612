"""What OLM v0 runs, read from a live cluster, and what each install means as a declaration.

Reading (``read_cluster``) is the only side effect here: one LIST per OLM kind
(Subscription, OperatorGroup, ClusterServiceVersion, InstallPlan,
CatalogSource), every namespace. Everything after it is pure: ``installs``
walks the Subscriptions, because a Subscription is what a user asked OLM for,
and judges each with what it points at (its installed CSV, the namespace's
OperatorGroup, its CatalogSource). An install that cannot be mapped becomes an
``Unmapped`` with its reason, never dropped; so does a CSV that no
Subscription accounts for (installed by hand, or left behind by a deleted
Subscription), since taking it over would mean guessing what was asked for.

OLM's copies of a CSV into the namespaces an OperatorGroup targets
(``olm.copiedFrom``) are bookkeeping, not installs, and are skipped; OLM's own
CSVs (its packageserver, or any CSV OLM's installation labels as a platform
component) are OLM's, listed as such (``Survey.platform``), never a failure. A
Subscription OLM made itself for a dependency (``olm.generated-by``) is an
install like any other: it runs a CSV, follows a channel and outlives the
Subscription that needed it, so it is adopted as its own Operator, with what
needed it recorded (``Install.dependency_of``).

Several installs under one OperatorGroup (OpenShift's ``global-operators``
holds every AllNamespaces install of ``openshift-operators``) are adopted each
as its own declaration with the group's namespaces: the group's one mode is
what each CSV must support, as OLM requires. A group that chooses namespaces
by a label selector is read as OLM reads it, through the namespaces it
resolved (``status.namespaces``). A Subscription another GitOps tool applies
(Argo CD, Flux, ACM: ``model/managers.py``) is left: the takeover deletes it,
and that tool would create it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reconciler.kube.client import Kube, ResourceInfo
from reconciler.errors import ClusterError
from reconciler.model import olmneeds
from reconciler.model.deployconfig import CONFIG_SHAPE, DeploymentConfig
from reconciler.model.managers import LET_GO, managed_by
from reconciler.model.shape import Mismatch
from reconciler.report.words import counted

GROUP = "operators.coreos.com"
KINDS = {  # what is read, and the apiVersion it is read in
    "Subscription": f"{GROUP}/v1alpha1",
    "ClusterServiceVersion": f"{GROUP}/v1alpha1",
    "InstallPlan": f"{GROUP}/v1alpha1",
    "CatalogSource": f"{GROUP}/v1alpha1",
    "OperatorGroup": f"{GROUP}/v1",
}
COPIED_FROM = "olm.copiedFrom"
# Labels OLM's installation puts on its own CSVs (the packageserver): components of OLM, not installs.
PLATFORM_LABELS = ("olm.version", "olm.clusteroperator.name")
GENERATED_BY = "olm.generated-by"   # on a Subscription catalog-operator made for a dependency: its InstallPlan
MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
EXECUTING = (None, "", "Planning", "Installing")   # InstallPlan phases in which catalog-operator still writes

Manifest = dict[str, Any]


@dataclass(frozen=True)
class ClusterView:
    """Every OLM v0 object of the cluster, by kind, as listed."""

    objects: dict[str, tuple[Manifest, ...]]

    def of(self, kind: str, namespace: str | None = None) -> list[Manifest]:
        return [o for o in self.objects.get(kind, ()) if namespace is None or _ns(o) == namespace]

    def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        return next((o for o in self.of(kind, namespace) if _name(o) == name), None)


@dataclass(frozen=True)
class Install:
    """One OLM v0 install that maps onto a declaration: what its Subscription asked for and what runs."""

    subscription: Manifest
    csv: Manifest
    operator_group: Manifest
    catalog_source: Manifest
    target_namespaces: tuple[str, ...]   # ("",) for all namespaces
    install_plans: tuple[str, ...] = ()
    # OLM made the Subscription itself, to satisfy a dependency: the InstallPlan it names, and the other
    # Subscriptions of the namespace whose CSVs that plan installed (what needed it), when the plan is still there
    generated_by: str = ""
    dependency_of: tuple[str, ...] = ()
    # An Automatic Subscription whose namespace holds a Manual one: OLM v0 plans a namespace's Subscriptions in
    # one InstallPlan, Manual when any of them is, so this install's upgrades waited for approval too
    held_by: str = ""

    @property
    def group_notes(self) -> tuple[str, ...]:
        """What the OperatorGroup said that a declaration says otherwise, or not at all (the mapping table of
        docs/migration.md): a label selector, a ServiceAccount OLM installed as, an upgrade strategy."""
        spec = self.operator_group.get("spec") or {}
        out = []
        if spec.get("selector"):
            out.append(f"its OperatorGroup {self.namespace}/{_name(self.operator_group)} chose its namespaces by a "
                       f"label selector; the declaration lists the ones OLM resolved ({', '.join(self.target_namespaces)}),"
                       " and a namespace labelled later is not added")
        if spec.get("serviceAccountName"):
            out.append(f"OLM installed it as ServiceAccount {self.namespace}/{spec['serviceAccountName']} (the "
                       "OperatorGroup's spec.serviceAccountName); the reconciler writes its objects as the Operator's "
                       "own installer, bound to exactly the approved permissions")
        strategy = spec.get("upgradeStrategy") or ""
        strategy = strategy.get("name") if isinstance(strategy, dict) else strategy   # a string in OLM v0.46's CRD
        if strategy and strategy != "Default":
            out.append(f"its OperatorGroup's upgradeStrategy {strategy} (OLM replaces a failed install) has no "
                       "equivalent: the reconciler upgrades along the catalog's edges from what runs")
        return tuple(out)

    @property
    def namespace(self) -> str:
        return _ns(self.subscription)

    @property
    def package(self) -> str:
        return str(self.subscription["spec"]["name"])

    @property
    def channel(self) -> str | None:
        return self.subscription["spec"].get("channel") or None

    @property
    def manual(self) -> bool:
        """Whether OLM v0 held this install's upgrades for approval: its own Subscription is Manual, or another
        of its namespace is (``held_by``)."""
        return self.subscription["spec"].get("installPlanApproval") == "Manual" or bool(self.held_by)

    @property
    def config(self) -> dict[str, Any]:
        """The Subscription's ``spec.config``, the fields that say something (the declaration's ``spec.config``)."""
        return DeploymentConfig.of(self.subscription["spec"].get("config")).value

    @property
    def csv_name(self) -> str:
        return _name(self.csv)

    @property
    def where(self) -> str:
        return f"Subscription {self.namespace}/{_name(self.subscription)}"

    # What every install `adopt` maps shares (``olmv1.Extension`` too): the bundle that runs and how it is checked,
    # where the repository's catalog comes from, what the declaration records.
    version_range = None
    self_certified = False

    @property
    def bundle_name(self) -> str:
        return self.csv_name

    @property
    def version(self) -> str:
        return str(self.csv["spec"].get("version") or "")

    @property
    def images(self) -> set[str]:
        return csv_images(self.csv)

    @property
    def catalog(self) -> str:
        """The repository catalog asked first: the one named like the CatalogSource."""
        return _name(self.catalog_source)

    @property
    def adopted_from(self) -> str:
        return f"olm-v0/{self.namespace}/{_name(self.subscription)}"

    @property
    def summary(self) -> str:
        held = f", held by Manual Subscription {self.held_by} of its namespace" if self.held_by else ""
        return (f"{self.package}, channel {self.channel or 'default'}, "
                f"{install_mode(self.namespace, self.target_namespaces)}, {'Manual' if self.manual else 'Automatic'} "
                f"approval{held}")

    @property
    def note(self) -> str:
        return f"; OLM made this Subscription for a dependency{dependency_of(self)}" if self.generated_by else ""

    @property
    def evidence(self) -> dict[str, Any]:
        return {"from": "OLM v0", "clusterServiceVersion": self.csv_name, "namespace": self.namespace,
                **csv_permissions(self.csv)}

    def catalog_hint(self, catalog: str) -> str:
        return (f"import the catalog the CatalogSource {_ns(self.catalog_source)}/{_name(self.catalog_source)} serves "
                f"({describe_source(self.catalog_source)}): {import_command(self.catalog_source)} at the repository's "
                "root, then adopt again (or `reconciler adopt --import-catalogs`)")

    def header(self) -> str:
        generated = ""
        if self.generated_by:
            generated = (f"# OLM made that Subscription for a dependency{dependency_of(self)} (InstallPlan "
                         f"{self.generated_by}).\n# Declared on its own as OLM kept it: it stays when what needed it "
                         "goes. Without this file the resolver\n# keeps it as a dependency of what needs it, "
                         "under the same Operator name.\n")
        held = ""
        if self.held_by:
            held = (f"# approval: Manual although its Subscription was Automatic: the Manual Subscription "
                    f"{self.namespace}/{self.held_by}\n# held it, since OLM v0 plans every Subscription of a "
                    "namespace in one InstallPlan, Manual when one\n# of them is. Declare it Automatic if its "
                    "upgrades should not wait for approval.\n")
        own = self.subscription["spec"].get("installPlanApproval") or "Automatic"
        group = "".join(f"# {line}\n" for note in self.group_notes for line in _wrap(note))
        return (f"# Adopted from OLM v0: {self.where} ({install_mode(self.namespace, self.target_namespaces)}, "
                f"installPlanApproval {own}), running {self.csv_name}.\n" + generated + held + group
                + "# No spec.version: it follows its channel along the upgrade edges as the Subscription did;\n"
                "# olm.lock pins the bundle that runs.\n")


@dataclass(frozen=True)
class Unmapped:
    """An install the adoption leaves to OLM (v0 or v1), and why: ``code`` is the reason as a word, for scripts
    and counts (docs/output.md), ``reason`` and ``hint`` say it to a person."""

    code: str       # "CatalogSourceUnready", "NeededByOLM", ... (docs/output.md lists them)
    what: str       # "Subscription ns/name", "ClusterServiceVersion ns/name" or "ClusterExtension name"
    reason: str
    hint: str = ""
    namespace: str = ""   # the install's namespace ("" for a cluster-scoped ClusterExtension)
    package: str = ""     # its package, where known


@dataclass(frozen=True)
class Survey:
    """The installs that map onto declarations, those left with their reason, and OLM's own components."""

    installs: tuple[Install, ...] = ()
    unmapped: tuple[Unmapped, ...] = field(default_factory=tuple)
    platform: tuple[Unmapped, ...] = field(default_factory=tuple)   # OLM's own: not installs, never adopted


def serves(kube: Kube) -> bool:
    return all(kube.resource(api_version, kind) is not None for kind, api_version in KINDS.items())


def read_cluster(kube: Kube) -> ClusterView:
    """List every OLM v0 object; a cluster without OLM's APIs is an error saying so."""
    infos: dict[str, ResourceInfo] = {}
    for kind, api_version in KINDS.items():
        info = kube.resource(api_version, kind)
        if info is None:
            raise ClusterError(f"the cluster runs no OLM v0: it does not serve {kind} ({api_version})",
                               obj=kube.server,
                               hint="adopt reads the installs OLM v0 made; check --kubeconfig/--context name the "
                                    "cluster that runs OLM (`kubectl get subscriptions -A` lists them)")
        infos[kind] = info
    return ClusterView({kind: tuple(kube.list(info)) for kind, info in infos.items()})


def survey(view: ClusterView) -> Survey:
    """Every Subscription as an ``Install`` or an ``Unmapped``, and every CSV no Subscription accounts for."""
    installs: list[Install] = []
    unmapped: list[Unmapped] = []
    claimed: set[tuple[str, str]] = set()
    for sub in sorted(view.of("Subscription"), key=lambda o: (_ns(o), _name(o))):
        ns = _ns(sub)
        status = sub.get("status") or {}
        csv_name = status.get("installedCSV") or ""
        if csv_name:
            claimed.add((ns, csv_name))
        result = _install(view, sub, csv_name)
        if isinstance(result, Unmapped):
            result = dataclasses.replace(result, namespace=ns, package=str((sub.get("spec") or {}).get("name") or ""))
        (installs if isinstance(result, Install) else unmapped).append(result)
    installs = [_held(view, i) for i in installs]
    unmapped.extend(_packages_twice(installs))
    conflicted = {u.what for u in unmapped}
    installs = [i for i in installs if i.where not in conflicted]
    platform = []
    for csv in sorted(view.of("ClusterServiceVersion"), key=lambda o: (_ns(o), _name(o))):
        if COPIED_FROM in (csv["metadata"].get("labels") or {}) or (_ns(csv), _name(csv)) in claimed:
            continue
        what = f"ClusterServiceVersion {_ns(csv)}/{_name(csv)}"
        if is_platform(csv):
            platform.append(Unmapped("Platform", what, "OLM's own component (its packageserver): not an install, "
                                     "left to OLM", namespace=_ns(csv)))
            continue
        unmapped.append(Unmapped("NoSubscription", what, "no Subscription installed it (applied by hand, or its "
                                 "Subscription was deleted): what was asked for (package, channel, approval) is "
                                 "unknown", "create a Subscription for its package in that namespace, or declare the "
                                 "Operator yourself and let `reconcile` take its objects over (reconciler.dev/adopt)",
                                 namespace=_ns(csv)))
    return Survey(tuple(installs), tuple(unmapped), tuple(platform))


def is_platform(csv: Manifest) -> bool:
    """Whether a CSV is a component of OLM itself (its packageserver), which OLM's installation made and labels."""
    labels = (csv.get("metadata") or {}).get("labels") or {}
    return any(k in labels for k in PLATFORM_LABELS) or (_name(csv) == "packageserver" and not labels.get("olm.copiedFrom"))


def _install(view: ClusterView, sub: Manifest, csv_name: str) -> Install | Unmapped:
    ns, name = _ns(sub), _name(sub)
    what = f"Subscription {ns}/{name}"
    spec = sub.get("spec") or {}
    if not csv_name:
        return _nothing_installed(view, sub, what)
    csv = view.get("ClusterServiceVersion", ns, csv_name)
    if csv is None:
        return Unmapped("CSVMissing", what, f"its installed ClusterServiceVersion {csv_name} does not exist",
                        "let OLM repair the install (or delete the Subscription) and adopt again")
    phase = (csv.get("status") or {}).get("phase") or "no phase"
    reason = (csv.get("status") or {}).get("reason") or ""
    if phase != "Succeeded":
        return Unmapped("CSVNotSucceeded", what,
                        f"ClusterServiceVersion {csv_name} is {phase}" + (f" ({reason})" if reason else "")
                        + ": only a succeeded install is taken over as it runs",
                        "wait for OLM to finish (or fix the failure) and adopt again")
    replacing = [c for c in view.of("ClusterServiceVersion", ns) if c["spec"].get("replaces") == csv_name
                 and COPIED_FROM not in (c["metadata"].get("labels") or {})]
    if replacing or (spec.get("installPlanApproval") != "Manual" and status_of(sub) == "UpgradePending"):
        return Unmapped("BeingReplaced", what, f"ClusterServiceVersion {csv_name} is being replaced"
                        + (f" by {_name(replacing[0])}" if replacing else " (an upgrade is pending)"),
                        "wait for the upgrade to finish and adopt again")
    managed = managed_by(sub)
    if managed is not None:
        tool, mark = managed
        return Unmapped("ManagedByAnotherTool", what,
                        f"is applied by {tool} ({mark}): the takeover deletes the Subscription, and {tool} "
                        "would create it again, and OLM with it", f"{LET_GO[tool]}; then adopt again")
    if (refused := _config_refused(spec.get("config"))) is not None:
        return Unmapped("ConfigNotDeclarable", what,
                        f"its spec.config {refused}", "fix or remove the field in the Subscription (OLM "
                        "applies the rest as written), then adopt again")
    groups = view.of("OperatorGroup", ns)
    if len(groups) != 1:
        return Unmapped("OperatorGroupCount", what,
                        f"namespace {ns} has {len(groups)} OperatorGroups (OLM installs nothing under "
                        "none or several)", "keep exactly one OperatorGroup in the namespace")
    group = groups[0]
    targets = _targets(group)
    if targets is None:
        return Unmapped("SelectorUnresolved", what,
                        f"OperatorGroup {ns}/{_name(group)} chooses its namespaces by a label selector and "
                        "OLM has not resolved them yet (no status.namespaces)",
                        "wait for OLM to list the namespaces on the OperatorGroup, then adopt again")
    mode = install_mode(ns, targets)
    supported = {m.get("type") for m in csv["spec"].get("installModes") or [] if m.get("supported")}
    if mode not in supported:
        return Unmapped("InstallModeUnsupported", what,
                        f"OperatorGroup {ns}/{_name(group)} asks for {mode}, which {csv_name} does not "
                        f"support ({', '.join(sorted(t for t in supported if t)) or 'no mode'})",
                        "fix the OperatorGroup's target namespaces in OLM first")
    src_ns, src = spec.get("sourceNamespace") or ns, spec.get("source") or ""
    source = view.get("CatalogSource", src_ns, src)
    if source is None:
        return Unmapped("CatalogSourceMissing", what, f"its CatalogSource {src_ns}/{src} does not exist",
                        "the bundle that runs cannot be checked against a catalog: recreate the CatalogSource")
    conn = ((source.get("status") or {}).get("connectionState") or {}).get("lastObservedState") or "unknown"
    if conn != "READY":
        return Unmapped("CatalogSourceUnready", what,
                        f"its CatalogSource {src_ns}/{src} cannot be read (connection {conn})",
                        "make the CatalogSource READY again, or put its catalog into the repository "
                        f"({import_command(source)})")
    plans = tuple(sorted(_name(p) for p in view.of("InstallPlan", ns)
                         if csv_name in (p.get("spec") or {}).get("clusterServiceVersionNames", [])))
    executing = [(_name(p), (p.get("status") or {}).get("phase") or "no phase yet") for p in view.of("InstallPlan", ns)
                 if _name(p) in plans and (p.get("status") or {}).get("phase") in EXECUTING]
    if executing:
        plan, phase = executing[0]
        return Unmapped("InstallPlanExecuting", what,
                        f"OLM is still executing InstallPlan {ns}/{plan} (phase {phase}), which installed "
                        f"{csv_name}: until it is Complete, catalog-operator writes its objects (and any Subscription "
                        "it makes for a dependency) again, over a takeover",
                        "wait until the InstallPlan is Complete (`kubectl get installplan -n " + ns + "`), then adopt "
                        "again")
    generated_by = str((sub["metadata"].get("annotations") or {}).get(GENERATED_BY) or "")
    return Install(sub, csv, group, source, targets, plans, generated_by, _needing(view, sub, csv_name, generated_by))


def _nothing_installed(view: ClusterView, sub: Manifest, what: str) -> Unmapped:
    """Why a Subscription has installed nothing, naming the object that holds it: its CatalogSource (missing,
    or not READY), its InstallPlan (waiting for approval, failed, still running), or OLM's resolution."""
    ns, spec, status = _ns(sub), sub.get("spec") or {}, sub.get("status") or {}
    src_ns, src = spec.get("sourceNamespace") or ns, spec.get("source") or ""
    later = "or delete the Subscription and declare the Operator in the repository"
    source = view.get("CatalogSource", src_ns, src)
    if source is None:
        return Unmapped("NothingInstalled", what, f"nothing is installed for it: its CatalogSource {src_ns}/{src} does not exist, so "
                        "OLM resolved nothing", f"create CatalogSource {src_ns}/{src} (or fix the Subscription's "
                        f"spec.source), let OLM install it and adopt again, {later}")
    conn = ((source.get("status") or {}).get("connectionState") or {}).get("lastObservedState") or "unknown"
    if conn != "READY":
        return Unmapped("NothingInstalled", what, f"nothing is installed for it: its CatalogSource {src_ns}/{src} cannot be read "
                        f"(connection {conn}), so OLM resolved nothing",
                        f"make CatalogSource {src_ns}/{src} READY (it serves {describe_source(source)}; `kubectl "
                        f"get catalogsource -n {src_ns} {src} -o yaml` says why it is not), let OLM install the "
                        f"Subscription and adopt again, {later}")
    ref = (status.get("installPlanRef") or status.get("installplan") or {}).get("name") or ""
    plan = view.get("InstallPlan", ns, ref) if ref else None
    if plan is not None:
        phase = (plan.get("status") or {}).get("phase") or "no phase yet"
        failed = next((c for c in (plan.get("status") or {}).get("conditions") or []
                       if c.get("type") == "Installed" and c.get("status") == "False"), None)
        if phase == "RequiresApproval":
            return Unmapped("NothingInstalled", what, f"nothing is installed for it yet: its InstallPlan {ns}/{ref} waits for approval "
                            "(installPlanApproval: Manual)",
                            f"approve InstallPlan {ns}/{ref} in OLM (`kubectl patch installplan -n {ns} {ref} "
                            f"--type merge -p '{{\"spec\":{{\"approved\":true}}}}'`) and adopt once it is installed, "
                            f"{later}")
        if phase == "Failed":
            why = " ".join(str((failed or {}).get("message") or "").split())[:300]
            return Unmapped("NothingInstalled", what, f"nothing is installed for it: its InstallPlan {ns}/{ref} failed"
                            + (f": {why}" if why else ""), f"fix what InstallPlan {ns}/{ref} says in OLM (or delete "
                            f"it so OLM plans again), let OLM install it and adopt again, {later}")
        return Unmapped("NothingInstalled", what, f"nothing is installed for it yet: OLM is executing its InstallPlan {ns}/{ref} "
                        f"(phase {phase})", f"wait until InstallPlan {ns}/{ref} is Complete, then adopt again")
    unresolved = next((c for c in status.get("conditions") or []
                       if c.get("type") == "ResolutionFailed" and c.get("status") == "True"), None)
    if unresolved is not None:
        why = " ".join(str(unresolved.get("message") or unresolved.get("reason") or "").split())[:300]
        return Unmapped("NothingInstalled", what, f"nothing is installed for it: OLM cannot resolve it from CatalogSource "
                        f"{src_ns}/{src}: {why}", f"fix the Subscription's package, channel or source so that OLM "
                        f"resolves it, then adopt, {later}")
    state = status.get("state") or "no state yet"
    return Unmapped("NothingInstalled", what, f"nothing is installed for it yet (state: {state}; no InstallPlan yet, CatalogSource "
                    f"{src_ns}/{src} is READY)", f"wait for OLM to resolve and install it, then adopt again, {later}")


def _held(view: ClusterView, inst: Install) -> Install:
    """``inst`` with ``held_by`` naming a Manual Subscription of its namespace when its own is Automatic: OLM v0
    resolves every Subscription of a namespace into one InstallPlan, and makes that plan Manual when any of them
    is, so this install's upgrades waited for approval as the Manual one's did."""
    if inst.manual:
        return inst
    manual = sorted(_name(o) for o in view.of("Subscription", inst.namespace)
                    if (o.get("spec") or {}).get("installPlanApproval") == "Manual")
    return dataclasses.replace(inst, held_by=manual[0]) if manual else inst


def _needing(view: ClusterView, sub: Manifest, csv_name: str, plan_name: str) -> tuple[str, ...]:
    """The other Subscriptions of the namespace whose installed CSV the plan that generated ``sub`` installed too."""
    plan = view.get("InstallPlan", _ns(sub), plan_name) if plan_name else None
    if plan is None:
        return ()
    csvs = set((plan.get("spec") or {}).get("clusterServiceVersionNames") or []) - {csv_name}
    return tuple(sorted(_name(o) for o in view.of("Subscription", _ns(sub))
                        if o is not sub and (o.get("status") or {}).get("installedCSV") in csvs
                        and not (o["metadata"].get("annotations") or {}).get(GENERATED_BY)))


def _config_refused(config: Any) -> str | None:
    """Why a Subscription's ``spec.config`` cannot become the declaration's ``spec.config`` (None when it can)."""
    if config is None:
        return None
    if isinstance(config, dict) and config.get("selector"):
        return "has a selector, which OLM v0 does not apply and a declaration does not accept"
    try:
        CONFIG_SHAPE.check({k: v for k, v in config.items() if k != "selector"} if isinstance(config, dict)
                           else config, "spec.config")
    except Mismatch as exc:
        return f"cannot be declared: {exc}"
    return None


def status_of(sub: Manifest) -> str:
    return str((sub.get("status") or {}).get("state") or "")


def _targets(group: Manifest) -> tuple[str, ...] | None:
    """The namespaces an OperatorGroup targets, as OLM reads them: its list, or, for a label selector, the
    namespaces OLM resolved it to (``status.namespaces``; None before OLM did). ("",) is every namespace."""
    spec = group.get("spec") or {}
    if spec.get("selector"):
        resolved = (group.get("status") or {}).get("namespaces")
        if resolved is None:
            return None
        return tuple(sorted(n for n in resolved if n)) or ("",)
    listed = spec.get("targetNamespaces")
    if listed is None:   # no list and no selector: every namespace
        return ("",)
    return tuple(sorted(listed)) or ("",)


def install_mode(namespace: str, targets: tuple[str, ...]) -> str:
    if targets == ("",):
        return "AllNamespaces"
    if targets == (namespace,):
        return "OwnNamespace"
    return "SingleNamespace" if len(targets) == 1 else "MultiNamespace"


def _packages_twice(installs: list[Install]) -> list[Unmapped]:
    """One package subscribed in several namespaces: the reconciler installs a package once per cluster (its
    CRDs and cluster RBAC are the cluster's), so none of them is taken over rather than one chosen."""
    by_package: dict[str, list[Install]] = {}
    for i in installs:
        by_package.setdefault(i.package, []).append(i)
    out = []
    for package, members in sorted(by_package.items()):
        if len(members) > 1:
            where = ", ".join(i.namespace for i in members)
            out += [Unmapped("PackageTwice", i.where, f"package {package} is installed in "
                             f"{counted(len(members), 'namespace')} ({where}); the reconciler installs a package "
                             "once per cluster",
                             "keep one of them in OLM (delete the other Subscriptions and CSVs) and adopt again",
                             namespace=i.namespace, package=package) for i in members]
    return out


def dependency_of(inst: Install) -> str:
    """`` of Subscription ns/a, ns/b`` when what needed a generated Subscription is known, else nothing."""
    return f" of {', '.join(f'Subscription {inst.namespace}/{n}' for n in inst.dependency_of)}" \
        if inst.dependency_of else ""


def import_command(source: Manifest) -> str:
    """The command that writes the catalog ``source`` serves into the repository (run at its root)."""
    return f"`reconciler catalog import . --catalog-source {_ns(source)}/{_name(source)}`"


def describe_source(source: Manifest) -> str:
    spec = source.get("spec") or {}
    return str(spec.get("image") or spec.get("address") or f"the catalog of CatalogSource {_name(source)}")


def csv_images(csv: Manifest) -> set[str]:
    """The images of the Deployments a CSV (live, or embedded in a catalog) says it runs."""
    strategy = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    return deployment_images(strategy.get("deployments") or [])


def deployment_images(deployments: Iterable[Manifest]) -> set[str]:
    """The containers' images of Deployments: live ones, or a CSV's install strategy entries (the same spec)."""
    return {c.get("image", "") for d in deployments
            for c in (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []}


def csv_permissions(csv: Manifest) -> dict[str, Any]:
    """The permissions the CSV holds, as written in it: the evidence an adoption records."""
    strategy = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    out: dict[str, Any] = {}
    for key in ("permissions", "clusterPermissions"):
        out[key] = [{"serviceAccountName": p.get("serviceAccountName", ""), "rules": p.get("rules") or []}
                    for p in strategy.get(key) or []]   # an empty list says it held none
    return out


def _ns(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _name(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _wrap(text: str, width: int = 110) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)


def needed_by_olm(adopting: Iterable[Install], view: ClusterView) -> list[Unmapped]:
    """Installs being adopted that an install staying with OLM needs (by package, or an API their CSV provides).

    catalog-operator resolves what each of its CSVs requires on every resolution, read as ``model/olmneeds.py``
    says: once the CSV that met a requirement is gone, it installs the package again (a new Subscription and
    CSV, and an update of the same-named Deployment), and fights the reconciler for it. Such an install is
    adopted together with what needs it, or left with it.
    """
    adopting = list(adopting)
    taken = {(i.namespace, i.csv_name) for i in adopting}
    staying = [c for c in view.of("ClusterServiceVersion") if (_ns(c), _name(c)) not in taken
               and COPIED_FROM not in ((c.get("metadata") or {}).get("labels") or {})]
    out = []
    for inst in adopting:
        needing = [(f"{_ns(c)}/{_name(c)}", what) for c in sorted(staying, key=lambda c: (_ns(c), _name(c)))
                   if (what := olmneeds.needed(c, inst.csv, inst.package))]
        if needing:
            who = ", ".join(f"ClusterServiceVersion {name} (needs {', '.join(what)})" for name, what in needing)
            out.append(Unmapped("NeededByOLM", inst.where, f"{who} stays with OLM and needs what {inst.csv_name} "
                                f"provides: once its CSV is gone, catalog-operator installs {inst.package} again to "
                                "satisfy it, and fights the reconciler for it",
                                "adopt them together (name both with --package, or adopt every install), or leave "
                                f"{inst.package} with OLM", namespace=inst.namespace, package=inst.package))
    return out
