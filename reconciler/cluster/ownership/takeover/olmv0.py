"""The takeover: an adopted declaration's first reconciles replace OLM v0's ownership, without disruption.

This is ownership policy, and its one seam into the apply engine is
``DesiredOperator.adopting``: the live objects an Operator may apply over
although the reconciler did not create them. Everything else happens around
the engine's sync, in an order chosen so that neither OLM nor Kubernetes'
garbage collector takes the workload, and so that every step can be
repeated: what is left to do is always read from the cluster, so a run
killed anywhere is finished by the next.

First, nothing is taken over that does not run the bundle the lock pins: a
Subscription that installed another bundle (OLM upgraded it since the
adoption, or the lock moved before the takeover), or whose approved
InstallPlan is installing one, refuses the run before anything is written:
OLM would go on reconciling the CSV that runs. ``adopt`` again pins what
runs now.

Before the sync (OLM stops asking):

1. the InstallPlans that installed the CSV are deleted: a plan OLM is still
   executing would otherwise create its Subscriptions again, the one OLM
   generates for a dependency among them;
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
   can still be found once the CSV's owner references are gone; then the
   CSV is deleted with ``propagationPolicy: Orphan``: the garbage
   collector removes the CSV's owner references from the Deployment,
   ServiceAccount, Service, Roles and bindings instead of deleting them, and
   olm-operator, with no CSV, no longer reconciles them; its copies in the
   target namespaces go with it (deleted here too, if left). A Subscription
   with ``spec.config`` is deleted only now, after its CSV: olm-operator
   reads the overrides from it whenever it syncs the CSV, and without it
   would rewrite the Deployments without them;
4. those labelled objects are deleted: the bundle's own, applied, replace
   them; a Deployment is never deleted;
5. the OperatorCondition of the CSV is deleted, and the namespace's
   OperatorGroup when no Subscription or CSV uses it any more;
6. last, OLM's labels (``olm.owner``, ``olm.owner.kind``,
   ``olm.owner.namespace``, ``olm.managed``,
   ``operators.coreos.com/<package>.<namespace>``) are removed from what
   was taken over, Deployments last of all.

CRDs and custom resources are never deleted by any step. ``reconcile
--dry-run`` lists each step that a real run would take, in this order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.apply import DesiredOperator
from reconciler.kube.client import ApiError, Kube
from reconciler.errors import PolicyError
from reconciler.model.deployconfig import DeploymentConfig
from reconciler.model.kube import ObjectRef
from reconciler.report.words import agree, counted

GROUP = "operators.coreos.com"
OWNER_LABELS = ("olm.owner", "olm.owner.kind", "olm.owner.namespace", "olm.managed")
# Kinds OLM v0 creates for a CSV beside its Deployments, which the takeover finds by the olm.owner label.
OWNED_KINDS = (("v1", "ServiceAccount"), ("v1", "Service"), ("v1", "Secret"), ("v1", "ConfigMap"),
               ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
               ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
               ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
               ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
               ("apiregistration.k8s.io/v1", "APIService"), ("apps/v1", "Deployment"))
ORPHAN_WAIT = 30.0
RETIRE = "reconciler.dev/retire-from-olm"   # OLM's object for a CSV, to be deleted once the CSV is gone


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

    @property
    def pending(self) -> bool:
        return bool(self.live_csv or self.subscription_exists or self.plans or self.owned)


def find(kube: Kube, desired: list[DesiredOperator], adopted: Mapping[str, str]) -> list[Takeover]:
    """The takeovers still to do: each desired Operator adopted from OLM v0 (``adopted``: name ->
    ``olm-v0/<namespace>/<subscription>``) whose OLM bookkeeping or labels are still in the cluster.

    A finished takeover costs two GETs and one labelled LIST per adopted
    Operator: no CSV, no Subscription, and no Deployment labelled as the CSV's
    (the labels of Deployments are the last thing a takeover removes). A
    cluster without OLM's APIs has nothing left to take over.
    """
    out, moved = [], []
    if not adopted or kube.resource(f"{GROUP}/v1alpha1", "ClusterServiceVersion") is None:
        return out
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
            moved.append(f"Operator {op.name} ({source}): {why}")
            continue
        plans = tuple(sorted(p["metadata"]["name"] for p in every_plan
                             if csv_name in (p.get("spec") or {}).get("clusterServiceVersionNames", [])))
        owned = tuple(_owned(kube, namespace, csv_name))
        configured = bool(DeploymentConfig.of(((sub or {}).get("spec") or {}).get("config")))
        out.append(Takeover(op.name, namespace, subscription, csv_name, str(op.bundle.get("package") or ""), csv,
                            sub is not None, plans, owned, configured))
    if moved:
        raise PolicyError(f"{counted(len(moved), 'adopted install')} {agree(len(moved), 'does', 'do')} not run the bundle olm.lock pins for them: OLM v0 "
                          "upgraded them since the adoption, or the lock moved before the takeover. A takeover "
                          "applies the pinned bundle over what runs, and OLM would keep the other, so nothing was "
                          "applied:\n  " + "\n  ".join(moved),
                          path="olm.lock",
                          hint="take over what runs first: pin it (remove the Operator's entry from olm.lock and run "
                               "`reconciler adopt REPO` again), reconcile, then move the pin with `reconciler "
                               "resolve`; if OLM is still installing, wait for its InstallPlan to finish")
    return [t for t in out if t.pending]


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


def after(kube: Kube, takeovers: list[Takeover], desired: list[DesiredOperator], *, dry_run: bool) -> list[str]:
    """Steps 3 to 6, once the sync applied the Operators (it raises otherwise): OLM lets go of what is now the
    reconciler's. OLM's labels go last, Deployments' very last: until then ``find`` sees the takeover as
    unfinished, so a run killed anywhere here is finished by the next."""
    lines = []
    mine = {op.name: {ObjectRef.of(o).key for o in op.objects} for op in desired}
    for t in takeovers:
        kept, extra = [], []
        for obj in t.owned:
            (kept if ObjectRef.of(obj).key in mine.get(t.operator, set()) or obj["kind"] == "Deployment"
             else extra).append(obj)
        if not dry_run:
            for obj in extra:
                _patch(kube, obj, {"metadata": {"labels": {RETIRE: t.csv}}})
        if t.live_csv is not None and not t.configured and not dry_run \
                and _get(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription) is not None:
            # made again since step 2 by catalog-operator from a plan it was executing (read from its cache):
            # without its CSV it would install the package anew, so it goes before the CSV
            lines.append(_step(t, f"delete Subscription {t.namespace}/{t.subscription} again (OLM made it anew "
                              f"from an InstallPlan it was still executing)", dry_run))
            _delete(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription)
        if t.live_csv is not None:
            lines.append(_step(t, f"delete ClusterServiceVersion {t.namespace}/{t.csv}, orphaning its objects "
                              f"(and its copies in the target namespaces)", dry_run))
            if not dry_run:
                _delete(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace, t.csv, orphan=True)
                _wait_gone(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace, t.csv)
            if t.configured and t.subscription_exists:
                lines.append(_step(t, f"delete Subscription {t.namespace}/{t.subscription} (kept until now: OLM "
                                  f"applied its spec.config while the CSV was there)", dry_run))
                if not dry_run:
                    _delete(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace, t.subscription)
        if not dry_run:
            for c in _list(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", "",
                           selector=f"olm.copiedFrom={t.namespace}"):
                if c["metadata"]["name"] == t.csv:
                    _delete(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", c["metadata"]["namespace"], t.csv)
        for obj in extra:
            lines.append(_step(t, f"delete OLM's {obj['kind']} {_where(obj)} (the bundle's own, applied, replaces "
                              f"it)", dry_run))
            if not dry_run:
                _delete(kube, obj["apiVersion"], obj["kind"], _ns(obj), obj["metadata"]["name"])
        if _get(kube, f"{GROUP}/v2", "OperatorCondition", t.namespace, t.csv) is not None:
            lines.append(_step(t, f"delete OperatorCondition {t.namespace}/{t.csv}", dry_run))
            if not dry_run:
                _delete(kube, f"{GROUP}/v2", "OperatorCondition", t.namespace, t.csv)
        lines.extend(_retire_group(kube, t, dry_run))
        if kept:
            lines.append(_step(t, f"remove OLM's labels from {counted(len(kept), 'object')} now the reconciler's", dry_run))
            if not dry_run:
                for obj in sorted(kept, key=lambda o: o["kind"] == "Deployment"):
                    _strip_labels(kube, obj, t)
    return lines


def _retire_group(kube: Kube, t: Takeover, dry_run: bool) -> list[str]:
    """The namespace's OperatorGroup goes once no Subscription and no CSV of OLM's own remains in it."""
    subs = [s for s in _list(kube, f"{GROUP}/v1alpha1", "Subscription", t.namespace)
            if not (dry_run and s["metadata"]["name"] == t.subscription)]
    csvs = [c for c in _list(kube, f"{GROUP}/v1alpha1", "ClusterServiceVersion", t.namespace)
            if "olm.copiedFrom" not in (c["metadata"].get("labels") or {})
            and not (dry_run and c["metadata"]["name"] == t.csv)]
    if subs or csvs:
        return []
    lines = []
    for group in _list(kube, f"{GROUP}/v1", "OperatorGroup", t.namespace):
        lines.append(_step(t, f"delete OperatorGroup {t.namespace}/{group['metadata']['name']} (nothing else "
                          f"uses it)", dry_run))
        if not dry_run:
            _delete(kube, f"{GROUP}/v1", "OperatorGroup", t.namespace, group["metadata"]["name"])
    return lines


def _owned(kube: Kube, namespace: str, csv: str) -> list[dict]:
    """What OLM made for the CSV: objects labelled ``olm.owner=<csv>`` of that namespace (in any namespace, and
    cluster-scoped), objects of its namespace whose owner reference names the CSV, and those a takeover marked
    to retire."""
    found: dict[tuple[str, str, str, str], dict] = {}
    for api_version, kind in OWNED_KINDS:
        # catalog-operator labels the bundle's cluster-scoped manifests olm.owner without olm.owner.namespace
        for selector in (f"olm.owner={csv}", f"{RETIRE}={csv}"):
            for obj in _list(kube, api_version, kind, "", selector=selector):
                if (obj["metadata"].get("labels") or {}).get("olm.owner.namespace", namespace) == namespace:
                    found[ObjectRef.of(obj).key] = obj
        info = kube.resource(api_version, kind)
        if info is None or not info.namespaced:
            continue
        for obj in kube.list(info, namespace=namespace):
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


def _patch(kube: Kube, obj: dict, patch: dict) -> None:
    """A JSON merge patch of ``obj``'s metadata (never its spec: no pod template changes); gone is done."""
    info = kube.resource(obj["apiVersion"], obj["kind"])
    assert info is not None
    try:
        kube.request("PATCH", info.path(_ns(obj), obj["metadata"]["name"]), body=patch,
                     content_type="application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            raise


def _step(t: Takeover, what: str, dry_run: bool) -> str:
    return f"takeover of {t.operator} from OLM v0: {'would ' if dry_run else ''}{what}"


def _get(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
    info = kube.resource(api_version, kind)
    return None if info is None or not name else kube.get(info, namespace, name)


def _list(kube: Kube, api_version: str, kind: str, namespace: str, selector: str | None = None) -> list[dict]:
    info = kube.resource(api_version, kind)
    if info is None:
        return []
    return kube.list(info, namespace=namespace if info.namespaced else "", label_selector=selector)


def _delete(kube: Kube, api_version: str, kind: str, namespace: str, name: str, orphan: bool = False) -> None:
    info = kube.resource(api_version, kind)
    if info is None:
        return
    query = [("propagationPolicy", "Orphan" if orphan else "Background")]
    try:
        kube.request("DELETE", info.path(namespace if info.namespaced else "", name), query=query)
    except ApiError as exc:
        if exc.status != 404:
            raise


def _wait_gone(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> None:
    """Until the collector has orphaned the CSV's dependents and removed it (bounded; the next run goes on)."""
    info = kube.resource(api_version, kind)
    if info is not None:
        kube.wait_gone(info, namespace, name, ORPHAN_WAIT)


def _ns(obj: dict) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _where(obj: dict) -> str:
    ns = _ns(obj)
    return f"{ns}/{obj['metadata']['name']}" if ns else obj["metadata"]["name"]
