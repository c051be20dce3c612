"""The handback: an Operator the reconciler runs is returned to OLM v0, with no pod restarted and nothing deleted
that OLM does not replace.

The reverse of the takeover, and shaped like it: `reconciler handback` writes
the intent into the declaration (``reconciler.dev/handback:
olm-v0/<namespace>/<catalogsource>``), a reviewer reads it as a commit, and
the next reconciles act on it. From then on the Operator is held: not
applied, not pruned. Each step is read back from the cluster, so a run killed
anywhere is finished by the next:

1. every object of the Operator's inventory is annotated
   ``reconciler.dev/prune: disabled``, so that a declaration removed too early
   releases its objects instead of pruning them;
2. the namespace gets the OperatorGroup OLM installed it under (named as the
   running pod templates say, ``olm.operatorGroup``, with the declaration's
   target namespaces) unless it has one, and a Subscription is created for
   the package: its channel, the CatalogSource of the annotation,
   ``startingCSV`` the bundle that runs, ``installPlanApproval: Manual`` so
   that OLM moves to no other bundle, and the declaration's ``spec.config``;
3. catalog-operator plans it; before the plan is approved, what OLM planned
   is checked: it installs that CSV and nothing else, and the pod templates
   OLM would write from it (the CSV's annotations, ``OPERATOR_CONDITION_NAME``,
   the cluster proxy's variables) are the running ones, so that OLM's update
   of each Deployment changes nothing and no pod restarts. A plan that fails
   the check is deleted with what the handback made, and the run refuses;
4. once the plan is Complete and OLM's CSV Succeeded over the same
   Deployments, and OLM's own RBAC grants the operator's ServiceAccounts at
   least what the reconciler's does (never narrower), the reconciler lets
   go: what OLM claimed (its owner reference, ``olm.owner`` or ``olm.managed``
   on it) and every CRD is released (the reconciler's labels and digest
   removed, left in place), the RBAC the reconciler made from the CSV is
   deleted (OLM's own replaces it), and the Operator's installer and status
   object go. Removing the declaration then prunes nothing.

What cannot be handed back without disruption is refused before anything is
written, naming why (``refusals``): a bundle OLM v0 does not install, one with
webhooks or APIServices (OLM would issue new certificates, restarting the
pods), pod templates OLM would write differently, a dependency OLM would
install again, an OperatorGroup or Subscription already there that does not
fit, an unreadable CatalogSource.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.apply import ANNOTATION_DIGEST, Action, Change, ChangeSet
from reconciler.cluster.ownership.takeover.calls import (delete as _delete, get as _get, list_of as _list,
                                                          patch as _patch, where as _where)
from reconciler.cluster.ownership.takeover.olmv0 import Refusal
from reconciler.cluster.status import objects as status_objects
from reconciler.kube.client import ApiError, Kube
from reconciler.model.kube import (
    ANNOTATION_PRUNE, LABEL_MANAGED_BY, LABEL_OPERATOR, LABEL_PART_OF, MANAGED_BY, Manifest, ObjectRef,
)
from reconciler.model.permissions import CLUSTER, PermissionSet, Rule
from reconciler.report.words import counted

if TYPE_CHECKING:
    from pathlib import Path

    from reconciler.bundle.installed import Installed
    from reconciler.model.lock import Lockfile
    from reconciler.repo import RepoSnapshot

GROUP = "operators.coreos.com"
SUB_V, GROUP_V, PLAN_V, CSV_V = (f"{GROUP}/v1alpha1", f"{GROUP}/v1", f"{GROUP}/v1alpha1", f"{GROUP}/v1alpha1")
LABEL_HANDBACK = "reconciler.dev/handback-of"   # on the OperatorGroup and Subscription a handback made
PROPERTIES = "operatorframework.io/properties"   # what catalog-operator adds to the CSV from the catalog
GROUP_ANNOTATION, GROUP_NAMESPACE, GROUP_TARGETS = "olm.operatorGroup", "olm.operatorNamespace", "olm.targetNamespaces"
CONDITION_ENV = "OPERATOR_CONDITION_NAME"
PROXY_ENV = (("HTTP_PROXY", "httpProxy"), ("HTTPS_PROXY", "httpsProxy"), ("NO_PROXY", "noProxy"))
RBAC = "rbac.authorization.k8s.io"
RBAC_KINDS = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
WAIT = 180.0   # for each of OLM's steps, within one run; the next run goes on from where OLM is


@dataclass(frozen=True)
class HandBack:
    """What one Operator's handback asks of OLM v0, from its declaration and what this run converted."""

    operator: str
    source_namespace: str          # the CatalogSource OLM subscribes from
    source: str
    package: str
    channel: str
    csv: str                       # the bundle that runs (and the lock pins)
    namespace: str
    targets: tuple[str, ...]       # () for all namespaces
    config: dict = field(default_factory=dict, hash=False)          # the declaration's spec.config
    mediatype: str = "registry+v1"
    csv_obj: dict = field(default_factory=dict, hash=False, repr=False)   # the bundle's CSV
    deployments: tuple = field(default=(), hash=False, repr=False)   # the bundle's Deployments as rendered
    dependencies: tuple[tuple[str, str], ...] = ()   # (Operator, bundle) meeting a requirement of the bundle
    installer_namespace: str = "reconciler-system"   # where the Operator's installer ServiceAccount lives

    @property
    def subscription(self) -> str:
        return self.package

    def step(self, what: str, dry_run: bool) -> str:
        return f"handback of {self.operator} to OLM v0: {'would ' if dry_run else ''}{what}"


def intents(snapshot: RepoSnapshot, installs: Iterable[Installed], lockfile: Lockfile) -> dict[str, HandBack]:
    """The Operators whose declarations ask for a handback, as this run converted them."""
    wanted = {d.name: d for d in snapshot.operators if d.handback}
    return {inst.selection.owner: intent(wanted[inst.selection.owner].handback, inst, lockfile, snapshot.root,
                                         snapshot.settings.installer_namespace)
            for inst in installs if inst.selection.owner in wanted}


def intent(value: str, inst: Installed, lockfile: Lockfile, root: Path,
           installer_namespace: str = "reconciler-system") -> HandBack:
    """The handback of ``inst``'s Operator from the CatalogSource ``value`` names (``olm-v0/<ns>/<name>``)."""
    from reconciler.bundle import fetch, read_content
    from reconciler.bundle.registry_v1 import find_csv

    decl = inst.selection.declaration
    _, source_ns, source = value.split("/")
    csv: dict = {}
    if inst.bundle.mediatype == "registry+v1":
        csv = find_csv(read_content(fetch(inst.bundle.reference, root, inst.bundle.digest))).obj
    owner = inst.selection.owner
    deps = tuple(sorted((e.operator, e.name) for e in lockfile.entries if owner in e.required_by.split(",")))
    return HandBack(owner, source_ns, source, inst.lock.package, inst.lock.channel or "", inst.bundle.name,
                    inst.bundle.namespace, tuple(t for t in inst.bundle.target_namespaces if t),
                    decl.install.config.value if decl is not None else {}, inst.bundle.mediatype, csv,
                    tuple(o for o in inst.bundle.objects if o.get("kind") == "Deployment"), deps,
                    installer_namespace)


# -- what OLM would write ---------------------------------------------------------------------------------------


def group_targets(targets: tuple[str, ...]) -> str:
    """``olm.targetNamespaces`` as OLM writes it: the namespaces joined by commas, "" for all namespaces."""
    return ",".join(sorted(targets))


def template_annotations(rendered: Manifest, csv_annotations: Mapping[str, str]) -> dict[str, str]:
    """A Deployment's pod template annotations as olm-operator writes them: the template's own and the
    ``spec.config`` ones (as the reconciler renders them), under the live CSV's annotations (the bundle's, the
    catalog's properties, and the OperatorGroup's three)."""
    own = ((rendered.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {}
    return {**own, **csv_annotations}


def container_env(rendered: list[dict], csv: str, proxy: list[dict]) -> list[dict]:
    """A container's env as olm-operator writes it: the bundle's with ``spec.config``'s merged in (as rendered),
    then the cluster proxy's variables and ``OPERATOR_CONDITION_NAME``, each replacing one of its name in place or
    appended."""
    out = [dict(e) for e in rendered]
    for var in [*proxy, {"name": CONDITION_ENV, "value": csv}]:
        for i, e in enumerate(out):
            if e.get("name") == var["name"]:
                out[i] = var
                break
        else:
            out.append(var)
    return out


def proxy_env(config: Mapping[str, Any], proxy: Mapping[str, Any] | None) -> list[dict]:
    """The proxy variables olm-operator injects: none when the cluster has no Proxy (``proxy`` is the
    ``config.openshift.io`` Proxy ``cluster``), or when ``spec.config.env`` sets any of them (it then sets them
    all); else each one the Proxy's status gives a value."""
    names = {e.get("name") for e in config.get("env") or []}
    if proxy is None or names & {n for n, _ in PROXY_ENV}:
        return []
    status = proxy.get("status") or {}
    return [{"name": n, "value": str(status[k])} for n, k in PROXY_ENV if status.get(k)]


def template_problems(live: Manifest, rendered: Manifest, csv_annotations: Mapping[str, str], csv: str,
                      proxy: list[dict], *, skip: frozenset[str] = frozenset()) -> list[str]:
    """How the running pod template of ``live`` differs from what OLM would write from the CSV (``rendered`` is
    the bundle's Deployment as the reconciler renders it): OLM replaces the template whole, so any difference rolls
    the Deployment. ``skip``: annotations not compared (unknown until OLM plans)."""
    name = live["metadata"]["name"]
    out = []
    template = (live.get("spec") or {}).get("template") or {}
    have = {k: v for k, v in ((template.get("metadata") or {}).get("annotations") or {}).items() if k not in skip}
    want = {k: v for k, v in template_annotations(rendered, csv_annotations).items() if k not in skip}
    for key in sorted(set(have) | set(want)):
        if key not in have:
            out.append(f"Deployment {name}: OLM would add the pod annotation {key}")
        elif key not in want:
            out.append(f"Deployment {name}: OLM would remove the pod annotation {key} (OLM does not write it)")
        elif have[key] != want[key]:
            out.append(f"Deployment {name}: OLM would change the pod annotation {key}")
    mine = {c.get("name"): c for c in (((rendered.get("spec") or {}).get("template") or {}).get("spec") or {})
            .get("containers") or []}
    for c in (template.get("spec") or {}).get("containers") or []:
        own = mine.get(c.get("name"))
        if own is None:
            out.append(f"Deployment {name}: container {c.get('name')} is not the bundle's")
            continue
        want_env, have_env = container_env(own.get("env") or [], csv, proxy), c.get("env") or []
        # the same variables in the same order, each as OLM writes it (the API server may add its defaults)
        names = [e.get("name") for e in want_env]
        if [e.get("name") for e in have_env] != names:
            out.append(f"Deployment {name}: OLM would set container {c.get('name')}'s env to {', '.join(names)} "
                       f"(it runs with {', '.join(str(e.get('name')) for e in have_env) or 'none'})")
        else:
            changed = [str(w.get("name")) for w, h in zip(want_env, have_env) if missing_from(w, h) or set(h) - set(w)]
            if changed:
                out.append(f"Deployment {name}: OLM would set container {c.get('name')}'s {', '.join(changed)} "
                           f"to other values")
    # the rest of what the bundle says (annotations and env compared above, with OLM's additions)
    said = dict((rendered.get("spec") or {}).get("template") or {})
    said["metadata"] = {k: v for k, v in (said.get("metadata") or {}).items() if k != "annotations"}
    differs = missing_from(_without_env(said), template)
    out += [f"Deployment {name}: the running pod template differs from the bundle's at {p}" for p in differs[:5]]
    return out


def _without_env(template: dict) -> dict:
    spec = dict(template.get("spec") or {})
    spec["containers"] = [{k: v for k, v in c.items() if k != "env"} for c in spec.get("containers") or []]
    return {**template, "spec": spec}


def missing_from(ours: Any, live: Any, path: str = "") -> list[str]:
    """Where ``ours`` says something ``live`` does not (``live`` may say more: the API server's defaults)."""
    if isinstance(ours, dict):
        if not isinstance(live, dict):
            return [path or "."]
        return [p for k, v in ours.items() for p in missing_from(v, live.get(k), f"{path}.{k}")]
    if isinstance(ours, list):
        if not isinstance(live, list) or len(ours) != len(live):
            return [path or "."]
        return [p for i, (o, v) in enumerate(zip(ours, live)) for p in missing_from(o, v, f"{path}[{i}]")]
    return [] if ours == live else [path or "."]


def granted(objects: Iterable[Manifest], namespace: str, account: str) -> PermissionSet:
    """What the RBAC among ``objects`` grants ServiceAccount ``namespace/account``."""
    objects = list(objects)
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
             if o.get("kind") in ("Role", "ClusterRole")}
    rules = []
    for b in (o for o in objects if o.get("kind") in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account
                   and s.get("namespace") == namespace for s in b.get("subjects") or []):
            continue
        scope = b["metadata"].get("namespace") or CLUSTER
        ref = b.get("roleRef") or {}
        role = roles.get((ref.get("kind"), "" if ref.get("kind") == "ClusterRole" else scope, ref.get("name")))
        rules += [Rule.from_rbac(r, scope) for r in (role or {}).get("rules") or []]
    return PermissionSet.of(rules)


def claimed(live: Manifest, csv: str) -> bool:
    """Whether OLM now holds ``live`` for the CSV: its owner reference, its owner label, or its managed label (on
    what catalog-operator's plan wrote)."""
    meta = live.get("metadata") or {}
    labels = meta.get("labels") or {}
    return labels.get("olm.owner") == csv or labels.get("olm.managed") == "true" or any(
        r.get("kind") == "ClusterServiceVersion" and r.get("name") == csv for r in meta.get("ownerReferences") or [])


# -- the cluster as the handback finds it ---------------------------------------------------------------------------


@dataclass
class Live:
    """What the cluster holds for one handback."""

    operator: str
    record: status_objects.Recorded | None
    deployments: dict[str, Manifest]
    groups: list[Manifest]
    subscriptions: list[Manifest]     # for the package, anywhere
    source: Manifest | None
    proxy: Manifest | None            # the cluster's Proxy, when OLM injects its variables
    csvs: list[Manifest]              # of the install namespace

    @property
    def subscription(self) -> Manifest | None:
        """The Subscription this handback made (labelled for its Operator)."""
        return next((s for s in self.subscriptions if _labels(s).get(LABEL_HANDBACK) == self.operator), None)

    def csv(self, name: str) -> Manifest | None:
        return next((c for c in self.csvs if c["metadata"]["name"] == name), None)


def read(kube: Kube, hb: HandBack, instance: str) -> Live:
    record = status_objects.read_all(kube, instance).get(hb.operator)
    deployments = {o["metadata"]["name"]: o for o in _list(kube, "apps/v1", "Deployment", hb.namespace)}
    subs = [s for s in _list(kube, SUB_V, "Subscription", "") if (s.get("spec") or {}).get("name") == hb.package]
    proxy = None
    if kube.resource("config.openshift.io/v1", "Proxy") is not None:
        proxy = _get(kube, "config.openshift.io/v1", "Proxy", "", "cluster")
    return Live(hb.operator, record, deployments, _list(kube, GROUP_V, "OperatorGroup", hb.namespace), subs,
                _get(kube, f"{GROUP}/v1alpha1", "CatalogSource", hb.source_namespace, hb.source), proxy,
                _list(kube, CSV_V, "ClusterServiceVersion", hb.namespace))


def group_name(hb: HandBack, live: Live) -> str:
    """The OperatorGroup OLM installed the operator under, as its running pod templates say; the namespace's own
    group when it has one."""
    if live.groups:
        return live.groups[0]["metadata"]["name"]
    for dep in live.deployments.values():
        name = _template_annotations(dep).get(GROUP_ANNOTATION)
        if name:
            return name
    return hb.namespace


def csv_annotations(hb: HandBack, live: Live, csv: Manifest | None = None) -> dict[str, str]:
    """The annotations OLM's CSV will carry (``csv``: the one OLM planned, else the bundle's), with the
    OperatorGroup's three; ``operatorframework.io/properties`` only when ``csv`` says it."""
    base = dict(((csv or hb.csv_obj).get("metadata") or {}).get("annotations") or {})
    base.update({GROUP_ANNOTATION: group_name(hb, live), GROUP_NAMESPACE: hb.namespace,
                 GROUP_TARGETS: group_targets(hb.targets)})
    return base


def refusals(hb: HandBack, live: Live) -> list[str]:
    """Why OLM v0 cannot take the Operator back without disruption (empty when it can); nothing is written."""
    rec, out = live.record, []
    if hb.mediatype != "registry+v1":
        return [f"its bundle is {hb.mediatype}: OLM v0 installs registry+v1 bundles only"]
    spec = hb.csv_obj.get("spec") or {}
    if spec.get("webhookdefinitions") or (spec.get("apiservicedefinitions") or {}).get("owned"):
        out.append("its ClusterServiceVersion serves webhooks or APIServices: OLM v0 issues its own CA and serving "
                   "certificate for them, and would not find the one the pods serve (its cache sees only Secrets "
                   "labelled olm.managed), so it would make new ones and roll the Deployments with them")
    if rec is not None:
        running = str((rec.status.get("bundle") or {}).get("name") or "")
        if running and running != hb.csv:
            out.append(f"it runs {running}, but olm.lock pins {hb.csv}: reconcile first (or pin what runs), so that "
                       f"OLM is handed the bundle that runs")
    for operator, bundle in hb.dependencies:
        theirs = live.csv(bundle)
        if theirs is None or _phase(theirs) != "Succeeded" or _labels(theirs).get("olm.copiedFrom"):
            out.append(f"its dependency {bundle} (Operator {operator}) is not run by OLM v0 in namespace "
                       f"{hb.namespace}: OLM would install it again, over the reconciler's; hand {operator} back "
                       f"first")
    ours = live.subscription
    for sub in live.subscriptions:
        if sub is not ours:
            out.append(f"OLM v0 already subscribes to {hb.package} (Subscription {_where(sub)}): a package is "
                       f"installed once")
    if len(live.groups) > 1:
        out.append(f"namespace {hb.namespace} has {len(live.groups)} OperatorGroups: OLM installs nothing under "
                   f"several")
    elif live.groups:
        group = live.groups[0]
        targets = (group.get("status") or {}).get("namespaces")
        if targets is None:
            targets = (group.get("spec") or {}).get("targetNamespaces") or [""]
        if sorted(t for t in targets if t) != sorted(hb.targets):
            out.append(f"OperatorGroup {_where(group)} targets {', '.join(targets) or 'all namespaces'}, the "
                       f"declaration {', '.join(hb.targets) or 'all namespaces'}: OLM would install it for "
                       f"other namespaces than it watches")
    source = live.source
    if source is None:
        out.append(f"CatalogSource {hb.source_namespace}/{hb.source} does not exist: OLM has nowhere to subscribe "
                   f"from")
    else:
        state = ((source.get("status") or {}).get("connectionState") or {}).get("lastObservedState") or "unknown"
        if state != "READY":
            out.append(f"CatalogSource {hb.source_namespace}/{hb.source} cannot be read (connection {state}): OLM "
                       f"could not resolve the Subscription")
    if not out:
        out += deployment_problems(hb, live, csv_annotations(hb, live), skip=frozenset({PROPERTIES}))
    return out


def deployment_problems(hb: HandBack, live: Live, annotations: Mapping[str, str],
                        skip: frozenset[str] = frozenset()) -> list[str]:
    """How what OLM would write for each Deployment of the CSV differs from what runs (pods would restart)."""
    out = []
    proxy = proxy_env(hb.config, live.proxy)
    for rendered in hb.deployments:
        name = rendered["metadata"]["name"]
        dep = live.deployments.get(name)
        if dep is None:
            out.append(f"Deployment {hb.namespace}/{name} does not run: there is nothing to hand back as it runs")
            continue
        out += template_problems(dep, rendered, annotations, hb.csv, proxy, skip=skip)
    return out


# -- the steps -----------------------------------------------------------------------------------------------------


def before(kube: Kube, handbacks: Mapping[str, HandBack], *, instance: str,
           dry_run: bool) -> tuple[list[str], list[Refusal]]:
    """Steps 1 to 3 for every handback: OLM is asked to take the Operator back, and its plan approved once it
    plans what runs. An Operator that cannot be handed back is refused alone (``Refusal``: nothing written for
    it, the reconciler keeps running it), the others go on."""
    lines: list[str] = []
    refused: list[Refusal] = []
    found = []
    for hb in handbacks.values():
        live = read(kube, hb, instance)
        if live.record is None:
            csv = live.csv(hb.csv)
            if live.subscription is not None and csv is not None and _phase(csv) == "Succeeded":
                lines.append(f"Operator {hb.operator} is OLM v0's again (Subscription {_where(live.subscription)}, "
                             f"ClusterServiceVersion {hb.csv} Succeeded): remove its declaration from the repository; "
                             f"nothing is pruned")
            else:
                lines.append(f"Operator {hb.operator} is annotated reconciler.dev/handback, but this reconciler "
                             f"instance runs nothing for it: nothing to hand back")
            continue
        csv = live.csv(hb.csv)
        if csv is not None and live.subscription is not None:
            found.append((hb, live))   # OLM has the install already: what is left is the reconciler's letting go
            continue
        why = refusals(hb, live)
        if why:
            refused.append(Refusal(hb.operator, f"handback/{hb.namespace}", "it cannot be handed back to OLM v0 "
                                   "without disruption, and nothing was done for it: " + "; ".join(why), _HINT))
            continue
        found.append((hb, live))
    for hb, live in found:
        try:
            lines += _ask_olm(kube, hb, live, dry_run)
        except _NotHandedBack as exc:
            refused.append(Refusal(hb.operator, f"handback/{hb.namespace}", str(exc), _HINT))
    return lines, refused


_HINT = ("remove the reconciler.dev/handback annotation from the declaration (the reconciler keeps running the "
         "Operator), or change what is named and run `reconciler handback` again")


class _NotHandedBack(Exception):
    """What OLM planned would not keep what runs: the handback of one Operator stops, the others go on."""


def _ask_olm(kube: Kube, hb: HandBack, live: Live, dry_run: bool) -> list[str]:
    lines = []
    assert live.record is not None
    unmarked = [r for r in live.record.inventory if r.kind != "Namespace"]
    if not dry_run:
        unmarked = [r for r in unmarked if _mark(kube, r)]
    if unmarked:
        lines.append(hb.step(f"annotate the {counted(len(unmarked), 'object')} of its inventory {ANNOTATION_PRUNE}=disabled "
                             f"(removing the declaration before the handback is done then prunes nothing)", dry_run))
    lines += _subscribe(kube, hb, live, dry_run)
    if dry_run:
        if live.csv(hb.csv) is None:
            lines.append(hb.step(f"approve the InstallPlan OLM makes for it once it is checked (it installs "
                                 f"{hb.csv} alone, and the pod templates OLM would write from it are the running "
                                 f"ones), then wait until ClusterServiceVersion {hb.namespace}/{hb.csv} is "
                                 f"Succeeded over the running Deployments", dry_run))
        return lines
    return lines + _approve(kube, hb, live)


def _subscribe(kube: Kube, hb: HandBack, live: Live, dry_run: bool) -> list[str]:
    """Step 2: the OperatorGroup (when the namespace has none) and the pinned Subscription."""
    lines = []
    if not live.groups:
        group = group_name(hb, live)
        lines.append(hb.step(f"create OperatorGroup {hb.namespace}/{group} (target namespaces: "
                             f"{', '.join(hb.targets) or 'all'})", dry_run))
        if not dry_run:
            body: dict[str, Any] = {"apiVersion": GROUP_V, "kind": "OperatorGroup",
                                    "metadata": {"name": group, "namespace": hb.namespace,
                                                 "labels": {LABEL_HANDBACK: hb.operator}}, "spec": {}}
            if hb.targets:
                body["spec"]["targetNamespaces"] = list(hb.targets)
            _create(kube, GROUP_V, "OperatorGroup", hb.namespace, body)
    if live.subscription is None:
        config = f", spec.config ({', '.join(sorted(hb.config))})" if hb.config else ""
        lines.append(hb.step(f"create Subscription {hb.namespace}/{hb.subscription} (package {hb.package}, channel "
                             f"{hb.channel or 'default'}, CatalogSource {hb.source_namespace}/{hb.source}, "
                             f"startingCSV {hb.csv}, installPlanApproval Manual{config})", dry_run))
        if not dry_run:
            spec: dict[str, Any] = {"name": hb.package, "source": hb.source, "sourceNamespace": hb.source_namespace,
                                    "startingCSV": hb.csv, "installPlanApproval": "Manual"}
            if hb.channel:
                spec["channel"] = hb.channel
            if hb.config:
                spec["config"] = hb.config
            _create(kube, SUB_V, "Subscription", hb.namespace, {
                "apiVersion": SUB_V, "kind": "Subscription",
                "metadata": {"name": hb.subscription, "namespace": hb.namespace,
                             "labels": {LABEL_HANDBACK: hb.operator}}, "spec": spec})
    return lines


def _approve(kube: Kube, hb: HandBack, live: Live) -> list[str]:
    """Step 3: OLM's plan checked, then approved; and the wait for OLM's install (each wait bounded)."""
    plan = _wait_for(lambda: _plan_of(kube, hb))
    if plan is None:
        return [hb.step(f"(waiting) OLM has not planned Subscription {hb.namespace}/{hb.subscription} yet; the next "
                        f"reconcile goes on", False)]
    lines = []
    if not (plan.get("spec") or {}).get("approved"):
        problems = plan_problems(hb, live, plan)
        if problems:
            undo(kube, hb)
            raise _NotHandedBack(f"it was not handed back to OLM v0: what OLM planned (InstallPlan {_where(plan)}) "
                                 f"would not keep what runs, so it was not approved, and the Subscription and "
                                 f"OperatorGroup the handback made were deleted: " + "; ".join(problems))
        _patch(kube, plan, {"spec": {"approved": True}})
        lines.append(hb.step(f"approve InstallPlan {_where(plan)} (it installs {hb.csv} alone, with the running pod "
                             f"templates)", False))
    if _wait_for(lambda: _installed(kube, hb)) is None:
        lines.append(hb.step(f"(waiting) OLM has not installed {hb.csv} yet (InstallPlan Complete, CSV Succeeded, "
                             f"recorded by the Subscription); the next reconcile goes on", False))
    else:
        lines.append(hb.step(f"ClusterServiceVersion {hb.namespace}/{hb.csv} Succeeded: OLM runs the install", False))
    return lines


def plan_problems(hb: HandBack, live: Live, plan: Manifest) -> list[str]:
    """Why OLM's plan would not keep what runs: another or a further CSV, or pod templates it would write
    differently from the CSV it planned."""
    names = list((plan.get("spec") or {}).get("clusterServiceVersionNames") or [])
    if names != [hb.csv]:
        return [f"it installs {', '.join(names) or 'nothing'}, not {hb.csv} alone"]
    csv, ref = None, None
    for step in (plan.get("status") or {}).get("plan") or []:
        resource = step.get("resource") or {}
        if resource.get("kind") == "ClusterServiceVersion" and resource.get("name") == hb.csv:
            try:
                manifest = json.loads(resource.get("manifest") or "{}")
            except ValueError:
                manifest = {}
            if manifest.get("kind") == "ClusterServiceVersion":
                csv = manifest
            elif manifest.get("kind") == "ConfigMap":   # an unpacked bundle: the bundle's CSV, the plan's properties
                ref = manifest
    if csv is None and ref is None:
        return [f"its steps do not carry {hb.csv}'s ClusterServiceVersion"]
    annotations = csv_annotations(hb, live, csv)
    if csv is None:
        annotations[PROPERTIES] = str(ref.get("properties") or "")
    return deployment_problems(hb, live, annotations)


def undo(kube: Kube, hb: HandBack) -> None:
    """What a handback made before OLM's plan was approved: its InstallPlan, Subscription and OperatorGroup."""
    plan = _plan_of(kube, hb)
    if plan is not None and not (plan.get("spec") or {}).get("approved"):
        _delete(kube, PLAN_V, "InstallPlan", hb.namespace, plan["metadata"]["name"])
    for api_version, kind in ((SUB_V, "Subscription"), (GROUP_V, "OperatorGroup")):
        for obj in _list(kube, api_version, kind, hb.namespace, selector=f"{LABEL_HANDBACK}={hb.operator}"):
            _delete(kube, api_version, kind, hb.namespace, obj["metadata"]["name"])


def after(kube: Kube, handbacks: Mapping[str, HandBack], result: ChangeSet, *, instance: str,
          dry_run: bool) -> None:
    """Step 4 for every handback OLM has installed: the reconciler lets go. Each object it releases or deletes is
    an entry of ``result`` (what a dry run would do, in a dry run), what is done a note."""
    from reconciler.cluster.ownership import installer

    for hb in handbacks.values():
        rec = status_objects.read_all(kube, instance).get(hb.operator)
        if rec is None:
            continue
        if not dry_run and _installed(kube, hb) is None:
            continue   # OLM is not done yet: the reconciler keeps everything
        live_objects = {r.key: _get(kube, r.api_version, r.kind, r.namespace, r.name) for r in rec.inventory}
        # the RBAC the reconciler made from the CSV: OLM makes its own under other names (a dry run, before OLM
        # planned, knows it by the names the reconciler gives it: the CSV's name first)
        mine_rbac = [o for o in live_objects.values() if o is not None and o.get("kind") in RBAC_KINDS
                     and not claimed(o, hb.csv) and (not dry_run or o["metadata"]["name"].startswith(hb.csv))]
        if mine_rbac and hb.targets != (hb.namespace,):
            lifted = lift(kube, hb, dry_run)
            if lifted or dry_run:
                where = "cluster-wide" if not hb.targets else "in the target namespaces"
                result.notes.append(hb.step(f"make the copies {where} of the Roles OLM made from the CSV's "
                                            f"permissions, as olm-operator makes them "
                                            f"({', '.join(lifted) or 'once OLM made them'}): it makes none while the "
                                            f"reconciler's own RBAC still grants as much", dry_run))
        if not dry_run and mine_rbac:
            if _wait_for(lambda: not rbac_gap(kube, hb, mine_rbac), WAIT / 3) is None:
                missing = rbac_gap(kube, hb, mine_rbac)
                result.notes.append(hb.step(f"(waiting) OLM's RBAC does not grant yet what the reconciler's does "
                                            f"({missing}); the reconciler keeps its own until it does, and the next "
                                            f"reconcile goes on", False))
                continue
        for ref in sorted(rec.inventory):
            obj = live_objects.get(ref.key)
            if obj is None:
                continue
            if obj in mine_rbac:
                if not dry_run:
                    _delete(kube, ref.api_version, ref.kind, ref.namespace, ref.name)
                result.changes.append(Change(hb.operator, ref, Action.DELETED,
                                             detail="handed back to OLM v0: the reconciler's RBAC made from the CSV, "
                                                    "replaced by OLM's own"))
                continue
            if not dry_run:
                _release(kube, obj)
            whose = "left in place" if dry_run else "OLM's" if claimed(obj, hb.csv) or \
                ref.kind == "CustomResourceDefinition" else "left in place, OLM does not claim it"
            result.changes.append(Change(hb.operator, ref, Action.CONFIGURED,
                                         detail=f"handed back to OLM v0: the reconciler's labels removed ({whose})"))
        result.notes.append(hb.step("delete its installer and its status object: removing its declaration "
                                    "from the repository then prunes nothing", dry_run))
        if not dry_run:
            installer.remove(kube, hb.installer_namespace, hb.operator)
            info = status_objects.resource(kube)
            if info is not None:
                kube.delete(info, "", hb.operator)
            result.notes.append(f"Operator {hb.operator} is OLM v0's again (Subscription "
                                f"{hb.namespace}/{hb.subscription}, ClusterServiceVersion {hb.csv}): remove its "
                                f"declaration from the repository")


def lift(kube: Kube, hb: HandBack, dry_run: bool) -> list[str]:
    """The RBAC olm-operator makes from the Roles and RoleBindings of the CSV's permissions for the namespaces the
    operator watches, made where missing; what was made. For an AllNamespaces install, ClusterRoles and
    ClusterRoleBindings (``ensureSingletonRBAC``: same name and labels, the rules and a view of namespaces); for
    other target namespaces, copies in each (``ensureTenantRBAC``: owned by the CSV's copy there, labelled as its,
    ``olm.copiedFrom``). olm-operator makes them only where the operator's permissions are not met, which the
    reconciler's own RBAC meets until it goes."""
    owner = f"olm.owner={hb.csv},olm.owner.namespace={hb.namespace},olm.owner.kind=ClusterServiceVersion"
    made = []
    for kind in ("Role", "RoleBinding"):
        for obj in _list(kube, f"{RBAC}/v1", kind, hb.namespace, selector=owner):
            for body in _copies(kube, hb, obj):
                made.append(f"{body['kind']} {_where(body)}")
                if not dry_run:
                    _create(kube, f"{RBAC}/v1", body["kind"], body["metadata"].get("namespace", ""), body)
    return made


def _copies(kube: Kube, hb: HandBack, obj: Manifest) -> list[dict]:
    """What olm-operator makes of one Role or RoleBinding of the CSV for the namespaces it targets, where missing."""
    name, kind = obj["metadata"]["name"], obj["kind"]
    view = {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}
    if not hb.targets:
        cluster_kind = f"Cluster{kind}"
        if _get(kube, f"{RBAC}/v1", cluster_kind, "", name) is not None:
            return []
        body: dict[str, Any] = {"apiVersion": f"{RBAC}/v1", "kind": cluster_kind,
                                "metadata": {"name": name, "labels": dict(_labels(obj))}}
        if kind == "Role":
            body["rules"] = [*(obj.get("rules") or []), view]
        else:
            ref = obj.get("roleRef") or {}
            body["subjects"] = obj.get("subjects") or []
            body["roleRef"] = {"apiGroup": ref.get("apiGroup") or RBAC, "kind": "ClusterRole", "name": ref.get("name")}
        return [body]
    out = []
    for ns in hb.targets:
        copy = _get(kube, CSV_V, "ClusterServiceVersion", ns, hb.csv) if ns != hb.namespace else None
        if copy is None or _get(kube, f"{RBAC}/v1", kind, ns, name) is not None:
            continue   # the install namespace's own, or no copy of the CSV there yet (OLM makes it), or made
        labels = {**_labels(obj), "olm.owner": hb.csv, "olm.owner.namespace": ns,
                  "olm.owner.kind": "ClusterServiceVersion", "olm.copiedFrom": hb.namespace, "olm.managed": "true"}
        body = {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": {
            "name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": CSV_V, "kind": "ClusterServiceVersion", "name": hb.csv,
                                 "uid": copy["metadata"]["uid"], "blockOwnerDeletion": False, "controller": False}]}}
        for key in ("rules", "subjects", "roleRef"):
            if key in obj:
                body[key] = obj[key]
        out.append(body)
    return out


def rbac_gap(kube: Kube, hb: HandBack, mine: list[Manifest]) -> str:
    """What the reconciler's RBAC grants the operator's ServiceAccounts that OLM's own does not (yet): "" when
    OLM's covers it."""
    theirs = [o for kind in RBAC_KINDS for o in _list(kube, f"{RBAC}/v1", kind, "", selector=f"olm.owner={hb.csv}")]
    theirs += [o for kind in ("Role", "RoleBinding") for o in _list(kube, f"{RBAC}/v1", kind, hb.namespace)
               if claimed(o, hb.csv) and o not in theirs]
    referenced = {(b["roleRef"]["kind"], b["metadata"].get("namespace", "") if b["roleRef"]["kind"] == "Role" else "",
                   b["roleRef"]["name"]) for b in theirs if b.get("roleRef")}
    have = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in theirs}
    for kind, ns, name in sorted(referenced - have):   # a binding of OLM's to a role of someone else's
        role = _get(kube, f"{RBAC}/v1", kind, ns, name)
        if role is not None:
            theirs.append(role)
    gaps = []
    accounts = {(s.get("namespace") or "", s.get("name") or "") for b in mine for s in b.get("subjects") or []
                if s.get("kind") == "ServiceAccount"}
    for ns, account in sorted(accounts):
        lacking = granted(theirs, ns, account).missing(granted(mine, ns, account))
        if lacking:
            gaps.append(f"ServiceAccount {ns}/{account}: " + "; ".join(line.strip() for line in lacking.describe()))
    return "; ".join(gaps)


def _release(kube: Kube, obj: Manifest) -> None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    patch_labels: dict[str, None] = {k: None for k in (LABEL_OPERATOR, LABEL_PART_OF) if k in labels}
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY:
        patch_labels[LABEL_MANAGED_BY] = None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    patch_annotations = {k: None for k in (ANNOTATION_DIGEST, ANNOTATION_PRUNE) if k in annotations}
    if patch_labels or patch_annotations:
        _patch(kube, obj, {"metadata": {"labels": patch_labels, "annotations": patch_annotations}})


def _mark(kube: Kube, ref: ObjectRef) -> bool:
    """Annotate one inventory object prune-disabled; whether it had to be."""
    live = _get(kube, ref.api_version, ref.kind, ref.namespace, ref.name)
    if live is None or ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PRUNE) == "disabled" \
            or (live.get("metadata") or {}).get("labels", {}).get(LABEL_OPERATOR) is None:
        return False
    _patch(kube, live, {"metadata": {"annotations": {ANNOTATION_PRUNE: "disabled"}}})
    return True


def _plan_of(kube: Kube, hb: HandBack) -> Manifest | None:
    sub = _get(kube, SUB_V, "Subscription", hb.namespace, hb.subscription)
    name = (((sub or {}).get("status") or {}).get("installPlanRef") or {}).get("name")
    return _get(kube, PLAN_V, "InstallPlan", hb.namespace, name) if name else None


def _installed(kube: Kube, hb: HandBack) -> Manifest | None:
    """OLM's CSV once it Succeeded, the plan that installed it is Complete and the Subscription records it as
    installed (None until then)."""
    sub = _get(kube, SUB_V, "Subscription", hb.namespace, hb.subscription)
    if sub is None or ((sub.get("status") or {}).get("installedCSV") or "") != hb.csv:
        return None
    plan = _plan_of(kube, hb)
    csv = _get(kube, CSV_V, "ClusterServiceVersion", hb.namespace, hb.csv)
    if plan is None or csv is None or (plan.get("status") or {}).get("phase") != "Complete" or \
            _phase(csv) != "Succeeded":
        return None
    return csv


def _wait_for(probe, timeout: float = WAIT):  # noqa: ANN001, ANN202 - a probe and what it returns
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        if time.monotonic() > deadline:
            return None
        time.sleep(1.0)
    return found


def _phase(csv: Manifest) -> str:
    return str((csv.get("status") or {}).get("phase") or "")


def _labels(obj: Manifest) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _template_annotations(dep: Manifest) -> dict:
    return (((dep.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}





def _create(kube: Kube, api_version: str, kind: str, namespace: str, body: dict) -> Manifest:
    info = kube.resource(api_version, kind)
    assert info is not None
    try:
        return kube.request("POST", info.path(namespace), body=body, obj=f"{kind} {namespace}/{body['metadata']['name']}")
    except ApiError as exc:
        if exc.status != 409:
            raise
        found = kube.get(info, namespace, body["metadata"]["name"])
        assert found is not None
        return found

