"""What runs where across a fleet: every cluster's Operators read concurrently, as a matrix.

Each cluster is read through its kubeconfig context (``spec.context``, else
its name) with a short timeout and few retries, a bounded number at a time,
so a fleet of a hundred answers in seconds and an unreachable cluster is a
row that says so, never a crash and never left out. A cell is one Operator on
one cluster: the bundle it runs, its health, an approval that waits, whether
it is what the cluster's lockfile pins, drift corrected, the revision last
applied. Per Operator, one line sums it up: ``plumbus: 37/40 clusters at
1.1.0, 2 at 1.0.0, 1 unreachable``.

``as_html`` writes one self-contained page (inline style, no script, no
external asset) that a person opens in a browser.
"""

from __future__ import annotations

import enum
import html
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.repo import RepoSnapshot, read_repository
from reconciler.repo.fleet import lock_file_of, read_lock, select_cluster
from reconciler.report.words import counted

API_VERSION = "reconciler.dev/v1alpha1"
KIND = "FleetStatus"
WORKERS = 16          # clusters read at once
TIMEOUT = (3.0, 10.0)   # connect, read: seconds, per request
ATTEMPTS = 2


# What a cell's health can be (docs/output.md); ``_cell`` decides it from the Operator's status conditions.
HEALTH = ("Healthy", "Progressing", "Degraded", "PendingApproval", "NotInstalled", "Unknown")


@dataclass
class Cell:
    """One Operator on one cluster."""

    operator: str
    placed: bool = True            # the repository places it on this cluster
    installed: bool = False
    bundle: str = ""
    version: str = ""
    health: str = "NotInstalled"   # Healthy | Progressing | Degraded | PendingApproval | NotInstalled | Unknown
    message: str = ""
    pending: str = ""              # the bundle that waits for approval
    locked: str = ""               # the bundle the cluster's lockfile pins
    in_sync: bool = False          # installed bundle == locked bundle
    drift: str = ""                # the last drift corrected, if any
    revision: str = ""
    ready_since: str = ""          # when Ready last became True (RFC 3339), for a promotion's soak


class Reach(enum.Enum):
    """Whether a cluster could be read, and if not, why: the kind of cause, so that a script (and `promote`'s
    exit code) decides on it, and a sentence for a person (``ClusterStatus.error``)."""

    REACHABLE = "Reachable"
    NO_KUBECONFIG = "NoKubeconfig"           # no kubeconfig at all
    NO_CONTEXT = "NoContext"                 # the kubeconfig lacks the cluster's context
    INVALID_CONTEXT = "InvalidContext"       # the context names a cluster or user it does not define, or bad data
    CONNECTION_REFUSED = "ConnectionRefused"
    TIMEOUT = "Timeout"
    UNKNOWN_HOST = "UnknownHost"
    TLS = "TLSFailed"
    UNAUTHORIZED = "Unauthorized"            # 401: credentials missing or expired
    FORBIDDEN = "Forbidden"                  # 403: the user may not read the status objects
    WRONG_CLUSTER = "WrongCluster"           # the context reaches another cluster of the fleet
    ERROR = "Error"                          # anything else the API server answered


class Unreadable(Exception):
    """A cluster that could not be read: the cause as a ``Reach`` and a sentence."""

    def __init__(self, reach: Reach, text: str) -> None:
        super().__init__(text)
        self.reach, self.text = reach, text


@dataclass
class ClusterStatus:
    name: str
    stage: str = ""
    context: str = ""
    reachable: bool = False
    error: str = ""                  # why it could not be read, for a person
    seconds: float = 0.0
    cells: dict[str, Cell] = field(default_factory=dict)
    cause: Reach | None = None       # why it could not be read (set with ``error``), for a script

    @property
    def reach(self) -> Reach:
        """``Reachable`` for a cluster that was read, else the cause recorded (``Error`` when none was)."""
        if self.reachable:
            return Reach.REACHABLE
        return self.cause if self.cause not in (None, Reach.REACHABLE) else Reach.ERROR


@dataclass
class FleetStatus:
    repository: str
    operators: list[str]
    clusters: list[ClusterStatus]

    def summary(self) -> list[str]:
        return [summary_line(self, name) for name in self.operators]

    def to_dict(self) -> dict[str, Any]:
        """The versioned document of ``fleet status -o json|yaml`` (docs/output.md)."""
        return {
            "apiVersion": API_VERSION, "kind": KIND,
            "repository": self.repository,
            "operators": self.operators,
            "clusters": [{"name": c.name, "stage": c.stage, "context": c.context, "reachable": c.reachable,
                          "reason": c.reach.value, "message": c.error,
                          "error": c.error,   # the same words, under the name scripts read before versioning
                          "operators": [_cell_document(cell) for _, cell in sorted(c.cells.items())]}
                         for c in self.clusters],
            "summary": [{"operator": name, "line": summary_line(self, name)} for name in self.operators],
        }


def _cell_document(cell: Cell) -> dict[str, Any]:
    return {"operator": cell.operator, "placed": cell.placed, "installed": cell.installed, "bundle": cell.bundle,
            "version": cell.version, "health": cell.health, "message": cell.message,
            "pendingApproval": cell.pending, "locked": cell.locked, "inSync": cell.in_sync,
            "driftCorrected": cell.drift, "revision": cell.revision, "readySince": cell.ready_since}


def summary_line(fleet: FleetStatus, operator: str) -> str:
    placed = [c for c in fleet.clusters if operator in c.cells and c.cells[operator].placed]
    unreachable = sum(1 for c in placed if not c.reachable)
    versions: dict[str, int] = {}
    missing = 0
    for c in placed:
        cell = c.cells[operator]
        if not c.reachable:
            continue
        if cell.installed:
            versions[cell.version or cell.bundle] = versions.get(cell.version or cell.bundle, 0) + 1
        else:
            missing += 1
    parts = [f"{n} at {v}" for v, n in sorted(versions.items(), key=lambda kv: (-kv[1], kv[0]))]
    if parts:
        parts[0] = f"{parts[0].split(' ', 1)[0]}/{counted(len(placed), 'cluster')} {parts[0].split(' ', 1)[1]}"
    if missing:
        parts.append(f"{missing} not installed")
    if unreachable:
        parts.append(f"{unreachable} unreachable")
    if not parts:
        parts.append(f"placed on {counted(len(placed), 'cluster')}")
    return f"{operator}: " + ", ".join(parts)


def _cell(name: str, status: dict[str, Any] | None, locked: str, placed: bool) -> Cell:
    cell = Cell(name, placed=placed, locked=locked)
    if status is None:
        return cell
    bundle = status.get("bundle") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    ready, degraded = conds.get("Ready") or {}, conds.get("Degraded") or {}
    pending = conds.get("InstallPendingApproval") or {}
    cell.installed = bool(bundle.get("name"))
    cell.bundle, cell.version = bundle.get("name", ""), bundle.get("version", "")
    cell.revision = str(status.get("revision") or "")
    cell.message = str(ready.get("message") or "")[:1000]   # its cause comes first (``health/causes.py``)
    if pending.get("status") == "True":
        cell.pending = str(((status.get("pending") or {}).get("bundle") or {}).get("name") or "")
    if ready.get("status") == "True":
        cell.health, cell.ready_since = "Healthy", str(ready.get("lastTransitionTime") or "")
    elif degraded.get("status") == "True" or ready.get("reason") in ("ApplyFailed", "ComponentFailed",
                                                                       "HealthTimeout"):
        cell.health = "Degraded"
    elif not cell.installed and cell.pending:
        cell.health = "PendingApproval"
    elif ready:
        cell.health = "Progressing"
    else:
        cell.health = "Unknown"
    drift = conds.get("ComponentsDiverge") or {}
    if drift.get("status") == "True":
        cell.drift = str(drift.get("message") or "")[:300]
    cell.in_sync = cell.installed and bool(locked) and cell.bundle == locked
    return cell


def gather(root: str | Path, kubeconfig: str | None = None, *, workers: int = WORKERS,
           snapshot: RepoSnapshot | None = None) -> FleetStatus:
    """Every cluster's status, read concurrently through the kubeconfig's contexts."""
    from reconciler.kube.kubeconfig import load_kubeconfig

    snapshot = snapshot or read_repository(root)
    merged = load_kubeconfig(kubeconfig)
    contexts = set(merged.contexts) if merged is not None else set()
    views = {name: select_cluster(snapshot, name) for name in sorted(snapshot.clusters)}
    operators = sorted({op.name for op in snapshot.operators})

    def read(name: str) -> ClusterStatus:
        cluster = snapshot.clusters[name]
        out = ClusterStatus(name, cluster.stage or "", cluster.kube_context)
        placed = {op.name for op in views[name].operators}
        lock = read_lock(snapshot.root, lock_file_of(name))
        locked = {e.operator: e.name for e in lock.entries} if lock else {}
        started = time.monotonic()
        try:
            recorded = _read_cluster(merged, contexts, cluster.kube_context, snapshot.settings.instance, name)
        except Exception as exc:   # noqa: BLE001 - whatever fails, the cluster is a row that says so
            why = exc if isinstance(exc, Unreadable) else Unreadable(Reach.ERROR, _sentence(exc))
            out.cause, out.error = why.reach, " ".join(why.text.split())[:300]
            out.cells = {op: Cell(op, placed=op in placed, locked=locked.get(op, ""), health="Unknown")
                         for op in operators}
            out.seconds = time.monotonic() - started
            return out
        out.reachable = True
        out.seconds = time.monotonic() - started
        for op in sorted(set(operators) | set(recorded)):
            out.cells[op] = _cell(op, recorded.get(op), locked.get(op, ""), op in placed)
        return out

    names = sorted(snapshot.clusters)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        clusters = list(pool.map(read, names))
    every = sorted(set(operators) | {op for c in clusters for op in c.cells})
    return FleetStatus(snapshot.identity or str(snapshot.root), every, clusters)


def _read_cluster(merged: Any, contexts: set[str], context: str, instance: str, name: str) -> dict[str, Any]:
    from reconciler.cluster.status import objects as status_objects
    from reconciler.kube.client import Kube, client_for_context
    from reconciler.errors import ClusterError

    if merged is None:
        raise Unreadable(Reach.NO_KUBECONFIG, f"no kubeconfig is configured: pass --kubeconfig FILE or set "
                                              f"KUBECONFIG to one with a context named {context!r}")
    if context not in contexts:
        raise Unreadable(Reach.NO_CONTEXT, f"the kubeconfig has no context {context!r} (it has {len(contexts)}): "
                                           f"add one, or name the one to use in spec.context of "
                                           f"clusters/{name}.yaml")
    try:
        api = client_for_context(merged, context)
    except Exception:   # noqa: BLE001 - the config loader's own text names its internals
        raise Unreadable(Reach.INVALID_CONTEXT, f"the kubeconfig's context {context!r} cannot be used: its "
                                                f"cluster or user is missing, or a certificate or token in it cannot "
                                                f"be read (try: kubectl --context {context} version)") from None
    kube = Kube(api, attempts=ATTEMPTS, timeout=TIMEOUT)
    server = kube.server
    out = {}
    try:
        records = status_objects.read_all(kube, instance)
    except ClusterError as exc:
        raise _unreachable(exc, server, context) from None
    for op, rec in records.items():
        if rec.cluster and rec.cluster != name:
            raise Unreadable(Reach.WRONG_CLUSTER, f"context {context!r} reaches the cluster of {rec.cluster!r} "
                                                  f"(Operator {op} says so), not {name!r}")
        out[op] = rec.status
    return out


def _unreachable(exc: BaseException, server: str, context: str) -> Unreadable:
    """What went wrong reading a cluster, in a sentence that names the server and the cause, never a library's
    text (the cause is found among the exceptions the error was raised from: ``kube/reach.py``)."""
    from reconciler.kube import reach

    status = getattr(exc, "status", None)
    if status == 401:
        return Unreadable(Reach.UNAUTHORIZED, f"the API server at {server} refused the credentials of context "
                                              f"{context!r} (401): they are missing or expired")
    if status == 403:
        return Unreadable(Reach.FORBIDDEN, f"the user of context {context!r} may not read the reconciler's "
                                           f"Operator status objects at {server} (403)")
    if status is not None:
        return Unreadable(Reach.ERROR, f"the API server at {server} answered {_sentence(exc)}")
    said = {   # the cause of a failed connection, as the fleet's reach and in words
        reach.TLS: (Reach.TLS, f"the TLS handshake with {server} failed: its certificate is not the one context "
                               f"{context!r} trusts, or it is not a TLS server"),
        reach.TIMEOUT: (Reach.TIMEOUT, f"the API server at {server} did not answer within {TIMEOUT[0]:.0f} s (a "
                                       f"firewall, or a cluster that is down?)"),
        reach.UNKNOWN_HOST: (Reach.UNKNOWN_HOST, f"the host name of {server} does not resolve (a typo in the "
                                                 f"kubeconfig, or a name known only inside another network?)"),
        reach.REFUSED: (Reach.CONNECTION_REFUSED, f"cannot reach the API server at {server}: "
                                                  f"{reach.WORDS[reach.REFUSED]}"),
    }
    kind = reach.cause(exc)
    if kind in said:
        return Unreadable(*said[kind])
    return Unreadable(Reach.ERROR, f"cannot reach the API server at {server}: the connection failed "
                                   f"(try: kubectl --context {context} version)")


def _sentence(exc: BaseException) -> str:
    """Our own errors say what is wrong; anything else is named by its kind only."""
    message = getattr(exc, "message", None)
    return str(message) if message else f"an unexpected {type(exc).__name__}"


# Rendering ---------------------------------------------------------------------------------------------

_MARK = {"Healthy": "ok", "Progressing": "..", "Degraded": "!!", "PendingApproval": "wait", "NotInstalled": "-",
         "Unknown": "?"}


def as_table(fleet: FleetStatus) -> str:
    head = ["CLUSTER", "STAGE", *fleet.operators]
    rows = [head]
    for c in fleet.clusters:
        if not c.reachable:
            rows.append([c.name, c.stage or "-", f"unreachable: {c.error}"])
            continue
        row = [c.name, c.stage or "-"]
        for op in fleet.operators:
            cell = c.cells.get(op)
            if cell is None or (not cell.placed and not cell.installed):
                row.append("")
                continue
            text = f"{cell.version or cell.bundle or '-'} {_MARK[cell.health]}"
            if cell.pending:
                text += " approve"
            if cell.installed and cell.locked and not cell.in_sync:
                text += " (lock " + cell.locked + ")"
            row.append(text)
        rows.append(row)
    full = [r for r in rows if len(r) == len(head)]   # an unreachable cluster's message spans the Operators
    widths = [max(len(r[i]) for r in full) for i in range(len(head))]
    lines = ["  ".join(v if i == len(r) - 1 else v.ljust(widths[i]) for i, v in enumerate(r)).rstrip()
             for r in rows]
    lines.append("")
    lines += fleet.summary()
    return "\n".join(lines) + "\n"


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}table{border-collapse:collapse;margin:12px 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.Healthy{background:#dff3df}td.Progressing{background:#fff6d6}
td.Degraded{background:#f8d7d7}td.PendingApproval{background:#e6e0f8}td.Unknown{background:#eee}
td.NotInstalled{background:#fafafa;color:#888}td.unreachable{background:#f8d7d7;font-weight:bold}
.small{font-size:12px;color:#555}code{background:#f3f3f3;padding:1px 4px}
"""


def as_html(fleet: FleetStatus, repo: str) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>Fleet status: {e(fleet.repository)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>Fleet status: {e(fleet.repository)}</h1>",
           f"<p class=\"small\">{counted(len(fleet.clusters), 'cluster')}, {counted(len(fleet.operators), 'Operator')}; written "
           f"{e(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))}</p>",
           "<h2>Summary</h2><ul id=\"summary\">"]
    out += [f"<li>{e(line)}</li>" for line in fleet.summary()]
    out.append("</ul><h2>Clusters &times; Operators</h2><table id=\"matrix\"><thead><tr><th>cluster</th>"
               "<th>stage</th>" + "".join(f"<th>{e(op)}</th>" for op in fleet.operators) + "</tr></thead><tbody>")
    for c in fleet.clusters:
        out.append(f"<tr data-cluster=\"{e(c.name)}\" data-reachable=\"{str(c.reachable).lower()}\">"
                   f"<th>{e(c.name)}</th><td>{e(c.stage or '-')}</td>")
        if not c.reachable:
            out.append(f"<td class=\"unreachable\" colspan=\"{max(1, len(fleet.operators))}\">unreachable: "
                       f"{e(c.error)}</td></tr>")
            continue
        for op in fleet.operators:
            cell = c.cells.get(op)
            if cell is None or (not cell.placed and not cell.installed):
                out.append(f"<td data-operator=\"{e(op)}\" data-placed=\"false\"></td>")
                continue
            title = "; ".join(x for x in (cell.message, f"revision {cell.revision}" if cell.revision else "",
                                          f"drift corrected: {cell.drift}" if cell.drift else "") if x)
            attrs = (f"class=\"{cell.health}\" data-operator=\"{e(op)}\" data-bundle=\"{e(cell.bundle)}\" "
                     f"data-health=\"{cell.health}\" data-in-sync=\"{str(cell.in_sync).lower()}\" "
                     f"data-pending=\"{e(cell.pending)}\" title=\"{e(title)}\"")
            lines = [f"<b>{e(cell.version or cell.bundle or 'not installed')}</b>", e(cell.health)]
            if cell.locked and not cell.in_sync:
                lines.append(f"lock: {e(cell.locked)}")
            if cell.pending:
                lines.append(f"waits: {e(cell.pending)}")
            if cell.drift:
                lines.append("drift corrected")
            if cell.revision:
                lines.append(f"<span class=\"small\">{e(cell.revision[:12])}</span>")
            out.append(f"<td {attrs}>" + "<br>".join(lines) + "</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    waiting = [(c.name, cell) for c in fleet.clusters for cell in c.cells.values() if cell.pending]
    out.append("<h2>Approvals that wait</h2>")
    if waiting:
        out.append("<table id=\"approvals\"><thead><tr><th>cluster</th><th>Operator</th><th>bundle</th>"
                   "<th>approve with</th></tr></thead><tbody>")
        for name, cell in sorted(waiting, key=lambda x: (x[1].operator, x[0])):
            command = f"reconciler approve {repo} {cell.operator}"
            out.append(f"<tr><td>{e(name)}</td><td>{e(cell.operator)}</td><td>{e(cell.pending)}</td>"
                       f"<td><code>{e(command)}</code> (then commit approvals/{e(cell.operator)}.yaml)</td></tr>")
        out.append("</tbody></table>")
    else:
        out.append("<p>none</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
