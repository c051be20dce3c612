"""The user's declarations: ``Operator`` in the shapes of the design documents.

Two apiVersions are accepted as written in git:

* ``operators.coreos.com/v1`` (``spec.catalog``, ``spec.version``,
  ``spec.inputClass``, ``spec.constraints``, ``spec.bundle``), and
* ``operators.coreos.com/v2alpha1`` (``spec.updates.catalogSource``),

and both become one ``OperatorDecl``. Parsing is strict: an unknown field is
an error naming the file and the field, since a typo that silently drops a
version pin is worse than a refusal.
"""

from __future__ import annotations

import dataclasses
import re

from dataclasses import dataclass, field
from typing import Any

from reconciler.model.deployconfig import CONFIG_SHAPE, DeploymentConfig
from reconciler.model.provisioner import UNSUPPORTED_CLASSES, Identity, class_name
from reconciler.errors import DeclarationError, InputError
from reconciler.model.kube import ANNOTATION_ADOPT, is_dns1123_label, is_dns1123_subdomain
from reconciler.model.semver_range import VersionRange
from reconciler.model.shape import Mismatch, kind_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from reconciler.model.fleet import Placement

OPERATOR_API_VERSIONS = ("operators.coreos.com/v1", "operators.coreos.com/v2alpha1")
INPUT_API_VERSIONS = ("deppy.io/v1", "depster.io/v1")
DEFAULT_INPUT_CLASS = "subscription"


@dataclass(frozen=True)
class Origin:
    """Where a declaration came from: a repository-relative path and document index."""

    path: str
    document: int = 0

    def __str__(self) -> str:
        return self.path if self.document == 0 else f"{self.path} (document {self.document + 1})"


@dataclass(frozen=True)
class CatalogSelector:
    name: str
    package: str            # "" until resolution finds it, for a v2alpha1 entrypoint written without its package
    channel: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Constraint:
    """An extra constraint as written (``type`` / ``value``); interpreted by the resolver."""

    type: str
    value: Any = field(compare=False, hash=False)


@dataclass(frozen=True)
class DirectBundle:
    """``spec.bundle``: install a bundle without a catalog."""

    name: str
    refs: tuple[str, ...]
    bundle_class: str = "olm.bundle"


@dataclass(frozen=True)
class InstallSettings:
    """Where the operator runs and which namespaces it watches.

    ``target_namespaces`` None means "let the bundle decide" (AllNamespaces
    when supported, else OwnNamespace). ``namespace_map`` (an Install's
    ``spec.namespaces``) replaces each ``from`` namespace by its ``to`` in
    every namespace field of the installed objects. ``config`` (an
    Operator's ``spec.config``) overrides every Deployment of a registry+v1
    bundle as OLM v0 applies a Subscription's ``spec.config``.
    """

    namespace: str | None = None
    target_namespaces: tuple[str, ...] | None = None
    namespace_map: tuple[tuple[str, str], ...] = ()
    config: DeploymentConfig = DeploymentConfig()


@dataclass(frozen=True)
class OperatorDecl:
    """An ``Operator`` or an ``Input``: something the resolver must satisfy with one bundle."""

    name: str
    origin: Origin
    kind: str = "Operator"
    input_class: str = DEFAULT_INPUT_CLASS
    catalog: CatalogSelector | None = None
    version: VersionRange | None = None
    entrypoint: str | None = None
    follow_updates: bool = True               # False: a v2alpha1 entrypoint without a package, installed as is
    constraints: tuple[Constraint, ...] = ()
    bundle: DirectBundle | None = None
    install: InstallSettings = InstallSettings()
    provisioner_class: str | None = None      # spec.provisionerClassName: the approval policy
    approver: Identity | None = None          # spec.approver: whom UserPermission checks
    manual_approval: bool = False             # v2alpha1 approval: Manual, an Install's Unapproved: DenyAll
    approved: bool = False                    # an Install's approval: Approved, the committed approval
    allow_unsafe_crds: str = ""   # metadata.annotations[reconciler.dev/allow-unsafe-crd-upgrade]
    delete_custom_resources: int = 0    # metadata.annotations[reconciler.dev/delete-custom-resources]: at most this many
    placement: Placement | None = None      # spec.placement: which clusters of a fleet, and their overrides
    ignore_differences: tuple = ()          # spec.ignoreDifferences (model.fieldrules.IgnoreRule)
    create_only: tuple = ()                 # spec.createOnly (model.fieldrules.ObjectSelector)
    adopted_from: str = ""   # metadata.annotations[reconciler.dev/adopted-from]: what `reconciler adopt` read
    adopt_existing: bool = False   # metadata.annotations[reconciler.dev/adopt]: take over what runs of the bundle
    handback: str = ""   # metadata.annotations[reconciler.dev/handback]: olm-v0/<catalogsource ns>/<catalogsource>

    @property
    def package(self) -> str | None:
        return self.catalog.package if self.catalog else None


@dataclass(frozen=True)
class InputClass:
    """How an Operator or Input is resolved and applied (seed: the Deppy InputClass).

    * ``force``: install the best match directly; no dependency resolution and
      no upgrade-edge rule.
    * ``dry_run``: resolve and report, never apply (and leave what is installed alone).
    * ``minimal_version``: dependencies at the lowest satisfying version.
    * ``next_kube_minor``: resolve as if the cluster ran the next Kubernetes minor.
    * ``constraints``: class-level constraints such as ``minKubeVersion``.
    """

    name: str
    force: bool = False
    dry_run: bool = False
    minimal_version: bool = False
    next_kube_minor: bool = False
    constraints: tuple[Constraint, ...] = ()
    origin: Origin | None = None


_SEED_CLASS_CONSTRAINTS = (Constraint("minKubeVersion", ">= 1.20"), Constraint("minOCPVersion", ">= 4.7"))
BUILTIN_INPUT_CLASSES = {
    c.name: c for c in (
        InputClass("subscription", constraints=_SEED_CLASS_CONSTRAINTS),
        InputClass("force", force=True, constraints=_SEED_CLASS_CONSTRAINTS),
        InputClass("minimal-version", minimal_version=True, constraints=_SEED_CLASS_CONSTRAINTS[:1]),
        InputClass("dry-run", dry_run=True, constraints=_SEED_CLASS_CONSTRAINTS),
        InputClass("dry-run-next", dry_run=True, next_kube_minor=True,
                   constraints=(Constraint("minKubeVersion", ">= 1.21"), Constraint("minOCPVersion", ">= 4.8"))),
    )
}
CLASS_CONSTRAINT_TYPES = ("minKubeVersion", "minOCPVersion")


_WORDS = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number",
          bool: "true or false"}


class _Reader:
    """Walks a mapping, recording which keys were read, so leftovers are reported."""

    def __init__(self, data: Any, where: str, obj: str, origin: Origin) -> None:
        if not isinstance(data, dict):
            raise DeclarationError(f"{where} must be a mapping, not {kind_of(data)}", path=str(origin), obj=obj)
        self.data, self.where, self.obj, self.origin = data, where, obj, origin
        self.seen: set[str] = set()

    def fail(self, message: str, hint: str | None = None) -> DeclarationError:
        return DeclarationError(message, path=str(self.origin), obj=self.obj, hint=hint)

    def get(self, key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
        self.seen.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.fail(f"{self.where}.{key} is required")
            return None
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            want = " or ".join(_WORDS.get(k, k.__name__) for k in kinds)
            raise self.fail(f"{self.where}.{key} must be {want}, not {kind_of(value)}")
        return value

    def child(self, key: str, required: bool = False) -> _Reader | None:
        value = self.get(key, dict, required)
        return None if value is None else _Reader(value, f"{self.where}.{key}", self.obj, self.origin)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen, key=str)   # keys need not be strings
        if extra:
            raise self.fail(f"unknown field {self.where}.{extra[0]}"
                            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""),
                            hint=f"known fields of {self.where}: {', '.join(sorted(self.seen))}")


def parse_operator(doc: dict[str, Any], origin: Origin) -> OperatorDecl:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise DeclarationError("Operator has no metadata.name", path=str(origin))
    obj = f"Operator {name}"
    if not is_dns1123_label(name):
        raise DeclarationError("metadata.name must be a DNS-1123 label (lowercase letters, digits and '-', "
                               "at most 63 characters)", path=str(origin), obj=obj)
    spec = _Reader(doc.get("spec") or {}, "spec", obj, origin)
    if doc["apiVersion"] == "operators.coreos.com/v2alpha1":
        decl = _parse_v2alpha1(spec, name, origin)
    else:
        decl = _parse_v1(spec, name, origin)
    decl = dataclasses.replace(decl, **_approval_fields(spec, origin))
    decl = dataclasses.replace(decl, install=dataclasses.replace(decl.install, config=_config(spec)))
    spec.done()
    decl = dataclasses.replace(decl, allow_unsafe_crds=_allow_unsafe_crds(meta, origin, obj),
                               delete_custom_resources=_delete_custom_resources(meta, origin, obj),
                               adopted_from=_adopted_from(meta, origin, obj))
    decl = dataclasses.replace(decl, adopt_existing=_adopt_existing(meta, origin, obj, decl.adopted_from))
    decl = dataclasses.replace(decl, handback=_handback(meta, origin, obj, decl))
    if decl.catalog is None and decl.bundle is None:
        raise spec.fail("spec must name a catalog package (spec.catalog) or a bundle (spec.bundle)")
    if decl.catalog is not None and decl.bundle is not None:
        raise spec.fail("spec.catalog and spec.bundle are mutually exclusive",
                        hint="install from a catalog, or a bundle directly, not both")
    return decl


ANNOTATION_ALLOW_UNSAFE_CRDS = "reconciler.dev/allow-unsafe-crd-upgrade"


def _allow_unsafe_crds(meta: dict[str, Any], origin: Origin, obj: str) -> str:
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise DeclarationError("metadata.annotations must be a mapping", path=str(origin), obj=obj)
    value = annotations.get(ANNOTATION_ALLOW_UNSAFE_CRDS) or ""
    if not isinstance(value, str):
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_ALLOW_UNSAFE_CRDS} must be a string of CRD "
                               f"names separated by commas, or \"*\"", path=str(origin), obj=obj)
    return value


ANNOTATION_ADOPTED_FROM = "reconciler.dev/adopted-from"


def _adopted_from(meta: dict[str, Any], origin: Origin, obj: str) -> str:
    """``olm-v0/<namespace>/<subscription>`` or ``olm-v1/<clusterextension>``: the install `reconciler adopt`
    read, which `reconcile` takes over."""
    value = (meta.get("annotations") or {}).get(ANNOTATION_ADOPTED_FROM) or ""
    parts = value.split("/") if isinstance(value, str) else []
    v0 = len(parts) == 3 and parts[0] == "olm-v0" and is_dns1123_label(parts[1]) and bool(parts[2])
    v1 = len(parts) == 2 and parts[0] == "olm-v1" and bool(parts[1])
    if value and not (v0 or v1):
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_ADOPTED_FROM} must be olm-v0/<namespace>/"
                               f"<subscription> or olm-v1/<clusterextension>, not {value!r}", path=str(origin),
                               obj=obj, hint="it is written by `reconciler adopt`; restore it from git, or remove it "
                                             "once the takeover is done")
    return value


def _adopt_existing(meta: dict[str, Any], origin: Origin, obj: str, adopted_from: str) -> bool:
    """The consent, reviewed in git, that the Operator takes over the objects of its bundle that already run
    (applied by hand, Helm or kustomize), as if each were annotated ``reconciler.dev/adopt``; it acts until
    the Operator's first successful apply (``cluster/ownership/takeover/existing.py``)."""
    value = (meta.get("annotations") or {}).get(ANNOTATION_ADOPT)
    if value is None or value == "false":
        return False
    if value != "true":
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_ADOPT} must be \"true\" (take over the objects of "
                               f"this Operator's bundle that already exist) or \"false\", not {value!r}",
                               path=str(origin), obj=obj,
                               hint=f"see what it would take over first: `reconciler adopt REPO --operator "
                                    f"{meta.get('name')}`")
    if adopted_from:
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_ADOPT} and {ANNOTATION_ADOPTED_FROM} are both "
                               f"set; the OLM takeover of {adopted_from} already takes over every object of the "
                               f"bundle", path=str(origin), obj=obj, hint=f"remove {ANNOTATION_ADOPT}")
    return True


ANNOTATION_HANDBACK = "reconciler.dev/handback"


def _handback(meta: dict[str, Any], origin: Origin, obj: str, decl: OperatorDecl) -> str:
    """``olm-v0/<namespace>/<catalogsource>``: the intent, written by `reconciler handback` and reviewed in git,
    that the next reconcile returns the Operator to OLM v0, subscribed from that CatalogSource
    (``cluster/ownership/takeover/handback.py``)."""
    value = (meta.get("annotations") or {}).get(ANNOTATION_HANDBACK)
    if value is None:
        return ""
    parts = value.split("/") if isinstance(value, str) else []
    if not (len(parts) == 3 and parts[0] == "olm-v0" and is_dns1123_label(parts[1])
            and is_dns1123_subdomain(parts[2])):
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_HANDBACK} must be olm-v0/<namespace>/"
                               f"<catalogsource>, the CatalogSource OLM v0 subscribes from, not {value!r}",
                               path=str(origin), obj=obj,
                               hint=f"write it with `reconciler handback REPO --operator {meta.get('name')}`")
    for other, set_ in ((ANNOTATION_ADOPTED_FROM, decl.adopted_from), (ANNOTATION_ADOPT, decl.adopt_existing)):
        if set_:
            raise DeclarationError(f"metadata.annotations.{ANNOTATION_HANDBACK} and {other} are both set: one "
                                   f"hands the Operator back to OLM v0, the other takes it over", path=str(origin),
                                   obj=obj, hint=f"remove {other} (the takeover is done), or the handback")
    if decl.bundle is not None or decl.catalog is None:
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_HANDBACK} needs a catalog package: OLM v0 "
                               f"installs from a CatalogSource, not a bundle named directly", path=str(origin),
                               obj=obj, hint=f"remove {ANNOTATION_HANDBACK}")
    return value


ANNOTATION_DELETE_CUSTOM_RESOURCES = "reconciler.dev/delete-custom-resources"


def _delete_custom_resources(meta: dict[str, Any], origin: Origin, obj: str) -> int:
    """The opt-in to delete this Operator's CRDs although custom resources of them exist (which deletes those):
    the number of custom resources the reviewer saw and agrees to delete. A CRD with more than that many is
    kept, and needs a new opt-in. 0 (or no annotation): none.

    Recorded on the Operator's status object when applied, so it still holds once the declaration is removed.
    """
    value = (meta.get("annotations") or {}).get(ANNOTATION_DELETE_CUSTOM_RESOURCES)
    if value is None or value == "false":
        return 0
    if not isinstance(value, str) or not value.isdigit() or len(value) > 9:
        raise DeclarationError(f"metadata.annotations.{ANNOTATION_DELETE_CUSTOM_RESOURCES} must be the number of "
                               f"custom resources you agree to delete, not {value!r}", path=str(origin), obj=obj,
                               hint="write the count a reconcile reported (\"kept: 3 custom resources of it still "
                                    "exist\"), e.g. \"3\"; a CRD found with more keeps them until the count is raised")
    return int(value)


def _parse_v1(spec: _Reader, name: str, origin: Origin) -> OperatorDecl:
    input_class = spec.get("inputClass", str) or DEFAULT_INPUT_CLASS
    catalog = None
    if (c := spec.child("catalog")) is not None:
        catalog = CatalogSelector(
            name=c.get("name", str, required=True),
            package=c.get("package", str, required=True),
            channel=c.get("channel", str),
            namespace=c.get("namespace", str),
        )
        c.done()
    version = _version(spec, spec.get("version", (str, int, float)))
    constraints = _constraints(spec)
    bundle = None
    if (b := spec.child("bundle")) is not None:
        bname = b.get("name", str, required=True)
        bspec = b.child("spec", required=True)
        assert bspec is not None
        refs = bspec.get("refs", list, required=True)
        if not refs or not all(isinstance(r, str) and r for r in refs):
            raise spec.fail("spec.bundle.spec.refs must be a non-empty list of references")
        refs = [image_reference(bspec, f"spec.bundle.spec.refs[{i}]", r) for i, r in enumerate(refs)]
        bundle = DirectBundle(bname, tuple(refs), provisioner_class(bspec, "class") or "olm.bundle")
        bspec.done()
        b.done()
    return OperatorDecl(name=name, origin=origin, input_class=input_class, catalog=catalog,
                        version=version, constraints=constraints, bundle=bundle,
                        install=_install(spec))


def _parse_v2alpha1(spec: _Reader, name: str, origin: Origin) -> OperatorDecl:
    updates = spec.child("updates", required=True)
    assert updates is not None
    kind = updates.get("type", str) or "CatalogSource"
    if kind != "CatalogSource":
        raise updates.fail(f"spec.updates.type {kind!r} is not supported", hint="use CatalogSource")
    cs = updates.child("catalogSource", required=True)
    assert cs is not None
    ref = cs.child("ref", required=True)
    assert ref is not None
    package, channel, entrypoint = cs.get("package", str), cs.get("channel", str), cs.get("entrypoint", str)
    if package is None and (entrypoint is None or channel is not None):
        # seed 001: "Omitting package and channel will install the entrypoint from ref without subscribing to
        # updates"
        raise cs.fail("spec.updates.catalogSource needs a package (and optionally a channel and an entrypoint), or "
                      "an entrypoint alone" + (", not a channel without its package" if channel else ""),
                      hint="write package: NAME to follow its updates, or only entrypoint: BUNDLE (and ref) to "
                           "install that bundle without updates")
    catalog = CatalogSelector(name=ref.get("name", str, required=True),
                              namespace=ref.get("namespace", str),
                              package=package or "", channel=channel)
    ref.done()
    approval = cs.get("approval", str) or "Automatic"
    if approval not in ("Automatic", "Manual"):
        raise cs.fail(f"spec.updates.catalogSource.approval must be Automatic or Manual, not {approval!r}")
    cs.done()
    updates.done()
    return OperatorDecl(name=name, origin=origin, catalog=catalog, entrypoint=entrypoint,
                        follow_updates=package is not None, manual_approval=approval == "Manual",
                        version=_version(spec, spec.get("version", (str, int, float))),
                        install=_install(spec))


def _config(spec: _Reader) -> DeploymentConfig:
    """``spec.config``: the Deployment overrides of OLM v0's Subscription ``spec.config``, checked field by field."""
    value = spec.get("config", dict)
    if value is None:
        return DeploymentConfig()
    if "selector" in value:
        raise spec.fail("spec.config.selector has no effect (OLM v0 never applied it either) and is not accepted",
                        hint="remove spec.config.selector; the bundle's Deployments keep their own selectors")
    try:
        CONFIG_SHAPE.check(value, "spec.config")
    except Mismatch as exc:
        raise spec.fail(str(exc), hint="spec.config takes OLM v0's Subscription spec.config fields: env, envFrom, "
                                       "volumes, volumeMounts, tolerations, resources, nodeSelector, affinity, "
                                       "annotations, each as Kubernetes spells it (docs/declarations.md)") from None
    return DeploymentConfig.of(value)


def _version(spec: _Reader, raw: Any) -> VersionRange | None:
    if raw is None:
        return None
    if isinstance(raw, float):
        raise spec.fail(f"spec.version {raw!r} was read as a number, which loses digits (1.10 becomes 1.1)",
                        hint='quote it: version: "1.10"')
    try:
        return VersionRange.parse(str(raw))
    except InputError as exc:  # the range parser says what forms it accepts
        raise spec.fail(f"spec.version: {exc.message}", hint=exc.hint) from None


def _constraints(spec: _Reader, validate: bool = True) -> tuple[Constraint, ...]:
    """The constraint list; each is parsed once here so a bad one is reported with its file."""
    from reconciler.model.constraints import parse_constraint

    raw = spec.get("constraints", list) or []
    out = []
    for i, item in enumerate(raw):
        where = f"{spec.where}.constraints[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise spec.fail(f"{where} must be a mapping with a string 'type'")
        if validate:
            try:
                parse_constraint(item["type"], item.get("value"), where)
            except InputError as exc:
                raise spec.fail(exc.message, hint=exc.hint) from None
        out.append(Constraint(item["type"], item.get("value")))
    return tuple(out)


def _approval_fields(spec: _Reader, origin: Origin) -> dict[str, Any]:
    """spec.provisionerClassName, spec.approver, spec.placement and the field rules, shared by every declaration
    kind."""
    out: dict[str, Any] = {}
    if (raw := spec.get("placement", dict)) is not None:
        from reconciler.model.fleet import parse_placement

        out["placement"] = parse_placement(raw, str(origin), spec.obj)
    for key, field_name in (("ignoreDifferences", "ignore_differences"), ("createOnly", "create_only")):
        if (raw := spec.get(key, list)) is not None:
            from reconciler.model.fieldrules import parse_create_only, parse_ignore_rules

            parse = parse_ignore_rules if key == "ignoreDifferences" else parse_create_only
            try:
                out[field_name] = parse(raw, f"spec.{key}", str(origin), spec.obj)
            except InputError as exc:
                raise spec.fail(exc.message, hint=exc.hint) from None
    if (pcls := provisioner_class(spec, "provisionerClassName")) is not None:
        out["provisioner_class"] = pcls
    if (raw := spec.get("approver", dict)) is not None:
        out["approver"] = Identity.parse(raw, "spec.approver", str(origin))
    return out


def provisioner_class(reader: _Reader, key: str) -> str | None:
    """A ProvisionerClass named at ``key`` (``class`` or ``provisionerClassName``), as ``class_name`` reads it; a
    class of content this tool does not install is refused saying what to write instead."""
    written = reader.get(key, str)
    if written in UNSUPPORTED_CLASSES:
        raise reader.fail(f"{reader.where}.{key} {written!r} is not supported", hint=UNSUPPORTED_CLASSES[written])
    return None if written is None else class_name(written)


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")


def image_reference(reader: _Reader, where: str, ref: str) -> str:
    """``ref`` as written; an image reference whose digest is not one (the documents' ``sha256:def456...``
    stands for a digest) is refused here, naming the declaration, rather than when the image is pulled."""
    if ref.startswith(("file://", "git+", "https://", "http://")) or "@" not in ref:
        return ref
    digest = ref.rsplit("@", 1)[1]
    if not _DIGEST.fullmatch(digest):
        raise reader.fail(f"{where} {ref!r}: {digest!r} is not an image digest (sha256: and 64 hex digits)",
                          hint="write the image's digest in full (a placeholder such as sha256:abc123... names "
                               "no image), or a tag, which `reconciler resolve` pins to its digest in olm.lock")
    return ref


def _install(spec: _Reader) -> InstallSettings:
    inst = spec.child("install")
    if inst is None:
        return InstallSettings()
    if "serviceAccountName" in inst.data:
        raise inst.fail(
            "spec.install.serviceAccountName cannot be chosen: each declaration is applied as its own installer "
            "ServiceAccount, install-<name> in the installer namespace (reconciler.yaml installerNamespace, "
            "default reconciler-system), which the reconciler creates and binds to exactly the permissions "
            "approved for the bundle; a ServiceAccount named here could hold more or less than was approved",
            hint="remove spec.install.serviceAccountName; approve the bundle's permissions instead "
                 "(docs/approval.md)")
    ns = inst.get("namespace", str)
    if ns is not None and not is_dns1123_label(ns):
        raise inst.fail(f"spec.install.namespace {ns!r} is not a valid namespace name")
    targets = inst.get("targetNamespaces", list)
    if targets is not None:
        for t in targets:
            if not isinstance(t, str) or (t and not is_dns1123_label(t)):
                raise inst.fail(f"spec.install.targetNamespaces entry {t!r} is not a valid namespace name",
                                hint='use [""] for all namespaces, or a list of namespace names')
        targets = tuple(targets)
    inst.done()
    return InstallSettings(namespace=ns, target_namespaces=targets)


def parse_input(doc: dict[str, Any], origin: Origin) -> OperatorDecl:
    """A Deppy ``Input``: a name, an input class and a constraint list (an ``olm.catalog`` one becomes ``catalog``)."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not is_dns1123_label(name):
        raise DeclarationError("Input needs a metadata.name that is a DNS-1123 label", path=str(origin))
    spec = _Reader(doc.get("spec") or {}, "spec", f"Input {name}", origin)
    input_class = spec.get("inputClass", str) or DEFAULT_INPUT_CLASS
    constraints = _constraints(spec)
    if not constraints:
        raise spec.fail("spec.constraints must list at least one constraint")
    catalog = None
    rest = []
    for c in constraints:
        if c.type == "olm.catalog" and catalog is None and isinstance(c.value, dict) and c.value.get("package"):
            catalog = CatalogSelector(name=str(c.value.get("name", "")), package=str(c.value["package"]),
                                      channel=c.value.get("channel"), namespace=c.value.get("namespace"))
        else:
            rest.append(c)
    decl = OperatorDecl(name=name, origin=origin, kind="Input", input_class=input_class, catalog=catalog,
                        constraints=tuple(rest), install=_install(spec), **_approval_fields(spec, origin))
    spec.seen.add("status")
    spec.done()
    return decl


def parse_input_class(doc: dict[str, Any], origin: Origin) -> InputClass:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not is_dns1123_subdomain(name):
        raise DeclarationError("InputClass needs a metadata.name", path=str(origin))
    params = _Reader(doc.get("parameters") or {}, "parameters", f"InputClass {name}", origin)
    written = {}
    for key in ("force", "dryRun", "minimalVersion", "nextKubeMinor", "generateInputsForDependencies", "trace"):
        written[key] = params.get(key, bool)
    flags = {key: bool(value) for key, value in written.items()}
    constraints = _constraints(params, validate=False)
    for c in constraints:
        if c.type not in CLASS_CONSTRAINT_TYPES:
            raise params.fail(f"InputClass constraint type {c.type!r} is not supported",
                              hint=f"supported: {', '.join(CLASS_CONSTRAINT_TYPES)}")
        _class_range(params, c)
    params.done()
    cls = InputClass(name=name, force=flags["force"], dry_run=flags["dryRun"],
                     minimal_version=flags["minimalVersion"], next_kube_minor=flags["nextKubeMinor"],
                     constraints=constraints, origin=origin)
    if name in BUILTIN_INPUT_CLASSES:
        _same_as_builtin(cls, written, origin)
        return BUILTIN_INPUT_CLASSES[name]
    return cls


def _same_as_builtin(cls: InputClass, written: dict[str, bool | None], origin: Origin) -> None:
    """A built-in class may be written out (seed 004 prints the defaults) but not changed: the flags written and
    the constraints must be the built-in's. Flags left out (nextKubeMinor, which dry-run-next implies) agree."""
    builtin = BUILTIN_INPUT_CLASSES[cls.name]
    differs = []
    for key, attr in (("force", "force"), ("dryRun", "dry_run"), ("minimalVersion", "minimal_version"),
                      ("nextKubeMinor", "next_kube_minor")):
        if written[key] is not None and written[key] != getattr(builtin, attr):
            differs.append(f"parameters.{key} is {str(written[key]).lower()}, built in "
                           f"{str(getattr(builtin, attr)).lower()}")

    def ranges(c: InputClass) -> list[str]:
        return sorted(f"{k.type} {''.join(str(k.value).split())}" for k in c.constraints)
    if ranges(cls) != ranges(builtin):
        differs.append(f"parameters.constraints are {', '.join(ranges(cls)) or 'none'}, built in "
                       f"{', '.join(ranges(builtin)) or 'none'}")
    if differs:
        raise DeclarationError(f"InputClass {cls.name} is built in, and this definition changes it: "
                               f"{'; '.join(differs)}", path=str(origin), obj=f"InputClass {cls.name}",
                               hint=f"declare the class under another name and name it in spec.inputClass, or "
                                    f"remove this definition to use the built-in {cls.name} (docs/declarations.md)")


def _class_range(reader: _Reader, c: Constraint) -> VersionRange:
    try:
        return class_range(c)
    except InputError as exc:
        raise reader.fail(f"{c.type}: {exc.message}") from None


def class_range(c: Constraint) -> VersionRange:
    """The version range of a class constraint such as ``minKubeVersion: >= 1.20`` (partial versions allowed)."""
    return VersionRange.parse(str(c.value))


__all__ = [
    "OPERATOR_API_VERSIONS", "CatalogSelector", "Constraint", "DirectBundle", "InstallSettings",
    "OperatorDecl", "Origin", "parse_operator", "InputClass", "BUILTIN_INPUT_CLASSES", "parse_input",
    "parse_input_class", "class_range", "INPUT_API_VERSIONS",
]
