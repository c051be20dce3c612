"""A review written for its reader: a terminal (text), a program (JSON) or a pull request (markdown).

The JSON document is the stable form (``SCHEMA_VERSION``; documented in
docs/review.md); text and markdown are for people and may change.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from reconciler.report.words import agree, counted
from reconciler.review.compare import Approval, ObjectChange, OperatorChange, Review

SCHEMA_VERSION = 1

_COLOURS = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m", "@": "\033[36m", "!": "\033[1;31m"}
_RESET = "\033[0m"
_SIGN = {"created": "+", "changed": "~", "deleted": "-"}


def objects_summary(objects: Iterable[ObjectChange]) -> str:
    objects = list(objects)
    counts = {a: sum(1 for o in objects if o.action == a) for a in ("created", "changed", "deleted")}
    return f"+{counts['created']} ~{counts['changed']} -{counts['deleted']}"


def _objects_summary(op: OperatorChange) -> str:
    return objects_summary(op.objects)


def object_lines(objects: Iterable[ObjectChange], indent: str = "  ",
                 paint: Callable[[str, str | None], str] = lambda line, key=None: line) -> list[str]:
    """Each object created, changed or deleted, and a changed one's diff below it, for a terminal."""
    out = []
    for o in objects:
        sign = _SIGN[o.action]
        out.append(paint(f"{indent}{sign} {o.ref}  {o.action}", sign))
        if o.action == "changed":
            for line in o.diff[2:]:
                out.append(paint(f"{indent}    {line}", line[:1] if line[:1] in "+-@" else None))
    return out


def object_document(o: ObjectChange) -> dict[str, Any]:
    return {"action": o.action, **o.ref.to_dict(), "diff": list(o.diff)}


def _bundle(b: Any) -> str:
    return b.name if b is not None else "-"


def _approval(op: OperatorChange, *, before: bool = False) -> str:
    approval = op.approval_before if before else op.approval
    if approval is None:
        return "-"
    return "approved" if approval.approved else f"waits ({approval.reason})"


def _rbac_summary(op: OperatorChange) -> str:
    return f"rules +{len(op.rbac_gained.rules)} -{len(op.rbac_lost.rules)}"


# JSON ------------------------------------------------------------------------------------------------

def as_document(r: Review) -> dict[str, Any]:
    return {
        "schemaVersion": SCHEMA_VERSION,
        "before": r.before,
        "after": r.after,
        "changed": r.changed,
        "kubernetesVersion": r.kube_version,
        "nextKubernetesVersion": r.next_version,
        "dependenciesChanged": r.dependencies_changed,
        "operators": [_operator_doc(op) for op in r.operators],
        "apiRemovals": [f.to_dict() for f in r.apis],
    }


def _operator_doc(op: OperatorChange) -> dict[str, Any]:
    return {
        "operator": op.operator, "kind": op.kind, "change": op.change,
        "before": op.before.to_dict() if op.before else None,
        "after": op.after.to_dict() if op.after else None,
        "edge": op.edge,
        "dependencies": {"added": [{"meets": m, "bundle": b} for m, b in op.dependencies_added],
                         "dropped": [{"meets": m, "bundle": b} for m, b in op.dependencies_dropped]},
        "objects": [object_document(o) for o in op.objects],
        "rbac": {"gained": op.rbac_gained.to_list(), "lost": op.rbac_lost.to_list()},
        "crds": list(op.crds),
        "deprecations": list(op.deprecations),
        "approval": _approval_doc(op.approval),
        "approvalBefore": _approval_doc(op.approval_before),
    }


def _approval_doc(approval: Approval | None) -> dict[str, Any] | None:
    return None if approval is None else {
        "approved": approval.approved, "reason": approval.reason, "message": approval.message,
        "pending": approval.pending.to_list()}


# Text ------------------------------------------------------------------------------------------------

def as_text(r: Review, colour: bool = False) -> str:
    def paint(line: str, key: str | None = None) -> str:
        key = key or (line.lstrip()[:1] if line.strip() else "")
        if not colour or key not in _COLOURS:
            return line
        return f"{_COLOURS[key]}{line}{_RESET}"

    out = [f"Diff {r.before} -> {r.after}"]
    if not r.operators:
        out.append("No Operator changes.")
    for op in r.operators:
        out.append("")
        if op.change == "approval":
            out.append(f"{op.operator} ({op.kind}): {_bundle(op.after)}: approval {_approval(op, before=True)} -> "
                       f"{_approval(op)}")
        else:
            out.append(f"{op.operator} ({op.kind}): {op.change} {_bundle(op.before)} -> {_bundle(op.after)}"
                       + (f"  [{op.edge}]" if op.edge else ""))
        for need, b in op.dependencies_added:
            out.append(paint(f"  + dependency {b} (for {need})", "+"))
        for need, b in op.dependencies_dropped:
            out.append(paint(f"  - dependency {b} (was for {need})", "-"))
        if op.objects:
            out.append(f"  objects: {_objects_summary(op)}")
        out += object_lines(op.objects, "  ", paint)
        if op.rbac_gained:
            out.append(paint("  permissions gained:", "+"))
            out += [paint(line, "+") for line in op.rbac_gained.describe("    ")]
        if op.rbac_lost:
            out.append(paint("  permissions lost:", "-"))
            out += [paint(line, "-") for line in op.rbac_lost.describe("    ")]
        for line in op.crds:
            out.append(paint(f"  ! {line}", "!") if "UNSAFE" in line else f"  {line}")
        for line in op.deprecations:
            out.append(paint(f"  ! {line}", "!"))
        if op.approval is not None:
            out.append(f"  approval: {'approved' if op.approval.approved else 'will wait'}: {op.approval.message}")
    out.append("")
    out += _api_text(r, paint)
    out.append(f"Summary: {counted(len(r.operators), 'Operator')} {agree(len(r.operators), 'changes', 'change')}")
    return "\n".join(out) + "\n"


def _versions(r: Review) -> str:
    if r.kube_version is None:
        return "Kubernetes version unknown (set kubernetesVersion in reconciler.yaml); by the release that removes each"
    return f"Kubernetes {r.kube_version} and the next minor {r.next_version}"


def _api_text(r: Review, paint: Any) -> list[str]:
    if not r.apis:
        return [f"API removals ({_versions(r)}): none"]
    return [f"API removals ({_versions(r)}):"] + [paint(f"  ! {f.operator}: {f.describe()}", "!") for f in r.apis]


# Markdown --------------------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def as_markdown(r: Review) -> str:
    out = [f"## Operator changes: {r.before} → {r.after}", ""]
    if not r.operators:
        out.append("No Operator changes.")
    else:
        out += ["| Operator | Change | Before | After | Upgrade edge | Objects | RBAC | Approval |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for op in r.operators:
            out.append("| " + " | ".join(_cell(c) for c in (
                op.operator, op.change, _bundle(op.before), _bundle(op.after), op.edge or "-",
                _objects_summary(op), _rbac_summary(op), _approval(op))) + " |")
    out += ["", f"### API removals ({_versions(r)})", ""]
    if r.apis:
        out += ["| Operator | Object | apiVersion | Kubernetes | Status | Replacement |",
                "| --- | --- | --- | --- | --- | --- |"]
        for f in r.apis:
            obj = f"{f.object.kind} {f.object.namespace + '/' if f.object.namespace else ''}{f.object.name}"
            out.append("| " + " | ".join(_cell(c) for c in (
                f.operator, obj, f.api.api_version, f.kube_version, f.status,
                f.api.replacement or "none")) + " |")
    else:
        out.append("No rendered object uses a deprecated or removed API.")
    if r.dependencies_changed and r.graph:
        out += ["", "### Dependencies", "", "```mermaid", "graph LR"]
        ids: dict[str, str] = {}

        def node(label: str) -> str:
            if label not in ids:
                ids[label] = f"n{len(ids)}"
            return ids[label]
        lines = []
        for owner, bundle, dep in r.graph:
            lines.append(f'  {node("op:" + owner)}["{owner}"] --> {node(bundle)}("{bundle}")')
            if dep:
                lines.append(f'  {node(bundle)} --> {node(dep)}("{dep}")')
        out += sorted(set(lines), key=lines.index) + ["```"]
    for op in r.operators:
        out += ["", "<details>",
                f"<summary><b>{op.operator}</b>: {op.change} {_bundle(op.before)} → {_bundle(op.after)}</summary>",
                ""]
        if op.edge:
            out.append(f"**Upgrade edge:** {op.edge}")
            out.append("")
        if op.dependencies_added or op.dependencies_dropped:
            out.append("**Dependencies:**")
            out += [f"- added `{b}` (for {need})" for need, b in op.dependencies_added]
            out += [f"- dropped `{b}` (was for {need})" for need, b in op.dependencies_dropped]
            out.append("")
        if op.objects:
            out += [f"**Objects** ({_objects_summary(op)}):", ""]
            out += [f"- {o.action} `{o.ref}`" for o in op.objects]
            changed = [o for o in op.objects if o.action == "changed"]
            for o in changed:
                out += ["", f"`{o.ref}`:", "", "```diff", *o.diff[2:], "```"]
            created = [o for o in op.objects if o.action == "created"]
            if created:
                out += ["", f"<details><summary>{counted(len(created), 'created object')}</summary>", ""]
                for o in created:
                    out += [f"`{o.ref}`:", "", "```diff", *o.diff[3:], "```", ""]
                out.append("</details>")
            out.append("")
        if op.rbac_gained or op.rbac_lost:
            out += ["**Permissions** (RBAC the bundle grants):", "", "```diff"]
            out += ["+" + line[1:] for line in op.rbac_gained.describe()]
            out += ["-" + line[1:] for line in op.rbac_lost.describe()]
            out += ["```", ""]
        if op.crds:
            out += ["**CRDs:**"] + [f"- {c}" for c in op.crds] + [""]
        if op.deprecations:
            out += ["**Deprecations:**"] + [f"- {d}" for d in op.deprecations] + [""]
        if op.approval is not None:
            out.append(f"**Approval:** {'approved' if op.approval.approved else 'will wait'}: "
                       f"{op.approval.message}")
            if op.approval.pending:
                out += ["", "```", *op.approval.pending.describe(), "```"]
            out.append("")
        out.append("</details>")
    return "\n".join(out).rstrip() + "\n"


# The resolution as a picture ---------------------------------------------------------------------------

def resolution_mermaid(resolution: Any, installed: dict[str, Any] | None = None) -> str:
    """Operators -> chosen bundles -> dependencies (edges labelled with the constraint that linked them);
    a bundle installed before and replaced by the choice is drawn dashed into it. Chosen bundles are
    styled ``chosen``, installed ones ``installed``, report-only (dry-run) choices ``reportonly``."""
    ids: dict[str, str] = {}

    def node(key: str) -> str:
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    def esc(text: str) -> str:
        return text.replace('"', "#quot;")

    lines = ["graph LR"]
    classes: dict[str, list[str]] = {"chosen": [], "installed": [], "reportonly": [], "operator": []}
    for s in resolution.selections:
        o = node("op:" + s.owner) if s.kind != "Dependency" else ""
        b = node("bundle:" + s.bundle_name)
        where = ", ".join(x for x in (s.catalog, s.channel) if x)
        label = esc(s.bundle_name + (f"<br/>{where}" if where else ""))
        if o:
            lines.append(f'  {o}["{esc(s.kind)} {esc(s.owner)}"] --> {b}("{label}")')
            classes["operator"].append(o)
        else:
            lines.append(f'  {b}("{label}")')
        (classes["chosen"] if s.apply else classes["reportonly"]).append(b)
        for need, dep in s.dependencies:
            lines.append(f'  {b} -->|"{esc(need)}"| {node("bundle:" + dep)}')
        old = (installed or {}).get(s.owner)
        if old is not None and old.name != s.bundle_name:
            i = node("bundle:" + old.name)
            lines.append(f'  {i}("{esc(old.name)}<br/>installed") -.->|upgrade| {b}')
            classes["installed"].append(i)
    lines += ["  classDef operator fill:#eef,stroke:#447", "  classDef chosen fill:#efe,stroke:#474",
              "  classDef installed fill:#eee,stroke:#777,stroke-dasharray: 4 2",
              "  classDef reportonly fill:#ffe,stroke:#aa4"]
    for cls, members in classes.items():
        if members:
            lines.append(f"  class {','.join(dict.fromkeys(members))} {cls}")
    return "\n".join(lines) + "\n"
