"""Signed commits and tags: verify the revision about to be applied against keys kept outside the repository.

Whoever can push to the watched branch decides what runs, approvals
included (an approval is a file in the same repository). A signature moves
that decision to whoever holds a trusted key, so the keys must come from
outside the repository they verify: ``--trusted-keys FILE`` (a mounted
Secret in deploy/), never a file of the tree.

The file holds OpenPGP public keys (ASCII-armored blocks) and SSH signing
keys in git's allowed-signers form (``gpg.format ssh``), in any mix.
Verification runs the verifiers git itself runs, so a signature means here
what ``git verify-commit`` says it means: ``gpg --verify`` against a
keyring built from the file's OpenPGP keys in a private, temporary
GNUPGHOME (nothing of the user's own keyring counts), and ``ssh-keygen -Y
find-principals`` then ``-Y verify`` (namespace ``git``) against the
file's allowed-signers lines. Both are maintained by the projects that
define the formats; no Python library verifies SSH signatures, and
re-implementing OpenPGP packet parsing (subkeys, expiry, revocation) is
where verifiers go wrong.

Modes are Flux's: ``HEAD`` verifies the commit applied, ``Tag`` the
annotated tag it is followed at (or, in a working tree, a tag at HEAD),
``TagAndHEAD`` both. A revision older than the one the cluster has applied
(an ancestor of it: a branch forced back to an older signed commit) is
refused unless the rollback is declared (``--allow-rollback``): a signature
proves who wrote a commit, not that it is the one meant to run now.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from reconciler.errors import InputError, ReconcilerError

MODES = ("HEAD", "Tag", "TagAndHEAD")
NAMESPACE = "git"   # the namespace git signs commits and tags in with ssh-keygen -Y sign
_PGP_BLOCK = re.compile(r"-----BEGIN PGP PUBLIC KEY BLOCK-----.*?-----END PGP PUBLIC KEY BLOCK-----", re.DOTALL)
_SIG_START = {"openpgp": b"-----BEGIN PGP SIGNATURE-----", "ssh": b"-----BEGIN SSH SIGNATURE-----",
              "x509": b"-----BEGIN SIGNED MESSAGE-----"}
_SSH_KEY_TYPES = re.compile(r"(?:^|\s)(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com|"
                            r"sk-ecdsa-sha2-nistp256@openssh\.com)\s+[A-Za-z0-9+/=]+")
_TIMEOUT = 30.0


class UntrustedRevision(ReconcilerError):
    """The revision about to be applied is not signed by a trusted key (or moves back without a declaration)."""


@dataclass(frozen=True)
class Verdict:
    """A verified signature: what (``commit abc…``, ``tag v1``), who (the signer's name), with which key."""

    subject: str
    signer: str
    key: str
    format: str   # openpgp or ssh

    def __str__(self) -> str:
        kind = "OpenPGP key" if self.format == "openpgp" else "SSH key"
        return f"{self.subject} is signed by {self.signer} ({kind} {self.key})"


@dataclass
class TrustedKeys:
    """The keys of one trusted-keys file, with the verifiers' state (a keyring, an allowed-signers file)."""

    path: Path
    openpgp: tuple[str, ...]
    allowed_signers: tuple[str, ...]
    _home: Path | None = field(default=None, repr=False)
    fingerprints: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> TrustedKeys:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the trusted keys: {getattr(exc, 'strerror', None) or exc}",
                             path=str(path), hint="give a file of OpenPGP public keys (armored) and SSH "
                                                  "allowed-signers lines") from None
        blocks = tuple(_PGP_BLOCK.findall(text))
        rest = _PGP_BLOCK.sub("", text)
        signers = []
        for number, line in enumerate(rest.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "-----BEGIN" in line or "-----END" in line:
                raise InputError("an armored block is not a complete OpenPGP public key block", path=str(path),
                                 hint="export keys with `gpg --armor --export KEYID`; private keys do not belong "
                                      "here")
            if not _SSH_KEY_TYPES.search(line):
                raise InputError(f"line {number} is neither part of an OpenPGP key block nor an allowed-signers "
                                 f"line (PRINCIPALS [OPTIONS] KEYTYPE KEY)", path=str(path),
                                 hint="an allowed-signers line reads like `alice@example.com ssh-ed25519 AAAA...`, "
                                      "see ssh-keygen(1), ALLOWED SIGNERS")
            signers.append(line)
        if not blocks and not signers:
            raise InputError("the trusted keys file holds no key", path=str(path),
                             hint="add OpenPGP public keys (`gpg --armor --export KEYID`) or allowed-signers lines")
        return cls(path, blocks, tuple(signers))

    # -- verifier state, built once per process --------------------------------------------------

    def home(self) -> Path:
        """A private directory with the allowed-signers file (and the keyring, GNUPGHOME), removed at exit."""
        if self._home is None:
            home = Path(tempfile.mkdtemp(prefix="reconciler-trust-"))
            atexit.register(_remove_home, home)
            (home / "allowed_signers").write_text("".join(f"{line}\n" for line in self.allowed_signers))
            self._home = home
        return self._home

    def keyring(self) -> Path:
        """The GNUPGHOME holding exactly the file's OpenPGP keys, imported on first use."""
        home = self.home()
        if self.openpgp and not self.fingerprints:
            done = _run(["gpg", "--homedir", str(home), "--batch", "--no-tty", "--status-fd", "1", "--import"],
                        "\n".join(self.openpgp).encode())
            self.fingerprints = tuple(m.group(1) for m in re.finditer(r"\[GNUPG:\] IMPORT_OK \d+ (\w+)",
                                                                      done.stdout.decode(errors="replace")))
            if done.returncode != 0 or not self.fingerprints:
                said = done.stderr.decode(errors="replace").strip().splitlines()
                raise InputError("gpg could not import the OpenPGP keys" + (f": {said[-1]}" if said else ""),
                                 path=str(self.path), hint="export keys with `gpg --armor --export KEYID`")
        return home

    def close(self) -> None:
        if self._home is not None:
            _remove_home(self._home)
            self._home = None


def _remove_home(home: Path) -> None:
    if home.is_dir():
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


def _run(command: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(command, input=data, capture_output=True, timeout=_TIMEOUT, check=False)
    except FileNotFoundError:
        raise ReconcilerError(f"`{command[0]}` is not installed, and it verifies the signatures of commits",
                              hint="install gnupg and openssh-client (the image has both)") from None
    except subprocess.TimeoutExpired:
        raise ReconcilerError(f"`{command[0]}` did not finish verifying a signature in {_TIMEOUT:.0f}s") from None


@dataclass(frozen=True)
class Trust:
    """What to verify: the keys, the mode (Flux's HEAD, Tag, TagAndHEAD) and whether a rollback is declared."""

    keys: TrustedKeys
    mode: str = "HEAD"
    allow_rollback: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"verification mode {self.mode!r} is not one of {', '.join(MODES)}")


# -- what is signed -----------------------------------------------------------------------------------


def _describe(commit: pygit2.Commit) -> str:
    who = commit.committer
    return f"commit {commit.id} ({commit.message.strip().splitlines()[0][:60] if commit.message.strip() else ''!r}" \
           f" committed by {who.name} <{who.email}>)"


def _split_tag(raw: bytes) -> tuple[bytes | None, bytes]:
    """An annotated tag's signature (appended to its message, as git writes it) and the data it signs."""
    for marker in _SIG_START.values():
        at = raw.find(b"\n" + marker)
        if at >= 0:
            return raw[at + 1:], raw[:at + 1]
    return None, raw


def verify_signature(keys: TrustedKeys, signature: bytes | None, payload: bytes, subject: str) -> Verdict:
    """Check one signature over ``payload``; raise ``UntrustedRevision`` saying who signed and why it fails."""
    hint = (f"sign it with a key in {keys.path} (`git commit -S`, `git tag -s`), or add the signer's public key "
            f"there if it is to be trusted")
    if not signature:
        raise UntrustedRevision(f"{subject} is not signed", path=str(keys.path), hint=hint)
    if signature.startswith(_SIG_START["openpgp"]):
        return _verify_openpgp(keys, signature, payload, subject, hint)
    if signature.startswith(_SIG_START["ssh"]):
        return _verify_ssh(keys, signature, payload, subject, hint)
    kind = "an X.509 (gpgsm) signature" if signature.startswith(_SIG_START["x509"]) else "a signature of unknown kind"
    raise UntrustedRevision(f"{subject} carries {kind}, which is not verified", path=str(keys.path),
                            hint="sign with an OpenPGP key or an SSH key (gpg.format openpgp or ssh)")


def _verify_openpgp(keys: TrustedKeys, signature: bytes, payload: bytes, subject: str, hint: str) -> Verdict:
    if not keys.openpgp:
        raise UntrustedRevision(f"{subject} has an OpenPGP signature, and {keys.path} trusts no OpenPGP key",
                                path=str(keys.path), hint=hint)
    home = keys.keyring()
    with _signature_file(home, signature) as sig:
        done = _run(["gpg", "--homedir", str(home), "--batch", "--no-tty", "--no-auto-key-retrieve", "--status-fd",
                     "1", "--verify", str(sig), "-"], payload)
    status = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        if line.startswith("[GNUPG:] "):
            word, _, rest = line[9:].partition(" ")
            status.setdefault(word, rest)
    if "VALIDSIG" in status and "GOODSIG" in status and done.returncode == 0:
        fields = status["VALIDSIG"].split()
        primary = fields[-1] if len(fields) >= 10 else fields[0]
        signer = status["GOODSIG"].partition(" ")[2] or primary
        return Verdict(subject, signer, primary, "openpgp")
    for word, why in (("EXPKEYSIG", "expired"), ("REVKEYSIG", "revoked"), ("EXPSIG", "an expired signature of")):
        if word in status:
            keyid, _, uid = status[word].partition(" ")
            raise UntrustedRevision(f"{subject} is signed by {uid or 'an unknown signer'} with OpenPGP key {keyid}, "
                                    f"which is {why}" if word != "EXPSIG" else
                                    f"{subject} carries {why} OpenPGP key {keyid} ({uid})", path=str(keys.path),
                                    hint=hint)
    if "BADSIG" in status:
        keyid, _, uid = status["BADSIG"].partition(" ")
        raise UntrustedRevision(f"{subject} has a bad signature: it claims OpenPGP key {keyid} ({uid}) but does not "
                                f"match the commit's content (altered after signing)", path=str(keys.path),
                                hint="the commit or its signature was tampered with; do not apply it")
    if "NO_PUBKEY" in status or "ERRSIG" in status:
        keyid = (status.get("NO_PUBKEY") or status["ERRSIG"]).split()[0]
        raise UntrustedRevision(f"{subject} is signed with OpenPGP key {keyid}, which is not among the trusted keys",
                                path=str(keys.path), hint=hint)
    raise UntrustedRevision(f"{subject}: gpg could not verify its signature: "
                            + (done.stderr.decode(errors="replace").strip() or "no verdict"),
                            path=str(keys.path), hint=hint)


def _verify_ssh(keys: TrustedKeys, signature: bytes, payload: bytes, subject: str, hint: str) -> Verdict:
    home = keys.home()
    with _signature_file(home, signature) as sig:
        return _verify_ssh_file(keys, str(home / "allowed_signers"), sig, payload, subject, hint)


def _verify_ssh_file(keys: TrustedKeys, allowed: str, sig: str, payload: bytes, subject: str, hint: str) -> Verdict:
    found = _run(["ssh-keygen", "-Y", "find-principals", "-f", allowed, "-s", sig], b"")
    principals = found.stdout.decode(errors="replace").split() if found.returncode == 0 else []
    for principal in principals:
        done = _run(["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", principal, "-n", NAMESPACE, "-s", sig],
                    payload)
        if done.returncode == 0:
            return Verdict(subject, principal, _ssh_fingerprint(done.stdout + done.stderr), "ssh")
    # Who signed, and whether the signature is good at all, without trusting its key.
    check = _run(["ssh-keygen", "-Y", "check-novalidate", "-n", NAMESPACE, "-s", sig], payload)
    key = _ssh_fingerprint(check.stdout + check.stderr) or "(unreadable key)"
    if check.returncode != 0:
        raise UntrustedRevision(f"{subject} has a bad SSH signature (key {key}): it does not match the commit's "
                                f"content (altered after signing)", path=str(keys.path),
                                hint="the commit or its signature was tampered with; do not apply it")
    if principals:
        raise UntrustedRevision(f"{subject} is signed with SSH key {key} of {', '.join(principals)}, whose "
                                f"allowed-signers entry does not allow it (namespaces, or valid-after/-before)",
                                path=str(keys.path), hint=hint)
    raise UntrustedRevision(f"{subject} is signed with SSH key {key}, which is not among the trusted keys",
                            path=str(keys.path), hint=hint)


@contextlib.contextmanager
def _signature_file(home: Path, signature: bytes) -> Iterator[str]:
    """The signature in a file of its own (the verifiers read it from a path), so concurrent checks never mix."""
    fd, name = tempfile.mkstemp(dir=home, suffix=".sig")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(signature)
        yield name
    finally:
        os.unlink(name)


def _ssh_fingerprint(output: bytes) -> str:
    match = re.search(rb"(SHA256:[A-Za-z0-9+/=]+)", output)
    return match.group(1).decode() if match else ""


# -- what the reconciler acts on ----------------------------------------------------------------------


def verify_commit(repo: pygit2.Repository, commit_id: str, keys: TrustedKeys) -> Verdict:
    commit = repo[commit_id].peel(pygit2.Commit)
    signature, payload = commit.gpg_signature
    return verify_signature(keys, signature, payload or b"", _describe(commit))


def verify_tag(repo: pygit2.Repository, name: str, keys: TrustedKeys) -> Verdict:
    ref = repo.references.get(f"refs/tags/{name}")
    if ref is None:
        raise UntrustedRevision(f"tag {name} does not exist", path=str(keys.path))
    obj = repo[ref.target]
    if obj.type != pygit2.enums.ObjectType.TAG:
        raise UntrustedRevision(f"tag {name} is a lightweight tag, which cannot be signed", path=str(keys.path),
                                hint="publish a signed annotated tag (`git tag -s`)")
    signature, payload = _split_tag(obj.read_raw())
    tagger = obj.tagger
    who = f" tagged by {tagger.name} <{tagger.email}>" if tagger else ""
    return verify_signature(keys, signature, payload, f"tag {name} ({obj.target}{who})")


def tags_at(repo: pygit2.Repository, commit_id: str) -> list[str]:
    """The tags whose target is ``commit_id`` (annotated or not), sorted."""
    out = []
    for name in repo.references:
        if name.startswith("refs/tags/"):
            try:
                if str(repo[repo.references[name].target].peel(pygit2.Commit).id) == commit_id:
                    out.append(name[len("refs/tags/"):])
            except (KeyError, ValueError, pygit2.GitError):
                continue
    return sorted(out)


def verify_revision(git_dir: Path | None, revision: str | None, trust: Trust, *, tag: str | None = None,
                    applied: Iterable[str] = ()) -> tuple[Verdict, ...]:
    """Verify the revision about to be applied as ``trust.mode`` asks; refuse a rollback not declared.

    ``tag`` is the tag a remote is followed at; without one (a working tree, a branch), Tag modes look for a
    tag at the revision that verifies. ``applied`` are the revisions the cluster records as applied.
    """
    if git_dir is None or not revision:
        raise UntrustedRevision("the repository is not a git checkout, so there is no commit to verify",
                                path=str(trust.keys.path), hint="reconcile a git working tree, or a remote URL")
    if revision.endswith("-dirty"):
        raise UntrustedRevision(f"the working tree has changes not committed on top of {revision[:-6]}, which no "
                                f"signature covers", path=str(trust.keys.path),
                                hint="commit (signed) or discard the changes; only committed content is verified")
    repo = pygit2.Repository(str(git_dir))
    verdicts: list[Verdict] = []
    if trust.mode in ("Tag", "TagAndHEAD"):
        verdicts.append(_verify_some_tag(repo, revision, tag, trust.keys))
    if trust.mode in ("HEAD", "TagAndHEAD"):
        verdicts.append(verify_commit(repo, revision, trust.keys))
    if not trust.allow_rollback:
        check_rollback(repo, revision, applied, trust.keys.path)
    return tuple(verdicts)


def _verify_some_tag(repo: pygit2.Repository, revision: str, tag: str | None, keys: TrustedKeys) -> Verdict:
    if tag:
        return verify_tag(repo, tag, keys)
    names = tags_at(repo, revision)
    if not names:
        raise UntrustedRevision(f"commit {revision} has no tag, and the verification mode asks for a signed tag",
                                path=str(keys.path), hint="tag the commit with `git tag -s`, or verify HEAD")
    refusals = []
    for name in names:
        try:
            return verify_tag(repo, name, keys)
        except UntrustedRevision as exc:
            refusals.append(exc.message)
    raise UntrustedRevision("no tag at commit " + revision + " is signed by a trusted key: " + "; ".join(refusals),
                            path=str(keys.path), hint="sign a tag with a trusted key (`git tag -s`)")


def check_rollback(repo: pygit2.Repository, revision: str, applied: Iterable[str], keys_path: Path) -> None:
    """Refuse ``revision`` when it is an ancestor of a revision the cluster has applied (history moved back)."""
    for done in sorted({a.removesuffix("-dirty") for a in applied if a}):
        if done == revision or not re.fullmatch(r"[0-9a-f]{40}", done) or done not in repo:
            continue
        try:
            older = repo.descendant_of(done, revision)
        except (pygit2.GitError, ValueError):
            continue
        if older:
            raise UntrustedRevision(f"commit {revision} is older than commit {done}, which is applied (the branch "
                                    f"was moved back to an ancestor): a rollback replays a signed commit whose "
                                    f"time has passed", path=str(keys_path),
                                    hint="undo with a new signed commit (`git revert -S`), or declare this rollback "
                                         "for one run with --allow-rollback ($RECONCILER_ALLOW_ROLLBACK=true)")
