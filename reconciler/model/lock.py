"""The lockfile ``olm.lock``: the exact bundles a repository resolves to.

Written deterministically (sorted entries, sorted keys, no timestamps) so the
same inputs give the same bytes and a diff in review shows exactly what moved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from reconciler import yamlio
from reconciler.errors import LockfileError
from reconciler.model.shape import kind_of

LOCK_FILENAME = "olm.lock"
LOCK_API_VERSION = "reconciler.dev/v1alpha1"
LOCK_KIND = "Lock"
_HEADER = "# Written by `reconciler`; do not edit by hand. Commit it with the declarations.\n"


@dataclass(frozen=True, order=True)
class LockEntry:
    operator: str
    package: str
    name: str
    version: str
    catalog: str
    channel: str
    source: str
    digest: str
    mediatype: str = "registry+v1"
    required_by: str = ""      # for a dependency: the declarations that need it, comma-separated


@dataclass(frozen=True)
class Lockfile:
    entries: tuple[LockEntry, ...]

    def for_operator(self, operator: str) -> LockEntry | None:
        return next((e for e in self.entries if e.operator == operator), None)

    def render(self) -> str:
        doc = {
            "apiVersion": LOCK_API_VERSION,
            "kind": LOCK_KIND,
            "bundles": [{k: v for k, v in asdict(e).items() if v or k != "required_by"}
                        for e in sorted(self.entries)],
        }
        return _HEADER + yamlio.dump(doc)

    @classmethod
    def parse(cls, text: str, source: str = LOCK_FILENAME) -> Lockfile:
        docs = yamlio.load_all(text, source)  # a file of only comments holds no document
        if len(docs) > 1:
            raise LockfileError(f"expected one YAML document, found {len(docs)}", path=source,
                                hint="delete it; the next reconcile writes a new one")
        doc = docs[0] if docs else {}
        if doc == {}:
            return cls(())
        if not isinstance(doc, dict) or doc.get("kind") != LOCK_KIND:
            raise LockfileError(f"not a lockfile (expected kind {LOCK_KIND})", path=source,
                                hint="delete it; the next reconcile writes a new one")
        bundles = doc.get("bundles") or []
        if not isinstance(bundles, list):
            raise LockfileError("bundles must be a list", path=source,
                                hint="delete it; the next reconcile writes a new one")
        entries = []
        for i, raw in enumerate(bundles):
            if not isinstance(raw, dict):
                raise LockfileError(f"bundles[{i}] is malformed: not a mapping", path=source,
                                    hint="delete it; the next reconcile writes a new one")
            wrong = next((k for k, v in raw.items() if isinstance(v, (list, dict))), None)
            if wrong is not None:
                raise LockfileError(f"bundles[{i}].{wrong} must be a scalar, not {kind_of(raw[wrong])}", path=source,
                                    hint="delete it; the next reconcile writes a new one")
            try:
                entries.append(LockEntry(**{k: str(v) for k, v in raw.items()}))
            except TypeError as exc:
                raise LockfileError(f"bundles[{i}] is malformed: {exc}", path=source,
                                    hint="delete it; the next reconcile writes a new one") from None
        return cls(tuple(sorted(entries)))
