"""The resolver: declarations + catalogs + what is installed -> the exact bundles to install.

Reads catalog metadata only; never bundle content. ``SatResolver`` encodes
the problem for python-sat (``sat.py``) with deppy's semantics and preference
(``universe.py``): it picks a bundle for every Operator and Input, adds the
bundles their dependencies need, explains an unsatisfiable problem as a
minimal set of conflicting facts, and lists the updates an Operator could
take only by changing its declaration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Protocol

import semver

from reconciler.errors import InputError, ResolutionError
from reconciler.model.catalog import SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE, Catalog
from reconciler.model.constraints import (
    AllOf, CatalogIs, ChannelIs, Located, NameIs, PackageIs, Predicate, VersionIn, parse_constraint,
)
from reconciler.model.declarations import (
    BUILTIN_INPUT_CLASSES, InputClass, InstallSettings, OperatorDecl, class_range,
)
from reconciler.model.lock import LockEntry
from reconciler.model.semver_range import VersionRange, order_key, parse_version
from reconciler.resolve.sat import Hold, Problem, Requirement
from reconciler.resolve.universe import Candidate, Universe, heirs, own_order, successors
from reconciler.report.words import counted

__all__ = ["Deprecation", "Resolution", "ResolutionRequest", "Resolver", "SatResolver", "Selection", "Unsatisfiable",
           "Update", "UNSATISFIABLE"]

UNSATISFIABLE = "the declarations cannot all be satisfied"


class Unsatisfiable(ResolutionError):
    """No choice of bundles satisfies every declaration; ``facts`` is a minimal conflicting set."""

    def __init__(self, facts: list[str]) -> None:
        self.facts = facts
        super().__init__(UNSATISFIABLE + ":\n  - " + "\n  - ".join(facts),
                         hint="change one of the declarations or catalogs above so these facts no longer conflict")


@dataclass(frozen=True)
class Selection:
    """A bundle to install, who it is installed for, and why."""

    owner: str
    kind: str                         # Operator, Input or Dependency
    origin: str                       # the declaration's file, or "dependency of ..."
    bundle_name: str
    image: str
    package: str = ""
    version: str = ""
    catalog: str = ""
    channel: str = ""
    install: InstallSettings = InstallSettings()
    required_by: tuple[str, ...] = ()
    apply: bool = True
    reasons: tuple[str, ...] = ()
    dependencies: tuple[tuple[str, str], ...] = ()   # (what is needed, bundle that satisfies it)
    satisfies: tuple[tuple[str, str], ...] = ()      # (bundle that needs this one, what it needs)
    declaration: OperatorDecl | None = None
    listed_in: str = ""               # the catalog file that lists the bundle ("" for spec.bundle)


@dataclass(frozen=True)
class Update:
    """Newer bundles an Operator could reach only by changing its declaration."""

    operator: str
    catalog: str
    package: str
    channel: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Deprecation:
    """A catalog deprecates the package, the channel or the bundle chosen for an owner."""

    operator: str
    scope: str            # package, channel or bundle
    name: str
    message: str


@dataclass(frozen=True)
class Resolution:
    selections: tuple[Selection, ...]
    updates: tuple[Update, ...] = ()
    kube_version: str | None = None
    deprecations: tuple[Deprecation, ...] = ()

    def for_owner(self, owner: str) -> Selection | None:
        return next((s for s in self.selections if s.owner == owner), None)


@dataclass(frozen=True)
class ResolutionRequest:
    declarations: tuple[OperatorDecl, ...]
    catalogs: Mapping[str, Catalog]
    installed: Mapping[str, LockEntry] = field(default_factory=dict)   # owner -> what is installed
    classes: Mapping[str, InputClass] = field(default_factory=lambda: dict(BUILTIN_INPUT_CLASSES))
    kube_version: str | None = None
    semver_catalogs: frozenset[str] = frozenset()   # catalogs whose upgrade graph is semver-ordered
    pins: Mapping[str, LockEntry] = field(default_factory=dict)   # owner -> locked bundle, preferred first
    installed_from: str = ""   # where ``installed`` comes from when not the cluster, e.g. "olm.lock"
    holds: Mapping[str, frozenset[str]] = field(default_factory=dict)   # package -> the only bundles allowed


class Resolver(Protocol):
    def resolve(self, request: ResolutionRequest) -> Resolution: ...


class SatResolver:
    universe: Universe | None = None   # the last resolution's: which packages it looked at (the closure)

    def resolve(self, request: ResolutionRequest) -> Resolution:
        request = replace(request, declarations=tuple(_entrypoint_package(d, request.catalogs)
                                                      for d in request.declarations))
        _check_packages_unique(request.declarations)
        universe = self.universe = Universe(request.catalogs, request.holds)
        current = _kube(request.kube_version)
        direct = [d for d in request.declarations if d.bundle is not None]
        resolved = [d for d in request.declarations if d.bundle is None]
        for d in resolved:
            _check_class(request.classes[d.input_class], d, current)
        now = [d for d in resolved if not request.classes[d.input_class].next_kube_minor]
        later = [d for d in resolved if request.classes[d.input_class].next_kube_minor]
        selections = [_direct(d, request.classes.get(d.input_class)) for d in direct]
        updates: list[Update] = []
        sel, upd = _solve(universe, request, resolved, current, keep=now)
        selections += sel
        updates += upd
        if later:
            nxt = current.bump_minor() if current else None
            sel, upd = _solve(universe, request, resolved, nxt, keep=later)
            selections += [s for s in sel if s.kind != "Dependency"]
            updates += upd
        selections.sort(key=lambda s: s.owner)
        return Resolution(tuple(selections),
                          tuple(sorted(updates, key=lambda u: (u.operator, u.catalog, u.channel))),
                          str(current) if current else None, deprecations(selections, request.catalogs))


def deprecations(selections: list[Selection], catalogs: Mapping[str, Catalog]) -> tuple[Deprecation, ...]:
    """What the catalogs deprecate among the chosen packages, followed channels and bundles."""
    out = []
    for sel in selections:
        cat = catalogs.get(sel.catalog) if sel.catalog else None
        if cat is None:
            continue
        for scope, schema, name in (("package", SCHEMA_PACKAGE, sel.package), ("channel", SCHEMA_CHANNEL, sel.channel),
                                    ("bundle", SCHEMA_BUNDLE, sel.bundle_name)):
            message = cat.deprecation(sel.package, schema, name) if name else None
            if message is not None:
                out.append(Deprecation(sel.owner, scope, name, message))
    return tuple(out)


def _kube(text: str | None) -> semver.Version | None:
    if not text:
        return None
    v = parse_version(text.split("+")[0] if text.startswith("v") else text)
    return semver.Version(v.major, v.minor, v.patch)


def _entrypoint_package(d: OperatorDecl, catalogs: Mapping[str, Catalog]) -> OperatorDecl:
    """A v2alpha1 entrypoint written without its package (seed 001) gets the package its catalog lists it in."""
    if d.catalog is None or d.catalog.package or not d.entrypoint:
        return d
    where, obj = str(d.origin), f"{d.kind} {d.name}"
    catalog = catalogs.get(d.catalog.name)
    if catalog is None:
        raise ResolutionError(f"catalog {d.catalog.name!r} not found", path=where, obj=obj,
                              hint=f"catalogs in this repository: {_names(catalogs)}")
    packages = sorted(p for p, (_, bundles) in catalog.contents.members.items() if d.entrypoint in bundles)
    if len(packages) != 1:
        raise ResolutionError(f"entrypoint {d.entrypoint!r} is " + (
            f"a bundle of {counted(len(packages), 'package')} of catalog {d.catalog.name!r}: {', '.join(packages)}" if packages
            else f"no bundle of catalog {d.catalog.name!r}"), path=where, obj=obj,
            hint="name the package too (spec.updates.catalogSource.package)" if packages else
            "name a bundle the catalog lists (`reconciler catalog list bundles`)")
    return replace(d, catalog=replace(d.catalog, package=packages[0]))


def _check_packages_unique(decls: tuple[OperatorDecl, ...]) -> None:
    seen: dict[str, OperatorDecl] = {}
    for d in decls:
        if d.package is None:
            continue
        if d.package in seen:
            other = seen[d.package]
            raise ResolutionError(
                f"package {d.package!r} is declared by both {other.kind} {other.name} ({other.origin}) and "
                f"{d.kind} {d.name} ({d.origin}); a package is installed at most once per cluster",
                path=str(d.origin), obj=f"{d.kind} {d.name}", hint="keep one declaration per package")
        seen[d.package] = d


def _check_class(cls: InputClass, d: OperatorDecl, kube: semver.Version | None) -> None:
    for c in cls.constraints:
        if c.type == "minKubeVersion" and kube is not None:
            assumed = kube.bump_minor() if cls.next_kube_minor else kube
            if not class_range(c).contains(assumed):
                raise ResolutionError(f"input class {cls.name} requires Kubernetes {c.value}, but the cluster "
                                      f"runs {assumed}", path=str(d.origin), obj=f"{d.kind} {d.name}",
                                      hint="choose another inputClass")


def _direct(d: OperatorDecl, cls: InputClass | None) -> Selection:
    """A bundle named by the declaration; a dry-run class reports it without applying it."""
    assert d.bundle is not None
    return Selection(owner=d.name, kind=d.kind, origin=str(d.origin), bundle_name=d.bundle.name,
                     image=d.bundle.refs[0], install=d.install, declaration=d,
                     apply=not (cls is not None and cls.dry_run),
                     reasons=("installed directly from spec.bundle, without a catalog",))


def _predicate(d: OperatorDecl, catalogs: Mapping[str, Catalog], installed: LockEntry | None) -> Predicate:
    parts: list[Predicate] = []
    where, obj = str(d.origin), f"{d.kind} {d.name}"
    if d.catalog is not None:
        sel = d.catalog
        catalog = catalogs.get(sel.name)
        if catalog is None:
            raise ResolutionError(f"catalog {sel.name!r} not found", path=where, obj=obj,
                                  hint=f"catalogs in this repository: {_names(catalogs)} "
                                       f"(each is a directory under catalogs/)")
        package = catalog.packages.get(sel.package)
        if package is None:
            raise ResolutionError(f"package {sel.package!r} not found in catalog {sel.name!r}", path=where,
                                  obj=obj, hint=f"packages in {sel.name}: {_names(catalog.packages)}")
        channel = sel.channel or package.default_channel
        if channel is None:
            raise ResolutionError(f"package {sel.package!r} has no default channel; set spec.catalog.channel",
                                  path=where, obj=obj)
        if (sel.package, channel) not in catalog.channels:
            raise ResolutionError(
                f"channel {channel!r} not found in package {sel.package!r} of catalog {sel.name!r}",
                path=where, obj=obj, hint=f"channels: {_names({c.name: c for c in catalog.channels_of(sel.package)})}")
        parts += [CatalogIs(sel.name), PackageIs(sel.package)]
        if d.follow_updates or sel.channel:   # an entrypoint alone is installed from whichever channel lists it
            parts.append(ChannelIs(channel))
    if d.version is not None:
        parts.append(VersionIn(d.version))
    if d.entrypoint and (installed is None or not d.follow_updates):
        parts.append(NameIs(d.entrypoint))
    for i, c in enumerate(d.constraints):
        try:
            parts.append(Located(parse_constraint(c.type, c.value, f"spec.constraints[{i}]"), where, obj))
        except InputError as exc:
            raise ResolutionError(exc.message, path=where, obj=obj, hint=exc.hint) from None
    return AllOf(tuple(parts))


def _nothing_matches(d: OperatorDecl, pred: Predicate, catalogs: Mapping[str, Catalog],
                     installed: LockEntry | None) -> ResolutionError:
    where, obj = str(d.origin), f"{d.kind} {d.name}"
    if d.catalog is None:
        return ResolutionError(f"no bundle in any catalog satisfies {pred.describe()}", path=where, obj=obj)
    catalog = catalogs[d.catalog.name]
    channel = d.catalog.channel or catalog.packages[d.catalog.package].default_channel
    wants = ([f"version {d.version}"] if d.version else []) + \
        ([f"entrypoint {d.entrypoint}"] if d.entrypoint and installed is None else []) + \
        [f"constraint {c.type}" for c in d.constraints]
    bundles = [catalog.bundles[(d.catalog.package, e.name)]
               for e in catalog.channels[(d.catalog.package, channel)].entries]
    newest = sorted(bundles, key=lambda b: order_key(b.version), reverse=True)
    have = ", ".join(f"{b.name} ({b.version})" for b in newest)
    return ResolutionError(f"no bundle in channel {channel!r} of package {d.catalog.package!r} satisfies "
                           f"{' and '.join(wants) or 'the declaration'}", path=where, obj=obj,
                           hint=f"the channel has: {have or 'no bundles'}")


def _min_kube_check(kube: semver.Version | None) -> Callable[[Candidate], str | None] | None:
    """Why a candidate cannot run on ``kube`` (its CSV's minKubeVersion), asked only of candidates in the problem.

    The CSV fields come from ``olm.csv.metadata`` or, in catalogs without it,
    from the CSV among the bundle's ``olm.bundle.object`` properties.
    """
    if kube is None:
        return None

    def check(cand: Candidate) -> str | None:
        mkv = cand.bundle.csv_fields.get("minKubeVersion")
        if not mkv:
            return None
        wanted = _at_least(str(mkv))
        if wanted is None or wanted.contains(kube):   # unparsable: a catalog finding, not a reason to exclude
            return None
        return f"needs Kubernetes {mkv} or newer (minKubeVersion), but the cluster runs {kube}"
    return check


@functools.lru_cache(maxsize=256)
def _at_least(mkv: str) -> VersionRange | None:
    """``>= mkv``, parsed once per distinct minKubeVersion (catalogs repeat a handful of them)."""
    try:
        return VersionRange.parse(f">={mkv.strip().lstrip('v')}")
    except InputError:
        return None


def _solve(universe: Universe, request: ResolutionRequest, decls: list[OperatorDecl],
           kube: semver.Version | None, keep: list[OperatorDecl]) -> tuple[list[Selection], list[Update]]:
    if not decls:
        return [], []
    reqs = []
    by_name = {d.name: d for d in decls}
    for d in decls:
        cls = request.classes[d.input_class]
        installed_entry = request.installed.get(d.name)
        pred = _predicate(d, request.catalogs, installed_entry)
        channel = (d.catalog.channel or None) if d.catalog else None
        cands = own_order(universe.matching(pred), channel, ranged=d.version is not None)
        if not cands:
            raise _nothing_matches(d, pred, request.catalogs, installed_entry)
        installed = _installed_candidate(universe, installed_entry, d.package)
        pinned = (_installed_candidate(universe, request.pins.get(d.name), d.package) if installed_entry is None
                  else None)
        if pinned is not None and pinned in cands:
            cands = [pinned] + [c for c in cands if c is not pinned]
        allowed = None
        installed_name = ""
        if installed is not None and not cls.force:
            semver_mode = installed.catalog in request.semver_catalogs
            allowed = {installed.key} | {s.key for s in successors(universe, installed, semver_mode)}
        elif installed_entry is not None and not cls.force and _same_package(installed_entry, d, universe):
            allowed = _heirs_of_gone(universe, request, installed_entry, d)
            installed_name = installed_entry.name
        reqs.append(Requirement(name=d.name, label=f"{d.kind} {d.name}",
                                text=f"{d.kind} {d.name} ({d.origin}) requires {pred.describe()}",
                                candidates=cands, allowed=allowed, installed=installed,
                                installed_name=installed_name, force=cls.force,
                                installed_from=request.installed_from,
                                minimal_version=cls.minimal_version))
    problem = Problem(universe, reqs, _min_kube_check(kube), _held_dependencies(universe, request))
    try:
        out = problem.solve()
    finally:
        problem.close()
    if out.conflict is not None:
        raise Unsatisfiable(out.conflict)
    keep_names = {d.name for d in keep}
    owner_of: dict[tuple[str, str, str], str] = {c.key: name for name, c in out.by_requirement.items()}
    selections: list[Selection] = []
    dependents: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    parents: dict[tuple[str, str, str], set[tuple[str, str, str]]] = {}
    for dep_key, needs in out.dependencies.items():
        for need, cand in needs:
            dependents.setdefault(cand.key, []).append((out.choices[dep_key].candidate.name, need))
            parents.setdefault(cand.key, set()).add(dep_key)
    # dependencies take the owner name of their package (or <package>-dependency if that is taken)
    for key, choice in sorted(out.choices.items()):
        if key not in owner_of:
            pkg = choice.candidate.package
            owner_of[key] = pkg if pkg not in by_name else f"{pkg}-dependency"
    for key, choice in sorted(out.choices.items()):
        cand, owner = choice.candidate, owner_of[key]
        decl = by_name.get(owner) if out.by_requirement.get(owner) is cand else None
        if decl is not None and decl.name not in keep_names:
            continue
        roots = sorted(_roots(key, parents, out.by_requirement, owner_of) - {owner})
        if decl is None and not (set(roots) & keep_names):
            continue
        cls = request.classes[decl.input_class] if decl else None
        first_root = by_name.get(roots[0]) if roots else None
        install = decl.install if decl else InstallSettings(
            namespace=first_root.install.namespace if first_root else None)
        channel = _channel_of(cand, decl)
        reasons = [f"satisfies: {b}" for b in choice.because]
        req = next((r for r in reqs if r.name == owner), None) if decl else None
        if req is not None:
            reasons.append("preference order (most preferred first): "
                           + ", ".join(_describe(c, req) for c in req.candidates[:6])
                           + (f", and {len(req.candidates) - 6} more" if len(req.candidates) > 6 else ""))
        reasons += [f"not {alt}: {'; '.join(why) or 'less preferred'}" for alt, why in choice.rejected]
        selections.append(Selection(
            owner=owner, kind=decl.kind if decl else "Dependency",
            origin=str(decl.origin) if decl else f"dependency of {', '.join(roots)}",
            bundle_name=cand.name, image=cand.bundle.image, package=cand.package, version=str(cand.version),
            listed_in=cand.bundle.source,
            catalog=cand.catalog, channel=channel, install=install, required_by=tuple(roots),
            apply=not (cls.dry_run if cls else any(request.classes[by_name[r].input_class].dry_run
                                                   for r in roots if r in by_name)),
            reasons=tuple(reasons), declaration=decl,
            dependencies=tuple((need, c.name) for need, c in out.dependencies.get(key, [])),
            satisfies=tuple(sorted(dependents.get(key, []))),
        ))
    updates = [u for name, cand in sorted(out.by_requirement.items()) if name in keep_names
               for u in _updates(universe, by_name[name], cand, reqs)]
    return selections, updates


def _describe(c: Candidate, req: Requirement) -> str:
    notes = []
    installed = f"locked in {req.installed_from}" if req.installed_from else "installed"   # the lock is all we know
    if req.installed is not None and c.key == req.installed.key:
        notes.append(installed)
    elif req.allowed is not None and c.key not in req.allowed:
        notes.append(f"not an upgrade edge from what is {installed}")
    if c.heads_of:
        notes.append(f"head of {', '.join(sorted(c.heads_of))}")
    if c.deprecated:
        notes.append("deprecated")
    return f"{c.name}" + (f" ({'; '.join(notes)})" if notes else "")


def _roots(key: tuple[str, str, str], parents: Mapping[tuple[str, str, str], set[tuple[str, str, str]]],
           by_requirement: Mapping[str, Candidate], owner_of: Mapping[tuple[str, str, str], str]) -> set[str]:
    """Every declaration whose choice pulled this bundle in, directly or through other dependencies."""
    declared = {c.key for c in by_requirement.values()}
    found: set[str] = set()
    seen = {key}
    todo = list(parents.get(key, ()))
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        if k in declared:
            found.add(owner_of[k])
        todo.extend(parents.get(k, ()))
    return found


def _channel_of(cand: Candidate, decl: OperatorDecl | None) -> str:
    wanted = decl.catalog.channel if decl and decl.catalog else None
    for name in (wanted, cand.default_channel):
        if name and name in cand.channels:
            return name
    return sorted(cand.channels)[0] if cand.channels else ""


def _installed_candidate(universe: Universe, entry: LockEntry | None, package: str | None) -> Candidate | None:
    if entry is None or (package and entry.package != package):
        return None
    for cand in universe.package(entry.package):
        if cand.name == entry.name and (not entry.catalog or cand.catalog == entry.catalog):
            return cand
    return None


def _held_dependencies(universe: Universe, request: ResolutionRequest) -> tuple[Hold, ...]:
    """Installed dependencies: each may stay, or move one upgrade edge, never jump to the newest.

    OLM v0 gives every dependency it installs a Subscription of its own,
    and a Subscription moves one edge at a time; so does a declared
    Operator here. An installed bundle whose owner is no declaration (a
    dependency, or an Operator whose declaration was removed while something
    still needs it) holds its package the same way, unless a declaration
    names that package (it then follows the declaration).
    """
    declared = {d.name for d in request.declarations}
    declared_packages = {d.package for d in request.declarations if d.package}
    holds = []
    for owner, entry in sorted(request.installed.items()):
        if owner in declared or not entry.package or entry.package in declared_packages:
            continue
        if not universe.package(entry.package):
            continue   # in no catalog: nothing of it can be chosen anyway
        installed = _installed_candidate(universe, entry, entry.package)
        if installed is not None:
            semver_mode = installed.catalog in request.semver_catalogs
            allowed = {installed.key} | {s.key for s in successors(universe, installed, semver_mode)}
        else:
            try:
                version = parse_version(entry.version) if entry.version else None
            except InputError:
                version = None
            allowed = {c.key for c in heirs(universe, entry.catalog, entry.package, entry.name, version,
                                            entry.catalog in request.semver_catalogs)}
        reachable = ", ".join(sorted(key[2] for key in allowed)) or "nothing (the catalog no longer has it)"
        holds.append(Hold(entry.package, frozenset(allowed),
                          f"dependency {owner} has {entry.name} installed, and a dependency follows the catalog's "
                          f"upgrade edges one hop at a time, as the Subscription OLM gives it would, which allow "
                          f"only: {reachable}"))
    return tuple(holds)


def _same_package(entry: LockEntry, d: OperatorDecl, universe: Universe) -> bool:
    """Whether what is installed is the declaration's package (and that package is in some catalog)."""
    return d.package is not None and entry.package == d.package and bool(universe.package(entry.package))


def _heirs_of_gone(universe: Universe, request: ResolutionRequest, entry: LockEntry,
                   d: OperatorDecl) -> set[tuple[str, str, str]]:
    """Upgrade edges from an installed bundle the catalog no longer has; an error naming it when none exist."""
    catalog = entry.catalog or (d.catalog.name if d.catalog else "")
    try:
        version = parse_version(entry.version) if entry.version else None
    except InputError:
        version = None
    found = heirs(universe, catalog, entry.package, entry.name, version, catalog in request.semver_catalogs)
    if not found:
        raise ResolutionError(
            f"the installed bundle {entry.name} (package {entry.package}, version {entry.version or 'unknown'}) "
            f"is no longer in catalog {catalog!r}, and no bundle there replaces, skips or has a skipRange "
            f"including it, so there is no upgrade edge from it",
            path=str(d.origin), obj=f"{d.kind} {d.name}",
            hint="restore the bundle in the catalog, add an upgrade edge from it, or set inputClass: force "
                 "to move to what the declaration selects")
    return {c.key for c in found}


def _updates(universe: Universe, d: OperatorDecl, chosen: Candidate, reqs: list[Requirement]) -> list[Update]:
    req = next(r for r in reqs if r.name == d.name)
    reachable = {c.key for c in req.candidates}
    newer: dict[tuple[str, str], list[Candidate]] = {}
    for cand in universe.package(chosen.package):
        if order_key(cand.version) <= order_key(chosen.version) or cand.key in reachable:
            continue
        for ch in cand.channels:   # other catalogs too: a newer bundle elsewhere is an update as well
            newer.setdefault((cand.catalog, ch), []).append(cand)
    return [Update(d.name, catalog, chosen.package, ch,
                   tuple(c.name for c in sorted(cands, key=lambda c: order_key(c.version), reverse=True)))
            for (catalog, ch), cands in sorted(newer.items())]


def _names(items: Mapping[str, object]) -> str:
    return ", ".join(sorted(items)) or "none"
