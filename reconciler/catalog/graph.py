"""A package's upgrade graph as data, then as Mermaid text, DOT text, or SVG through Graphviz.

The graph is built once as plain data (nodes and typed edges) from the
catalog model; the three outputs are renderings of that data, so they always
agree. Edges point in the upgrade direction, from the installed bundle to
the bundle that may replace it: ``replaces``, ``skips``, and ``skipRange``
(every entry of the same channel whose version falls in the range). Channel
heads and deprecated bundles are marked. Only SVG needs an external program
(Graphviz's ``dot``); Mermaid and DOT are always available.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from reconciler.errors import CatalogError, InputError, ReconcilerError
from reconciler.model.catalog import SCHEMA_BUNDLE, SCHEMA_CHANNEL, Catalog, Channel
from reconciler.model.semver_range import VersionRange

REPLACES, SKIPS, SKIP_RANGE = "replaces", "skips", "skipRange"


@dataclass(frozen=True)
class Node:
    name: str
    version: str
    channels: tuple[str, ...]
    head_of: tuple[str, ...]      # channels this bundle is the head of
    deprecated: bool
    present: bool = True          # False for a replaced/skipped name with no entry in the channel


@dataclass(frozen=True)
class Edge:
    source: str   # the bundle upgraded from
    target: str   # the bundle upgraded to
    kind: str     # replaces | skips | skipRange
    channels: tuple[str, ...]


@dataclass(frozen=True)
class UpgradeGraph:
    package: str
    channels: tuple[str, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def build(catalog: Catalog, package: str, channel: str | None = None) -> UpgradeGraph:
    if package not in catalog.packages:
        have = ", ".join(sorted(catalog.packages)[:20]) or "none"
        raise CatalogError(f"package {package!r} is not in catalog {catalog.name!r}", hint=f"packages: {have}")
    chans: list[Channel] = catalog.channels_of(package)
    if channel is not None:
        chans = [c for c in chans if c.name == channel]
        if not chans:
            have = ", ".join(c.name for c in catalog.channels_of(package))
            raise CatalogError(f"package {package!r} has no channel {channel!r}", hint=f"channels: {have}")
    members: dict[str, list[str]] = {}
    heads: dict[str, list[str]] = {}
    edges: dict[tuple[str, str, str], list[str]] = {}
    for ch in chans:
        versions = {}
        for e in ch.entries:
            members.setdefault(e.name, []).append(ch.name)
            b = catalog.bundle(package, e.name)
            try:
                versions[e.name] = b.version if b else None
            except Exception:
                versions[e.name] = None
        for h in ch.heads:
            heads.setdefault(h, []).append(ch.name)
        for e in ch.entries:
            if e.replaces:
                edges.setdefault((e.replaces, e.name, REPLACES), []).append(ch.name)
            for s in e.skips:
                edges.setdefault((s, e.name, SKIPS), []).append(ch.name)
            if e.skip_range:
                try:
                    rng = VersionRange.parse(e.skip_range, dialect="blang")
                except InputError:
                    continue
                for other, v in versions.items():
                    if other != e.name and v is not None and rng.contains(v):
                        edges.setdefault((other, e.name, SKIP_RANGE), []).append(ch.name)
    names = set(members) | {s for s, _, _ in edges} | {t for _, t, _ in edges}
    nodes = []
    for n in sorted(names, key=lambda x: (_vkey(catalog, package, x), x)):
        b = catalog.bundle(package, n)
        version = ""
        if b is not None:
            try:
                version = str(b.version)
            except Exception:
                version = ""
        nodes.append(Node(n, version, tuple(members.get(n, ())), tuple(heads.get(n, ())),
                          catalog.deprecation(package, SCHEMA_BUNDLE, n) is not None, n in members))
    edge_list = tuple(Edge(s, t, k, tuple(c)) for (s, t, k), c in sorted(edges.items()))
    return UpgradeGraph(package, tuple(c.name for c in chans), tuple(nodes), edge_list)


def _vkey(catalog: Catalog, package: str, name: str) -> tuple:
    b = catalog.bundle(package, name)
    try:
        v = b.version if b else None
    except Exception:
        v = None
    return (0, v.major, v.minor, v.patch, str(v)) if v is not None else (1, 0, 0, 0, "")


def channel_deprecations(catalog: Catalog, graph: UpgradeGraph) -> dict[str, str]:
    return {c: m for c in graph.channels if (m := catalog.deprecation(graph.package, SCHEMA_CHANNEL, c))}


def _id(name: str, ids: dict[str, str]) -> str:
    if name not in ids:
        ids[name] = f"n{len(ids)}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return ids[name]


def _label(n: Node) -> list[str]:
    parts = [n.name]
    if n.head_of:
        parts.append(f"head of {', '.join(n.head_of)}")
    if n.deprecated:
        parts.append("deprecated")
    if not n.present:
        parts.append("not in channel")
    return parts


def to_mermaid(graph: UpgradeGraph) -> str:
    ids: dict[str, str] = {}
    lines = ["graph LR", f"  %% upgrade graph of package {graph.package}, channels: {', '.join(graph.channels)}"]
    for n in graph.nodes:
        text = "<br/>".join(_label(n)).replace('"', "#quot;")
        lines.append(f'  {_id(n.name, ids)}["{text}"]')
    for e in graph.edges:
        arrow = "-->" if e.kind == REPLACES else "-.->"
        lines.append(f"  {_id(e.source, ids)} {arrow}|{e.kind}| {_id(e.target, ids)}")
    lines += ["  classDef head stroke-width:3px,stroke:#2a7", "  classDef deprecated fill:#eee,stroke:#a33,color:#a33",
              "  classDef missing stroke-dasharray:4 2,color:#888"]
    for cls, pick in (("head", lambda n: n.head_of), ("deprecated", lambda n: n.deprecated),
                      ("missing", lambda n: not n.present)):
        chosen = [_id(n.name, ids) for n in graph.nodes if pick(n)]
        if chosen:
            lines.append(f"  class {','.join(chosen)} {cls}")
    return "\n".join(lines) + "\n"


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: UpgradeGraph) -> str:
    lines = [f"digraph {_dot_str(graph.package)} {{", "  rankdir=LR;",
             '  node [shape=box, style="rounded", fontname="Helvetica"];', '  edge [fontname="Helvetica"];',
             f"  label={_dot_str(f'{graph.package}: ' + ', '.join(graph.channels))}; labelloc=t;"]
    for n in graph.nodes:
        attrs: dict[str, str] = {}
        styles = ["rounded"]
        if n.head_of:
            attrs["penwidth"] = "3"
            attrs["color"] = "#22aa77"
        if n.deprecated:
            styles.append("filled")
            attrs["fillcolor"] = "#eeeeee"
            attrs["fontcolor"] = "#aa3333"
        if not n.present:
            styles.append("dashed")
        attrs["style"] = ",".join(styles)
        label = '"' + "\\n".join(_dot_str(p)[1:-1] for p in _label(n)) + '"'
        body = ", ".join([f"label={label}"] + [f"{k}={_dot_str(v)}" for k, v in attrs.items()])
        lines.append(f"  {_dot_str(n.name)} [{body}];")
    for e in graph.edges:
        style = "solid" if e.kind == REPLACES else ("dashed" if e.kind == SKIPS else "dotted")
        lines.append(f"  {_dot_str(e.source)} -> {_dot_str(e.target)} [label={_dot_str(e.kind)}, style={style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


class GraphvizMissing(ReconcilerError):
    """SVG output was asked for but Graphviz's ``dot`` is not installed."""


def to_svg(graph: UpgradeGraph, dot: str | None = None) -> str:
    exe = dot or shutil.which("dot")
    if exe is None:
        raise GraphvizMissing("SVG output needs Graphviz's `dot` program, which is not on PATH",
                              hint="install Graphviz (e.g. apt-get install graphviz), or use --format mermaid "
                                   "or --format dot")
    proc = subprocess.run([exe, "-Tsvg"], input=to_dot(graph), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ReconcilerError(f"`dot -Tsvg` failed: {proc.stderr.strip()[:500]}")
    return proc.stdout
