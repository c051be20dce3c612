"""A package's upgrade graph as data, then as Mermaid text, DOT text, or SVG through Graphviz.

The graph is built once as plain data (nodes and typed edges) from the
catalog model; the three outputs are renderings of that data, so they always
agree. Edges point in the upgrade direction, from the installed bundle to
the bundle that may replace it: ``replaces``, ``skips``, and ``skipRange``
(every entry of the same channel whose version falls in the range). Channel
heads and deprecated bundles are marked. Only SVG needs an external program
(Graphviz's ``dot``); Mermaid and DOT are always available.

Large packages stay readable: drawn per channel (each channel a box of its
own, as ``opm alpha render-graph`` does), with a window on the versions
(``window``), and with a bundle's skipRange fan (often hundreds of edges
into one bundle) collapsed into one node that names the range and how many
bundles it covers (``collapse_fans``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from reconciler.errors import CatalogError, InputError, ReconcilerError
from reconciler.model.catalog import SCHEMA_BUNDLE, Catalog, Channel
from reconciler.model.semver_range import VersionRange
from reconciler.report.words import counted

REPLACES, SKIPS, SKIP_RANGE = "replaces", "skips", "skipRange"


@dataclass(frozen=True)
class Node:
    name: str
    version: str
    channels: tuple[str, ...]
    head_of: tuple[str, ...]      # channels this bundle is the head of
    deprecated: bool
    present: bool = True          # False for a replaced/skipped name with no entry in the channel
    collapsed: tuple[str, ...] = ()  # for a collapsed skipRange fan: the bundles it stands for
    note: str = ""                   # a collapsed fan's description


@dataclass(frozen=True)
class Edge:
    source: str   # the bundle upgraded from
    target: str   # the bundle upgraded to
    kind: str     # replaces | skips | skipRange
    channels: tuple[str, ...]
    range: str = ""  # the skipRange, for skipRange edges


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
    ranges: dict[str, str] = {}
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
                ranges[e.name] = e.skip_range
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
    edge_list = tuple(Edge(s, t, k, tuple(c), ranges.get(t, "") if k == SKIP_RANGE else "")
                      for (s, t, k), c in sorted(edges.items()))
    return UpgradeGraph(package, tuple(c.name for c in chans), tuple(nodes), edge_list)


def window(graph: UpgradeGraph, since: str) -> UpgradeGraph:
    """Only the bundles at version ``since`` or later, and the edges between them."""
    from reconciler.model.semver_range import parse_version

    try:
        floor = parse_version(since)
    except InputError:
        raise InputError(f"--since {since!r} is not a semantic version", hint="for example --since 1.4.0") from None
    keep = set()
    for n in graph.nodes:
        try:
            if n.version and parse_version(n.version) >= floor:
                keep.add(n.name)
        except InputError:
            continue
    return UpgradeGraph(graph.package, graph.channels, tuple(n for n in graph.nodes if n.name in keep),
                        tuple(e for e in graph.edges if e.source in keep and e.target in keep))


def collapse_fans(graph: UpgradeGraph, threshold: int = 4) -> UpgradeGraph:
    """Replace each bundle's skipRange fan of more than ``threshold`` edges by one node standing for them."""
    fans: dict[tuple[str, tuple[str, ...]], list[Edge]] = {}
    for e in graph.edges:
        if e.kind == SKIP_RANGE:
            fans.setdefault((e.target, e.channels), []).append(e)
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    versions = {n.name: n.version for n in graph.nodes}
    extra: list[Node] = []
    dropped: set[tuple[str, str, str]] = set()
    added: list[Edge] = []
    for (target, channels), fan in sorted(fans.items()):
        if len(fan) <= threshold:
            continue
        sources = tuple(sorted((e.source for e in fan), key=lambda n: (order.get(n, len(order)), n)))
        first, last = versions.get(sources[0]) or sources[0], versions.get(sources[-1]) or sources[-1]
        name = f"{counted(len(sources), 'bundle')} skipped by {target}" + (f" in {', '.join(channels)}" if channels else "")
        note = f"{counted(len(sources), 'bundle')}, {first} … {last}, skipRange {fan[0].range!r}"
        extra.append(Node(name, "", channels, (), False, True, sources, note))
        dropped.update((e.source, e.target, e.kind) for e in fan)
        added.append(Edge(name, target, SKIP_RANGE, channels, fan[0].range))
    if not extra:
        return graph
    edges = tuple(e for e in graph.edges if (e.source, e.target, e.kind) not in dropped) + tuple(added)
    return UpgradeGraph(graph.package, graph.channels, graph.nodes + tuple(extra), edges)


def _by_channel(graph: UpgradeGraph) -> list[tuple[str, list[Node], list[Edge]]]:
    """Each channel's own nodes and edges; a bundle in several channels is drawn in each."""
    out = []
    for ch in graph.channels:
        edges = [e for e in graph.edges if ch in e.channels]
        names = {n.name for n in graph.nodes if ch in n.channels} | {e.source for e in edges} | {e.target for e in edges}
        out.append((ch, [n for n in graph.nodes if n.name in names], edges))
    return out


def _vkey(catalog: Catalog, package: str, name: str) -> tuple:
    b = catalog.bundle(package, name)
    try:
        v = b.version if b else None
    except Exception:
        v = None
    return (0, v.major, v.minor, v.patch, str(v)) if v is not None else (1, 0, 0, 0, "")


def _id(name: str, ids: dict[str, str]) -> str:
    if name not in ids:
        ids[name] = f"n{len(ids)}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return ids[name]


def _label(n: Node, channel: str | None = None, marks: dict[str, str] | None = None) -> list[str]:
    """A node's label lines: the bundle (or a collapsed fan's note), its mark, where it sits, deprecation.

    Every label names its channel, so a node read on its own (a DOT file fed to another tool, a search in an
    SVG, a bundle drawn once per channel) still says which channel it belongs to and whether it heads it.
    """
    parts = [n.note] if n.collapsed else [n.name]
    if not n.collapsed and (marks or {}).get(n.name):
        parts.append(marks[n.name])
    parts.append(_where(n, channel))
    if n.deprecated:
        parts.append("deprecated")
    return parts


def _where(n: Node, channel: str | None) -> str:
    """The channel of a node in ``channel``'s box, or all its channels in a graph drawn as one."""
    if channel is not None:
        if not n.present:
            return f"not in channel {channel}"
        return f"channel {channel}" + (" (head)" if channel in n.head_of else "")
    if not n.channels:
        return "not in any channel"
    names = [c + (" (head)" if c in n.head_of else "") for c in n.channels]
    return f"channel{'s' if len(names) > 1 else ''} {', '.join(names)}"


def to_mermaid(graph: UpgradeGraph, *, group: bool = False, marks: dict[str, str] | None = None) -> str:
    """Mermaid flowchart; with ``group``, one subgraph per channel. ``marks`` labels and highlights bundles
    by name: ``installed`` (what a cluster runs) and ``target`` (what a resolution chose)."""
    ids: dict[str, str] = {}
    lines = ["graph LR", f"  %% upgrade graph of package {graph.package}, channels: {', '.join(graph.channels)}"]
    views = _by_channel(graph) if group else [(None, list(graph.nodes), list(graph.edges))]
    classes: dict[str, list[str]] = {"head": [], "deprecated": [], "missing": [], "collapsed": [], "installed": [],
                                     "target": []}
    for channel, nodes, edges in views:
        indent = "  "
        if channel is not None:
            lines.append(f'  subgraph {_id("channel " + channel, ids)}["channel {channel}"]')
            indent = "    "

        def key(name: str, channel: str | None = channel) -> str:
            return f"{channel}\0{name}" if channel is not None else name

        for n in nodes:
            nid = _id(key(n.name), ids)
            text = "<br/>".join(_label(n, channel, marks)).replace('"', "#quot;")
            lines.append(f'{indent}{nid}["{text}"]')
            for cls, on in (("head", n.head_of and (channel is None or channel in n.head_of)),
                            ("deprecated", n.deprecated), ("missing", not n.present), ("collapsed", n.collapsed),
                            ("installed", (marks or {}).get(n.name) == "installed"),
                            ("target", (marks or {}).get(n.name) == "target")):
                if on:
                    classes[cls].append(nid)
        for e in edges:
            arrow = "-->" if e.kind == REPLACES else "-.->"
            lines.append(f"{indent}{_id(key(e.source), ids)} {arrow}|{e.kind}| {_id(key(e.target), ids)}")
        if channel is not None:
            lines.append("  end")
    lines += ["  classDef head stroke-width:3px,stroke:#2a7", "  classDef deprecated fill:#eee,stroke:#a33,color:#a33",
              "  classDef missing stroke-dasharray:4 2,color:#888", "  classDef collapsed fill:#f4f4ff,stroke:#66a",
              "  classDef installed fill:#dde8ff,stroke:#24a,stroke-width:3px",
              "  classDef target fill:#ddf5dd,stroke:#2a2,stroke-width:3px"]
    for cls, chosen in classes.items():
        if chosen:
            lines.append(f"  class {','.join(chosen)} {cls}")
    return "\n".join(lines) + "\n"


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: UpgradeGraph, *, group: bool = False, marks: dict[str, str] | None = None) -> str:
    """Graphviz DOT; with ``group``, one cluster per channel; ``marks`` as for ``to_mermaid``."""
    lines = [f"digraph {_dot_str(graph.package)} {{", "  rankdir=LR;",
             '  node [shape=box, style="rounded", fontname="Helvetica"];', '  edge [fontname="Helvetica"];',
             f"  label={_dot_str(f'{graph.package}: ' + ', '.join(graph.channels))}; labelloc=t;"]
    views = _by_channel(graph) if group else [(None, list(graph.nodes), list(graph.edges))]
    for channel, nodes, edges in views:
        indent = "  "

        def key(name: str, channel: str | None = channel) -> str:
            return f"{channel}/{name}" if channel is not None else name

        if channel is not None:
            lines += [f"  subgraph {_dot_str('cluster_' + channel)} {{", f"    label={_dot_str('channel ' + channel)};"]
            indent = "    "
        for n in nodes:
            attrs: dict[str, str] = {}
            styles = ["rounded"]
            if n.head_of and (channel is None or channel in n.head_of):
                attrs["penwidth"] = "3"
                attrs["color"] = "#22aa77"
            if n.deprecated:
                styles.append("filled")
                attrs["fillcolor"] = "#eeeeee"
                attrs["fontcolor"] = "#aa3333"
            if not n.present:
                styles.append("dashed")
            if n.collapsed:
                styles.append("filled")
                attrs["fillcolor"] = "#f4f4ff"
            mark = (marks or {}).get(n.name)
            if mark:
                styles.append("filled")
                attrs["fillcolor"] = "#dde8ff" if mark == "installed" else "#ddf5dd"
                attrs["penwidth"] = "3"
            attrs["style"] = ",".join(dict.fromkeys(styles))
            label = '"' + "\\n".join(_dot_str(p)[1:-1] for p in _label(n, channel, marks)) + '"'
            body = ", ".join([f"label={label}"] + [f"{k}={_dot_str(v)}" for k, v in attrs.items()])
            lines.append(f"{indent}{_dot_str(key(n.name))} [{body}];")
        for e in edges:
            style = "solid" if e.kind == REPLACES else ("dashed" if e.kind == SKIPS else "dotted")
            lines.append(f"{indent}{_dot_str(key(e.source))} -> {_dot_str(key(e.target))} "
                         f"[label={_dot_str(e.kind)}, style={style}];")
        if channel is not None:
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


class GraphvizMissing(ReconcilerError):
    """SVG output was asked for but Graphviz's ``dot`` is not installed."""


def to_svg(graph: UpgradeGraph, dot: str | None = None, *, group: bool = False,
           marks: dict[str, str] | None = None) -> str:
    exe = dot or shutil.which("dot")
    if exe is None:
        raise GraphvizMissing("SVG output needs Graphviz's `dot` program, which is not on PATH",
                              hint="install Graphviz (e.g. apt-get install graphviz), or use --format mermaid "
                                   "or --format dot")
    proc = subprocess.run([exe, "-Tsvg"], input=to_dot(graph, group=group, marks=marks), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ReconcilerError(f"`dot -Tsvg` failed: {proc.stderr.strip()[:500]}")
    return proc.stdout
