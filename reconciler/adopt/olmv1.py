"""What OLM v1 runs, read from a live cluster, and what each ClusterExtension means as a declaration.

Reading (``read_cluster``) is the only side effect: one LIST of
ClusterExtensions, one of ClusterCatalogs (to say which image to render when
the repository lacks a catalog), and one of Deployments carrying OLM v1's
owner label (their images are checked against the repository's bundle, as a
CSV's are for OLM v0). ``survey`` is pure: every ClusterExtension becomes an
``Extension`` or an ``Unmapped`` with its reason.

A ClusterExtension maps onto a declaration closely: its package, its channel,
its version range (``spec.version``, the same Masterminds ranges), and the
install namespace. OLM v1 installs in AllNamespaces mode unless
``spec.config.inline.watchNamespace`` names one namespace (the install
namespace itself, OwnNamespace, or another, SingleNamespace), which a
declaration's target namespaces say as well. Two things have no equivalent:

* several channels: a declaration follows one, so such an extension is left
  to OLM v1 with the reason;
* ``upgradeConstraintPolicy: SelfCertified``, which lets OLM v1 move to any
  version in the range regardless of the catalog's upgrade edges. It is
  adopted anyway, with the edges followed from then on, and the declaration
  says so: what runs is pinned by the lock either way, and a declaration that
  follows the edges only ever asks for fewer upgrades, never an unreviewed one.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from typing import Any

from reconciler.adopt.olmv0 import Unmapped, deployment_images
from reconciler.cluster.ownership.takeover.olmv1 import API_VERSION, OWNER_KIND, OWNER_NAME, installed_bundle
from reconciler.kube.client import Kube
from reconciler.model.labels import parse_selector

Manifest = dict[str, Any]


@dataclass(frozen=True)
class ClusterView:
    """Every ClusterExtension and ClusterCatalog of the cluster, and the Deployments OLM v1 installed."""

    extensions: tuple[Manifest, ...] = ()
    catalogs: tuple[Manifest, ...] = ()
    deployments: tuple[Manifest, ...] = ()


@dataclass(frozen=True)
class Extension:
    """One ClusterExtension that maps onto a declaration: what it asks for and the bundle it installed."""

    extension: Manifest
    deployments: tuple[Manifest, ...]   # the live Deployments it installed: their images are what runs
    catalog_images: tuple[str, ...]      # the images of the ClusterCatalogs it may resolve from
    target_namespaces: tuple[str, ...] = ("",)

    manual = False
    config: dict[str, Any] = field(default_factory=dict)
    generated_by = ""
    dependency_of: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return _name(self.extension)

    @property
    def _catalog_spec(self) -> dict[str, Any]:
        return ((self.extension.get("spec") or {}).get("source") or {}).get("catalog") or {}

    @property
    def namespace(self) -> str:
        return str((self.extension.get("spec") or {}).get("namespace") or "")

    @property
    def package(self) -> str:
        return str(self._catalog_spec.get("packageName") or "")

    @property
    def channel(self) -> str | None:
        channels = self._catalog_spec.get("channels") or []
        return channels[0] if channels else None

    @property
    def version_range(self) -> str | None:
        return self._catalog_spec.get("version") or None

    @property
    def self_certified(self) -> bool:
        return self._catalog_spec.get("upgradeConstraintPolicy") == "SelfCertified"

    @property
    def service_account(self) -> str:
        return str(((self.extension.get("spec") or {}).get("serviceAccount") or {}).get("name") or "")

    @property
    def bundle_name(self) -> str:
        return str(installed_bundle(self.extension).get("name") or "")

    @property
    def version(self) -> str:
        return str(installed_bundle(self.extension).get("version") or "")

    @property
    def images(self) -> set[str]:
        return deployment_images(self.deployments)

    @property
    def catalog(self) -> str:
        """The repository catalog asked first: none is preferred (a ClusterExtension names no catalog)."""
        return ""

    @property
    def where(self) -> str:
        return f"ClusterExtension {self.name}"

    @property
    def adopted_from(self) -> str:
        return f"olm-v1/{self.name}"

    @property
    def summary(self) -> str:
        from reconciler.adopt.olmv0 import install_mode

        return (f"{self.package}, channel {self.channel or 'any'}, version {self.version_range or 'any'}, "
                f"{install_mode(self.namespace, self.target_namespaces)}"
                + (", upgradeConstraintPolicy SelfCertified: the catalog's upgrade edges are followed from now on"
                   if self.self_certified else ""))

    note = ""

    @property
    def evidence(self) -> dict[str, Any]:
        return {"from": "OLM v1", "clusterExtension": self.name, "namespace": self.namespace,
                **({"serviceAccount": self.service_account} if self.service_account else {}),
                "bundle": self.bundle_name}

    def catalog_hint(self, catalog: str) -> str:
        images = " or ".join(f"`reconciler catalog import . --image {i} --name {catalog or 'NAME'} --package "
                             f"{self.package}`" for i in self.catalog_images) or \
            (f"`reconciler catalog import . --image <the image of the ClusterCatalog that serves {self.package}> "
             f"--name NAME --package {self.package}`")
        return f"add the catalog OLM v1 installed it from: {images}, then adopt again"

    def header(self) -> str:
        from reconciler.adopt.olmv0 import install_mode

        policy = ""
        if self.self_certified:
            policy = ("# Its upgradeConstraintPolicy was SelfCertified (any version in range, edges or not): a\n"
                      "# declaration follows the catalog's upgrade edges.\n")
        return (f"# Adopted from OLM v1: {self.where} ({install_mode(self.namespace, self.target_namespaces)}), "
                f"running {self.bundle_name}.\n" + policy +
                ("# spec.version is the ClusterExtension's version range" if self.version_range else
                 "# No spec.version: the ClusterExtension asked for none") +
                "; olm.lock pins the bundle that runs.\n")


@dataclass(frozen=True)
class Survey:
    installs: tuple[Extension, ...] = ()
    unmapped: tuple[Unmapped, ...] = ()


def serves(kube: Kube) -> bool:
    return kube.resource(API_VERSION, "ClusterExtension") is not None


def read_cluster(kube: Kube) -> ClusterView:
    """The ClusterExtensions, ClusterCatalogs and OLM v1's Deployments (call only when ``serves``)."""
    def listed(api_version: str, kind: str, selector: str | None = None) -> tuple[Manifest, ...]:
        info = kube.resource(api_version, kind)
        return () if info is None else tuple(kube.list(info, label_selector=selector))

    return ClusterView(listed(API_VERSION, "ClusterExtension"), listed(API_VERSION, "ClusterCatalog"),
                       listed("apps/v1", "Deployment", OWNER_NAME))


def survey(view: ClusterView) -> Survey:
    installs: list[Extension] = []
    unmapped: list[Unmapped] = []
    for ext in sorted(view.extensions, key=_name):
        result = _extension(view, ext)
        if isinstance(result, Unmapped):
            spec = ext.get("spec") or {}
            result = dataclasses.replace(result, namespace=str(spec.get("namespace") or ""), package=str(
                ((spec.get("source") or {}).get("catalog") or {}).get("packageName") or ""))
        (installs if isinstance(result, Extension) else unmapped).append(result)
    return Survey(tuple(installs), tuple(unmapped))


def _extension(view: ClusterView, ext: Manifest) -> Extension | Unmapped:
    what = f"ClusterExtension {_name(ext)}"
    spec = ext.get("spec") or {}
    source = spec.get("source") or {}
    if ext["metadata"].get("deletionTimestamp"):
        return Unmapped("BeingDeleted", what, "the ClusterExtension is being deleted", "let OLM v1 finish (or recreate it), then adopt "
                        "again")
    if source.get("sourceType") != "Catalog":
        return Unmapped("NotACatalog", what, f"its source is {source.get('sourceType')!r}, not a catalog",
                        "declare the Operator yourself from the bundle it installs")
    installed, progressing = _condition(ext, "Installed"), _condition(ext, "Progressing")
    if installed.get("status") != "True" or not installed_bundle(ext):
        return Unmapped("NothingInstalled", what, "nothing is installed for it (the ClusterExtension's condition Installed: "
                        f"{installed.get('reason') or 'no condition yet'}"
                        + (f": {installed['message']}" if installed.get("message") else "") + ")",
                        "let OLM v1 finish the install (or fix what stops it), then adopt again")
    if progressing.get("status") == "True" and progressing.get("reason") != "Succeeded":
        return Unmapped("Progressing", what, f"operator-controller is still working on the ClusterExtension (Progressing: "
                        f"{progressing.get('reason')}"
                        + (f": {progressing['message']}" if progressing.get("message") else "")
                        + "): what runs may be about to change", "wait until it has settled, then adopt again")
    if (ext.get("status") or {}).get("activeRevisions"):
        return Unmapped("BoxcutterRuntime", what,
                        "operator-controller installed it as ClusterObjectSet revisions (its BoxcutterRuntime "
                        "feature), which adopt does not retire yet: only Helm-release installs are taken over",
                        "leave it to OLM v1")
    channels = (source.get("catalog") or {}).get("channels") or []
    if len(channels) > 1:
        return Unmapped("SeveralChannels", what,
                        f"it follows several channels ({', '.join(channels)}); a declaration follows one",
                        "keep one channel in the ClusterExtension, or declare the Operator yourself")
    config = spec.get("config") or {}
    inline = config.get("inline") or {}
    if config and (config.get("configType") != "Inline" or set(inline) - {"watchNamespace"}):
        return Unmapped("ConfigNotDeclarable", what, "its spec.config sets more than the namespace to watch "
                        f"({', '.join(sorted(set(inline) - {'watchNamespace'})) or config.get('configType')}), "
                        "which a declaration does not say", "remove it from the ClusterExtension, then adopt again")
    watched = str(inline.get("watchNamespace") or "")
    name = _name(ext)
    deployments = tuple(d for d in view.deployments
                        if (d["metadata"].get("labels") or {}).get(OWNER_NAME) == name
                        and (d["metadata"].get("labels") or {}).get(OWNER_KIND) == "ClusterExtension")
    return Extension(ext, deployments, _catalog_images(view, source.get("catalog") or {}),
                     (watched,) if watched else ("",))


def _catalog_images(view: ClusterView, catalog: dict[str, Any]) -> tuple[str, ...]:
    """The images of the ClusterCatalogs the extension's selector picks (every one without a selector)."""
    selector = parse_selector(catalog["selector"], "spec.source.catalog.selector", "the cluster", "ClusterExtension") \
        if catalog.get("selector") else None
    out = []
    for cat in sorted(view.catalogs, key=_name):
        if selector is not None and not selector.matches(cat["metadata"].get("labels") or {}):
            continue
        ref = (((cat.get("spec") or {}).get("source") or {}).get("image") or {}).get("ref")
        if ref:
            out.append(str(ref))
    return tuple(out)


def _condition(obj: Manifest, kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _name(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
