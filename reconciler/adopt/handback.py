"""`reconciler handback REPO --operator NAME`: the way back to OLM v0, written into the repository as intent.

As with adoption, the command changes nothing in the cluster: it checks that
OLM v0 can take the Operator back as it runs (the checks the reconcile makes
again before it writes, ``cluster/ownership/takeover/handback.py``), says
what the next reconcile will do, step by step and object by object, and
annotates the declaration ``reconciler.dev/handback:
olm-v0/<namespace>/<catalogsource>`` (removing ``reconciler.dev/adopted-from``:
the takeover is over). The commit is the review; the reconcile after it acts.

The declaration file is edited line by line, so its comments and layout stay;
the edit is read back and compared with what was meant before it is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import yamlio
from reconciler.errors import ClusterError, DeclarationError, UsageError
from reconciler.model.declarations import ANNOTATION_ADOPTED_FROM, ANNOTATION_HANDBACK

if TYPE_CHECKING:
    from reconciler.cluster.apply import Change
    from reconciler.kube.client import Kube


@dataclass
class Report:
    """One Operator's handback as the command found it."""

    operator: str
    declaration: str                 # the file, relative to the repository
    value: str = ""                  # the annotation written (or to write)
    refused: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    written: bool = False
    already: bool = False            # the declaration says so already


def handback(repo: str | Path, kube: Kube, names: list[str], *, source: str | None = None,
             dry_run: bool = False) -> list[Report]:
    """Check and (unless ``dry_run`` or refused) write the handback of each Operator in ``names``."""
    from reconciler.cluster.apply import ChangeSet
    from reconciler.cluster.ownership.takeover import handback as hand
    from reconciler.pipeline import prepare

    if kube.resource(hand.SUB_V, "Subscription") is None:
        raise ClusterError("the cluster runs no OLM v0: it does not serve Subscriptions, so there is nothing to "
                           "hand the Operator back to", obj=kube.server,
                           hint="check --kubeconfig/--context name the cluster that runs OLM v0")
    prepared = prepare(repo, kube, preview=True)
    snapshot = prepared.snapshot
    decls = {d.name: d for d in snapshot.operators}
    reports = []
    for name in names:
        decl = decls.get(name)
        if decl is None:
            raise DeclarationError(f"the repository declares no Operator {name}", path=str(snapshot.root),
                                   hint=f"declared: {', '.join(sorted(decls)) or 'none'}")
        report = Report(name, decl.origin.path)
        inst = next((i for i in prepared.installs if i.selection.owner == name), None)
        if inst is None:
            report.refused.append("the repository does not apply it (its input class only reports): the reconciler "
                                  "runs nothing of it to hand back")
            reports.append(report)
            continue
        if decl.catalog is None or decl.bundle is not None:
            report.refused.append("it is installed from a bundle named directly, not from a catalog: OLM v0 "
                                  "subscribes to a package of a CatalogSource")
            reports.append(report)
            continue
        report.already = bool(decl.handback)
        report.value = decl.handback or f"olm-v0/{source or find_source(kube, decl.catalog.name, inst.bundle.namespace)}"
        # (--source is checked by the command, the annotation when the declaration is read)
        hb = hand.intent(report.value, inst, prepared.lockfile, snapshot.root, snapshot.settings.installer_namespace)
        live = hand.read(kube, hb, snapshot.settings.instance)
        if live.record is None:
            report.refused.append(f"reconciler instance {snapshot.settings.instance!r} runs nothing for it (no "
                                  f"status object): there is nothing to hand back")
        else:
            report.refused += hand.refusals(hb, live)
        if not report.refused:
            steps, refusals = hand.before(kube, {name: hb}, instance=snapshot.settings.instance, dry_run=True)
            report.refused += [r.reason for r in refusals]
            if not report.refused:
                planned = ChangeSet()
                hand.after(kube, {name: hb}, planned, instance=snapshot.settings.instance, dry_run=True)
                report.steps = steps + planned.notes
                report.changes = planned.changes
        reports.append(report)
    if not dry_run:
        for report in reports:
            if not report.refused and not report.already:
                path = Path(snapshot.root) / report.declaration
                yamlio.write_atomic(path, annotated(path.read_text(encoding="utf-8"), report.operator,
                                                    report.value, report.declaration))
                report.written = True
    return reports


def find_source(kube: Kube, catalog: str, namespace: str) -> str:
    """The CatalogSource OLM is to subscribe from, ``namespace/name``: the one named like the repository's catalog
    in the install namespace, else the only one so named, else the cluster's only one."""
    from reconciler.cluster.ownership.takeover import handback as hand

    info = kube.resource(f"{hand.GROUP}/v1alpha1", "CatalogSource")
    sources = sorted((s["metadata"]["namespace"], s["metadata"]["name"]) for s in (kube.list(info) if info else []))
    named = [s for s in sources if s[1] == catalog]
    for found in ([s for s in named if s[0] == namespace], named, sources):
        if len(found) == 1:
            return "/".join(found[0])
    raise UsageError("which CatalogSource should OLM v0 subscribe from? "
                     + (f"{len(named)} are named {catalog} like the repository's catalog" if named else
                        f"none is named {catalog} like the repository's catalog, and the cluster has {len(sources)}"),
                     hint="name it with --source NAMESPACE/NAME; the cluster's CatalogSources: "
                          + (", ".join("/".join(s) for s in sources) or "none"))


_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.M)


def annotated(text: str, operator: str, value: str, where: str) -> str:
    """The declaration file ``text`` with Operator ``operator`` annotated ``reconciler.dev/handback: <value>`` and
    without ``reconciler.dev/adopted-from``; only those lines change. Raises when the file is not laid out so that
    the lines can be found, naming what to write by hand."""
    parts, seps = _DOC_SPLIT.split(text), _DOC_SPLIT.findall(text)
    for i, doc in enumerate(parts):
        data = yamlio.load_one(doc, where) if doc.strip() else None
        if not (isinstance(data, dict) and data.get("kind") == "Operator"
                and (data.get("metadata") or {}).get("name") == operator):
            continue
        edited = _edit(doc, value)
        want = dict(data)
        meta = dict(want.get("metadata") or {})
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_ADOPTED_FROM}
        meta["annotations"] = {**annotations, ANNOTATION_HANDBACK: value}
        want["metadata"] = meta
        if edited is None or yamlio.load_one(edited, where) != want:
            raise DeclarationError(f"cannot add the annotation to Operator {operator}'s declaration in place",
                                   path=where, hint=f"add `{ANNOTATION_HANDBACK}: {value}` under metadata.annotations"
                                                    f" by hand (and remove {ANNOTATION_ADOPTED_FROM})")
        parts[i] = edited
        out = parts[0]
        for sep, part in zip(seps, parts[1:]):
            out += sep + part
        return out
    raise DeclarationError(f"{where} has no Operator {operator}", path=where)


def _edit(doc: str, value: str) -> str | None:
    """The lines of one document with the handback annotation added under ``metadata.annotations`` (made when
    missing) and the adopted-from line removed; None when the block-style layout is not there."""
    lines = doc.split("\n")
    meta = next((i for i, line in enumerate(lines) if re.match(r"^metadata:\s*(#.*)?$", line)), None)
    if meta is None:
        return None
    end = meta + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "#")):
        end += 1
    children = [i for i in range(meta + 1, end) if lines[i].strip() and not lines[i].lstrip().startswith("#")]
    if not children:
        return None
    indent = re.match(r"^( +)", lines[children[0]])
    if indent is None:
        return None
    pad = indent.group(1)
    entry = yamlio.dump({ANNOTATION_HANDBACK: value}).strip()
    found = next((i for i in children if re.match(rf"^{pad}annotations:\s*(#.*)?$", lines[i])), None)
    if found is None:
        if any(re.match(rf"^{pad}annotations:", lines[i]) for i in children):
            return None   # in flow style ({...}): not edited
        lines[meta + 1:meta + 1] = [f"{pad}annotations:", f"{pad}{pad}{entry}"]
    else:
        below = next((lines[i] for i in range(found + 1, end) if lines[i].strip()), "")
        inner = re.match(r"^( +)", below)
        inner_pad = inner.group(1) if inner and len(inner.group(1)) > len(pad) else pad + pad
        lines.insert(found + 1, f"{inner_pad}{entry}")
    return "\n".join(line for line in lines
                     if not re.match(rf"^\s+{re.escape(ANNOTATION_ADOPTED_FROM)}:", line))
