"""The takeover of an OLM v1 install: an adopted declaration's first reconciles replace operator-controller's
ownership of what a ClusterExtension installed, without disruption.

What operator-controller (v1.11, its Helm applier) leaves on what it installs,
as read on the live controllers: every object of the release is labelled
``olm.operatorframework.io/owner-kind: ClusterExtension`` and
``olm.operatorframework.io/owner-name: <name>`` and carries a controller owner
reference to the ClusterExtension, CRDs included (a ClusterExtension is
cluster-scoped, so it can own cluster-scoped objects). Deleting the
ClusterExtension the usual way therefore lets the garbage collector delete
every object it installed, CRDs first among them and every custom resource
with them. The release is recorded in Helm's chunked storage: an index Secret
(labelled ``owner=operator-controller``, ``name=<name>``, ``type=index``), owned
by the ClusterExtension, and its chunks, in operator-controller's namespace.
Its finalizers (``cleanup-unpack-cache``, ``cleanup-contentmanager-cache``)
only drop its caches and watches; from the deletion timestamp on it applies
nothing more.

The order, every step read back from the cluster so a run killed anywhere is
finished by the next:

1. the ClusterExtension is deleted with ``propagationPolicy: Orphan``: the
   garbage collector removes its owner references from the Deployment, the
   CRDs and the rest instead of deleting them, and operator-controller,
   seeing the deletion timestamp, only drops its caches and applies nothing
   more. This comes first because, while the ClusterExtension lives,
   operator-controller corrects drift on every change of what it installed:
   it would write its own values back (``app.kubernetes.io/managed-by:
   Helm`` and its labels) over the reconciler's, and own them again;
2. the sync applies the bundle over what runs (``adopting``): server-side
   apply sets the fields the bundle renders, operator-controller's stay, so a
   pod template that renders the same does not change. Nothing is deleted
   before the bundle is applied, so the operator's permissions are never
   narrower;
3. once the ClusterExtension is gone (a bounded wait), the Helm release
   Secrets are deleted: nothing reads them any more, and a ClusterExtension of
   the same name made later would otherwise find a release whose objects are
   the reconciler's;
4. what operator-controller made that the bundle does not render here (its
   RBAC, which each converter names with a hash of its own) is deleted: the
   bundle's own, applied in step 2, replaces it. A Deployment or a CRD is
   never deleted;
5. OLM v1's labels, the release's Helm marks and any owner reference to the
   ClusterExtension the collector has not removed yet go from what was taken
   over, Deployments last.

The ServiceAccount a ClusterExtension names, and the RBAC made for it, were
made by the user, not by OLM v1: they are left as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.ownership.takeover.calls import (delete as _delete, get as _get, list_of as _list,
                                                          namespace_of as _ns, patch as _patch, where as _where)
from reconciler.cluster.ownership.takeover.olmv0 import OWNED_KINDS
from reconciler.cluster.apply import DesiredOperator
from reconciler.kube.client import Kube
from reconciler.errors import PolicyError
from reconciler.model.kube import LABEL_MANAGED_BY, ObjectRef
from reconciler.report.words import counted

GROUP = "olm.operatorframework.io"
API_VERSION = f"{GROUP}/v1"
OWNER_KIND = f"{GROUP}/owner-kind"
OWNER_NAME = f"{GROUP}/owner-name"
RELEASE_OWNER = "operator-controller"   # the owner label of operator-controller's Helm release Secrets
ORPHAN_WAIT = 60.0
HELM_MARKS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")
KEPT_KINDS = ("Deployment", "CustomResourceDefinition")   # never deleted by a takeover, whatever renders them


@dataclass(frozen=True)
class Takeover:
    """One adopted Operator whose OLM v1 install is (still) being taken over."""

    operator: str
    extension: str
    live: dict | None                 # the ClusterExtension
    releases: tuple[dict, ...]        # the Helm release Secrets (index and chunks)
    labelled: tuple[dict, ...]        # live objects of the bundle still carrying OLM v1's marks
    extra: tuple[dict, ...] = ()      # what it made that the bundle does not render here, still labelled

    @property
    def pending(self) -> bool:
        return bool(self.live or self.releases or self.labelled or self.extra)


def find(kube: Kube, desired: list[DesiredOperator], adopted: Mapping[str, str]) -> list[Takeover]:
    """The takeovers still to do: each desired Operator adopted from OLM v1 (``adopted``: name ->
    ``olm-v1/<clusterextension>``) whose ClusterExtension, release or marks are still in the cluster.

    A finished takeover costs a GET, a labelled LIST of Secrets and one of
    Deployments per adopted Operator (the Deployments' labels go last)."""
    out = []
    for op in desired:
        source = adopted.get(op.name) or ""
        if not source.startswith("olm-v1/") or op.waiting:
            continue
        name = source.split("/", 1)[1]
        live = _get(kube, API_VERSION, "ClusterExtension", "", name)
        running = installed_bundle(live or {}).get("name") or ""
        if live is not None and not live["metadata"].get("deletionTimestamp") and running \
                and running != op.bundle.get("name"):
            raise PolicyError(f"ClusterExtension {name} runs {running} now, not {op.bundle.get('name')}, which "
                              f"Operator {op.name} was adopted with: taking it over would replace what runs",
                              obj=f"Operator {op.name}", path="olm.lock",
                              hint="take over what runs first: pin it (remove the Operator's entry from olm.lock and "
                                   "run `reconciler adopt REPO` again), reconcile, then move the pin with "
                                   "`reconciler resolve`")
        releases = tuple(_releases(kube, name))
        namespaces = sorted({ObjectRef.of(o).namespace for o in op.objects if o.get("kind") == "Deployment"})
        if live is None and not releases and not any(
                _list(kube, "apps/v1", "Deployment", ns, f"{OWNER_NAME}={name}") for ns in namespaces):
            continue
        kept, extra = _marked(kube, op, name)
        out.append(Takeover(op.name, name, live, releases, tuple(kept), tuple(extra)))
    return [t for t in out if t.pending]


def installed_bundle(extension: dict) -> dict[str, Any]:
    """``status.install.bundle`` of a ClusterExtension: the name and version of the bundle it installed."""
    return (((extension.get("status") or {}).get("install") or {}).get("bundle") or {})


def adopting(desired: list[DesiredOperator], takeovers: Iterable[Takeover]) -> list[DesiredOperator]:
    """``desired`` with each taken-over Operator allowed to apply over the live objects of its bundle, which
    operator-controller made from the same bundle."""
    by_name = {t.operator for t in takeovers}
    return [dataclasses.replace(op, adopting=frozenset(ObjectRef.of(o).key for o in op.objects))
            if op.name in by_name else op for op in desired]


def before(kube: Kube, takeovers: list[Takeover], *, dry_run: bool) -> list[str]:
    """Step 1: operator-controller stops. Returns what was (or would be) done, one line per step."""
    lines = []
    for t in takeovers:
        if t.live is not None:
            going = bool(t.live["metadata"].get("deletionTimestamp"))
            lines.append(_step(t, f"{'finish deleting' if going else 'delete'} ClusterExtension {t.extension}, "
                              f"orphaning what it installed (the garbage collector removes its owner references "
                              f"instead of deleting the objects, and operator-controller applies nothing more)",
                              dry_run))
            if not dry_run and not going:
                _delete(kube, API_VERSION, "ClusterExtension", "", t.extension, orphan=True)
        if t.live is not None or t.labelled:
            lines.append(_step(t, f"apply the bundle over what OLM v1 made for ClusterExtension {t.extension} "
                              f"(pod templates kept as they run): {counted(len(t.labelled), 'object')}", dry_run))
    return lines


def after(kube: Kube, takeovers: list[Takeover], *, dry_run: bool) -> list[str]:
    """Steps 3 to 6, once the sync applied the Operators (it raises otherwise)."""
    lines = []
    for t in takeovers:
        if t.live is not None and not dry_run:
            info = kube.resource(API_VERSION, "ClusterExtension")
            assert info is not None
            if not kube.wait_gone(info, "", t.extension, ORPHAN_WAIT):
                lines.append(_step(t, f"ClusterExtension {t.extension} is not gone yet (its finalizers are "
                                  "operator-controller's); the next run goes on from here", dry_run))
                continue
        releases = t.releases if dry_run or t.live is None else tuple(_releases(kube, t.extension))
        for secret in releases:
            lines.append(_step(t, f"delete OLM v1's Helm release Secret {_where(secret)}", dry_run))
            if not dry_run:
                _delete(kube, "v1", "Secret", _ns(secret), secret["metadata"]["name"])
        for obj in t.extra:
            kind = obj["kind"]
            if kind in KEPT_KINDS:
                lines.append(_step(t, f"keep {kind} {_where(obj)}, which the bundle does not render here (a "
                                  f"{kind} is never deleted): OLM v1's marks removed, it is yours", dry_run))
                if not dry_run:
                    _strip(kube, obj, t.extension)
                continue
            lines.append(_step(t, f"delete OLM v1's {kind} {_where(obj)} (the bundle's own, applied, replaces it)",
                              dry_run))
            if not dry_run:
                _delete(kube, obj["apiVersion"], kind, _ns(obj), obj["metadata"]["name"])
        if t.labelled:
            lines.append(_step(t, f"remove OLM v1's labels from {counted(len(t.labelled), 'object')} now the reconciler's",
                              dry_run))
            if not dry_run:
                for obj in sorted(t.labelled, key=lambda o: o["kind"] == "Deployment"):
                    _strip(kube, obj, t.extension)
    return lines


def _releases(kube: Kube, name: str) -> list[dict]:
    """operator-controller's Helm release of ``name``: its index Secrets and their chunks, in any namespace."""
    indexes = _list(kube, "v1", "Secret", "", f"owner={RELEASE_OWNER},name={name},type=index")
    chunks = [c for i in indexes
              for c in _list(kube, "v1", "Secret", "", f"owner={RELEASE_OWNER},key={i['metadata']['name']},type=chunk")]
    return sorted(indexes + chunks, key=lambda s: (_ns(s), s["metadata"]["name"]))


def _marked(kube: Kube, op: DesiredOperator, name: str) -> tuple[list[dict], list[dict]]:
    """The live objects OLM v1 still marks as the ClusterExtension's (its labels, or an owner reference to it):
    those of ``op``'s bundle, and the others (one LIST per kind, by label, and a GET of each object of the bundle
    not found so)."""
    found: dict[tuple[str, str, str, str], dict] = {}
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in op.objects} | set(OWNED_KINDS))
    for api_version, kind in kinds:
        for obj in _list(kube, api_version, kind, "", f"{OWNER_NAME}={name}"):
            found[ObjectRef.of(obj).key] = obj
    for obj in op.objects:
        ref = ObjectRef.of(obj)
        if ref.key in found:
            continue
        live = _get(kube, obj["apiVersion"], obj["kind"], ref.namespace, ref.name)
        if live is not None and _owned_by(live, name):
            found[ref.key] = live
    mine = {ObjectRef.of(o).key for o in op.objects}
    return [found[k] for k in sorted(found) if k in mine], [found[k] for k in sorted(found) if k not in mine]


def _owned_by(obj: dict, name: str) -> bool:
    return any(r.get("kind") == "ClusterExtension" and r.get("name") == name
               for r in obj["metadata"].get("ownerReferences") or [])


def _strip(kube: Kube, obj: dict, name: str) -> None:
    """OLM v1's labels and owner reference off ``obj``, and the marks of the Helm release it kept its objects in
    (``meta.helm.sh/`` annotations, ``app.kubernetes.io/managed-by: Helm``): a JSON merge patch of its metadata,
    never its spec. Read again first: the sync has applied the reconciler's labels since ``find`` read it."""
    obj = _get(kube, obj["apiVersion"], obj["kind"], _ns(obj), obj["metadata"]["name"]) or {}
    if not obj:
        return
    labels = (obj.get("metadata") or {}).get("labels") or {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    gone = [k for k in (OWNER_KIND, OWNER_NAME) if k in labels]
    if labels.get(LABEL_MANAGED_BY) == "Helm":   # the reconciler's own value once it applied the object
        gone.append(LABEL_MANAGED_BY)
    patch: dict[str, Any] = {"metadata": {"labels": {k: None for k in gone},
                                          "annotations": {k: None for k in HELM_MARKS if k in annotations}}}
    refs = obj["metadata"].get("ownerReferences") or []
    kept = [r for r in refs if not (r.get("kind") == "ClusterExtension" and r.get("name") == name)]
    if len(kept) != len(refs):
        patch["metadata"]["ownerReferences"] = kept
    _patch(kube, obj, patch)


def _step(t: Takeover, what: str, dry_run: bool) -> str:
    return f"takeover of {t.operator} from OLM v1: {'would ' if dry_run else ''}{what}"
