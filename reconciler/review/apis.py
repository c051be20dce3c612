"""API removals: which rendered objects use an apiVersion Kubernetes deprecates or no longer serves.

The facts live as data (``deprecated_apis.yaml``, from Kubernetes' deprecated
API migration guide), so a new release is a data change. A check is made at
a Kubernetes minor; the review asks at the cluster's minor and the next one,
because an upgrade of the cluster is when a removed API bites.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import semver

from reconciler import yamlio
from reconciler.model.kube import Manifest, ObjectRef, split_api_version
from reconciler.model.semver_range import parse_version

DATA = Path(__file__).with_name("deprecated_apis.yaml")


@dataclass(frozen=True)
class DeprecatedApi:
    group: str
    version: str
    kind: str
    deprecated_in: str
    removed_in: str
    replacement: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class ApiFinding:
    """One object whose apiVersion is deprecated (still served) or removed at ``kube_version``."""

    operator: str
    object: ObjectRef
    api: DeprecatedApi
    kube_version: str      # the minor checked, "1.22"
    status: str            # "removed" or "deprecated"

    def to_dict(self) -> dict[str, str]:
        return {"operator": self.operator, "kind": self.object.kind, "name": self.object.name,
                "namespace": self.object.namespace, "apiVersion": self.api.api_version,
                "kubernetesVersion": self.kube_version, "status": self.status,
                "deprecatedIn": self.api.deprecated_in, "removedIn": self.api.removed_in,
                "replacement": self.api.replacement}

    def describe(self) -> str:
        where = f"{self.object.kind} {self.object.namespace + '/' if self.object.namespace else ''}{self.object.name}"
        instead = f"; use {self.api.replacement}" if self.api.replacement else "; no replacement"
        if self.status == "removed":
            return (f"{where}: {self.api.api_version} is not served in Kubernetes {self.kube_version} "
                    f"(removed in {self.api.removed_in}{instead})")
        return (f"{where}: {self.api.api_version} is deprecated in Kubernetes {self.kube_version} "
                f"(since {self.api.deprecated_in}, removed in {self.api.removed_in}{instead})")


@lru_cache(maxsize=1)
def table() -> dict[tuple[str, str, str], DeprecatedApi]:
    """The data file, indexed by (group, version, kind)."""
    doc = yamlio.load_one(yamlio.read_text(DATA, "reconciler/review/deprecated_apis.yaml"), "deprecated_apis.yaml")
    out = {}
    for item in doc["apis"]:
        api = DeprecatedApi(item["group"], item["version"], item["kind"], str(item["deprecatedIn"]),
                            str(item["removedIn"]), item.get("replacement") or "")
        out[(api.group, api.version, api.kind)] = api
    return out


def minor(version: str) -> semver.Version:
    """``v1.29.3+k3s1`` -> 1.29.0: API removals happen at minors."""
    core = version.lstrip("v").split("+")[0].split("-")[0]
    v = parse_version(".".join((core.split(".") + ["0", "0"])[:3]))
    return semver.Version(v.major, v.minor, 0)


def next_minor(version: str) -> str:
    m = minor(version).bump_minor()
    return f"{m.major}.{m.minor}"


def _at_or_after(kube: semver.Version, release: str) -> bool:
    return kube >= minor(release)


def check(operator: str, objects: Iterable[Manifest], kube_version: str) -> list[ApiFinding]:
    """Every object whose apiVersion is removed, or deprecated, at the minor of ``kube_version``."""
    kube = minor(kube_version)
    label = f"{kube.major}.{kube.minor}"
    known = table()
    found = []
    for obj in objects:
        group, version = split_api_version(str(obj.get("apiVersion", "")))
        api = known.get((group, version, str(obj.get("kind", ""))))
        if api is None:
            continue
        if _at_or_after(kube, api.removed_in):
            status = "removed"
        elif _at_or_after(kube, api.deprecated_in):
            status = "deprecated"
        else:
            continue
        found.append(ApiFinding(operator, ObjectRef.of(obj), api, label, status))
    return sorted(found, key=lambda f: (f.operator, f.object.key, f.kube_version))


def check_versions(operator: str, objects: Iterable[Manifest], kube_version: str | None) -> list[ApiFinding]:
    """The check at the cluster's minor and at the next one (an object found at both is listed at the first).

    Without a known version every object on a listed apiVersion is reported
    at the release that removes it, so nothing is hidden for lack of a setting.
    """
    objects = list(objects)
    if kube_version is None:
        out = []
        for obj in objects:
            group, version = split_api_version(str(obj.get("apiVersion", "")))
            api = table().get((group, version, str(obj.get("kind", ""))))
            if api is not None:
                out.append(ApiFinding(operator, ObjectRef.of(obj), api, api.removed_in, "removed"))
        return out
    now = check(operator, objects, kube_version)
    seen = {(f.object.key, f.status) for f in now}
    later = [f for f in check(operator, objects, next_minor(kube_version)) if (f.object.key, f.status) not in seen]
    return now + later
