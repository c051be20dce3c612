"""Reading the GitOps repository: declarations, catalogs, settings, lockfile.

Layout (documented in the README):

* ``catalogs/<name>/``   file-based catalogs; the directory name is the catalog name
* ``bundles/``           local bundle directories, referenced as ``file://bundles/...``
* ``reconciler.yaml``    optional repository-wide settings
* ``olm.lock``           the lockfile
* ``approvals/``         approval records, one file per Operator (written by ``reconciler approve``)
* ``policies/``          the repository's own guardrail policies
* ``clusters/<name>.yaml`` a fleet's ``Cluster`` declarations; ``clusters/<name>/olm.lock`` each one's lockfile
* every other ``*.yaml`` / ``*.yml`` file holds declarations, recognised by apiVersion and kind (the design
  documents' Operator, Input, InputClass, ProvisionerClass, Install, Bundle, Instance, BundleDeployment;
  ``model/direct.py`` maps the last four onto Operators installing a bundle directly).

Hidden files and directories (``.git``, ``.github``) are skipped, and so are nested git repositories
(a submodule's checkout), which a fetched tree does not have either.

The working tree is confined as a fetched tree is (``git.py``): a symbolic
link that leads out of the repository, or to nothing, is refused before
anything is read, so no file outside the repository (``/dev/zero``, another
repository's settings) can stand in for a declaration, a catalog, the
settings, the lockfile or a bundle. Only regular files are read
(``yamlio.read_text``). Declarations and settings are decoded strictly: a key
written twice is an error, as in kubectl.
"""

from __future__ import annotations

import re

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.errors import DeclarationError, InputError
from reconciler.model.declarations import (
    BUILTIN_INPUT_CLASSES, INPUT_API_VERSIONS, OPERATOR_API_VERSIONS, InputClass, OperatorDecl, Origin,
    parse_input, parse_input_class, parse_operator,
)
from reconciler.model.semver_range import parse_version
from reconciler.model.kube import DEFAULT_INSTANCE, is_dns1123_label
from reconciler.model.imagepolicy import NONE as NO_POLICY, ImagePolicy, parse_policy
from reconciler.model.lock import LOCK_FILENAME, Lockfile
from reconciler.model import direct
from reconciler.model.provisioner import (
    API_VERSIONS as PROVISIONER_API_VERSIONS, BUILTIN_CLASSES, DEFAULT_CLASS, ProvisionerClass,
    parse_provisioner_class,
)
from reconciler.report.words import counted

SETTINGS_FILE = "reconciler.yaml"
CATALOGS_DIR = "catalogs"
BUNDLES_DIR = "bundles"
APPROVALS_DIR = "approvals"
MAX_TREE_DEPTH = 64   # directory levels of a working tree or a fetched one; real repositories stay under 15
POLICIES_DIR = "policies"
CLUSTERS_DIR = "clusters"
_NOT_DECLARATIONS = (CATALOGS_DIR, BUNDLES_DIR, APPROVALS_DIR, POLICIES_DIR, CLUSTERS_DIR)
@dataclass(frozen=True)
class CatalogSettings:
    """Per-catalog settings: ``priority`` orders candidates; ``upgradeGraph: semver`` makes every newer
    version of the same major (minor for 0.x) an upgrade of an installed bundle, as a package whose
    graph is semver-based expects, instead of following replaces/skips/skipRange edges one hop."""

    priority: int = 0
    upgrade_graph: str = "replaces"
    image: str | None = None       # a catalog image instead of catalogs/<name>/
    # what the catalog image's digest must be signed by (``verify``), and every bundle image the catalog lists
    # (``verifyBundles``): keys kept in the repository, certificate identities, attestations (model/imagepolicy.py)
    verify: ImagePolicy = NO_POLICY
    verify_bundles: ImagePolicy = NO_POLICY
    packages: tuple[str, ...] = ()   # of a catalog image: only these packages are unpacked and read


@dataclass(frozen=True)
class Settings:
    """``reconciler.yaml``. Every field is optional."""

    default_install_namespace: str = "operators"
    allow_empty: bool = False
    kubernetes_version: str | None = None
    openshift_version: str | None = None   # the OpenShift release checked against bundles' olm.maxOpenShiftVersion
    ignore: tuple[str, ...] = ()
    catalogs: dict[str, CatalogSettings] = field(default_factory=dict)
    provisioner_class: str = DEFAULT_CLASS    # the approval policy of Operators that name none
    installer_namespace: str = "reconciler-system"   # where each Operator's installer ServiceAccount lives
    instance: str = DEFAULT_INSTANCE   # which reconciler instance owns what this repository installs
    repository: str | None = None      # this repository's identity, when its address cannot be detected (identity.py)
    stages: tuple[str, ...] = ()       # a fleet's stages, in the order a bundle is promoted through them
    ignore_differences: tuple = ()     # model.fieldrules.IgnoreRule: fields left to their owners, every Operator
    create_only: tuple = ()            # model.fieldrules.ObjectSelector: objects created once, never overwritten
    take_over_managers: tuple[str, ...] = ()   # client-side managers whose fields are taken over, beyond the defaults
    mirrors: tuple = ()                # oci.mirrors.MirrorRule: where images are pulled from instead (docs/catalogs.md)


@dataclass(frozen=True)
class RepoSnapshot:
    root: Path
    revision: str | None
    settings: Settings
    operators: tuple[OperatorDecl, ...]
    catalog_dirs: dict[str, Path]
    lock: Lockfile | None
    input_classes: dict[str, InputClass] = field(default_factory=lambda: dict(BUILTIN_INPUT_CLASSES))
    provisioner_classes: dict[str, ProvisionerClass] = field(default_factory=lambda: dict(BUILTIN_CLASSES))
    bundles: dict = field(default_factory=dict)     # RukPak Bundles by name (model.direct.BundleDecl)
    approvals: dict = field(default_factory=dict)   # Operator name -> model.approvals.ApprovalRecord
    # The approvals as committed at HEAD, in a git working tree (None elsewhere: a fetched commit's tree is
    # committed by construction, a tree outside git has no commits): what a real apply counts.
    committed_approvals: dict | None = None
    identity: str = ""              # the repository's identity, recorded on what it installs (identity.py)
    git_dir: Path | None = None     # where its commits can be looked up (a recorded revision's provenance)
    clusters: dict = field(default_factory=dict)   # a fleet's clusters by name (model.fleet.ClusterDecl)
    cluster: Any = None             # the cluster this view is of (``select_cluster``), in a fleet repository
    lock_file: str = LOCK_FILENAME  # the lockfile, relative to the root
    operator_stages: dict = field(default_factory=dict)   # a fleet's Operators -> the stages they are placed on

    @property
    def lock_path(self) -> Path:
        return self.root / self.lock_file

    @property
    def is_fleet(self) -> bool:
        return bool(self.clusters)


def read_repository(root: str | os.PathLike[str]) -> RepoSnapshot:
    """Read a repository's working tree. Raises InputError naming the first bad file."""
    top = Path(root).resolve()
    if not top.is_dir():
        raise InputError("repository directory does not exist", path=str(root))
    check_links(top)
    for reserved in _NOT_DECLARATIONS:   # a file in place of one would read as "nothing there"
        if os.path.lexists(top / reserved) and not (top / reserved).is_dir():
            raise InputError("not a directory", path=reserved,
                             hint=f"{reserved}/ is a directory of the repository layout (see the README); "
                                  f"move the file into it or rename it")
    settings = read_settings(top)
    lock = None
    if os.path.lexists(top / LOCK_FILENAME):
        lock = Lockfile.parse(yamlio.read_text(top / LOCK_FILENAME, LOCK_FILENAME), LOCK_FILENAME)
    operators, classes, provisioners, bundles = _read_declarations(top, settings)
    clusters = _read_clusters(top, settings)
    _check_overrides(operators, provisioners)
    from reconciler.repo import identity

    return RepoSnapshot(root=top, revision=git_revision(top), settings=settings,
                        operators=operators, catalog_dirs=_catalog_dirs(top), lock=lock, input_classes=classes,
                        provisioner_classes=provisioners, bundles=bundles, approvals=read_records(top),
                        committed_approvals=committed_records(top),
                        identity=settings.repository or identity.detect(top), git_dir=identity.git_dir(top),
                        clusters=clusters)


def read_settings(top: Path) -> Settings:
    path = top / SETTINGS_FILE
    if not os.path.lexists(path):
        return Settings()
    docs = yamlio.load_all(yamlio.read_text(path, SETTINGS_FILE), SETTINGS_FILE, strict=True)
    if not docs:   # empty, or only comments: every setting at its default, as when the file is absent
        return Settings()
    if len(docs) > 1:
        raise InputError(f"expected one YAML document (the settings), found {len(docs)}", path=SETTINGS_FILE,
                         hint="put every setting in one mapping")
    doc: Any = docs[0]
    if not isinstance(doc, dict):
        raise InputError("settings must be a mapping", path=SETTINGS_FILE)
    known = {"defaultInstallNamespace", "allowEmpty", "ignore", "catalogs", "kubernetesVersion", "openshiftVersion",
             "provisionerClassName", "installerNamespace", "instance", "repository", "stages",
             "ignoreDifferences", "createOnly", "takeOverManagers", "mirrors"}
    unknown = sorted(set(doc) - known, key=str)   # keys need not be strings
    if unknown:
        raise InputError(f"unknown setting {unknown[0]!r}", path=SETTINGS_FILE,
                         hint=f"known settings: {', '.join(sorted(known))}")
    ns = doc.get("defaultInstallNamespace", "operators")
    if not isinstance(ns, str) or not is_dns1123_label(ns):
        raise InputError(f"defaultInstallNamespace {ns!r} is not a valid namespace name", path=SETTINGS_FILE)
    allow_empty = doc.get("allowEmpty", False)
    if not isinstance(allow_empty, bool):
        raise InputError("allowEmpty must be true or false", path=SETTINGS_FILE)
    ignore = doc.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(g, str) for g in ignore):
        raise InputError("ignore must be a list of glob patterns", path=SETTINGS_FILE)
    catalogs: dict[str, CatalogSettings] = {}
    raw_catalogs = doc.get("catalogs") or {}
    if not isinstance(raw_catalogs, dict):
        raise InputError("catalogs must be a mapping of catalog name to settings", path=SETTINGS_FILE,
                         hint="for example: catalogs: {community: {priority: 10}}")
    for name, cfg in raw_catalogs.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"catalogs: the catalog name {name!r} must be a string", path=SETTINGS_FILE)
        cfg = cfg or {}
        if not isinstance(cfg, dict) or set(cfg) - {"priority", "upgradeGraph", "image", "verify", "verifyBundles",
                                                    "packages"}:
            raise InputError(f"catalogs.{name} must be a mapping such as {{priority: 10}}", path=SETTINGS_FILE,
                             hint="catalog settings are 'priority', 'upgradeGraph', 'image', 'packages', 'verify' "
                                  "and 'verifyBundles'")
        image = cfg.get("image")
        if image is not None and (not isinstance(image, str) or not image):
            raise InputError(f"catalogs.{name}.image must be an image reference", path=SETTINGS_FILE)
        prio = cfg.get("priority", 0)
        if not isinstance(prio, int) or isinstance(prio, bool):
            raise InputError(f"catalogs.{name}.priority must be an integer", path=SETTINGS_FILE)
        graph = cfg.get("upgradeGraph", "replaces")
        if graph not in ("replaces", "semver"):
            raise InputError(f"catalogs.{name}.upgradeGraph must be 'replaces' or 'semver', not {graph!r}",
                             path=SETTINGS_FILE)
        verify = {field_: parse_policy(cfg.get(field_), f"catalogs.{name}.{field_}")
                  for field_ in ("verify", "verifyBundles")}
        if verify["verify"] and image is None:
            raise InputError(f"catalogs.{name}.verify applies to a catalog image, and the catalog has no 'image'",
                             path=SETTINGS_FILE, hint="a catalog directory is verified with the commit that holds "
                                                      "it (--trusted-keys); verifyBundles still applies to it")
        packages = cfg.get("packages")
        if packages is not None and (image is None or not isinstance(packages, list) or not packages
                                     or not all(isinstance(p, str) and is_dns1123_label(p) for p in packages)):
            raise InputError(f"catalogs.{name}.packages must list package names of the catalog image", path=SETTINGS_FILE,
                             hint="for example: {image: registry.example.com/index@sha256:..., packages: [plumbus]}; "
                                  "a catalog directory holds only what it holds")
        catalogs[name] = CatalogSettings(priority=prio, upgrade_graph=graph, image=image, verify=verify["verify"],
                                         verify_bundles=verify["verifyBundles"], packages=tuple(packages or ()))
    kube_version = doc.get("kubernetesVersion")
    if kube_version is not None:
        try:
            parse_version(str(kube_version))
        except InputError as exc:
            raise InputError(f"kubernetesVersion: {exc.message}", path=SETTINGS_FILE) from None
    openshift = doc.get("openshiftVersion")
    if openshift is not None and not (isinstance(openshift, str) and re.fullmatch(r"v?\d+\.\d+(\.\d+)?", openshift)):
        raise InputError(f"openshiftVersion must be an OpenShift release such as \"4.16\" (a string), not "
                         f"{openshift!r}", path=SETTINGS_FILE, hint='quote it: openshiftVersion: "4.16"')
    provisioner_class = doc.get("provisionerClassName", DEFAULT_CLASS)
    if not isinstance(provisioner_class, str) or not provisioner_class:
        raise InputError("provisionerClassName must name a ProvisionerClass", path=SETTINGS_FILE,
                         hint="olm.resolveset (Android), olm.bundle (UserPermission), or one you declare")
    installer_ns = doc.get("installerNamespace", "reconciler-system")
    if not isinstance(installer_ns, str) or not is_dns1123_label(installer_ns):
        raise InputError("installerNamespace must be a namespace name", path=SETTINGS_FILE)
    instance = doc.get("instance", DEFAULT_INSTANCE)
    if not isinstance(instance, str) or not is_dns1123_label(instance) or len(instance) > 40:
        raise InputError(f"instance {instance!r} must be a name of lowercase letters, digits and '-' "
                         f"(at most 40 characters)", path=SETTINGS_FILE,
                         hint="each repository reconciled into one cluster needs its own instance name, "
                              "e.g. instance: team-a")
    repository = doc.get("repository")
    if repository is not None:
        from reconciler.repo.identity import MAX_LENGTH, from_setting

        if not isinstance(repository, str) or not repository.strip() or len(repository) > MAX_LENGTH \
                or not repository.isprintable():
            raise InputError("repository must be this repository's address, e.g. github.com/org/platform-config",
                             path=SETTINGS_FILE,
                             hint="it identifies the repository on the Operators it installs (docs/ownership.md)")
        repository = from_setting(repository)
    stages = doc.get("stages") or []
    if not isinstance(stages, list) or not all(isinstance(x, str) and is_dns1123_label(x) for x in stages) \
            or len(set(stages)) != len(stages):
        raise InputError("stages must be a list of distinct stage names, in the order bundles are promoted",
                         path=SETTINGS_FILE, hint="for example: stages: [dev, staging, prod]")
    from reconciler.model.fieldrules import parse_create_only, parse_ignore_rules

    ignore_rules = parse_ignore_rules(doc.get("ignoreDifferences"), "ignoreDifferences", SETTINGS_FILE)
    create_only = parse_create_only(doc.get("createOnly"), "createOnly", SETTINGS_FILE)
    take_over = doc.get("takeOverManagers") or []
    if not isinstance(take_over, list) or not all(isinstance(m, str) and m for m in take_over):
        raise InputError("takeOverManagers must be a list of field manager names", path=SETTINGS_FILE,
                         hint="managers whose client-side writes the reconciler takes over, e.g. [my-old-tool]")
    from reconciler.oci.mirrors import parse_settings

    mirrors = parse_settings(doc.get("mirrors"), SETTINGS_FILE)
    return Settings(default_install_namespace=ns, allow_empty=allow_empty, ignore=tuple(ignore), mirrors=mirrors,
                    catalogs=catalogs, kubernetes_version=str(kube_version) if kube_version else None,
                    openshift_version=openshift,
                    provisioner_class=provisioner_class, installer_namespace=installer_ns, instance=instance,
                    repository=repository, stages=tuple(stages), ignore_differences=ignore_rules,
                    create_only=create_only, take_over_managers=tuple(take_over))


def _read_clusters(top: Path, settings: Settings) -> dict[str, Any]:
    """``clusters/<name>.yaml``: one ``Cluster`` each, named as its file; ``clusters/<name>/`` holds its lockfile."""
    from reconciler.model.fleet import CLUSTER_API_VERSION, CLUSTER_KIND, parse_cluster

    base = top / CLUSTERS_DIR
    if not base.is_dir():
        return {}
    clusters: dict[str, Any] = {}
    for path in sorted(base.iterdir()):
        rel = f"{CLUSTERS_DIR}/{path.name}"
        if path.name.startswith(".") or path.is_dir():
            continue
        if not path.name.endswith((".yaml", ".yml")):
            raise InputError("not a Cluster declaration", path=rel,
                             hint=f"{CLUSTERS_DIR}/ holds <name>.yaml files declaring one Cluster each")
        docs = yamlio.read_all(path, rel, strict=True)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise DeclarationError(f"expected exactly one Cluster, found {counted(len(docs), 'document')}", path=rel)
        doc = docs[0]
        if doc.get("apiVersion") != CLUSTER_API_VERSION or doc.get("kind") != CLUSTER_KIND:
            raise DeclarationError(f"expected apiVersion {CLUSTER_API_VERSION} and kind {CLUSTER_KIND}, found "
                                   f"{doc.get('apiVersion')} {doc.get('kind')}", path=rel)
        cluster = parse_cluster(doc, rel)
        if cluster.name != path.name.rsplit(".", 1)[0]:
            raise DeclarationError(f"Cluster {cluster.name} is declared in {path.name}", path=rel,
                                   hint=f"name the file after the cluster: {CLUSTERS_DIR}/{cluster.name}.yaml "
                                        f"(its lockfile is {CLUSTERS_DIR}/{cluster.name}/{LOCK_FILENAME})")
        if cluster.name in clusters:
            raise DeclarationError(f"Cluster {cluster.name} is declared twice", path=rel,
                                   hint=f"the other declaration is {clusters[cluster.name].origin}")
        if cluster.stage is not None and cluster.stage not in settings.stages:
            raise DeclarationError(f"stage {cluster.stage!r} is not one of reconciler.yaml's stages "
                                   f"({', '.join(settings.stages) or 'none declared'})", path=rel,
                                   obj=f"Cluster {cluster.name}",
                                   hint=f"give spec.stage one of {', '.join(settings.stages)}, or add "
                                        f"{cluster.stage} to stages in reconciler.yaml" if settings.stages else
                                   "declare the stages in order, e.g. stages: [dev, staging, prod]")
        clusters[cluster.name] = cluster
    return clusters


def _check_overrides(operators: tuple[OperatorDecl, ...], provisioners: dict[str, ProvisionerClass]) -> None:
    for decl in operators:
        for o in decl.placement.overrides if decl.placement else ():
            if o.provisioner_class is not None and o.provisioner_class not in provisioners:
                raise DeclarationError(f"spec.placement.overrides: ProvisionerClass {o.provisioner_class!r} does "
                                       f"not exist", path=str(decl.origin), obj=f"{decl.kind} {decl.name}",
                                       hint=f"known classes: {', '.join(sorted(provisioners))}")


def _catalog_dirs(top: Path) -> dict[str, Path]:
    base = top / CATALOGS_DIR
    if not base.is_dir():
        return {}
    return {p.name: p for p in sorted(base.iterdir()) if p.is_dir() and not p.name.startswith(".")}


def _declaration_files(top: Path, settings: Settings) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = Path(dirpath).relative_to(top)
        # a nested repository (a submodule's checkout holds a .git file) is not part of this one: a fetched
        # tree skips submodules, so a working tree must not read declarations from them either
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not (rel_dir == Path(".") and d in _NOT_DECLARATIONS)
                             and not os.path.lexists(os.path.join(dirpath, d, ".git")))
        for name in sorted(filenames):
            if name.startswith(".") or not name.endswith((".yaml", ".yml")):
                continue
            rel = (rel_dir / name).as_posix()
            if rel == SETTINGS_FILE or any(fnmatch.fnmatch(rel, g) for g in settings.ignore):
                continue
            found.append(Path(dirpath) / name)
    return found


# Kinds the design documents show next to declarations, which have no meaning in a repository, and why.
_RBAC = ("the reconciler derives RBAC from approvals (each Operator's installer is bound to what was approved); "
         "who may install from a catalog is who may commit to the repository")
_NO_MEANING = {
    "Role": _RBAC, "ClusterRole": _RBAC, "RoleBinding": _RBAC, "ClusterRoleBinding": _RBAC,
    "ConfigMap": "file:// bundle content is a directory of the repository, not a ConfigMap",
    "CatalogSource": "a catalog is a directory under catalogs/ (or an image named in reconciler.yaml catalogs:)",
}

# The fields of an object the design documents print on their own (seed 001: status, spec.updates, conditions).
_OBJECT_PARTS = {"metadata", "spec", "status", "updates", "content", "conditions", "components", "parameters"}


def _read_declarations(top: Path, settings: Settings) -> tuple[
        tuple[OperatorDecl, ...], dict[str, InputClass], dict[str, ProvisionerClass], dict[str, direct.BundleDecl]]:
    operators: dict[str, OperatorDecl] = {}
    classes: dict[str, InputClass] = dict(BUILTIN_INPUT_CLASSES)
    provisioners: dict[str, ProvisionerClass] = dict(BUILTIN_CLASSES)
    declared_provisioners: set[str] = set()
    bundles: dict[str, direct.BundleDecl] = {}
    for path in _declaration_files(top, settings):
        rel = path.relative_to(top).as_posix()
        for index, doc in enumerate(yamlio.read_all(path, rel, strict=True)):
            origin = Origin(rel, index)
            if isinstance(doc, dict) and doc.get("kind") in direct.NO_API_VERSION and "apiVersion" not in doc:
                doc = dict(doc, apiVersion=None)   # seed 004 writes these without one
            _check_api_version(doc, origin)
            if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
                part = (", ".join(sorted(doc)) if isinstance(doc, dict) and doc and "kind" not in doc
                        and set(doc) <= _OBJECT_PARTS else "a list" if isinstance(doc, list) and doc else "")
                raise DeclarationError("not a declaration: every document needs apiVersion and kind",
                                       path=str(origin),
                                       hint=f"this is part of an object ({part}), not a whole "
                                            f"one: write the whole declaration with its apiVersion and kind; a "
                                            f"status is the cluster's to write, never declared" if part else
                                            f"move the file out of the repository or list it under "
                                            f"'ignore:' in {SETTINGS_FILE}")
            if not isinstance(doc["apiVersion"], (str, type(None))) or not isinstance(doc["kind"], str):
                raise DeclarationError("apiVersion and kind must be strings", path=str(origin))
            api_version, kind = doc["apiVersion"], doc["kind"]
            if kind == "InputClass" and api_version in INPUT_API_VERSIONS:
                cls = parse_input_class(doc, origin)
                _once(classes, set(classes) - set(BUILTIN_INPUT_CLASSES), cls.name, cls, kind, origin)
                continue
            if kind == "Bundle":
                bundle = direct.parse_bundle(doc, origin)
                _once(bundles, set(bundles), bundle.name, bundle, kind, origin)
                continue
            if kind == "ProvisionerClass":
                pcls = parse_provisioner_class(doc, str(origin))
                _once(provisioners, declared_provisioners, pcls.name, pcls, kind, origin)
                declared_provisioners.add(pcls.name)
                continue
            if kind == "Operator" and api_version in OPERATOR_API_VERSIONS:
                decls: tuple[OperatorDecl, ...] = (parse_operator(doc, origin),)
            elif kind == "Input" and api_version in INPUT_API_VERSIONS:
                decls = (parse_input(doc, origin),)
            elif kind == "Install":
                decls = direct.parse_install(doc, origin)
            elif kind == "Instance":
                decls = (direct.parse_instance(doc, origin),)
            elif kind in ("BundleDeployment", "BundleInstance"):
                decls = (direct.parse_bundle_deployment(doc, origin),)
            elif kind in _NO_MEANING:
                raise DeclarationError(f"{api_version} {kind} is not a declaration here: {_NO_MEANING[kind]}",
                                       path=str(origin), hint=f"remove it, or list the file under 'ignore:' in "
                                                              f"{SETTINGS_FILE} (docs/declarations.md)")
            else:
                raise DeclarationError(f"unknown declaration {api_version} {kind}", path=str(origin),
                                       hint=f"supported: Operator ({', '.join(OPERATOR_API_VERSIONS)}), "
                                            f"Input and InputClass ({', '.join(INPUT_API_VERSIONS)}), "
                                            f"ProvisionerClass ({', '.join(PROVISIONER_API_VERSIONS)}), "
                                            f"Install ({direct.INSTALL_API_VERSION}), Bundle, Instance, "
                                            f"BundleDeployment ({', '.join(direct.RUKPAK_API_VERSIONS)}); "
                                            f"list other files under 'ignore:' in {SETTINGS_FILE}")
            for decl in decls:
                if decl.name in operators:
                    other = operators[decl.name]
                    raise DeclarationError(f"{decl.kind} {decl.name} is declared twice", path=str(origin),
                                           hint=f"{other.kind} {other.name} is also declared in {other.origin}; "
                                                f"Operators, Inputs, Installs, Instances and BundleDeployments "
                                                f"share one namespace of names")
                operators[decl.name] = decl
    operators = {name: direct.refer(d, bundles) if d.kind == "Instance" else d for name, d in operators.items()}
    for bundle in bundles.values():
        if bundle.source.bundle_class not in provisioners:
            raise DeclarationError(f"class {bundle.source.bundle_class!r} names no ProvisionerClass",
                                   path=str(bundle.origin), obj=f"Bundle {bundle.name}",
                                   hint=f"known classes: {', '.join(sorted(provisioners))}")
    for decl in operators.values():
        if decl.input_class not in classes:
            raise DeclarationError(f"input class {decl.input_class!r} does not exist", path=str(decl.origin),
                                   obj=f"{decl.kind} {decl.name}",
                                   hint=f"known classes: {', '.join(sorted(classes))}")
    for decl in operators.values():
        wanted = decl.provisioner_class
        if wanted is not None and wanted not in provisioners:
            raise DeclarationError(f"ProvisionerClass {wanted!r} does not exist", path=str(decl.origin),
                                   obj=f"{decl.kind} {decl.name}",
                                   hint=f"known classes: {', '.join(sorted(provisioners))}")
    if settings.provisioner_class not in provisioners:
        raise DeclarationError(f"provisionerClassName {settings.provisioner_class!r} names no ProvisionerClass",
                               path=SETTINGS_FILE, hint=f"known classes: {', '.join(sorted(provisioners))}")
    return tuple(operators[n] for n in sorted(operators)), classes, provisioners, bundles


def _once(table: dict[str, Any], declared: set[str], name: str, item: Any, kind: str, origin: Origin) -> None:
    """Add a named declaration to ``table``; one already ``declared`` under that name is an error."""
    if name in declared:
        raise DeclarationError(f"{kind} {name} is declared twice", path=str(origin),
                               hint=f"the other declaration is in {table[name].origin}")
    table[name] = item


def _check_api_version(doc: Any, origin: Origin) -> None:
    """The apiVersions the kinds of the design documents are written with (None: written without one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return
    kind, api_version = doc["kind"], doc.get("apiVersion")
    allowed = PROVISIONER_API_VERSIONS if kind == "ProvisionerClass" else direct.KINDS.get(kind)
    if allowed is None or api_version in allowed or (api_version is None and kind in direct.NO_API_VERSION):
        return
    raise DeclarationError(f"{kind} needs apiVersion {' or '.join(allowed)}"
                           + (f", not {api_version}" if api_version else ""), path=str(origin))


def check_links(top: Path) -> None:
    """Refuse a symbolic link anywhere in the working tree that leads out of it or to nothing.

    Links are found from directory entries without following them (no stat
    per file), so this costs one directory listing per directory; ``.git`` is
    not the working tree and is skipped.
    """
    pending = [(top, 0)]
    while pending:
        here, depth = pending.pop()
        if depth > MAX_TREE_DEPTH:   # what reads the tree recurses per level (os.walk), and no layout needs it
            raise InputError(f"directories nest more than {MAX_TREE_DEPTH} levels deep",
                             path="/".join(_rel(top, Path(here)).split("/")[:4]) + "/...",
                             hint=f"flatten the directories; the reconciler reads at most {MAX_TREE_DEPTH} levels")
        try:
            entries = list(os.scandir(here))
        except OSError as exc:
            raise InputError(f"cannot list directory: {exc.strerror}", path=_rel(top, Path(here))) from None
        for e in entries:
            if here == top and e.name == ".git":
                continue
            if e.is_symlink():
                rel = _rel(top, Path(e.path))
                try:
                    target = Path(e.path).resolve(strict=False)
                except (RuntimeError, OSError):  # a loop of links: Python 3.12 raises RuntimeError, 3.13 OSError
                    raise InputError(f"symbolic link is part of a loop of links: {os.readlink(e.path)}", path=rel,
                                     hint="replace the link with the file it should point to") from None
                if target != top and top not in target.parents:
                    raise InputError(f"symbolic link points outside the repository: {os.readlink(e.path)}",
                                     path=rel, hint="replace the link with the file it points to; the "
                                                    "reconciler reads nothing outside the repository")
                try:
                    exists = target.exists()
                except OSError:  # ELOOP
                    exists = False
                if not exists:
                    raise InputError(f"symbolic link points to nothing: {os.readlink(e.path)}", path=rel,
                                     hint="remove the link or restore what it points to")
                if target.is_dir() and (target == Path(here).resolve() or target in Path(e.path).parents
                                        or target in Path(here).resolve().parents):
                    raise InputError(f"symbolic link points to a directory that contains it: {os.readlink(e.path)}",
                                     path=rel, hint="a link to its own directory makes the tree endless; "
                                                    "remove it or link a sibling directory instead")
            elif e.is_dir(follow_symlinks=False):
                pending.append((Path(e.path), depth + 1))


def _rel(top: Path, path: Path) -> str:
    try:
        return path.relative_to(top).as_posix()
    except ValueError:
        return str(path)


def read_records(root: Path) -> dict:
    """The approval records of the working tree's ``approvals/`` (``model/approvals.py``)."""
    from reconciler.model.approvals import APPROVALS_DIR, is_record_file, records_from

    base = root / APPROVALS_DIR
    if not base.is_dir():
        return {}
    rels = [f"{APPROVALS_DIR}/{path.name}" for path in sorted(base.iterdir()) if is_record_file(path.name)]
    return records_from((rel, yamlio.read_text(root / rel, rel)) for rel in rels)


def committed_records(top: Path) -> dict | None:
    """The approval records of ``top``'s ``approvals/`` as committed at HEAD; None when ``top`` is not in a git
    working tree. Read from the object database as the working tree's files are read (regular files only,
    bounded, UTF-8), so an uncommitted edit, added or deleted file counts for nothing here."""
    from reconciler.repo.identity import maybe_in_git

    if not maybe_in_git(top):
        return None
    import pygit2

    from reconciler.model.approvals import is_record_file, records_from

    try:
        found = pygit2.discover_repository(str(top))
        repo = pygit2.Repository(found) if found else None
    except pygit2.GitError:
        return None
    if repo is None or repo.is_bare or not repo.workdir:
        return None
    workdir = Path(repo.workdir).resolve()
    if top != workdir and workdir not in top.parents:
        return None
    if repo.head_is_unborn:
        return {}
    rel = top.relative_to(workdir).as_posix()
    folder = APPROVALS_DIR if rel == "." else f"{rel}/{APPROVALS_DIR}"
    try:
        tree = repo.head.peel(pygit2.Commit).tree[folder]
    except KeyError:
        return {}
    if not isinstance(tree, pygit2.Tree):
        return {}
    files = []
    for entry in sorted(tree, key=lambda e: e.name):
        if not isinstance(entry, pygit2.Blob) or entry.filemode not in (pygit2.enums.FileMode.BLOB,
                                                                        pygit2.enums.FileMode.BLOB_EXECUTABLE):
            continue
        if not is_record_file(entry.name):
            continue
        name = f"{APPROVALS_DIR}/{entry.name}"
        if entry.size > yamlio.MAX_FILE_BYTES:
            raise InputError(f"file is over the {yamlio.MAX_FILE_BYTES}-byte limit (as committed)", path=name)
        try:
            files.append((name, entry.data.decode("utf-8")))
        except UnicodeDecodeError:
            raise InputError("file is not UTF-8 text (as committed)", path=name) from None
    return records_from(files)


def git_revision(path: Path) -> str | None:
    """The HEAD commit of the git repository containing ``path``, with ``-dirty`` when it has changes."""
    from reconciler.repo.identity import maybe_in_git

    if not maybe_in_git(path):
        return None
    import pygit2

    try:
        found = pygit2.discover_repository(str(path))
        if not found:
            return None
        repo = pygit2.Repository(found)
        if repo.head_is_unborn:
            return None
        commit = str(repo.head.target)
    except pygit2.GitError:
        return None
    workdir = Path(repo.workdir).resolve() if repo.workdir else None
    prefix = path.relative_to(workdir).as_posix() if workdir and path != workdir else ""
    ignored = pygit2.enums.FileStatus.IGNORED
    dirty = any(not (flags & ignored) and (not prefix or p.startswith(prefix + "/"))
                and not p.endswith(LOCK_FILENAME)
                for p, flags in repo.status().items())
    return commit + ("-dirty" if dirty else "")
