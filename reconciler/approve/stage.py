"""The approval stage of a reconcile: which approvals count, and one decision per bundle to apply.

Its decision is that approval is a gate in front of the cluster, not a step
of applying: every bundle the pipeline converted gets a decision (committed
approval records, ProvisionerClass policies, SubjectAccessReviews when a
cluster is reachable), then guardrail policies and the CRD upgrade-safety
preflight can only turn an approved bundle into a waiting one, and a bundle
whose dependency waits, waits with it. ``diff``, ``approve`` and ``reconcile``
call this one function, so they cannot disagree about what waits.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from reconciler.approve.evaluate import Decision, Subject, evaluate
from reconciler.kube.access import access_check
from reconciler.bundle import RenderedBundle
from reconciler.kube.client import Kube
from reconciler.model.kube import Manifest, ObjectRef, instance_applyset_id, stamped
from reconciler.repo import RepoSnapshot

if TYPE_CHECKING:
    from reconciler.bundle.installed import Installed


def counted_approvals(snapshot: RepoSnapshot, uncommitted: bool = False) -> dict:
    """The approval records that count. An approval is a commit: in a git working tree, those committed at
    HEAD; the working tree's own with ``uncommitted`` (a preview), or where there are no commits to read."""
    if uncommitted or snapshot.committed_approvals is None:
        return snapshot.approvals
    return snapshot.committed_approvals


def uncommitted_approval_files(snapshot: RepoSnapshot) -> list[str]:
    """The files of ``approvals/`` whose working-tree content is not what HEAD has (edited, added, deleted)."""
    committed = snapshot.committed_approvals
    if committed is None:
        return []
    working = snapshot.approvals
    return sorted({(working.get(n) or committed[n]).path for n in set(committed) | set(working)
                   if working.get(n) != committed.get(n)})


def approval_notes(snapshot: RepoSnapshot, *, counted: bool) -> tuple[str, ...]:
    """What a run says about approvals that are not committed: counted (a preview) or not."""
    files = uncommitted_approval_files(snapshot)
    if not files:
        return ()
    which = ", ".join(files)
    if counted:
        return (f"{which}: uncommitted changes, counted by this dry run as if committed; a reconcile counts "
                f"only committed approvals (commit to approve)",)
    return (f"{which}: uncommitted changes, not counted: a reconcile counts only committed approvals (commit to "
            f"approve; a dry run previews them)",)


def approvals(snapshot: RepoSnapshot, installs: tuple[Installed, ...], kube: Kube | None = None, *,
              uncommitted: bool = False) -> dict[str, Decision]:
    """The approval stage: one decision per bundle to apply (reads the cluster only to ask SubjectAccessReviews).

    Only committed approvals count, unless ``uncommitted`` (``counted_approvals``)."""
    records = counted_approvals(snapshot, uncommitted)
    subjects = [Subject(i.selection.owner, i.lock.name or i.bundle.name, i.lock.digest, i.bundle.objects,
                        i.selection.declaration) for i in installs]
    def from_cluster(api_version: str, kind: str) -> tuple[str, bool] | None:
        info = kube.resource(api_version, kind) if kube is not None else None
        return (info.plural, info.namespaced) if info else None
    lookup = from_cluster if kube is not None else None
    decisions = evaluate(subjects, classes=snapshot.provisioner_classes, records=records,
                         default_class=snapshot.settings.provisioner_class,
                         check=access_check(kube) if kube is not None else None, cluster_lookup=lookup)
    from reconciler.approve.guardrails import load_policies

    policies = load_policies(snapshot.root) if installs else []
    part_of = instance_applyset_id(snapshot.settings.instance, snapshot.settings.installer_namespace)
    applied = applied_crds(kube, installs)
    for inst in installs:
        owner = inst.selection.owner
        found = guardrail_violations(snapshot, inst, policies, lookup) + crd_preflight(kube, inst, part_of, applied)
        record = records.get(owner)
        entry = record.find(decisions[owner].bundle, decisions[owner].digest) if record else None
        waived = set(entry.waived_policies) if entry else set()
        if waived:
            decisions[owner] = dataclasses.replace(decisions[owner], waived=tuple(sorted(waived)))
        found = tuple(v for v in found if v.policy not in waived or v.policy == CRD_STORED_VERSION)
        if found:
            d = decisions[owner]
            decisions[owner] = dataclasses.replace(
                d, approved=False, reason="PolicyViolation", violations=found,
                message=f"{d.bundle} violates {len(found)} guardrail polic{'y' if len(found) == 1 else 'ies'}: "
                        + "; ".join(v.describe() for v in found[:5]),
                pending=d.pending if not d.approved else type(d.pending)())
    # A bundle whose dependency waits waits with it: installed alone it could not work.
    owner_of = {i.lock.name: i.selection.owner for i in installs}
    changed = True
    while changed:
        changed = False
        for inst in installs:
            d = decisions[inst.selection.owner]
            waiting = sorted(owner_of[b] for _, b in inst.selection.dependencies
                             if b in owner_of and not decisions[owner_of[b]].approved)
            if d.approved and waiting:
                decisions[inst.selection.owner] = dataclasses.replace(
                    d, approved=False, reason="DependencyPendingApproval",
                    message=f"{d.bundle} depends on {', '.join(waiting)}, which waits for approval")
                changed = True
    return decisions


def applied_crds(kube: Kube | None, installs: tuple[Installed, ...]) -> dict[str, str | None]:
    """The applied-digest of every live CRD labelled for one of the Operators whose bundles ship CRDs, by name:
    one metadata LIST for them all."""
    owners = sorted({i.selection.owner for i in installs
                     if any(obj.get("kind") == "CustomResourceDefinition" for obj in i.bundle.objects)})
    info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition") if kube and owners else None
    if info is None:
        return {}
    from reconciler.model.kube import digest_of, operators_selector

    return {item["metadata"]["name"]: digest_of(item)
            for item in kube.list(info, label_selector=operators_selector(owners), metadata_only=True)}


def crd_preflight(kube: Kube | None, inst: Installed, part_of: str, applied: dict[str, str | None]) -> tuple:
    """The CRD upgrade-safety check as violations of ``crd-upgrade-safety``, against the live CRDs of a cluster
    (none without one: `diff` reports the same offline): what `reconcile` would refuse, `approve` shows and
    waits on, waivable with --waive crd-upgrade-safety, but for a stored version removed, which nothing waives.

    A CRD whose live applied-digest is the one this bundle's CRD would be applied with (labelled for the
    Operator and ``part_of``, the instance's ApplySet) is what we applied last: replacing it changes
    nothing, and it is not read. ``applied`` (``applied_crds``: one metadata LIST for every Operator) tells;
    only the others are read whole. Whatever was changed
    on a live CRD behind our back is the planner's to find (its field managers moved), which checks again."""
    if kube is None:
        return ()
    from reconciler.approve.guardrails import Violation
    from reconciler.model.crdsafety import STORED_VERSION_REMOVED, crd_findings
    from reconciler.model.kube import digest_of, with_digest
    from reconciler.kube.concurrent import concurrently

    info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    if info is None:
        return ()
    owner, decl = inst.selection.owner, inst.selection.declaration
    crds = [obj for obj in inst.bundle.objects if obj.get("kind") == "CustomResourceDefinition"]
    if not crds:
        return ()
    crds = [obj for obj in crds if applied.get(obj["metadata"]["name"]) is None
            or applied[obj["metadata"]["name"]] != digest_of(with_digest(stamped(obj, owner, part_of)))]
    lives = concurrently(lambda obj: kube.get(info, "", obj["metadata"]["name"]), crds)   # read at once
    out = []
    for obj, live in zip(crds, lives):
        if live is None:
            continue
        for f in crd_findings(obj, live, decl.allow_unsafe_crds if decl is not None else "",
                            kube.custom_resource_count):
            if f.rule == STORED_VERSION_REMOVED:
                out.append(Violation(CRD_STORED_VERSION, f"version {f.version}", f"CustomResourceDefinition {f.crd}",
                                     f"{f.message}; the API server refuses this: migrate the stored objects, then "
                                     f"remove the version from status.storedVersions"))
            else:
                where = f"version {f.version} {f.path}".strip() if f.version else f.path
                out.append(Violation(CRD_SAFETY_WAIVER, where, f"CustomResourceDefinition {f.crd}",
                                     f"{f.message} ({f.rule}); it breaks existing custom resources unless accepted "
                                     f"(--waive {CRD_SAFETY_WAIVER}, or the declaration's annotation "
                                     f"reconciler.dev/allow-unsafe-crd-upgrade: {f.crd})"))
    return tuple(out)


def guardrail_violations(snapshot: RepoSnapshot, inst: Installed, policies: list, lookup=None) -> tuple:
    """Every guardrail policy the bundle's objects or its resolution violate."""
    from reconciler.approve import guardrails
    from reconciler.model.resources import guess_plural, resource_lookup

    if not policies:
        return ()
    sel = inst.selection
    catalogs = sorted(set(snapshot.catalog_dirs) | {n for n, c in snapshot.settings.catalogs.items() if c.image})
    params = {"catalogs": catalogs, "serviceAccounts": _service_accounts(inst.bundle),
              "installerNamespace": snapshot.settings.installer_namespace}
    find = resource_lookup(inst.bundle.objects, lookup)

    def resource_of(api_version: str, kind: str) -> str:
        found = find(api_version, kind)
        return found[0] if found else guess_plural(kind)
    resolution = {"operator": sel.owner, "kind": sel.kind, "package": sel.package or inst.lock.package,
                  "bundle": sel.bundle_name, "version": sel.version or inst.lock.version, "catalog": sel.catalog,
                  "channel": sel.channel, "source": sel.image,
                  "declaredBundle": bool(sel.declaration is not None and sel.declaration.bundle is not None)}
    written = dict(inst.bundle.written_namespaces)
    objects = [_as_written(o, written) for o in inst.bundle.objects] if written else inst.bundle.objects
    found = guardrails.check_objects(policies, objects, resource_of, params)
    if written:   # say why an object is judged in a namespace other than where it would be installed
        moved = {f"{kind} {ns}/{name}": (ns, placed) for (_, kind, placed, name), ns in written.items()}
        found = [dataclasses.replace(v, message=f"{v.message}; the bundle writes it for namespace "
                                                 f"{moved[v.subject][0]}, and it is refused there rather than moved "
                                                 f"into the install namespace {moved[v.subject][1]}")
                 if v.subject in moved else v for v in found]
    return tuple(guardrails.check_resolution(policies, resolution, params) + found)


def _as_written(obj: Manifest, written: dict[tuple[str, str, str, str], str]) -> Manifest:
    """``obj`` in the namespace its bundle wrote it for, where conversion placed it elsewhere."""
    ns = written.get(ObjectRef.of(obj).key)
    return obj if ns is None else {**obj, "metadata": {**obj["metadata"], "namespace": ns}}


def _service_accounts(bundle: RenderedBundle) -> list[str]:
    """The bundle's own ServiceAccounts, as ``namespace/name``, for guardrails (``params.serviceAccounts``)."""
    out = set()
    for obj in bundle.objects:
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "ServiceAccount":
            meta = obj.get("metadata") or {}
            out.add(f"{meta.get('namespace') or bundle.namespace}/{meta.get('name', '')}")
    return sorted(out)


CRD_SAFETY_WAIVER = "crd-upgrade-safety"
CRD_STORED_VERSION = "crd-stored-version"   # a stored version removed: the API server refuses it, nothing waives it
