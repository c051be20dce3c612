"""Rendered bundles (``RenderedBundle``: a bundle converted for one install), remembered across processes: a
reconcile with nothing new converts nothing.

Converting a large registry+v1 bundle (CRDs to v1, typed decoding, keyed
lists, RBAC per install mode) costs tenths of a second per bundle, yet a
bundle's objects are a pure function of its content (pinned by digest), the
install settings, the default namespace and the certificates its webhook
Services get. So a rendering is stored under the first three (plus the
reference, the provider and a digest of the converting code and its API type
table, ``FORMAT``)
together with the certificates it was given. On a hit the provider is asked
for the same Services' certificates again (a self-signed one is reused from
the cluster, or renewed near expiry): when every answer equals the recorded
one the stored rendering is the answer, otherwise the bundle is converted
again with the new certificates. Nothing is stored when conversion fails.

Entries are pickles in ``<cache_dir>/bundle-render/``, written atomically;
a corrupt or foreign entry is a miss.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import cachedir
from reconciler.model.kube import Manifest

if TYPE_CHECKING:
    from reconciler.bundle.certs import CertificateProvider, ServiceCert


@dataclass(frozen=True)
class RenderedBundle:
    """A bundle converted for one install: what it is, where it goes, and its objects."""

    reference: str
    digest: str
    mediatype: str
    package: str
    name: str
    version: str
    namespace: str
    target_namespaces: tuple[str, ...]
    objects: tuple[Manifest, ...]
    warnings: tuple[str, ...] = ()    # what was repaired or is suspicious, each naming the bundle's file
    # What the CSV says about the Operator (displayName, description, version, apis provided and
    # required), in the shape of the Operator status' ``metadata``; empty for plain bundles.
    metadata: dict = field(default_factory=dict)
    # Owned CRD name -> where its custom resources keep their conditions (under status), for operand health.
    operand_conditions: dict = field(default_factory=dict)
    # Objects the bundle wrote for another namespace than the one conversion placed them in (registry+v1 puts its
    # optional objects in the install namespace, as OLM does): (ObjectRef key as placed, namespace as written).
    # Guardrails judge them where they were written.
    written_namespaces: tuple[tuple[tuple[str, str, str, str], str], ...] = ()


KEEP_ENTRIES = 256
_PRODUCERS = ("bundle", "model/kube.py", "model/declarations.py", "yamlio")


def _format() -> str:
    h = hashlib.sha256()
    top = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    for rel in _PRODUCERS:
        path = os.path.join(top, rel)
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith((".py", ".json"))) \
            if os.path.isdir(path) else [path]
        for f in files:
            with open(f, "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


FORMAT = _format()


class _Recording:
    """A certificate provider that remembers what it was asked and what it answered."""

    def __init__(self, inner: CertificateProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.answers: list[tuple[str, str, ServiceCert]] = []

    def service_cert(self, namespace: str, service: str) -> ServiceCert:
        cert = self.inner.service_cert(namespace, service)
        self.answers.append((namespace, service, cert))
        return cert


def cached(key_parts: tuple[str, ...], certificates: CertificateProvider | None,
           render: Callable[[CertificateProvider | None], RenderedBundle]) -> RenderedBundle:
    """``render(certificates)``, or the stored rendering of the same inputs whose certificates still hold."""
    key = hashlib.sha256("\0".join((FORMAT, getattr(certificates, "name", ""), *key_parts)).encode()).hexdigest()
    path = os.path.join(cachedir.root(), "bundle-render", f"{key}.pickle")
    entry = _read(path)
    if entry is not None:
        rendered, answers = entry
        if all(certificates is not None and certificates.service_cert(ns, svc) == cert
               for ns, svc, cert in answers):
            return rendered
    if certificates is None:   # what the converter would make for itself: certificates made now, never reused
        from reconciler.bundle.certs import SelfSignedProvider

        recording = _Recording(SelfSignedProvider())
    else:
        recording = _Recording(certificates)
    rendered = render(recording)
    _write(path, (rendered, recording.answers))
    return rendered


def _read(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)
    except Exception:  # noqa: BLE001 - missing, corrupt or from other code: a miss
        return None
    return entry if isinstance(entry, tuple) and len(entry) == 2 else None


def _write(path: str, entry: Any) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cachedir.write_atomic(path, lambda f: pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL))
        _prune(os.path.dirname(path))
    except (OSError, pickle.PicklingError):
        pass


def _prune(directory: str) -> None:
    with os.scandir(directory) as it:
        entries = sorted(((e.stat().st_mtime, e.path) for e in it if e.name.endswith(".pickle")), reverse=True)
    for _, path in entries[KEEP_ENTRIES:]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
