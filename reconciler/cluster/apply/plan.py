"""Planning: every object's action decided before anything is written.

Live objects are read with one labelled LIST per kind; an object whose digest
and managed fields show it intact is unchanged; every other object is
server-side dry-run (as its Operator's installer) and compared, ownership is
checked and CRD replacements are judged for safety. Any refusal here stops
the run with nothing written. A first install is no exception: its new
objects are dry-run too, so a bundle the API server refuses leaves no CRD,
APIService or cluster RBAC behind. Only an object whose namespace or
CustomResourceDefinition the same run creates cannot be checked beforehand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.cluster.apply.changes import Action, Change, DesiredOperator
from reconciler.cluster.apply.crds import CRD, unsafe_crd_changes
from reconciler.cluster.apply.diff import describe_diff, external_files, label_of, unified
from reconciler.cluster.apply.digest import digest_of, is_current, with_digest
from reconciler.cluster.apply.fields import as_taken_over, create_only, respect, stale_entries, take_over
from reconciler.cluster.apply.order import order_key
from reconciler.kube.concurrent import concurrently
from reconciler.cluster.apply.provenance import check_owner
from reconciler.model import crdsafety
from reconciler.kube.client import ApiError, Kube, ResourceInfo
from reconciler.cluster.apply.target import Claims, PlanOptions, Target
from reconciler.errors import BundleError, ClusterError, PolicyError, ReconcilerError
from reconciler.model.kube import FIELD_MANAGER, Manifest, ObjectRef, operators_selector
from reconciler.report.words import agree, counted


_Key = tuple[str, str, str, str]


@dataclass
class Planned:
    operator: str
    obj: Manifest
    ref: ObjectRef
    info: ResourceInfo | None
    action: Action
    diff: tuple[str, ...] = ()
    writer: Kube | None = None   # the identity that writes it (the Operator's installer), else the caller's
    drifted: bool = False        # live differs although it carries the digest of what we apply: someone changed it
    write: bool = True    # False when the live object already is what we would apply
    detail: str = ""      # why, when it is left as it is (create-only)
    unified: tuple[str, ...] = ()
    sides: tuple[str, str] | None = None


@dataclass
class Plan:
    """Every object's action (``planned``), and the Operators the plan refuses, each with its error: their
    objects are not in ``planned``, and what they would have written is not written. An Operator's refusal is
    its own: the others' objects are planned as if it were not there."""

    planned: list[Planned]
    refused: dict[str, ReconcilerError] = field(default_factory=dict)


def plan(target: Target, desired: list[DesiredOperator], claims: Claims, options: PlanOptions) -> Plan:
    """Decide every object's action before anything is written.

    Live objects are read with one labelled LIST per kind (a GET only for a
    desired object the list did not return: it is missing, or exists without
    our label). An object whose recorded digest matches and whose fields we
    own are intact is unchanged without further requests; every other object
    is validated by a server-side dry-run (concurrently, as the Operator's
    installer when it has one) and compared. A CRD that would be replaced is
    checked for changes that break its custom resources. A new object is
    dry-run like any other: nothing is written until every object that can
    be checked has passed, but for the objects of a first install in a
    namespace this run created for it (``fresh``: (Operator, namespace)
    pairs of ``options``). Those touch nothing but that namespace; each is validated as it
    is created, and a refusal rolls the first install back whole (``sync``).

    A dry run cannot check, and reports so, what the identity a real run writes with is not yet allowed to
    write: the objects of an Operator whose installer does not exist yet (planned as the caller, who in the
    cluster may not write bundles), and those that only the newly approved permissions of a ``rebinding``
    installer allow (``options``).
    """
    planner = _Planner(target, desired, claims, options.rebinding)
    planned = planner.place()
    planner.read(planned, set(options.missing) | _shipped_namespaces_missing(target.kube, desired))
    checks = planner.triage(planned, options.fresh)
    refused = planner.judge(checks)
    return Plan([p for p in planned if p.operator not in refused], refused)


class _Planner:
    """One plan's shared state; its steps, in order: place, read, triage, judge (which raises any refusal)."""

    def __init__(self, target: Target, desired: list[DesiredOperator], claims: Claims,
                 rebinding: frozenset[str]) -> None:
        self.kube, self.dry_run, self.result = target.kube, target.dry_run, target.changes
        self.target, self.desired, self.claims, self.rebinding = target, desired, claims, rebinding
        self.by_name = {op.name: op for op in desired}
        self.errors: list[tuple[str, str]] = []      # (Operator, what the API server refused)
        self.conflicts: list[tuple[str, PolicyError]] = []   # (Operator, an existing object it may not take over)
        self.unplaced: list[tuple[str, str]] = []   # namespaced by the cluster's discovery, yet given no namespace
        self.unverified = 0             # created after their CRD or namespace: nothing to compare or dry-run yet
        self.live: dict[_Key, Manifest] = {}
        self.partial: set[_Key] = set()   # read as metadata only
        self.missing_ns: set[str] = set()

    def place(self) -> list[Planned]:
        """Each desired object with its kind as the cluster serves it (or as a CRD of the run will)."""
        new_crd_kinds = {(o["spec"]["group"], o["spec"]["names"]["kind"]) for op in self.desired for o in op.objects
                         if o.get("kind") == CRD[1] and o.get("apiVersion", "").startswith(CRD[0] + "/")}
        planned: list[Planned] = []
        for op in self.desired:
            writer = self.target.installer(op.name)   # None: the caller (no installer, or none yet in a dry run)
            for ref, obj in sorted(((ObjectRef.of(o), o) for o in op.objects), key=lambda ro: order_key(ro[0])):
                info = self.kube.resource(obj["apiVersion"], obj["kind"])
                if info is None and (ref.group, ref.kind) not in new_crd_kinds:
                    self.errors.append((op.name, f"{ref}: the cluster does not serve {ref.kind} in {obj['apiVersion']}"))
                elif info is not None and info.namespaced and not ref.namespace:
                    self.unplaced.append((op.name, f"{ref} (Operator {op.name})"))
                else:
                    planned.append(Planned(op.name, with_digest(obj), ref, info, Action.CREATED, writer=writer))
        return planned

    def read(self, planned: list[Planned], missing_ns: set[str]) -> None:
        """The live copies of what can exist: all but objects of a kind or in a namespace still to be made."""
        self.missing_ns = missing_ns
        errors: list[str] = []
        readable = [p for p in planned if p.info is not None and p.ref.namespace not in missing_ns]
        self.live, self.partial = read_live(self.kube, readable, errors)
        whose = {str(p.ref): p.operator for p in readable}
        self.errors += [(whose.get(e.split(": ", 1)[0], ""), e) for e in errors]

    def triage(self, planned: list[Planned], fresh: frozenset[tuple[str, str]]) -> list[tuple[Planned,
                                                                                            Manifest | None]]:
        """Decide what needs no request (unchanged, create-only, not checkable yet); return what must be
        dry-run, with its live copy."""
        checks: list[tuple[Planned, Manifest | None]] = []
        for p in planned:
            if p.info is None or p.ref.namespace in self.missing_ns:
                self.unverified += 1
                continue
            current = self.live.get(p.ref.key)
            if current is not None:
                op = self.by_name[p.operator]
                try:
                    check_owner(p.operator, p.ref, current, self.claims.owned, self.claims.moves,
                                self.claims.instance, adopting=op.adopting)
                except PolicyError as exc:
                    self.conflicts.append((p.operator, exc))
                    continue
                if create_only(p.obj, p.ref, op.create_only):
                    p.action, p.write, p.detail = Action.UNCHANGED, False, "create-only: it exists, left as it is"
                    continue
                rules = [r for r in op.ignore if r.matches(p.ref)]
                if rules:
                    if any(r.json_pointers for r in rules) and p.ref.key in self.partial:   # the values are needed
                        current = self.live[p.ref.key] = self.kube.get(p.info, p.ref.namespace, p.ref.name) or current
                        self.partial.discard(p.ref.key)
                    p.obj = respect(p.obj, current, rules)
                if is_current(p.obj, current):
                    p.action, p.write = Action.UNCHANGED, False
                    continue
            elif (p.operator, p.ref.namespace) in fresh:
                continue   # in the namespace just made for this first install: its create validates it
            checks.append((p, current))
        return checks

    def check(self, item: tuple[Planned, Manifest | None]) -> list[tuple[str, str]]:
        """Dry-run one object and compare: problems as (invalid | unsafe | unchecked | error, message); none
        when the object can be applied."""
        p, current = item
        assert p.info is not None
        kube, op = self.kube, self.by_name[p.operator]
        writer = p.writer or kube
        unsafe: list[tuple[str, str]] = []
        try:
            if current is not None and p.ref.key in self.partial:  # listed as metadata: the diff needs all of it
                current = kube.get(p.info, p.ref.namespace, p.ref.name)
            if current is not None and not self.dry_run and stale_entries(current, op.take_over):
                # fields a client-side apply wrote long ago become ours, so what the bundle drops goes
                take_over(writer, p.info, p.ref, current, p.obj["apiVersion"], op.take_over)
                current = kube.get(p.info, p.ref.namespace, p.ref.name)
            if current is not None and (p.ref.group, p.ref.kind) == CRD:
                unsafe = [("unsafe", u) for u in unsafe_crd_changes(kube, op, p.obj, current)]
            dry = writer.apply(p.info, p.obj, field_manager=FIELD_MANAGER, dry_run=True)
            if current is not None and self.dry_run:
                dry = taken_over(writer, p, dry, op.take_over)
        except ApiError as exc:
            if is_invalid_object(exc):
                return [("invalid", f"{p.ref}: {exc.message}")]
            if self.dry_run and not_allowed_yet(p, exc) and (p.operator in self.rebinding if p.writer is not None
                                                              else op.installer is not None):
                # the identity a real run writes with does not exist yet (a first install) or is not bound to
                # the new approval yet, and the reconciler's own may not write bundles (in-cluster)
                if current is not None:
                    p.action, p.detail = Action.CONFIGURED, "not checked by the API server"
                return [("unchecked", p.operator)]
            return [("error", f"{p.ref}: {exc.message}{as_installer(p, writer, exc)}")]
        if current is not None:
            p.diff = describe_diff(current, dry)
            p.action = Action.CONFIGURED if p.diff else Action.UNCHANGED
            if p.diff:
                p.unified = unified(current, dry, label_of(p.ref))
                if self.dry_run:
                    p.sides = external_files(current, dry)
            # With no difference, write only to record a new digest (once), so the next run is a fast no-op.
            p.write = bool(p.diff) or digest_of(current) != digest_of(p.obj)
            p.drifted = bool(p.diff) and digest_of(current) == digest_of(p.obj)
        return unsafe

    def judge(self, checks: list[tuple[Planned, Manifest | None]]) -> dict[str, ReconcilerError]:
        """Dry-run what must be (concurrently), then refuse each Operator with a problem (its error, by name),
        or note what a dry run could not check."""
        invalid: list[tuple[DesiredOperator, str]] = []
        unsafe: list[tuple[str, str]] = []
        unchecked: set[str] = set()
        for (p, _), problems in zip(checks, concurrently(self.check, checks)):
            for category, message in problems:
                if category == "invalid":
                    invalid.append((self.by_name[p.operator], message))
                elif category == "unsafe":
                    unsafe.append((p.operator, message))
                elif category == "unchecked":
                    unchecked.add(message)
                else:
                    self.errors.append((p.operator, message))
        notes = self.result.notes
        if unchecked - self.rebinding:
            notes.append(f"not checked by the API server: the objects of "
                         f"{', '.join(sorted(unchecked - self.rebinding))}, whose installer a real run creates "
                         f"first (this identity may not write them itself)")
        if unchecked & self.rebinding:
            notes.append(f"not checked by the API server: the objects of "
                         f"{', '.join(sorted(unchecked & self.rebinding))} that only the newly approved "
                         f"permissions allow (a real run binds the installer to them first)")
        if self.unverified and self.dry_run:
            notes.append(f"{counted(self.unverified, 'object')} could not be checked by server-side dry-run because their "
                         f"namespace or CustomResourceDefinition does not exist yet")
        problems = {o for o, _ in [*((op.name, m) for op, m in invalid), *unsafe, *self.unplaced, *self.conflicts,
                                   *self.errors]}
        # Each Operator is refused alone; when every one is, nothing at all is applied, and the error says so.
        every = problems >= {op.name for op in self.desired}
        refused: dict[str, ReconcilerError] = {}
        for name in sorted(problems & set(self.by_name)):
            state = "nothing was applied" if every else f"nothing of Operator {name} was applied"
            refused[name] = self.refusal(state, [(op, m) for op, m in invalid if op.name == name],
                                         [m for o, m in unsafe if o == name],
                                         [m for o, m in self.unplaced if o == name],
                                         [e for o, e in self.conflicts if o == name],
                                         [m for o, m in self.errors if o == name])
        stray = [m for o, m in self.errors if o not in self.by_name]   # not an Operator's object: refuses all
        if stray:
            raise ClusterError(f"{counted(len(stray), 'object')} {agree(len(stray), 'was', 'were')} refused by the API "
                               f"server; nothing was applied:"
                               f"\n  " + "\n  ".join(stray))
        return refused

    @staticmethod
    def refusal(state: str, invalid: list[tuple[DesiredOperator, str]], unsafe: list[str], unplaced: list[str],
                conflicts: list[PolicyError], errors: list[str]) -> ReconcilerError:
        """One Operator's refusal, the first kind of problem it has deciding which error it is; ``state`` says
        what was applied."""
        if invalid:
            return invalid_objects(invalid, state)
        if unsafe:
            return PolicyError(f"replacing these CustomResourceDefinitions could break custom resources; {state}:\n  "
                               + "\n  ".join(unsafe),
                               hint=f"review the change; to accept it for this exact bundle, record it with `reconciler "
                                    f"approve REPO OPERATOR --waive crd-upgrade-safety` and commit, or annotate the "
                                    f"Operator declaration with {crdsafety.ANNOTATION_ALLOW}: <CRD name>[,...] (or "
                                    f"\"*\")")
        if unplaced:
            names = agree(len(unplaced), "names", "name")
            return BundleError(f"{counted(len(unplaced), 'object')} of a namespaced kind {names} no namespace, and "
                               f"neither the built-in kinds nor the bundle's CRDs say the kind is namespaced, so it was not "
                               f"placed in the install namespace; {state}:\n  " + "\n  ".join(unplaced),
                               hint="set metadata.namespace on each in its bundle")
        if len(conflicts) == 1:
            return conflicts[0]
        if conflicts:
            return PolicyError(f"{counted(len(conflicts), 'object')} exist and may not be taken over; {state}:\n  "
                               + "\n  ".join(c.render() for c in conflicts))
        return ClusterError(f"{counted(len(errors), 'object')} {agree(len(errors), 'was', 'were')} refused by the API server; "
                            f"{state}:\n  "
                            + "\n  ".join(errors))


def taken_over(writer: Kube, p: Planned, dry: Manifest, extra: tuple[str, ...]) -> Manifest:
    """A dry run's answer as the real run's take-over of client-side fields leaves the object: what it would
    remove removed (``fields.as_taken_over``), then defaulted again by the API server, as the real apply's
    result is (a field with a default, such as a container's imagePullPolicy, comes back as it was), by a
    dry-run update of that object."""
    taken = as_taken_over(dry, extra)
    if taken is dry:
        return dry
    assert p.info is not None
    try:
        return writer.request("PUT", p.info.path(p.ref.namespace, p.ref.name), body=taken, obj=str(p.ref),
                              query=[("dryRun", "All"), ("fieldManager", FIELD_MANAGER)])
    except ApiError as exc:
        if exc.status != 409:   # changed since it was read: the next run sees it as it is
            raise
        return taken


def not_allowed_yet(p: Planned, exc: ApiError) -> bool:
    """Refused for want of a permission: 403, or the 404 of a binding to a role the same run creates, which the
    API server looks up to see whether the writer holds its permissions when it may not bind it by name."""
    return exc.status == 403 or (exc.status == 404 and p.ref.group == "rbac.authorization.k8s.io"
                                 and p.ref.kind in ("RoleBinding", "ClusterRoleBinding"))


INVALID_STATUSES = (400, 422)  # the object itself is wrong (schema, field validation): the bundle's fault


def is_invalid_object(exc: ApiError) -> bool:
    """The API server refused the object itself, not the request: invalid fields, or (server-side apply
    answers 500 for these) a field of the wrong type or one the schema does not declare."""
    return exc.status in INVALID_STATUSES or (exc.status == 500 and "failed to create typed patch object"
                                              in exc.message)


def invalid_objects(invalid: list[tuple[DesiredOperator, str]], state: str = "nothing was applied") -> BundleError:
    """Objects the API server refused as invalid: an error in the bundle (exit 2), naming it and each object."""
    sources = sorted({str(op.bundle.get("source") or op.name) for op, _ in invalid})
    lines = "\n  ".join(f"{line} [bundle {op.bundle.get('source') or op.name} of {op.name}]" for op, line in invalid)
    return BundleError(f"{counted(len(invalid), 'object')} of the bundle were refused by the API server as invalid; "
                       f"{state}:\n  {lines}", path=sources[0],
                       hint="the bundle's manifests do not pass the cluster's validation; fix the bundle or choose "
                            "another version")



_LIST_OVER_GETS = 4   # this many unlisted objects of one kind in one namespace are read with one LIST


def read_live(kube: Kube, planned: list[Planned], errors: list[str]) -> tuple[dict[_Key, Manifest], set[_Key]]:
    """The live copy of each planned object, by one labelled LIST per kind, then a GET for what it missed.

    Also returns the keys of objects read as metadata only.
    """
    live: dict[_Key, Manifest] = {}
    partial: set[_Key] = set()
    # Metadata decides "unchanged"; only a Secret written through stringData is checked by its stored data.
    full = {p.info for p in planned if p.ref.kind == "Secret" and p.ref.group == "" and "stringData" in p.obj}
    _list_labelled(kube, planned, full, live, partial)
    # Objects the labelled list did not return are new, or exist without our label (adoption, conflict).
    unlisted = _scan_crowded(kube, [p for p in planned if p.ref.key not in live], live, partial)

    def read(p: Planned) -> tuple[Planned, Manifest | None, str | None]:
        assert p.info is not None
        try:
            return p, kube.get(p.info, p.ref.namespace, p.ref.name), None
        except ApiError as exc:
            return p, None, f"{p.ref}: {exc.message}"

    for p, obj, error in concurrently(read, unlisted):
        if error:
            errors.append(error)
        elif obj is not None:
            live[p.ref.key] = obj
    return live, partial


_NOT_LISTABLE = (401, 403, 404, 405, 406)   # not allowed to list (or no list of) this kind: read one by one


def _list_labelled(kube: Kube, planned: list[Planned], full: set[ResourceInfo | None], live: dict[_Key, Manifest],
                   partial: set[_Key]) -> None:
    """One LIST per kind of the planned Operators' labelled objects into ``live`` (metadata only but for
    ``full`` kinds, whose keys are not added to ``partial``)."""
    kinds = sorted({p.info for p in planned if p.info is not None}, key=lambda i: (i.group, i.version, i.kind))
    owners: dict[ResourceInfo, set[str]] = {}
    for p in planned:
        owners.setdefault(p.info, set()).add(p.operator)  # type: ignore[arg-type]

    def listed(info: ResourceInfo) -> list[Manifest]:
        # Only the planned Operators' objects: the server encodes (and we decode) nothing of the others'. An
        # object another Operator owns is not returned here; it is read below and refused as a conflict.
        selector = operators_selector(owners.get(info, ()))
        try:
            return kube.list(info, label_selector=selector, metadata_only=info not in full)
        except ApiError as exc:
            if exc.status not in _NOT_LISTABLE:
                raise
            return []  # each object is read on its own instead

    for info, items in zip(kinds, concurrently(listed, kinds)):
        for item in items:
            key = ObjectRef.of(item).key
            live[key] = item
            if info not in full:
                partial.add(key)


def _scan_crowded(kube: Kube, unlisted: list[Planned], live: dict[_Key, Manifest],
                  partial: set[_Key]) -> list[Planned]:
    """Where many unlisted objects share a kind and namespace, one unlabelled metadata LIST there answers for
    all of them (into ``live``); returns the unlisted objects left to read one by one."""
    groups: dict[tuple[ResourceInfo, str], list[Planned]] = {}
    for p in unlisted:
        assert p.info is not None
        groups.setdefault((p.info, p.ref.namespace if p.info.namespaced else ""), []).append(p)
    scopes = [scope for scope, members in groups.items() if len(members) >= _LIST_OVER_GETS]

    def scanned(scope: tuple[ResourceInfo, str]) -> list[Manifest] | None:
        try:
            return kube.list(scope[0], namespace=scope[1], metadata_only=True)
        except ApiError as exc:
            if exc.status not in _NOT_LISTABLE:
                raise
            return None

    for scope, items in zip(scopes, concurrently(scanned, scopes)):
        if items is None:
            continue
        for item in items:
            key = ObjectRef.of(item).key
            live.setdefault(key, item)
            partial.add(key)
        del groups[scope]
    return [p for members in groups.values() for p in members]


def ensure_namespaces(target: Target, desired: list[DesiredOperator]) -> set[str]:
    """Create missing install namespaces (never pruned); return those that did not exist (created unless dry-run).

    A run refused before it writes anything else deletes the ones it created (``sync``), so a refusal leaves
    the cluster as it was.

    A namespace the Operator's bundle ships as an object is left to that object (applied first, and the
    Operator's own): creating it here would make the bundle's Namespace a foreign object in its own way.
    """
    kube, dry_run, result = target.kube, target.dry_run, target.changes
    info = kube.resource("v1", "Namespace")
    assert info is not None
    missing: set[str] = set()
    wanted = {ns for op in desired for ns in op.namespaces}
    if not wanted:
        return missing
    try:  # one LIST, not a GET per namespace
        listed = [item for item in kube.list(info) if item["metadata"]["name"] in wanted]
    except ApiError as exc:
        if exc.status not in (401, 403):
            raise
        listed = [item for item in (kube.get(info, "", ns) for ns in sorted(wanted)) if item is not None]
    existing = {item["metadata"]["name"] for item in listed}
    leaving = sorted(item["metadata"]["name"] for item in listed if item["metadata"].get("deletionTimestamp"))
    if leaving and not dry_run:   # e.g. one a refused run removed: created again once it is gone
        existing -= _wait_gone(kube, info, leaving)
    for op in desired:
        shipped = op.shipped_namespaces
        for ns in op.namespaces:
            if ns in missing or ns in existing or ns in shipped:
                continue
            missing.add(ns)
            if not dry_run:
                kube.apply(info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                           field_manager=FIELD_MANAGER, dry_run=False)
            result.changes.append(Change(op.name, ObjectRef("", "Namespace", "", ns, "v1"), Action.CREATED,
                                         detail="namespaces are created when missing and never deleted"))
    return missing


_TERMINATING_WAIT = 60.0


def _wait_gone(kube: Kube, info: ResourceInfo, names: list[str]) -> set[str]:
    """Wait (bounded) for namespaces being deleted to be gone; returns them, or says which never went."""
    import time

    deadline = time.monotonic() + _TERMINATING_WAIT
    left = [ns for ns in names if not kube.wait_gone(info, "", ns, max(0.0, deadline - time.monotonic()))]
    if left:
        raise ClusterError(f"namespace {', '.join(left)} is being deleted and is still there after "
                           f"{_TERMINATING_WAIT:.0f}s; nothing can be installed into it until it is gone",
                           hint=f"see what holds it: kubectl get namespace {left[0]} -o yaml (its status "
                                f"conditions name what is left); reconcile again once it is gone")
    return set(names)


def _shipped_namespaces_missing(kube: Kube, desired: list[DesiredOperator]) -> set[str]:
    """Namespaces a bundle ships as objects (plain bundles do) that do not exist yet.

    Objects in them cannot be dry-run before the Namespace is applied; they are
    validated when they are applied, right after it.
    """
    shipped = set().union(*(op.shipped_namespaces for op in desired)) if desired else set()
    info = kube.resource("v1", "Namespace") if shipped else None
    return {ns for ns in shipped if info is not None and kube.get(info, "", ns) is None}


def as_installer(p: Planned, writer: Kube | None, exc: ApiError) -> str:
    """Why a 403 is no surprise when the object was written as the Operator's installer."""
    if exc.status != 403 or writer is None or not writer.impersonated:
        return ""
    return f" (applied as {writer.impersonated}, bound to the permissions approved for Operator {p.operator})"
