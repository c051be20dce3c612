"""Findings: what validation reports, one value per problem.

Validation never stops at the first problem; it collects ``Finding`` values
(file, blob, rule, message, hint) so ``reconciler catalog validate`` can
report them all. ``CatalogInvalid`` turns a list of findings into the one
error the pipeline raises: its message, path and object are the first
finding's, and its rendering lists every finding.
"""

from __future__ import annotations

from reconciler.errors import CatalogError, printable, printable_lines
from reconciler.model.record import Record
from reconciler.report.words import counted

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any

ERROR = "error"
WARNING = "warning"


class Finding(Record):
    """One problem a rule found in a catalog: where, what, and what to do."""

    rule: str            # a stable rule id, e.g. "channel-head"; see RULES
    message: str
    path: str | None     # the file, as displayed (repository-relative where possible)
    obj: str | None      # the blob: "olm.bundle demo.v1.0.0", or "blob 3" before its name is known
    hint: str | None
    severity: str

    def __init__(self, rule: str, message: str, path: str | None, obj: str | None, hint: str | None = None,
                 severity: str = ERROR) -> None:
        self.__dict__.update(rule=rule, message=message, path=path, obj=obj, hint=hint, severity=severity)

    def render(self) -> str:
        where = ": ".join(printable(p) for p in (self.path, self.obj) if p)
        message = printable_lines(self.message)
        text = f"{where}: {message} [{self.rule}]" if where else f"{message} [{self.rule}]"
        if self.severity != ERROR:
            text = f"{self.severity}: {text}"
        if self.hint:
            text += f"\n  hint: {printable_lines(self.hint)}"
        return text

    def as_dict(self) -> dict[str, Any]:
        # A file name that is not UTF-8 keeps its bytes as lone surrogates, which no UTF-8 output can write.
        path = self.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if self.path else None
        return {k: v for k, v in (("rule", self.rule), ("severity", self.severity), ("path", path),
                                  ("blob", self.obj), ("message", self.message), ("hint", self.hint)) if v}


# Every rule, with what it checks (shown by `reconciler catalog validate --rules` and in docs/catalogs.md).
RULES: dict[str, str] = {
    "parse": "every file parses as YAML or JSON (multi-document YAML, concatenated JSON)",
    "blob-shape": "every blob is a mapping with a non-empty schema, and fields of the types its schema declares",
    "non-catalog-file": "(warning) files that are not .json/.yaml/.yml are read when they hold catalog blobs, "
                        "as opm reads every file, and skipped otherwise (opm would fail on them); list them in "
                        ".indexignore",
    "template": "(warning) a basic or semver template in a catalog directory is not expanded there: opm keeps it "
                "as an unknown blob",
    "package-name": "package names are non-empty, valid DNS-1123 labels",
    "duplicate-package": "a package is defined by exactly one olm.package blob",
    "duplicate-channel": "a channel is defined once per package",
    "duplicate-bundle": "a bundle name is defined once per package",
    "duplicate-entry": "a bundle appears at most once in a channel's entries",
    "default-channel": "each package names a default channel, and that channel exists",
    "package-channels": "each package has at least one channel",
    "channel-package": "each channel and bundle belongs to a package that has an olm.package blob",
    "channel-empty": "each channel has at least one entry",
    "channel-entry-bundle": "each channel entry names an olm.bundle of the package",
    "bundle-in-channel": "each bundle appears in at least one channel",
    "bundle-package-property": "each bundle has exactly one olm.package property, naming its own package, "
                               "with a strict semantic version",
    "bundle-image": "each bundle has an image (or olm.bundle.object properties)",
    "property-value": "properties have a type and a value of the shape their type declares",
    "property-type": "(warning) a property type the reconciler does not interpret is kept as written and plays no "
                     "part in resolution, as OLM ignores it; one finding per type",
    "channel-head": "each channel has exactly one head (an entry nothing replaces or skips)",
    "replaces-cycle": "following replaces from the channel head never comes back to a bundle",
    "stranded-bundle": "every entry is reachable from the head by replaces, or skipped",
    "skip-range": "skipRange is a valid semver range (blang dialect)",
    "skips": "skips are non-empty bundle names",
    "unique-version": "bundle versions are unique within a package",
    "deprecation": "olm.deprecations blobs name known packages (once each), and their entries name existing "
                   "channels and bundles, with a message",
    "compose-duplicate": "composing catalogs: no package or bundle is defined in two of them",
}


def errors_of(findings: list[Finding] | tuple[Finding, ...]) -> list[Finding]:
    return [f for f in findings if f.severity == ERROR]


class CatalogInvalid(CatalogError):
    """A catalog with one or more error findings; renders every one."""

    def __init__(self, findings: list[Finding], catalog: str | None = None) -> None:
        self.findings = tuple(findings)
        first = self.findings[0]
        self.catalog = catalog
        super().__init__(first.message, path=first.path, obj=first.obj, hint=first.hint)

    def render(self) -> str:
        if len(getattr(self, "findings", ())) <= 1:
            return super().render()
        head = f"catalog {self.catalog!r} is invalid" if self.catalog else "the catalog is invalid"
        lines = [f"{head}: {counted(len(self.findings), 'problem')}"]
        for f in self.findings:
            lines.extend("  " + ln for ln in f.render().splitlines())
        return "\n".join(lines)
