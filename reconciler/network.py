"""Whether this run may use the network: ``--offline`` means none at all.

An offline run (``resolve --offline``, ``approve --offline``) reads no
cluster, and every edge that would otherwise connect asks here first:
registries (``oci``: resolving a tag, fetching an image, a tag's re-pin),
git remotes and tarball downloads (``bundle/source.py``). Instead of the
network they use what is recorded: the digests ``olm.lock`` pins its sources
to (``pins``), the digest a tag had when it was last resolved online (the
OCI cache's tag index), and the bundles, images and clones already in the
cache. What is not recorded is an ``OfflineError`` naming the reference, so
a command can say what it could not evaluate rather than reach out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from reconciler.errors import ReconcilerError

_lock = threading.Lock()
_global: dict[str, str] | None = None   # pins of the offline run in progress; None when online


class OfflineError(ReconcilerError):
    """Something needed the network in an offline run."""


@contextmanager
def offline(pins: Mapping[str, str] | None = None) -> Iterator[None]:
    """Run the body offline; ``pins`` maps a source reference (as ``olm.lock`` writes it) to its digest."""
    global _global
    with _lock:
        outer = _global
        _global = {**(outer or {}), **(pins or {})}
    try:
        yield
    finally:
        with _lock:
            _global = outer


def is_offline() -> bool:
    return _global is not None


def pinned(reference: str) -> str | None:
    """The digest an offline run knows ``reference`` by, from the lock; None when it has no pin."""
    pins = _global or {}
    return pins.get(reference) or pins.get(reference.removeprefix("docker://")) or \
        pins.get(f"docker://{reference}")


def refuse(what: str, reference: str) -> OfflineError:
    """The error for ``what`` (e.g. "pulling the image") that an offline run cannot do for ``reference``."""
    return OfflineError(f"offline: {what} would need the network", obj=reference,
                        hint="run once without --offline to fetch it into the cache (and pin it in olm.lock)")
