"""Registry mirrors: where an image is pulled from when its own registry is not the place to ask.

The rules are those of containers' ``registries.conf`` and OpenShift's ImageDigestMirrorSet and
ImageTagMirrorSet, which every disconnected cluster uses:

* a rule's ``source`` is matched against ``registry/repository`` at a path boundary
  (``registry.redhat.io/redhat`` matches ``registry.redhat.io/redhat/redhat-operator-index``, not
  ``registry.redhat.io/redhat-x``); ``*.example.com`` matches every host under example.com; the longest
  matching source decides (whatever kind of reference its rules are for), and the matched prefix is replaced
  by each mirror in turn;
* a digest reference is pulled only through rules for digests (ImageDigestMirrorSet, registries.conf's
  ``pull-from-mirror: digest-only`` or ``all``), a tag reference only through rules for tags (ImageTagMirrorSet,
  ``tag-only`` or ``all``): a tag may mean something else on a mirror, a digest cannot;
* the mirrors are tried in order, and the source itself last, unless the rule says
  ``mirrorSourcePolicy: NeverContactSource``.

Everything the reconciler records (olm.lock, catalog import metadata, findings) names the source reference:
a mirror is where bytes came from, and a manifest's digest is checked whichever registry served it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from reconciler.errors import InputError

DIGESTS, TAGS, ALL = "digest-only", "tag-only", "all"
NEVER_CONTACT_SOURCE, ALLOW_CONTACTING_SOURCE = "NeverContactSource", "AllowContactingSource"

_lock = threading.Lock()
_rules: tuple[MirrorRule, ...] = ()       # what every block in force asks for, newest first
_blocks: list[tuple[object, tuple[MirrorRule, ...]]] = []


@dataclass(frozen=True)
class MirrorRule:
    """Pull images under ``source`` from ``mirrors`` (for digests, tags or both), the source last unless
    ``never_contact_source``."""

    source: str
    mirrors: tuple[str, ...]
    pull_from: str = ALL
    never_contact_source: bool = False
    origin: str = ""   # where the rule was declared, for messages

    def matches(self, name: str) -> str | None:
        """The part of ``name`` (``registry/repository``) after this rule's source, or None when it does not
        apply ("" for the source itself)."""
        if self.source.startswith("*."):
            host, _, rest = name.partition("/")
            if host.endswith(self.source[1:]) and host != self.source[2:]:
                return "/" + rest if rest else ""
            return None
        if name == self.source:
            return ""
        if name.startswith(self.source + "/"):
            return name[len(self.source):]
        return None

    def applies_to(self, by_digest: bool) -> bool:
        return self.pull_from == ALL or self.pull_from == (DIGESTS if by_digest else TAGS)


def _split(location: str) -> tuple[str, str]:
    registry, _, repository = location.partition("/")
    return registry, repository


def candidates(registry: str, repository: str, by_digest: bool,
               rules: Iterable[MirrorRule] | None = None) -> list[tuple[str, str, bool]]:
    """Where to pull ``registry/repository`` from, in order: ``(registry, repository, is_mirror)``."""
    name = f"{registry}/{repository}"
    best: list[tuple[int, MirrorRule, str]] = []
    for rule in _rules if rules is None else rules:
        rest = rule.matches(name)
        if rest is not None:
            best.append((len(rule.source.lstrip("*")), rule, rest))
    if not best:
        return [(registry, repository, False)]
    # As registries.conf: the longest matching source decides, whichever kind of reference its mirrors are for.
    longest = max(length for length, _, _ in best)
    chosen = [(rule, rest) for length, rule, rest in best if length == longest and rule.applies_to(by_digest)]
    out: list[tuple[str, str, bool]] = []
    for rule, rest in chosen:
        for mirror in rule.mirrors:
            where = _split(mirror + rest)
            if (*where, True) not in out and where[1]:
                out.append((*where, True))
    if not any(rule.never_contact_source for rule, _ in chosen):
        out.append((registry, repository, False))
    return out


def active() -> tuple[MirrorRule, ...]:
    return _rules


@contextmanager
def using(rules: Iterable[MirrorRule]) -> Iterator[None]:
    """Pull through ``rules`` (before any already in force) for the block. Blocks of several threads may overlap
    and end in any order: each takes its own rules away, and only its own."""
    token = object()
    with _lock:
        _blocks.append((token, tuple(rules)))
        _refresh()
    try:
        yield
    finally:
        with _lock:
            _blocks[:] = [b for b in _blocks if b[0] is not token]
            _refresh()


def _refresh() -> None:
    global _rules
    seen: list[MirrorRule] = []
    for _, rules in reversed(_blocks):
        seen += [r for r in rules if r not in seen]
    _rules = tuple(seen)


def _location(value: Any, where: str, origin: str) -> str:
    if not isinstance(value, str) or not value or any(c in value for c in " \t@") or value.endswith("/") \
            or ":" in value.split("/", 1)[-1] and "/" in value:
        raise InputError(f"{where}: {value!r} is not a registry or repository (host[:port][/path], no tag or digest)",
                         path=origin or None, hint="for example registry.redhat.io/redhat or mirror.example.com:5000")
    if "*" in value and not (value.startswith("*.") and "/" not in value and "*" not in value[1:]):
        raise InputError(f"{where}: {value!r}: a wildcard is only allowed as a host prefix, *.example.com",
                         path=origin or None)
    return value


def parse_settings(raw: Any, origin: str) -> tuple[MirrorRule, ...]:
    """``mirrors:`` of reconciler.yaml: a list of ``{source, mirrors, pullFromMirror, mirrorSourcePolicy}``."""
    if raw is None:
        return ()
    example = ("for example: mirrors: [{source: registry.redhat.io, mirrors: [mirror.example.com/redhat-io], "
               "pullFromMirror: digest-only}]")
    if not isinstance(raw, list):
        raise InputError("mirrors must be a list of mirror rules", path=origin, hint=example)
    rules = []
    for i, item in enumerate(raw):
        where = f"mirrors[{i}]"
        if not isinstance(item, dict) or set(item) - {"source", "mirrors", "pullFromMirror", "mirrorSourcePolicy"}:
            raise InputError(f"{where} must be a mapping of source, mirrors, pullFromMirror and mirrorSourcePolicy",
                             path=origin, hint=example)
        source = _location(item.get("source"), f"{where}.source", origin)
        mirrors = item.get("mirrors") or []
        if not isinstance(mirrors, list) or not mirrors and item.get("mirrorSourcePolicy") != NEVER_CONTACT_SOURCE:
            raise InputError(f"{where}.mirrors must list one or more mirrors of {source}", path=origin, hint=example)
        pull_from = item.get("pullFromMirror", ALL)
        if pull_from not in (ALL, DIGESTS, TAGS):
            raise InputError(f"{where}.pullFromMirror must be all, digest-only or tag-only, not {pull_from!r}",
                             path=origin, hint="digest-only is what an ImageDigestMirrorSet means, tag-only an "
                                               "ImageTagMirrorSet")
        policy = item.get("mirrorSourcePolicy", ALLOW_CONTACTING_SOURCE)
        if policy not in (ALLOW_CONTACTING_SOURCE, NEVER_CONTACT_SOURCE):
            raise InputError(f"{where}.mirrorSourcePolicy must be AllowContactingSource or NeverContactSource, "
                             f"not {policy!r}", path=origin)
        rules.append(MirrorRule(source, tuple(_location(m, f"{where}.mirrors", origin) for m in mirrors), pull_from,
                                policy == NEVER_CONTACT_SOURCE, f"{origin} {where}"))
    return tuple(rules)


# The cluster's objects: (group, version, plural, kind, field of spec, which references they apply to)
CLUSTER_KINDS = (
    ("config.openshift.io", "v1", "imagedigestmirrorsets", "ImageDigestMirrorSet", "imageDigestMirrors", DIGESTS),
    ("config.openshift.io", "v1", "imagetagmirrorsets", "ImageTagMirrorSet", "imageTagMirrors", TAGS),
    ("operator.openshift.io", "v1alpha1", "imagecontentsourcepolicies", "ImageContentSourcePolicy",
     "repositoryDigestMirrors", DIGESTS),
)


def from_cluster_objects(objects: Mapping[str, list[Mapping[str, Any]]]) -> tuple[MirrorRule, ...]:
    """The rules of ImageDigestMirrorSets, ImageTagMirrorSets and ImageContentSourcePolicies (by kind), as the
    cluster's nodes apply them; an entry that is not of their shape is an error naming the object."""
    rules = []
    for _, _, _, kind, field, pull_from in CLUSTER_KINDS:
        for obj in sorted(objects.get(kind) or [], key=lambda o: str((o.get("metadata") or {}).get("name"))):
            name = f"{kind} {(obj.get('metadata') or {}).get('name')}"
            entries = (obj.get("spec") or {}).get(field) or []
            if not isinstance(entries, list):
                raise InputError(f"spec.{field} is not a list", obj=name)
            for i, entry in enumerate(entries):
                where = f"spec.{field}[{i}]"
                if not isinstance(entry, dict):
                    raise InputError(f"{where} is not a mapping", obj=name)
                source = _location(entry.get("source"), where + ".source", "")
                mirrors = tuple(_location(m, where + ".mirrors", "") for m in entry.get("mirrors") or [])
                never = entry.get("mirrorSourcePolicy") == NEVER_CONTACT_SOURCE
                if mirrors or never:
                    rules.append(MirrorRule(source, mirrors, pull_from, never, name))
    return tuple(rules)


def read_cluster(kube: Any) -> tuple[MirrorRule, ...]:
    """The mirror rules of the cluster's ImageDigestMirrorSets, ImageTagMirrorSets and ImageContentSourcePolicies
    (a cluster that serves none of those kinds has none)."""
    objects: dict[str, list] = {}
    for group, version, _, kind, _, _ in CLUSTER_KINDS:
        info = kube.resource(f"{group}/{version}", kind)
        if info is not None:
            objects[kind] = list(kube.list(info))
    return from_cluster_objects(objects)


def describe(rules: Iterable[MirrorRule]) -> list[str]:
    """One line per rule, as a command reports the mirrors it uses."""
    out = []
    for r in rules:
        mode = {ALL: "digests and tags", DIGESTS: "digests", TAGS: "tags"}[r.pull_from]
        tail = ", never the source" if r.never_contact_source else ", then the source"
        out.append(f"{r.source} -> {', '.join(r.mirrors) or '(no mirror)'} ({mode}{tail}; {r.origin})")
    return out
