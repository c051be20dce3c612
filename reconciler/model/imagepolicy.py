"""What an image must carry before it is used: the ``verify``/``verifyBundles`` settings of a catalog.

One shape for both, read from reconciler.yaml::

    verify:
      provider: cosign
      keys: [keys/catalog.pub]               # cosign key pairs' public halves, files of the repository
      identities:                            # or certificates: keyless (Fulcio) or a private PKI
        - issuer: https://token.actions.githubusercontent.com        # or issuerRegExp
          subjectRegExp: https://github.com/org/catalogs/\\.github/workflows/.*   # or subject
      transparencyLog: true                  # a verified log entry (inclusion proof, checkpoint) is required
      signedTimestamp: true                  # a verified RFC 3161 timestamp is required
      attestations:                          # in-toto attestations the image must also carry
        - predicateType: https://slsa.dev/provenance/v1
          predicate:                         # fields of the predicate, by dotted path, and their values
            runDetails.builder.id: https://github.com/org/builder

A signature is accepted when it is by one of the keys, or by a certificate
that chains to the trust root given from outside the repository
(``oci/trustroot.py``) and whose identity matches one of the identities;
subject and issuer are matched as ``cosign verify --certificate-identity
(-regexp) --certificate-oidc-issuer(-regexp)`` takes them, except that a
regular expression must match the whole value. Each attestation listed must
be present, signed the same way. Keys and identities may be combined: either
signer is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reconciler.errors import InputError

SETTINGS_FILE = "reconciler.yaml"
_EXAMPLE = "for example {provider: cosign, keys: [keys/cosign.pub]}"
_KNOWN = ("provider", "keys", "identities", "transparencyLog", "signedTimestamp", "attestations")
MAX_PATH_DEPTH = 16


@dataclass(frozen=True)
class Identity:
    """A certificate's signer: its OIDC issuer and its subject (SAN: an email or a URI), exact or by pattern."""

    issuer: str | None = None
    issuer_regexp: str | None = None
    subject: str | None = None
    subject_regexp: str | None = None

    def matches(self, issuer: str | None, subjects: tuple[str, ...]) -> bool:
        if self.issuer is not None and issuer != self.issuer:
            return False
        if self.issuer_regexp is not None and (issuer is None or not re.fullmatch(self.issuer_regexp, issuer)):
            return False
        if self.subject is not None and self.subject not in subjects:
            return False
        if self.subject_regexp is not None and not any(re.fullmatch(self.subject_regexp, s) for s in subjects):
            return False
        return True

    def __str__(self) -> str:
        issuer = self.issuer if self.issuer is not None else f"/{self.issuer_regexp}/"
        subject = self.subject if self.subject is not None else f"/{self.subject_regexp}/"
        return f"{subject} (issuer {issuer})"


@dataclass(frozen=True)
class Attestation:
    """An in-toto attestation required on the image: its predicate type, and values fields of it must have."""

    predicate_type: str
    predicate: tuple[tuple[str, str], ...] = ()    # (dotted path, value)

    def mismatches(self, predicate: Any) -> list[str]:
        """The fields of ``predicate`` that are not as required, described."""
        out = []
        for path, want in self.predicate:
            got = field_at(predicate, path)
            if got != want:
                out.append(f"{path} is {got!r}, not {want!r}" if got is not None else f"{path} is absent")
        return out

    def __str__(self) -> str:
        return self.predicate_type


@dataclass(frozen=True)
class ImagePolicy:
    """The signers an image must be signed by, and what else it must carry."""

    keys: tuple[str, ...] = ()
    identities: tuple[Identity, ...] = ()
    transparency_log: bool = False
    signed_timestamp: bool = False
    attestations: tuple[Attestation, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keys or self.identities)


NONE = ImagePolicy()


def field_at(doc: Any, path: str) -> Any:
    """``doc``'s value at a dotted path (``runDetails.builder.id``; a number indexes a list), or None."""
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


def parse_policy(cfg: Any, where: str) -> ImagePolicy:
    """``catalogs.<name>.verify`` (or ``verifyBundles``) of reconciler.yaml; NONE when absent."""
    if cfg is None:
        return NONE
    if not isinstance(cfg, dict) or set(cfg) - set(_KNOWN):
        unknown = sorted(set(cfg) - set(_KNOWN), key=str) if isinstance(cfg, dict) else []
        raise InputError(f"{where} must be a mapping of {', '.join(repr(k) for k in _KNOWN)}"
                         + (f" (unknown: {unknown[0]!r})" if unknown else ""), path=SETTINGS_FILE, hint=_EXAMPLE)
    if cfg.get("provider", "cosign") != "cosign":
        raise InputError(f"{where}.provider {cfg.get('provider')!r} is not supported: only cosign is",
                         path=SETTINGS_FILE, hint=_EXAMPLE)
    keys = cfg.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        raise InputError(f"{where}.keys must list public key files of the repository", path=SETTINGS_FILE,
                         hint=_EXAMPLE)
    identities = tuple(_identity(i, f"{where}.identities[{n}]")
                       for n, i in enumerate(_list(cfg.get("identities", []), f"{where}.identities")))
    if not keys and not identities:
        raise InputError(f"{where}.keys must list one or more public key files of the repository, or "
                         f"{where}.identities one or more certificate identities", path=SETTINGS_FILE,
                         hint=_EXAMPLE)
    flags = {}
    for name in ("transparencyLog", "signedTimestamp"):
        value = cfg.get(name, False)
        if not isinstance(value, bool):
            raise InputError(f"{where}.{name} must be true or false", path=SETTINGS_FILE)
        flags[name] = value
    attestations = tuple(_attestation(a, f"{where}.attestations[{n}]")
                         for n, a in enumerate(_list(cfg.get("attestations", []), f"{where}.attestations")))
    return ImagePolicy(tuple(keys), identities, flags["transparencyLog"], flags["signedTimestamp"], attestations)


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list", path=SETTINGS_FILE)
    return value


def _identity(doc: Any, where: str) -> Identity:
    hint = ("for example {issuer: https://token.actions.githubusercontent.com, subjectRegExp: "
            "'https://github.com/org/repo/.+'}")
    known = {"issuer", "issuerRegExp", "subject", "subjectRegExp"}
    if not isinstance(doc, dict) or set(doc) - known or not all(isinstance(v, str) and v for v in doc.values()):
        raise InputError(f"{where} must map 'issuer' or 'issuerRegExp', and 'subject' or 'subjectRegExp', to "
                         f"strings", path=SETTINGS_FILE, hint=hint)
    for exact, pattern in (("issuer", "issuerRegExp"), ("subject", "subjectRegExp")):
        if (exact in doc) == (pattern in doc):
            raise InputError(f"{where} needs exactly one of {exact!r} and {pattern!r}", path=SETTINGS_FILE,
                             hint=hint)
        if pattern in doc:
            try:
                re.compile(doc[pattern])
            except re.error as exc:
                raise InputError(f"{where}.{pattern} is not a valid regular expression: {exc}",
                                 path=SETTINGS_FILE) from None
    return Identity(doc.get("issuer"), doc.get("issuerRegExp"), doc.get("subject"), doc.get("subjectRegExp"))


def _attestation(doc: Any, where: str) -> Attestation:
    hint = "for example {predicateType: https://slsa.dev/provenance/v1, predicate: {runDetails.builder.id: ...}}"
    if not isinstance(doc, dict) or set(doc) - {"predicateType", "predicate"} \
            or not isinstance(doc.get("predicateType"), str) or not doc["predicateType"]:
        raise InputError(f"{where} must give a 'predicateType' (and optionally 'predicate')", path=SETTINGS_FILE,
                         hint=hint)
    fields = doc.get("predicate") or {}
    if not isinstance(fields, dict) or not all(isinstance(k, str) and k and isinstance(v, str)
                                               and len(k.split(".")) <= MAX_PATH_DEPTH for k, v in fields.items()):
        raise InputError(f"{where}.predicate must map dotted field paths to the string values they must have",
                         path=SETTINGS_FILE, hint=hint)
    return Attestation(doc["predicateType"], tuple(sorted(fields.items())))
