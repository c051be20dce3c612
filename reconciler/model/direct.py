"""Direct installs in the design documents' shapes: ``Install`` (seed 001), ``Bundle``, ``Instance`` (seed 004),
``BundleDeployment`` and ``BundleInstance`` (seeds 003 and 002).

Each becomes what this tool already acts on, so each is reconciled, approved,
pruned and reported like an Operator (docs/declarations.md has the mapping):

* a ``Bundle`` is a named, pinned bundle source; it installs nothing by
  itself (as in RukPak) and is what an ``Instance`` refers to by name;
* an ``Instance`` is a direct install of a Bundle (named, or embedded in
  ``spec.bundle.spec``) with its own approval: the Bundle's class is its
  ProvisionerClass, its decisions and records are its own;
* a ``BundleDeployment`` (``BundleInstance``, its earlier name) is an Instance
  whose Bundle is embedded in ``spec.template``;
* an ``Install`` is the reviewable plan: content (bundle images) installed as
  one unit each, a namespace mapping, and ``spec.approval``, which is the
  committed approval record (``Approved`` approves the content as committed,
  ``Unapproved`` waits as under DenyAll until ``reconciler approve`` records it).

Bundle specs come in both documents' forms: seed 004's ``class`` and ``refs``
(``volumeMounts`` are read and have no effect: a ``file://`` ref names a
directory of the repository), and seed 003's ``source`` (``image.ref``, or
``git`` with a ``repository`` and a ``ref`` by commit, tag or branch; only a
commit pins, and a tag or branch is refused when the bundle is fetched) with
``provisionerClassName``. Status written into a declaration (the documents
show it) is never read. Parsing is otherwise strict, as for Operators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from reconciler.errors import DeclarationError
from reconciler.model.declarations import (
    DirectBundle, InstallSettings, OperatorDecl, Origin, _install, _Reader, image_reference, provisioner_class,
)
from reconciler.model.labels import parse_selector
from reconciler.model.kube import is_dns1123_label, is_dns1123_subdomain

INSTALL_API_VERSION = "operators.coreos.com/v2alpha1"
RUKPAK_API_VERSIONS = ("core.rukpak.io/v1alpha1", "rukpak.io/v1")
# seed 004 writes its Bundle, Instance and ProvisionerClass examples without an apiVersion
NO_API_VERSION = ("Bundle", "Instance", "ProvisionerClass")
KINDS = {"Install": (INSTALL_API_VERSION,), "Bundle": RUKPAK_API_VERSIONS, "Instance": RUKPAK_API_VERSIONS,
         "BundleDeployment": RUKPAK_API_VERSIONS[:1], "BundleInstance": RUKPAK_API_VERSIONS[:1]}
DEFAULT_BUNDLE_CLASS = "olm.bundle"


@dataclass(frozen=True)
class BundleDecl:
    """A RukPak ``Bundle``: a named bundle source (the Instances that name it install it)."""

    name: str
    origin: Origin
    source: DirectBundle


def _name(doc: dict[str, Any], origin: Origin, kind: str, *, label: bool = True) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise DeclarationError(f"{kind} has no metadata.name", path=str(origin))
    valid = is_dns1123_label(name) if label else is_dns1123_subdomain(name)
    if not valid:
        what = "a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)" if label else \
            "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')"
        raise DeclarationError(f"metadata.name {name!r} must be {what}", path=str(origin), obj=f"{kind} {name}")
    return name


def _bundle_spec(spec: _Reader, name: str) -> DirectBundle:
    """A Bundle spec in either document's form: ``class``/``refs`` (seed 004) or ``source`` (seed 003)."""
    where = spec.where
    cls = provisioner_class(spec, "class")
    pcn = provisioner_class(spec, "provisionerClassName")
    refs = spec.get("refs", list)
    spec.get("volumeMounts", list)    # seed 004: where a provisioner finds file:// content; here the repository
    source = spec.child("source")
    if (refs is None) == (source is None):
        raise spec.fail(f"{where} needs refs (a list of bundle references) or source (image or git), "
                        f"{'not both' if refs is not None else 'and has neither'}")
    if refs is not None:
        if not refs or not all(isinstance(r, str) and r for r in refs):
            raise spec.fail(f"{where}.refs must be a non-empty list of references")
        refs = [image_reference(spec, f"{where}.refs[{i}]", r) for i, r in enumerate(refs)]
    else:
        assert source is not None
        refs = [image_reference(spec, f"{where}.source.image.ref", _source_ref(source))]
    spec.done()
    return DirectBundle(name, tuple(refs), cls or pcn or DEFAULT_BUNDLE_CLASS)


def _source_ref(source: _Reader) -> str:
    """Seed 003's ``source`` as a bundle reference of ``reconciler.bundle.source``."""
    kind = source.get("type", str, required=True)
    if kind == "image":
        image = source.child("image", required=True)
        assert image is not None
        ref = image.get("ref", str, required=True)
        image.done()
        out = str(ref)
    elif kind == "git":
        git = source.child("git", required=True)
        assert git is not None
        repository = git.get("repository", str, required=True)
        directory = (git.get("directory", str) or "").strip("/")
        at = git.child("ref", required=True)
        assert at is not None
        pins = {k: at.get(k, str) for k in ("commit", "tag", "branch")}
        at.done()
        given = [v for v in pins.values() if v]
        if len(given) != 1:
            raise at.fail(f"{at.where} needs exactly one of commit, tag or branch")
        git.done()
        out = f"git+{repository}@{given[0]}#{directory}"
    else:
        raise source.fail(f"{source.where}.type {kind!r} is not supported", hint="use image or git")
    source.done()
    return out


def parse_bundle(doc: dict[str, Any], origin: Origin) -> BundleDecl:
    name = _name(doc, origin, "Bundle", label=False)
    spec = _Reader(doc.get("spec") or {}, "spec", f"Bundle {name}", origin)
    decl = BundleDecl(name, origin, _bundle_spec(spec, name))
    return decl


def parse_instance(doc: dict[str, Any], origin: Origin) -> OperatorDecl:
    """An Instance; a Bundle it names without embedding is filled in by ``refer``."""
    spec_doc = doc.get("spec") or {}
    bundle_doc = spec_doc.get("bundle") if isinstance(spec_doc, dict) else None
    meta = doc.get("metadata")
    if (not isinstance(meta, dict) or "name" not in meta) and isinstance(bundle_doc, dict) \
            and isinstance(bundle_doc.get("name"), str):
        # seed 004's direct installs show Instances without a name: such an Instance is named after its Bundle
        doc = dict(doc, metadata={**(meta if isinstance(meta, dict) else {}),
                                  "name": label_of(bundle_doc["name"])})
    name = _name(doc, origin, "Instance")
    spec = _Reader(spec_doc, "spec", f"Instance {name}", origin)
    selector = spec.get("selector", dict)   # which Bundles are earlier versions: here the Instance's inventory
    if selector is not None:   # checked as any LabelSelector is, though nothing selects by it
        parse_selector(selector, "spec.selector", str(origin), f"Instance {name}")
    if spec.data.get("bundle") is None:   # seed 004 shows an Instance with "spec: # omitted", for its status
        raise spec.fail("spec.bundle is required: an Instance installs the Bundle it names",
                        hint="write spec.bundle.name (a Bundle declared in the repository), or spec.bundle.name "
                             "and spec.bundle.spec (class and refs) to embed it")
    b = spec.child("bundle", required=True)
    assert b is not None
    bname = b.get("name", str, required=True)
    if not is_dns1123_subdomain(bname):
        raise b.fail(f"spec.bundle.name {bname!r} must be a DNS-1123 subdomain")
    bspec = b.child("spec")
    b.done()
    bundle = _bundle_spec(bspec, bname) if bspec is not None else DirectBundle(bname, ())
    install = _install(spec)
    spec.done()
    return OperatorDecl(name=name, origin=origin, kind="Instance", bundle=bundle, install=install,
                        provisioner_class=bundle.bundle_class if bundle.refs else None)


def parse_bundle_deployment(doc: dict[str, Any], origin: Origin) -> OperatorDecl:
    kind = str(doc["kind"])
    name = _name(doc, origin, kind)
    spec = _Reader(doc.get("spec") or {}, "spec", f"{kind} {name}", origin)
    pcn = provisioner_class(spec, "provisionerClassName")
    template = spec.child("template", required=True)
    assert template is not None
    template.get("metadata", dict)   # labels of the Bundle a provisioner would stamp out
    bspec = template.child("spec", required=True)
    assert bspec is not None
    bundle = _bundle_spec(bspec, name)
    template.done()
    install = _install(spec)
    spec.done()
    return OperatorDecl(name=name, origin=origin, kind=kind, bundle=bundle, install=install,
                        provisioner_class=pcn or bundle.bundle_class)


def parse_install(doc: dict[str, Any], origin: Origin) -> tuple[OperatorDecl, ...]:
    """An Install: one declaration per content entry (``<name>``, or ``<name>-1``... when it lists several)."""
    name = _name(doc, origin, "Install")
    spec = _Reader(doc.get("spec") or {}, "spec", f"Install {name}", origin)
    spec.seen.add("status")   # seed 001's example indents its status under spec; status is never read
    mapping = []
    for i, entry in enumerate(spec.get("namespaces", list) or []):
        if not isinstance(entry, dict) or set(entry) != {"from", "to"} or not all(
                isinstance(entry[k], str) and is_dns1123_label(entry[k]) for k in ("from", "to")):
            raise spec.fail(f"spec.namespaces[{i}] must be {{from: NAMESPACE, to: NAMESPACE}}")
        if entry["from"] in dict(mapping):
            raise spec.fail(f"spec.namespaces[{i}] maps namespace {entry['from']} a second time")
        mapping.append((entry["from"], entry["to"]))
    approval = spec.get("approval", str)
    if approval not in (None, "Approved", "Unapproved"):
        raise spec.fail(f"spec.approval must be Approved or Unapproved, not {approval!r}",
                        hint="Unapproved waits for `reconciler approve`; Approved approves the content as committed")
    content = spec.get("content", list, required=True)
    if not content:
        raise spec.fail("spec.content must list at least one thing to install")
    refs = []
    for i, item in enumerate(content):
        entry = _Reader(item, f"spec.content[{i}]", spec.obj, origin)
        kind = entry.get("type", str) or "ManifestImage"
        if kind != "ManifestImage":
            raise entry.fail(f"spec.content[{i}].type {kind!r} is not supported",
                             hint="ManifestImage, with the bundle image in manifestImage; raw manifests are "
                                  "committed as a plain+v0 bundle (bundles/NAME/manifests/) and installed by an "
                                  "Operator's spec.bundle (refs: [file://bundles/NAME])")
        refs.append(image_reference(entry, f"spec.content[{i}].manifestImage",
                                    entry.get("manifestImage", str, required=True)))
        entry.done()
    spec.done()
    install = InstallSettings(namespace_map=tuple(mapping))
    names = [name] if len(refs) == 1 else [f"{name}-{i + 1}" for i in range(len(refs))]
    for owner in names:
        if not is_dns1123_label(owner):
            raise spec.fail(f"{owner!r}, the name of one of its contents, is longer than 63 characters",
                            hint="shorten metadata.name")
    return tuple(OperatorDecl(name=owner, origin=origin, kind="Install", bundle=DirectBundle(_image_name(ref), (ref,)),
                              install=install, manual_approval=approval == "Unapproved",
                              approved=approval == "Approved")
                 for owner, ref in zip(names, refs))


def refer(decl: OperatorDecl, bundles: dict[str, BundleDecl]) -> OperatorDecl:
    """An Instance that names a Bundle, with that Bundle's source; refuses one naming no declared Bundle."""
    assert decl.bundle is not None
    found = bundles.get(decl.bundle.name)
    if decl.bundle.refs:
        if found is not None and found.source.refs != decl.bundle.refs:
            raise DeclarationError(f"spec.bundle embeds a spec for Bundle {decl.bundle.name}, which "
                                   f"{found.origin} declares with other refs", path=str(decl.origin),
                                   obj=f"{decl.kind} {decl.name}",
                                   hint="name the declared Bundle without a spec, or give the embedded one "
                                        "another name")
        return decl
    if found is None:
        raise DeclarationError(f"spec.bundle names Bundle {decl.bundle.name}, which no declaration defines",
                               path=str(decl.origin), obj=f"{decl.kind} {decl.name}",
                               hint="declare the Bundle (kind: Bundle) or embed its spec in spec.bundle.spec")
    return replace(decl, bundle=found.source, provisioner_class=found.source.bundle_class)


def label_of(name: str) -> str:
    """A bundle name as a DNS-1123 label: ``etcd-operator.v0.9.3`` -> ``etcd-operator-v0-9-3``."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-")[:63].rstrip("-")


def _image_name(ref: str) -> str:
    """The bundle name an image stands for until its CSV names it: the last path segment, without tag or digest."""
    last = ref.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[0] or ref
