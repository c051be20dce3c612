"""Keyed lists with duplicate entries: what server-side apply refuses but OLM v0 installs.

Server-side apply reads a list the API schema declares as a map
(``x-kubernetes-list-type: map``: a container's ``env`` keyed by name, its
``ports`` by containerPort and protocol, a ServiceAccount's ``secrets`` by
name, ...) as a set of keyed entries, and refuses an object in which two
entries share a key ("duplicate entries for key"). OLM v0 creates and updates
objects without it, and the API server's validation lets some duplicates
through; what runs is then decided by their readers. Those are normalised
here as they effectively behave, with a note naming the file and the field:

* ``env``: the kubelet builds the environment in order, so the last entry of
  a name is the value the process sees; it is kept, in the place of the
  first (only a ``$(NAME)`` reference written between the two could resolve
  differently);
* container ``ports`` (protocol defaults to TCP) and the ``imagePullSecrets``
  or ``secrets`` of a pod or ServiceAccount: informational or a set of
  names; the first entry is kept, completed with fields only a later one
  gives (a port's ``name``, for instance).

Duplicates the API server's validation refuses as well (two containers of
one name, two volumes of one name, two mounts at one path, two Service
ports with the same port and protocol) cannot be installed by any peer:
they are refused before anything is applied, naming the file and field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from reconciler.errors import UnsupportedBundleError
from reconciler.model.kube import Manifest
from reconciler.report.words import counted

Key = Callable[[dict[str, Any]], Any]

_POD_TEMPLATE = {"Deployment": ("spec", "template", "spec"), "ReplicaSet": ("spec", "template", "spec"),
                 "StatefulSet": ("spec", "template", "spec"), "DaemonSet": ("spec", "template", "spec"),
                 "Job": ("spec", "template", "spec"), "ReplicationController": ("spec", "template", "spec"),
                 "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"), "Pod": ("spec",),
                 "PodTemplate": ("template", "spec")}


def _name(entry: dict[str, Any]) -> Any:
    return entry.get("name")


def _port(entry: dict[str, Any]) -> Any:
    return entry.get("containerPort"), entry.get("protocol") or "TCP"


def _service_port(entry: dict[str, Any]) -> Any:
    return entry.get("port"), entry.get("protocol") or "TCP"


def _mount(entry: dict[str, Any]) -> Any:
    return entry.get("mountPath")


class _Normaliser:
    def __init__(self, file: str, bundle: str, what: str) -> None:
        self.file, self.bundle, self.what = file, bundle, what
        self.notes: list[str] = []

    def _groups(self, items: list[Any], key: Key) -> dict[Any, list[int]]:
        groups: dict[Any, list[int]] = {}
        for i, entry in enumerate(items):
            if isinstance(entry, dict):
                groups.setdefault(key(entry), []).append(i)
        return {k: v for k, v in groups.items() if len(v) > 1}

    def refuse(self, holder: dict[str, Any], field: str, path: str, key: Key, meaning: str) -> None:
        items = holder.get(field)
        if not isinstance(items, list):
            return
        for k, where in self._groups(items, key).items():
            raise UnsupportedBundleError(
                f"{self.what}: {_at(path, field)} has {counted(len(where), 'entry')} for {meaning} {_show(k)} "
                f"({', '.join(f'{field}[{i}]' for i in where)}); the API server refuses the object, so no "
                f"installer can apply it", path=self.file, obj=self.bundle,
                hint="remove the duplicate entries from the bundle")

    def dedupe(self, holder: dict[str, Any], field: str, path: str, key: Key, *, last_wins: bool,
               why: str) -> None:
        items = holder.get(field)
        if not isinstance(items, list):
            return
        groups = self._groups(items, key)
        if not groups:
            return
        drop: set[int] = set()
        out = list(items)
        for k, where in groups.items():
            first = where[0]
            if last_wins:
                out[first] = copy.deepcopy(items[where[-1]])
            else:
                merged = dict(items[first])
                for later in where[1:]:
                    for f, v in items[later].items():
                        merged.setdefault(f, v)
                out[first] = merged
            drop.update(where[1:])
            self.notes.append(f"{self.file}: {self.what}: {_at(path, field)} has {counted(len(where), 'entry')} for "
                              f"{_show(k)} ({', '.join(f'{field}[{i}]' for i in where)}); server-side apply "
                              f"refuses duplicates, so one is kept: {why}")
        holder[field] = [e for i, e in enumerate(out) if i not in drop]

    def pod(self, pod: Any, path: str) -> None:
        if not isinstance(pod, dict):
            return
        for field in ("containers", "initContainers"):
            self.refuse(pod, field, path, _name, "the container name")
        self.refuse(pod, "volumes", path, _name, "the volume name")
        self.dedupe(pod, "imagePullSecrets", path, _name, last_wins=False,
                    why="the first (a pull secret is named once)")
        for field in ("containers", "initContainers"):
            for i, c in enumerate(pod.get(field) or []):
                if not isinstance(c, dict):
                    continue
                where = f"{path}.{field}[{i}]"
                self.refuse(c, "volumeMounts", where, _mount, "the mount path")
                self.dedupe(c, "env", where, _name, last_wins=True,
                            why="the last, the value the kubelet gives the process, in the place of the first")
                self.dedupe(c, "ports", where, _port, last_wins=False,
                            why="the first, completed with the fields only a later one gives")


def _at(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _show(key: Any) -> str:
    if isinstance(key, tuple):
        return "/".join(str(k) for k in key)
    return repr(key)


def pod_spec(pod: Any, path: str, file: str, bundle: str, what: str) -> tuple[str, ...]:
    """Normalise one pod spec in place (``path`` is its field path in ``file``); the notes, or a refusal."""
    n = _Normaliser(file, bundle, what)
    n.pod(pod, path)
    return tuple(n.notes)


def normalise(obj: Manifest, file: str, bundle: str) -> tuple[Manifest, tuple[str, ...]]:
    """The object with duplicate keyed-list entries resolved (a copy when anything changes), and the notes."""
    kind = obj.get("kind")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    what = f"{kind} {meta.get('name')}"
    n = _Normaliser(file, bundle, what)
    if kind not in _POD_TEMPLATE and kind not in ("ServiceAccount", "Service"):
        return obj, ()
    out = copy.deepcopy(obj)
    if kind in _POD_TEMPLATE:
        node: Any = out
        for step in _POD_TEMPLATE[str(kind)]:
            node = node.get(step) if isinstance(node, dict) else None
        n.pod(node, ".".join(_POD_TEMPLATE[str(kind)]))
    elif kind == "ServiceAccount" and str(obj.get("apiVersion")) == "v1":
        for field in ("secrets", "imagePullSecrets"):
            n.dedupe(out, field, "", _name, last_wins=False, why="the first (a secret is named once)")
    elif kind == "Service" and str(obj.get("apiVersion")) == "v1" and isinstance(out.get("spec"), dict):
        n.refuse(out["spec"], "ports", "spec", _service_port, "the port/protocol")
    if not n.notes:
        return obj, ()
    return out, tuple(n.notes)
