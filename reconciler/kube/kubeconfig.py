"""kubeconfig files read and merged as kubectl reads them.

``--kubeconfig FILE`` names one file, which must exist. Otherwise
``$KUBECONFIG`` is a list of files separated by ``:`` (``;`` on Windows);
files that do not exist are skipped, and the rest are merged: the first file
to define a cluster, user or context by a name wins, and ``current-context``
comes from the first file that sets one. With neither, ``~/.kube/config`` is
read if present. Relative paths inside a file (certificates, keys, token
files, an exec plugin's command given as a path) are relative to that file,
so they are made absolute before the merge.

The official client's own merger lets the last file's ``current-context``
win and writes refreshed credentials back into the files; neither is what a
kubectl user expects, so the merged dict is built here and handed to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import ClusterError, ReconcilerError

_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
_PATH_FIELDS = {"cluster": ("certificate-authority",),
                "user": ("client-certificate", "client-key", "tokenFile")}


@dataclass(frozen=True)
class KubeConfig:
    """The merged configuration and where it came from."""

    files: tuple[str, ...]
    config: dict[str, Any] = field(hash=False)

    @property
    def contexts(self) -> list[str]:
        return [c["name"] for c in self.config.get("contexts", [])]

    @property
    def current_context(self) -> str:
        return self.config.get("current-context") or ""

    def context(self, name: str | None) -> dict[str, Any]:
        """The named (or current) context, or a ClusterError naming it, the files and the choices."""
        wanted = name or self.current_context
        files = ", ".join(self.files)
        available = ", ".join(self.contexts) or "none"
        if not wanted:
            raise ClusterError(f"no context is selected in the kubeconfig ({files}): current-context is not set",
                               hint=f"pass --context NAME (available: {available}), or run "
                                    "`kubectl config use-context NAME`")
        for c in self.config.get("contexts", []):
            if c["name"] == wanted:
                return c.get("context") or {}
        origin = "given by --context" if name else "named by current-context"
        raise ClusterError(f"context {wanted!r} ({origin}) is not defined in the kubeconfig ({files})",
                           hint=f"available contexts: {available}")

    def namespace(self, context: str | None = None) -> str:
        """The context's namespace, as kubectl's default for -n; empty when it sets none."""
        return self.context(context).get("namespace") or ""


def kubeconfig_files(kubeconfig: str | None = None) -> tuple[str, ...]:
    """The files to read, in precedence order; empty when none is configured."""
    if kubeconfig:
        if not Path(kubeconfig).is_file():
            raise ClusterError(f"kubeconfig {kubeconfig} does not exist",
                               hint="pass an existing file to --kubeconfig, or run `reconciler cluster up` for "
                                    "a local cluster")
        return (kubeconfig,)
    env = os.environ.get("KUBECONFIG", "")
    if env:
        listed = [p for p in env.split(os.pathsep) if p]
        present = tuple(dict.fromkeys(os.path.expanduser(p) for p in listed if Path(os.path.expanduser(p)).is_file()))
        if listed and not present:
            raise ClusterError(f"none of the files in $KUBECONFIG exists: {', '.join(listed)}",
                               hint="fix $KUBECONFIG, or run `reconciler cluster up` for a local cluster")
        return present
    default = Path.home() / ".kube" / "config"
    return (str(default),) if default.is_file() else ()


def load_kubeconfig(kubeconfig: str | None = None) -> KubeConfig | None:
    """The merged kubeconfig, or None when no file is configured (in-cluster, or no cluster)."""
    files = kubeconfig_files(kubeconfig)
    if not files:
        return None
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {section: set() for section, _ in _SECTIONS}
    for path in files:
        doc = _read(path)
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        base = Path(path).resolve().parent
        for section, key in _SECTIONS:
            entries = doc.get(section) or []
            if not isinstance(entries, list):
                raise ClusterError(f"{section} is not a list", path=path, hint="see `kubectl config view`")
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise ClusterError(f"an entry of {section} has no name", path=path)
                if entry["name"] in seen[section]:
                    continue
                seen[section].add(entry["name"])
                merged[section].append({"name": entry["name"], key: _absolute(entry.get(key) or {}, key, base)})
    return KubeConfig(files, merged)


def _read(path: str) -> dict[str, Any]:
    from reconciler import yamlio

    try:
        docs = yamlio.load_all(yamlio.read_text(path), path)
    except ReconcilerError as exc:
        raise ClusterError(f"cannot read the kubeconfig: {exc.message}", path=path) from None
    if not docs:
        return {}  # kubectl treats an empty file as an empty configuration
    if len(docs) > 1 or not isinstance(docs[0], dict):
        raise ClusterError("a kubeconfig must be one YAML mapping", path=path, hint="see `kubectl config view`")
    return docs[0]


def _absolute(value: dict[str, Any], key: str, base: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name in _PATH_FIELDS.get(key, ()):
        if isinstance(out.get(name), str) and out[name] and not os.path.isabs(os.path.expanduser(out[name])):
            out[name] = str(base / out[name])
    exec_ = out.get("exec")
    if key == "user" and isinstance(exec_, dict) and isinstance(exec_.get("command"), str):
        command = exec_["command"]
        if os.sep in command and not os.path.isabs(command):
            out["exec"] = {**exec_, "command": str(base / command)}
    return out
