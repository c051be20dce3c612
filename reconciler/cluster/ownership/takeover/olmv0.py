"""The takeover: an adopted declaration's first reconciles replace OLM v0's ownership, without disruption.

This is ownership policy, and its one seam into the apply engine is
``DesiredOperator.adopting``: the live objects an Operator may apply over
although the reconciler did not create them. Everything else happens around
the engine's sync, in an order chosen so that neither OLM nor Kubernetes'
garbage collector takes the workload, so that OLM's reactions to a deleted CSV
(read in OLM v0's own source: the ``csv-cleanup`` finalizer and the CSV
deletion handler of olm-operator) find nothing of the reconciler's to undo,
and so that every step can be repeated: what is left to do is always read
from the cluster, so a run killed anywhere is finished by the next.

First, an Operator is not taken over when its takeover would start a fight,
and only that Operator is held back (the others go on): a Subscription that
installed another bundle than the lock pins (OLM upgraded it since the
adoption, or the lock moved first), or whose approved InstallPlan is
installing one; a Subscription another GitOps tool applies (it would create
it again); an install OLM keeps that needs this package or an API it provides
(catalog-operator would install the package again to satisfy it).

Before the sync (OLM stops asking):

1. the InstallPlans that installed the CSV are deleted: a plan OLM is still
   executing would otherwise create its Subscriptions again, the one OLM
   generates for a dependency among them (a Complete plan that also
   installed a CSV OLM keeps stays: it is that install's record too);
2. the Subscription is deleted, so catalog-operator resolves, plans and
   upgrades nothing more for the package.

The sync then applies the bundle over what runs: the live objects of the
bundle as rendered (which OLM made from the same bundle: CSV-generated,
the bundle's other manifests, its CRDs) are ``adopting``. Server-side apply sets only the fields the bundle renders; the
fields OLM added to the pod template (the CSV's annotations,
``olm.operatorGroup``, ``olm.targetNamespaces``, ``OPERATOR_CONDITION_NAME``,
...) stay, owned by OLM's field manager, so the template does not change and
no pod restarts. Our RBAC is in place before OLM's goes: never narrower.

After a sync that applied the Operator (OLM lets go):

3. what OLM made for the CSV that the bundle does not render here (its
   hashed Roles and ClusterRoles and their bindings, webhook Services and
   certificates) is labelled ``reconciler.dev/retire-from-olm``, so that it
   can still be found once the CSV's owner references are gone;
4. what the bundle renders and OLM labelled as the CSV's loses OLM's owner
   labels (``olm.owner``, ``olm.owner.namespace``, ``olm.owner.kind``), but
   the Deployments: the ``csv-cleanup`` finalizer deletes the ClusterRoles,
   ClusterRoleBindings and webhook configurations that carry them, and the
   CSV deletion handler the APIServices, and these are the reconciler's now;
5. the CSV is deleted with ``propagationPolicy: Orphan``: the garbage
   collector removes the CSV's owner references from the Deployment,
   ServiceAccount, Service, Roles and bindings instead of deleting them, and
   olm-operator, with no CSV, no longer reconciles them; its copies in the
   target namespaces go with it (deleted here too, if left). A Subscription
   with ``spec.config`` is deleted only now, after its CSV: olm-operator
   reads the overrides from it whenever it syncs the CSV, and without it
   would rewrite the Deployments without them. olm-operator's deletion
   handler sets ``spec.conversion.strategy: None`` on every CRD the CSV's
   conversion webhooks served and deletes its APIServices, for a CSV that
   still carries its OperatorGroup annotations: they are taken off first,
   and exactly that version is deleted (``_delete_csv``). Should the
   handler act all the same, the takeover waits for it, bounded, and
   applies the bundle's CRD again at once, so the conversion webhook is back
   before the run ends (and any APIService found gone is applied again);
6. those labelled objects are deleted: the bundle's own, applied, replace
   them; a Deployment is never deleted. The OperatorCondition of the CSV
   stays, without the CSV as its owner (``_keep_condition``): the operator
   keeps the access OLM's OperatorCondition controller gives it (its Role
   and RoleBinding) and the conditions it reports there (``Upgradeable``)
   are read from it; the namespace's OperatorGroup goes when
   no Subscription or CSV uses it any more, unless OLM's installation ships
   it (``global-operators``) or another tool applies it;
7. last, OLM's labels (``olm.owner``, ``olm.owner.kind``,
   ``olm.owner.namespace``, ``olm.managed``,
   ``operators.coreos.com/<package>.<namespace>``) are removed from what
   was taken over, CRDs included, Deployments last of all, and the package
   label from every other object OLM's ``Operator`` object of the package
   lists as its component (``status.components.refs``); then that object
   goes (olm-operator made it for the objects that carried the label, and
   makes it again while one does).

CRDs and custom resources are never deleted by any step. ``reconcile
--dry-run`` lists each step that a real run would take, in this order.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.apply import DesiredOperator
from reconciler.cluster.ownership.takeover.calls import (delete as _delete, get as _get, list_of as _list,
                                                          namespace_of as _ns, patch as _patch, where as _where)
from reconciler.kube.client import ApiError, Kube
from reconciler.kube.concurrent import concurrently
from reconciler.model import olmneeds
from reconciler.model.deployconfig import DeploymentConfig
from reconciler.model.kube import Manifest, ObjectRef
from reconciler.model.managers import LET_GO, managed_by
from reconciler.report.words import counted

GROUP = "operators.coreos.com"
OWNER_LABELS = ("olm.owner", "olm.owner.kind", "olm.owner.namespace", "olm.managed")
# Kinds OLM v0 creates for a CSV beside its Deployments, which the takeover finds by the olm.owner label.
OWNED_KINDS = (("v1", "ServiceAccount"), ("v1", "Service"), ("v1", "Secret"), ("v1", "ConfigMap"),
               ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
               ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
               ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
               ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
               ("apiregistration.k8s.io/v1", "APIService"), ("apps/v1", "Deployment"))
# Kinds olm-operator counts as an operator's components (pkg/controller/operators/components.go in OLM v0):
# while one of them carries ``operators.coreos.com/<package>.<namespace>``, it makes the Operator object again.
COMPONENT_KINDS = (("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "Namespace"),
                   ("apiregistration.k8s.io/v1", "APIService"),
                   ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                   (f"{GROUP}/v1alpha1", "Subscription"), (f"{GROUP}/v1alpha1", "InstallPlan"),
                   (f"{GROUP}/v1alpha1", "ClusterServiceVersion"), (f"{GROUP}/v2", "OperatorCondition"),
                   ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "ServiceAccount"),
                   ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                   ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                   ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"))
ORPHAN_WAIT = 30.0
SETTLE_ATTEMPTS, SETTLE_PAUSE = 5, 1.0   # undoing what OLM may still do once the CSVs are gone (``After.settle``)
CONVERSION_WAIT = 30.0   # how long olm-operator's CSV deletion handler is waited for (it acts within a second)
CONVERSION_SETTLE = 2.0   # ... when the CSV went without the annotations it acts on (it should not act at all)
# The annotations olm-operator puts on a CSV from its OperatorGroup; its CSV deletion handler does nothing
# (no conversion webhook cleared, no APIService deleted) for a CSV deleted without them.
GROUP_ANNOTATIONS = ("olm.operatorGroup", "olm.operatorNamespace", "olm.targetNamespaces")
CSV_ATTEMPTS = 5
RETIRE = "reconciler.dev/retire-from-olm"   # OLM's object for a CSV, to be deleted once the CSV is gone
# OperatorGroups OLM's own installation ships (``operators``/``openshift-operators`` and ``olm``/
# ``openshift-operator-lifecycle-manager``): the platform's, left in place whatever is adopted under them.
PLATFORM_GROUPS = frozenset({"global-operators", "olm-operators"})


@dataclass(frozen=True)
class Takeover:
    """One adopted Operator whose OLM v0 install is (still) being taken over."""

    operator: str
    namespace: str
    subscription: str
    csv: str
    package: str
    live_csv: dict | None
    subscription_exists: bool
    plans: tuple[str, ...]
    owned: tuple[dict, ...]          # live objects OLM made for the CSV (by owner reference or olm.owner label)
    # The Subscription has spec.config: olm-operator reads the overrides from it each time it syncs the CSV, so
    # it goes only after the CSV (without it OLM would rewrite the Deployments without the overrides).
    configured: bool = False
    # Complete InstallPlans that installed this CSV and one a Subscription OLM keeps runs, which this Subscription
    # owns: they stay (that install's record too), and lose the owner reference first
    shared_plans: tuple[dict, ...] = ()

    @property
    def pending(self) -> bool:
        return bool(self.live_csv or self.subscription_exists or self.plans or self.owned)

    @property
    def conversion_crds(self) -> tuple[str, ...]:
        """The CRDs the CSV's conversion webhooks serve, which olm-operator's deletion handler clears."""
        hooks = ((self.live_csv or {}).get("spec") or {}).get("webhookdefinitions") or []
        return tuple(sorted({crd for h in hooks if h.get("type") == "ConversionWebhook"
                             for crd in h.get("conversionCRDs") or []}))


@dataclass(frozen=True)
class Refusal:
    """An adopted Operator held back from its takeover this run, and why (the others go on)."""

    operator: str
    source: str    # olm-v0/<namespace>/<subscription>
    reason: str
    hint: str


def find(kube: Kube, desired: list[DesiredOperator], adopted: Mapping[str, str]) -> tuple[list[Takeover],
                                                                                       list[Refusal]]:
    """The takeovers still to do: each desired Operator adopted from OLM v0 (``adopted``: name ->
    ``olm-v0/<namespace>/<subscription>``) whose OLM bookkeeping or labels are still in the cluster; and the
    ones held back (``Refusal``), each refused alone.

    A finished takeover costs two GETs and one labelled LIST per adopted
    Operator: no CSV, no Subscription, and no Deployment labelled as the CSV's
    (the labels of Deployments are the last thing a takeover removes). A
    cluster without OLM's APIs has nothing left to take over.
    """
    out: list[Takeover] = []
    refused: list[Refusal] = []
    if not adopted or kube.resource(f"{GROUP}/v1alpha1", "ClusterServiceVersion") is None:
        return out, refused
    index = _OwnedIndex(kube)
    for op in desired:
        source = adopted.get(op.name)
        if not source or op.waiting:
            continue
        _, namespace, subscription = source.split("/")
        csv_name = str(op.bundle.get("name") or "")
        csv = _get(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", namespace, csv_name)
        sub = _get(kube, f"{GROUP}/v1alpha1", "Subscription", namespace, subscription)
        if csv is None and sub is None and not _list(kube, "apps/v1", "Deployment", namespace,
                                                     selector=f"olm.owner={csv_name}"):
            continue
        every_plan = _list(kube, f"{GROUP}/v1alpha1", "InstallPlan", namespace)
        if sub is not None and (why := _moved_on(sub, csv_name, every_plan)):
            refused.append(Refusal(op.name, source, f"{why}: the takeover applies the pinned bundle over what runs, "
                                   "and OLM would keep the other",
                                   "take over what runs first: remove the Operator's entry from olm.lock and run "
                                   "`reconciler adopt REPO` again, reconcile, then move the pin with `reconciler "
                                   "resolve`; if OLM is still installing, wait for its InstallPlan to finish"))
            continue
        managed = managed_by(sub) if sub is not None else None
        if managed is not None:
            tool, mark = managed
            refused.append(Refusal(op.name, source, f"Subscription {namespace}/{subscription} is applied by {tool} "
                                   f"({mark}): the takeover deletes it, and {tool} would create it again, and OLM "
                                   "with it", f"{LET_GO[tool]}; the next reconcile then takes the install over"))
            continue
        plans, shared = _plans(kube, every_plan, csv_name, sub, adopted)
        owned = tuple(index.owned(namespace, csv_name))
        configured = bool(DeploymentConfig.of(((sub or {}).get("spec") or {}).get("config")).value)
        out.append(Takeover(op.name, namespace, subscription, csv_name, str(op.bundle.get("package") or ""), csv,
                            sub is not None, plans, owned, configured, shared))
    pending = [t for t in out if t.pending]
    needed = _needed_by_olm(kube, pending)
    refused += needed
    gone = {r.operator for r in needed}
    return [t for t in pending if t.operator not in gone], refused


def _needed_by_olm(kube: Kube, takeovers: list[Takeover]) -> list[Refusal]:
    """Takeovers that a CSV OLM keeps needs, by package or by an API this one provides, read as catalog-operator
    reads an installed CSV's requirements (``model/olmneeds.py``): once the CSV is gone, catalog-operator would
    install the package again to satisfy it (``adopt`` refuses the same; this holds for a cluster that changed
    since)."""
    if not any(t.live_csv for t in takeovers):
        return []
    every = [c for c in _list(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", "")
             if "olm.copiedFrom" not in (c["metadata"].get("labels") or {})]
    taken = {(t.namespace, t.csv) for t in takeovers}
    staying = sorted((c for c in every if (_ns(c), c["metadata"]["name"]) not in taken),
                     key=lambda c: (_ns(c), c["metadata"]["name"]))
    out = []
    for t in takeovers:
        if t.live_csv is None:
            continue
        needing = [f"{_ns(c)}/{c['metadata']['name']} (needs {', '.join(what)})" for c in staying
                   if (what := olmneeds.needed(c, t.live_csv, t.package))]
        if needing:
            out.append(Refusal(t.operator, f"olm-v0/{t.namespace}/{t.subscription}",
                               f"ClusterServiceVersion {', '.join(needing)} stays with OLM and needs what {t.csv} "
                               f"provides: once {t.csv} is gone, catalog-operator installs {t.package} again",
                               "adopt what needs it too (`reconciler adopt REPO --package ...`) and reconcile both, "
                               f"or leave {t.package} with OLM (remove its declaration)"))
    return out


def _plans(kube: Kube, every_plan: list[dict], csv_name: str, sub: dict | None,
           adopted: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[dict, ...]]:
    """The InstallPlans a takeover deletes: those that installed the CSV and the Subscription's latest (an upgrade
    waiting for approval, which catalog-operator would still install if someone approved it with the
    Subscription gone); and those it keeps, shared with an install OLM keeps, that the Subscription owns (the
    garbage collector would take them with it, so it lets go of them first)."""
    latest = str((((sub or {}).get("status") or {}).get("installPlanRef") or {}).get("name") or "")
    ours = [p for p in every_plan if csv_name in (p.get("spec") or {}).get("clusterServiceVersionNames", [])
            or p["metadata"]["name"] == latest]
    shared = [p for p in ours if _shared_with_olm(kube, p, csv_name, adopted)]
    uid = ((sub or {}).get("metadata") or {}).get("uid")
    owned = tuple(p for p in shared if uid and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences")
                                                   or []))
    return tuple(sorted(p["metadata"]["name"] for p in ours if p not in shared)), owned


def _shared_with_olm(kube: Kube, plan: dict, csv_name: str, adopted: Mapping[str, str]) -> bool:
    """Whether an InstallPlan that installed ``csv_name`` installed, in the same plan, a CSV a Subscription OLM
    keeps runs (catalog-operator plans a namespace's Subscriptions together): it is that install's record too
    (its Subscription's ``installPlanRef``), so it stays; once Complete, catalog-operator executes it no more."""
    others = set((plan.get("spec") or {}).get("clusterServiceVersionNames") or []) - {csv_name}
    if not others or (plan.get("status") or {}).get("phase") not in ("Complete", "Failed"):
        return False
    ns = _ns(plan)
    taken = {source for source in adopted.values()}
    return any(f"olm-v0/{ns}/{s['metadata']['name']}" not in taken
               and ((s.get("status") or {}).get("installedCSV") in others)
               for s in _list(kube, f"{GROUP}/v1alpha1", "Subscription", ns))


def _moved_on(sub: dict, csv_name: str, plans: Iterable[dict]) -> str:
    """Why OLM v0 no longer runs, or is replacing, the locked bundle ``csv_name`` under Subscription ``sub``;
    "" when it still runs it: an upgrade installed since the adoption, or one approved and being installed. An
    upgrade waiting for approval is not: the takeover deletes its InstallPlan."""
    status = sub.get("status") or {}
    installed, current = str(status.get("installedCSV") or ""), str(status.get("currentCSV") or "")
    if installed and installed != csv_name:
        return f"Subscription {_where(sub)} installed {installed}, the lock pins {csv_name}"
    planned = str((status.get("installPlanRef") or {}).get("name") or "")
    for plan in plans:
        if current in ("", csv_name) or plan["metadata"]["name"] != planned:
            continue
        phase = (plan.get("status") or {}).get("phase") or ""
        if (plan.get("spec") or {}).get("approved") and phase not in ("Complete", "Failed"):
            return (f"OLM is installing {current} over {csv_name} (InstallPlan {_where(plan)}, approved, phase "
                    f"{phase or 'none yet'})")
    return ""


def adopting(desired: list[DesiredOperator], takeovers: Iterable[Takeover]) -> list[DesiredOperator]:
    """``desired`` with each taken-over Operator allowed to apply over the live objects of its bundle.

    OLM made them from this very bundle: the CSV's Deployments, ServiceAccounts
    and RBAC, and the bundle's other manifests and CRDs, which catalog-operator
    creates without marking them as the CSV's. The engine still refuses what
    another Operator of the reconciler holds, and what is never adopted.
    """
    by_name = {t.operator: t for t in takeovers}
    return [dataclasses.replace(op, adopting=frozenset(ObjectRef.of(o).key for o in op.objects))
            if op.name in by_name else op for op in desired]


def before(kube: Kube, takeovers: list[Takeover], *, dry_run: bool) -> list[str]:
    """Steps 1 and 2: OLM stops asking. Returns what was (or would be) done, one line per step."""
    lines = []
    for t in takeovers:
        for shared in t.shared_plans:
            others = sorted(set(shared["spec"].get("clusterServiceVersionNames") or []) - {t.csv})
            lines.append(_step(t, f"keep InstallPlan {_where(shared)}, which installed {', '.join(others)} too (for a "
                              f"Subscription OLM keeps): Subscription {t.subscription}'s owner reference comes off "
                              "it, so that it outlives the Subscription", dry_run))
            if not dry_run:
                _patch(kube, shared, {"metadata": {"ownerReferences": [
                    r for r in shared["metadata"].get("ownerReferences") or []
                    if not (r.get("kind") == "Subscription" and r.get("name") == t.subscription)]}})
        for plan in t.plans:
            lines.append(_step(t, f"delete InstallPlan {t.namespace}/{plan}", dry_run))
            if not dry_run:
                _delete(kube, f"{GROUP}/v1alpha1", "InstallPlan", t.namespace, plan)
        if t.subscription_exists and not (t.configured and t.live_csv is not None):
            lines.append(_step(t, f"delete Subscription {t.namespace}/{t.subscription} (OLM resolves and "
                              f"upgrades nothing more for {t.package})", dry_run))
            if not dry_run:
                _delete(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription)
        if t.owned or t.live_csv:
            names = sorted(f"{o['kind']} {_where(o)}" for o in t.owned)
            lines.append(_step(t, f"apply the bundle over what OLM made for {t.csv} (pod templates kept as they "
                              f"run): {', '.join(names) or 'nothing yet'}", dry_run))
    return lines


class After:
    """Steps 3 to 7 for the takeovers of one sync, once it applied their Operators (it raises otherwise): OLM
    lets go of what is now the reconciler's. ``write`` applies one of an Operator's objects again, as its own
    writer (``Applier.write``): a CRD whose conversion webhook OLM cleared, an APIService OLM deleted."""

    def __init__(self, kube: Kube, takeovers: list[Takeover], desired: list[DesiredOperator], *, dry_run: bool,
                 write: Callable[[str, Manifest], object]) -> None:
        self.kube, self.takeovers, self.dry_run, self.write = kube, takeovers, dry_run, write
        self.objects = {op.name: {ObjectRef.of(o).key: o for o in op.objects} for op in desired}
        self.lines: list[str] = []
        self.deleted_operators: list[str] = []   # OLM's Operator objects this run deleted
        self.conditions: list[tuple[dict, Takeover]] = []   # OperatorConditions kept without their CSV

    def run(self) -> list[str]:
        for t in self.takeovers:
            self.one(t)
        self.settle()
        return self.lines

    def step(self, t: Takeover, what: str) -> None:
        self.lines.append(_step(t, what, self.dry_run))

    def one(self, t: Takeover) -> None:
        kube, dry_run = self.kube, self.dry_run
        mine = self.objects.get(t.operator, {})
        kept, extra = [], []
        for obj in t.owned:
            (kept if ObjectRef.of(obj).key in mine or obj["kind"] == "Deployment" else extra).append(obj)
        if extra:
            self.step(t, f"mark {counted(len(extra), 'object')} OLM made for {t.csv} that the bundle does not render, to "
                         f"retire them once the CSV is gone")
        if not dry_run:
            for obj in extra:
                _patch(kube, obj, {"metadata": {"labels": {RETIRE: t.csv}}})
        owner_labelled = [o for o in kept if o["kind"] != "Deployment" and _owner_labels(o)]
        if owner_labelled:
            self.step(t, f"remove OLM's owner labels from {counted(len(owner_labelled), 'object')} now the reconciler's, "
                         f"before the CSV goes (OLM's csv-cleanup finalizer and CSV deletion handler delete what "
                         f"carries them)")
            if not dry_run:
                for obj in owner_labelled:
                    _patch(kube, obj, {"metadata": {"labels": {k: None for k in _owner_labels(obj)}}})
        if t.live_csv is not None and not t.configured and not dry_run \
                and _get(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription) is not None:
            # made again since step 2 by catalog-operator from a plan it was executing (read from its cache):
            # without its CSV it would install the package anew, so it goes before the CSV
            self.step(t, f"delete Subscription {t.namespace}/{t.subscription} again (OLM made it anew from an "
                         f"InstallPlan it was still executing)")
            _delete(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription)
        condition = _get(kube, f"{GROUP}/v2", "OperatorCondition", t.namespace, t.csv)
        if t.live_csv is not None:
            self.step(t, f"delete ClusterServiceVersion {t.namespace}/{t.csv}, orphaning its objects (and its copies "
                         f"in the target namespaces)")
            unannotated = False
            if not dry_run:
                unannotated = _delete_csv(kube, t)
                _wait_gone(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace, t.csv)
            self.restore_conversion(t, CONVERSION_SETTLE if unannotated else CONVERSION_WAIT)
            self.restore_apiservices(t)
            if t.configured and t.subscription_exists:
                self.step(t, f"delete Subscription {t.namespace}/{t.subscription} (kept until now: OLM applied its "
                             f"spec.config while the CSV was there)")
                if not dry_run:
                    _delete(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription)
        if not dry_run:
            for c in _list(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", "",
                           selector=f"olm.copiedFrom={t.namespace}"):
                if c["metadata"]["name"] == t.csv:
                    _delete(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", c["metadata"]["namespace"], t.csv)
        for obj in extra:
            self.step(t, f"delete OLM's {obj['kind']} {_where(obj)} (the bundle's own, applied, replaces it)")
            if not dry_run:
                _delete(kube, obj["apiVersion"], obj["kind"], _ns(obj), obj["metadata"]["name"])
        if condition is not None:
            self.step(t, f"keep OperatorCondition {t.namespace}/{t.csv} without its CSV: the operator keeps the "
                         f"access OLM gives it there, and the reconciler reads its Upgradeable condition")
            if not dry_run and self.keep_condition(condition, t) is not None:
                self.conditions.append((condition, t))
        self.lines.extend(self.retire_group(t))
        self.release(t, kept)

    def restore_conversion(self, t: Takeover, wait: float) -> None:
        """olm-operator's CSV deletion handler sets ``conversion.strategy: None`` on the CRDs the CSV's conversion
        webhooks served (unless another CSV replaces it, or the CSV went without its OperatorGroup annotations:
        ``_delete_csv``): wait for that, bounded by ``wait``, and apply the bundle's CRD at once, so the webhook
        is back before the run ends."""
        crds = [n for n in t.conversion_crds if ("apiextensions.k8s.io", "CustomResourceDefinition", "", n)
                in self.objects.get(t.operator, {})]
        if not crds:
            return
        self.step(t, f"see that the conversion webhook of {', '.join(crds)} stays, and apply it again at once if "
                     f"olm-operator, seeing the CSV gone, sets its strategy to None")
        if self.dry_run:
            return
        info = self.kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        assert info is not None
        deadline = time.monotonic() + wait
        left = set(crds)
        while left:
            for name in sorted(left):
                live = self.kube.get(info, "", name) or {}
                if ((live.get("spec") or {}).get("conversion") or {}).get("strategy") != "Webhook":
                    self.write(t.operator, self.objects[t.operator][
                        ("apiextensions.k8s.io", "CustomResourceDefinition", "", name)])
                    left.discard(name)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)

    def restore_apiservices(self, t: Takeover) -> None:
        """An APIService of the bundle found gone after the CSV (OLM's deletion handler deletes those still
        labelled as the CSV's; step 4 took the labels off first) is applied again at once."""
        if self.dry_run:
            return
        info = self.kube.resource("apiregistration.k8s.io/v1", "APIService")
        for key, obj in sorted(self.objects.get(t.operator, {}).items()):
            if key[:2] == ("apiregistration.k8s.io", "APIService") and info is not None \
                    and self.kube.get(info, "", key[3]) is None:
                self.step(t, f"apply APIService {key[3]} again (OLM deleted it with the CSV)")
                self.write(t.operator, obj)

    def retire_group(self, t: Takeover) -> list[str]:
        """The namespace's OperatorGroup goes once no Subscription and no CSV of OLM's own remains in it (those of
        every takeover of this run counted as gone), but one OLM's installation ships or another tool applies."""
        going_subs = {(x.namespace, x.subscription) for x in self.takeovers}
        going_csvs = {(x.namespace, x.csv) for x in self.takeovers}
        if any(x.namespace == t.namespace for x in self.takeovers[self.takeovers.index(t) + 1:]):
            return []   # the last takeover of the namespace decides
        subs = [s for s in _list(self.kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace)
                if not (self.dry_run and (t.namespace, s["metadata"]["name"]) in going_subs)]
        csvs = [c for c in _list(self.kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace)
                if "olm.copiedFrom" not in (c["metadata"].get("labels") or {})
                and not (self.dry_run and (t.namespace, c["metadata"]["name"]) in going_csvs)]
        if subs or csvs:
            return []
        lines = []
        for group in _list(self.kube, f"{GROUP}/v1", "OperatorGroup", t.namespace):
            name = group["metadata"]["name"]
            managed = managed_by(group)
            if name in PLATFORM_GROUPS:
                lines.append(_step(t, f"keep OperatorGroup {t.namespace}/{name}: OLM's installation ships it",
                                   self.dry_run))
                continue
            if managed is not None:
                lines.append(_step(t, f"keep OperatorGroup {t.namespace}/{name}: {managed[0]} applies it "
                                   f"({managed[1]}); nothing uses it any more, {LET_GO[managed[0]]}", self.dry_run))
                continue
            lines.append(_step(t, f"delete OperatorGroup {t.namespace}/{name} (nothing else uses it)", self.dry_run))
            if not self.dry_run:
                _delete(self.kube, f"{GROUP}/v1", "OperatorGroup", t.namespace, name)
        return lines

    def release(self, t: Takeover, kept: list[dict]) -> None:
        """Step 7: OLM's labels off what was taken over (the bundle's objects OLM labelled as the package's, CRDs
        among them), Deployments last, and OLM's package label off every other object olm-operator counts as a
        component of the package (its OperatorCondition, ...); then OLM's Operator object of the package."""
        package_label = f"operators.coreos.com/{t.package}.{t.namespace}"
        labelled = {ObjectRef.of(o).key: o for o in kept}
        for key, obj in self.objects.get(t.operator, {}).items():
            if key in labelled or key[:2] not in (("apiextensions.k8s.io", "CustomResourceDefinition"),):
                continue
            info = self.kube.resource(obj["apiVersion"], obj["kind"])
            live = self.kube.get(info, key[2], key[3]) if info is not None else None
            if live is not None and package_label in ((live.get("metadata") or {}).get("labels") or {}):
                labelled[key] = live
        # the other objects OLM counts as the package's (its OperatorCondition, ...) lose that label only
        name = f"{t.package}.{t.namespace}"
        operator = _get(self.kube, f"{GROUP}/v1", "Operator", "", name)
        others = [o for o in _components(self.kube, package_label, operator) if ObjectRef.of(o).key not in labelled]
        if labelled or others:
            self.step(t, f"remove OLM's labels from {counted(len(labelled) + len(others), 'object')} now the "
                         f"reconciler's or no longer counted as {t.package}'s")
            if not self.dry_run:
                for obj in others:
                    _patch(self.kube, obj, {"metadata": {"labels": {package_label: None}}})
                for obj in sorted(labelled.values(), key=lambda o: o["kind"] == "Deployment"):
                    _strip_labels(self.kube, obj, t)
        if operator is not None:
            self.step(t, f"delete OLM's Operator {name} (nothing carries its label any more)")
            if not self.dry_run:
                _delete(self.kube, f"{GROUP}/v1", "Operator", "", name)
                self.deleted_operators.append(name)

    def keep_condition(self, condition: dict, t: Takeover) -> bool | None:
        """``_keep_condition``, or None when the reconciler may not change the OperatorCondition or make it again
        (deploy/olm-takeover does not grant it: docs/deploy.md), said in a line."""
        try:
            return _keep_condition(self.kube, condition, t)
        except ApiError as exc:
            if exc.status != 403:
                raise
            self.step(t, f"could not keep OperatorCondition {t.namespace}/{t.csv} without its CSV ({exc}): the "
                         f"garbage collector takes it with the CSV, and its operator no longer finds it")
            return None

    def settle(self) -> None:
        """What OLM may still do from events it queued while the CSVs went, undone until it holds: once every
        takeover of the run is done, after a pause, an Operator object olm-operator made again (from a component
        event queued before the labels went) is deleted again, and an OperatorCondition the garbage collector
        took after all (olm-operator gives it back its CSV owner while the CSV is being deleted) is made again
        (bounded; the next run's takeover does the same)."""
        operators, conditions = list(self.deleted_operators), list(self.conditions)
        for _ in range(SETTLE_ATTEMPTS):
            if not operators and not conditions:
                return
            time.sleep(SETTLE_PAUSE)
            again = [(n, o) for n in operators if (o := _get(self.kube, f"{GROUP}/v1", "Operator", "", n)) is not None]
            for name, operator in again:   # what it lists carries the label still (made since, or missed)
                for obj in _refs(self.kube, operator):
                    _patch(self.kube, obj, {"metadata": {"labels": {f"operators.coreos.com/{name}": None}}})
                _delete(self.kube, f"{GROUP}/v1", "Operator", "", name)
            operators = [n for n, _ in again]
            conditions = [(c, t) for c, t in conditions if self.keep_condition(c, t)]


def _keep_condition(kube: Kube, kept: dict, t: Takeover) -> bool:
    """The CSV's OperatorCondition (``kept``, as read before the CSV went) there without the CSV as its owner;
    True when it had to be changed (its owner reference taken off, or made again as it was, its status too).

    olm-operator's OperatorCondition generator sets the CSV as the owner whenever it syncs the CSV, a CSV being
    deleted included, so the garbage collector's orphaning does not hold: once the CSV is gone, the owner
    reference is taken off, and an OperatorCondition already collected is made again. OLM's OperatorCondition
    controller, still running, keeps its Role and RoleBinding, which give the operator access to it.
    """
    info = kube.resource(f"{GROUP}/v2", "OperatorCondition")
    if info is None:
        return False
    live = kube.get(info, t.namespace, t.csv)
    if live is not None:
        refs = live["metadata"].get("ownerReferences") or []
        mine = [r for r in refs if not (r.get("kind") == "ClusterServiceVersion" and r.get("name") == t.csv)]
        if len(mine) == len(refs):
            return False
        _patch(kube, live, {"metadata": {"ownerReferences": mine}})
        return True
    meta = kept["metadata"]
    package_label = f"operators.coreos.com/{t.package}.{t.namespace}"
    body = {"apiVersion": f"{GROUP}/v2", "kind": "OperatorCondition",
            "metadata": {"name": t.csv, "namespace": t.namespace,
                         "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k != package_label}},
            "spec": kept.get("spec") or {}}
    try:
        kube.request("POST", info.path(t.namespace), body=body, repeatable=True)
    except ApiError as exc:
        if exc.status != 409:
            raise
    if (kept.get("status") or {}).get("conditions"):
        kube.request("PATCH", info.path(t.namespace, t.csv) + "/status", body={"status": kept["status"]},
                     content_type="application/merge-patch+json")
    return True


def _components(kube: Kube, selector: str, operator: Manifest | None) -> list[dict]:
    """Every object of the kinds olm-operator counts as an operator's components that carries ``selector``
    (OLM's ``operators.coreos.com/<package>.<namespace>`` label), as metadata: olm-operator makes the package's
    ``Operator`` object again while any of them carries it.

    olm-operator lists them in that ``Operator`` object's ``status.components.refs``, kept as it watches them:
    read there, one GET for the package instead of a LIST of each of the 16 kinds (``settle`` reads the object
    again should OLM make it anew, for any it had not listed yet). Without the object (or its status), the
    kinds are listed by the label."""
    if operator is not None and "refs" in ((operator.get("status") or {}).get("components") or {}):
        return _refs(kube, operator)

    def one(kind: tuple[str, str]) -> list[dict]:
        info = kube.resource(*kind)
        return [] if info is None else kube.list(info, label_selector=selector, metadata_only=True)
    return [o for found in concurrently(one, list(COMPONENT_KINDS)) for o in found]


def _refs(kube: Kube, operator: Manifest) -> list[dict]:
    """The components an OLM ``Operator`` object lists, as objects to patch (apiVersion, kind, name,
    namespace); those of kinds olm-operator does not count, or the cluster does not serve, are left out."""
    counted_kinds = {k for _, k in COMPONENT_KINDS}
    out = []
    for ref in ((operator.get("status") or {}).get("components") or {}).get("refs") or []:
        if ref.get("kind") in counted_kinds and ref.get("apiVersion") and ref.get("name") \
                and kube.resource(ref["apiVersion"], ref["kind"]) is not None:
            meta = {"name": ref["name"], **({"namespace": ref["namespace"]} if ref.get("namespace") else {})}
            out.append({"apiVersion": ref["apiVersion"], "kind": ref["kind"], "metadata": meta})
    return out


def after(kube: Kube, takeovers: list[Takeover], desired: list[DesiredOperator], *, dry_run: bool,
          write: Callable[[str, Manifest], object]) -> list[str]:
    """Steps 3 to 7 (``After``); what was (or would be) done, one line per step."""
    return After(kube, takeovers, desired, dry_run=dry_run, write=write).run()


def _owner_labels(obj: dict) -> list[str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [k for k in ("olm.owner", "olm.owner.namespace", "olm.owner.kind") if k in labels]


class _OwnedIndex:
    """What OLM made for CSVs, read once for every takeover of a run: each kind OLM labels ``olm.owner`` (or a
    takeover marked to retire) listed once across the cluster, and each namespace's objects of a namespaced kind
    listed once (for owner references), all as metadata, concurrently. A hundred takeovers in one namespace cost
    the same LISTs as one."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._labelled: list[dict] | None = None
        self._namespaces: dict[str, list[dict]] = {}

    def _read(self, queries: list[tuple[str, str, str, str | None]]) -> list[dict]:
        def one(query: tuple[str, str, str, str | None]) -> list[dict]:
            api_version, kind, namespace, selector = query
            info = self.kube.resource(api_version, kind)
            if info is None:
                return []
            return self.kube.list(info, namespace=namespace if info.namespaced else "", label_selector=selector,
                                  metadata_only=True)
        return [o for found in concurrently(one, queries) for o in found]

    def labelled(self) -> list[dict]:
        if self._labelled is None:
            self._labelled = self._read([(a, k, "", s) for a, k in OWNED_KINDS for s in ("olm.owner", RETIRE)])
        return self._labelled

    def in_namespace(self, namespace: str) -> list[dict]:
        if namespace not in self._namespaces:
            namespaced = [(a, k) for a, k in OWNED_KINDS
                          if (info := self.kube.resource(a, k)) is not None and info.namespaced]
            self._namespaces[namespace] = self._read([(a, k, namespace, None) for a, k in namespaced])
        return self._namespaces[namespace]

    def owned(self, namespace: str, csv: str) -> list[dict]:
        """What OLM made for the CSV: objects labelled ``olm.owner=<csv>`` of that namespace (in any namespace, and
        cluster-scoped: catalog-operator labels the bundle's cluster-scoped manifests without
        ``olm.owner.namespace``), objects of its namespace whose owner reference names the CSV, and those a
        takeover marked to retire."""
        found: dict[tuple[str, str, str, str], dict] = {}
        for obj in self.labelled():
            labels = obj["metadata"].get("labels") or {}
            if csv in (labels.get("olm.owner"), labels.get(RETIRE)) \
                    and labels.get("olm.owner.namespace", namespace) == namespace:
                found[ObjectRef.of(obj).key] = obj
        for obj in self.in_namespace(namespace):
            if any(r.get("kind") == "ClusterServiceVersion" and r.get("name") == csv
                   for r in obj["metadata"].get("ownerReferences") or []):
                found[ObjectRef.of(obj).key] = obj
        return [found[k] for k in sorted(found)]


def _strip_labels(kube: Kube, obj: dict, t: Takeover) -> None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    gone = [k for k in labels if k in OWNER_LABELS or k == f"operators.coreos.com/{t.package}.{t.namespace}"]
    refs = [r for r in (obj["metadata"].get("ownerReferences") or [])
            if not (r.get("kind") == "ClusterServiceVersion" and r.get("name") == t.csv)]
    patch: dict[str, Any] = {"metadata": {"labels": {k: None for k in gone}}}
    if len(refs) != len(obj["metadata"].get("ownerReferences") or []):
        patch["metadata"]["ownerReferences"] = refs   # the collector did it already, unless the CSV was gone before
    if gone or "ownerReferences" in patch["metadata"]:
        _patch(kube, obj, patch)



def _step(t: Takeover, what: str, dry_run: bool) -> str:
    return f"takeover of {t.operator} from OLM v0: {'would ' if dry_run else ''}{what}"





def _delete_csv(kube: Kube, t: Takeover) -> bool:
    """Delete the CSV with ``propagationPolicy: Orphan`` as it is once its OperatorGroup annotations are off;
    True when the version deleted is one without them.

    olm-operator's CSV deletion handler reads the deleted CSV's ``olm.operatorGroup``, ``olm.operatorNamespace``
    and ``olm.targetNamespaces`` and does nothing without them: no conversion webhook set to None, no APIService
    deleted. It also puts them back whenever it syncs the CSV (and does nothing else on that sync), so the
    delete carries a precondition on the very version the annotations were taken off; when olm-operator was
    faster, it is tried again (bounded), and in the end the CSV is deleted as it is (the conversion webhooks
    and APIServices are then applied again after it: ``After.restore_conversion``, ``restore_apiservices``).
    """
    info = kube.resource(f"{GROUP}/v1alpha1", "ClusterServiceVersion")
    if info is None:
        return False
    path = info.path(t.namespace, t.csv)
    for _ in range(CSV_ATTEMPTS):
        live = kube.get(info, t.namespace, t.csv)
        if live is None:
            return True
        annotations = live["metadata"].get("annotations") or {}
        version = live["metadata"]["resourceVersion"]
        try:
            if any(k in annotations for k in GROUP_ANNOTATIONS):
                version = kube.request("PATCH", path, content_type="application/merge-patch+json", body={
                    "metadata": {"resourceVersion": version,
                                 "annotations": {k: None for k in GROUP_ANNOTATIONS}}})["metadata"]["resourceVersion"]
            kube.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                               "propagationPolicy": "Orphan",
                                               "preconditions": {"resourceVersion": version}})
            return True
        except ApiError as exc:
            if exc.status == 404:
                return True
            if exc.status != 409:
                raise
    _delete(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace, t.csv, orphan=True)
    return False


def _wait_gone(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> None:
    """Until the collector has orphaned the CSV's dependents and removed it (bounded; the next run goes on)."""
    info = kube.resource(api_version, kind)
    if info is not None:
        kube.wait_gone(info, namespace, name, ORPHAN_WAIT)

