"""Signing keys for tests, made with the real tools (gpg, ssh-keygen), and signed tags made by git.

Every key lives in the test's temporary directory: a GnuPG home of its own
for each OpenPGP signer, a key pair for each SSH signer. Commits and tags are
signed by the git command line, as a user signs them (`commit -S`, `tag -s`):
a signed commit is ``tests.support.repo.commit_all(root, message, signer=...)``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.parts import not_tested
from tests.support.repo import git


def tools_or_skip() -> None:
    for tool in ("git", "gpg", "ssh-keygen"):
        if shutil.which(tool) is None:
            not_tested("signing", f"{tool} is not installed")


class SshSigner:
    """An ed25519 key pair; ``allowed`` is its line in git's allowed-signers form."""

    format = "ssh"

    def __init__(self, directory: Path, principal: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.key = directory / f"{principal.split('@')[0]}_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", principal, "-f", str(self.key)],
                       check=True, capture_output=True)
        self.principal = principal
        pub = (self.key.parent / f"{self.key.name}.pub").read_text().split()
        self.allowed = f"{principal} {pub[0]} {pub[1]}"
        self.public = self.allowed

    def git_args(self) -> tuple[str, ...]:
        return ("-c", "gpg.format=ssh", "-c", f"user.signingkey={self.key}")

    def env(self) -> dict[str, str]:
        return dict(os.environ)


class GpgSigner:
    """An OpenPGP ed25519 signing key in a GnuPG home of its own; ``public`` is its armored public key."""

    format = "openpgp"

    def __init__(self, directory: Path, name: str, email: str) -> None:
        self.home = directory / f"gnupg-{email.split('@')[0]}"
        self.home.mkdir(parents=True, mode=0o700)
        self.uid = f"{name} <{email}>"
        run = dict(env=self.env(), check=True, capture_output=True)
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", self.uid, "ed25519", "sign",
                        "never"], **run)
        listed = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys", email], **run).stdout.decode()
        self.fingerprint = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))
        self.public = subprocess.run(["gpg", "--batch", "--armor", "--export", self.fingerprint],
                                     **run).stdout.decode()

    def git_args(self) -> tuple[str, ...]:
        return ("-c", "gpg.format=openpgp", "-c", f"user.signingkey={self.fingerprint}")

    def env(self) -> dict[str, str]:
        return {**os.environ, "GNUPGHOME": str(self.home)}

    def close(self) -> None:
        subprocess.run(["gpgconf", "--homedir", str(self.home), "--kill", "all"], capture_output=True, check=False)


def trusted_keys(path: Path, *signers: SshSigner | GpgSigner) -> Path:
    """A trusted-keys file holding the signers' public keys, both kinds in one file."""
    path.write_text("# trusted signers\n" + "".join(f"{s.public.strip()}\n" for s in signers))
    return path


def tag(repo: Path, name: str, signer: SshSigner | GpgSigner | None = None) -> None:
    """An annotated tag at HEAD, signed by ``signer`` when given."""
    git(repo, "tag", *(("-s",) if signer else ("-a",)), name, "-m", f"release {name}", signer=signer)


class Cosign:
    """The real cosign (``bench.peers.cosign``, v3; ``legacy=True``: ``bench.peers.cosign_v2``), kept on loopback: no
    transparency log upload, no signing config of the public instance, and a dead proxy for anything that is not
    loopback, so a key-pair signature (with a certificate when given) is all it makes."""

    PASSWORD = "cosign-test-password"
    OFFLINE = ("--use-signing-config=false", "--tlog-upload=false")

    def __init__(self, home: Path, legacy: bool = False) -> None:
        if legacy:
            from bench.peers.cosign_v2 import cosign_v2_binary as binary
        else:
            from bench.peers.cosign import cosign_binary as binary

        self.binary = str(binary())
        self.legacy = legacy
        self.home = home
        home.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "TUF_ROOT": str(self.home / "tuf"),
                "COSIGN_PASSWORD": self.PASSWORD, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY":
                "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost", "DOCKER_CONFIG": str(self.home / "docker")}

    def run(self, *args: str) -> str:
        done = subprocess.run([self.binary, *args], env=self.env(), cwd=self.home, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def key_pair(self, name: str) -> tuple[Path, Path]:
        """``cosign generate-key-pair``: the encrypted private key and the public key (PEM)."""
        self.run("generate-key-pair", "--output-key-prefix", str(self.home / name))
        return self.home / f"{name}.key", self.home / f"{name}.pub"

    def _flags(self) -> tuple[str, ...]:
        return ("--tlog-upload=false", "--allow-http-registry") if self.legacy else self.OFFLINE

    def sign(self, image_by_digest: str, key: Path, *extra: str) -> None:
        """``cosign sign --key`` with the offline flags only (v3: a Sigstore bundle, an OCI referrer of the image;
        v2: the ``.sig`` tag); ``extra`` e.g. ``--certificate leaf.pem --certificate-chain chain.pem``."""
        self.run("sign", "--key", str(key), *self._flags(), "--yes", *extra, image_by_digest)

    def attest(self, image_by_digest: str, key: Path, predicate: dict, kind: str, *extra: str) -> None:
        """``cosign attest --key --type KIND --predicate FILE``: an in-toto attestation bundle beside the image."""
        import json

        path = self.home / f"predicate-{abs(hash(json.dumps(predicate, sort_keys=True)))}.json"
        path.write_text(json.dumps(predicate))
        self.run("attest", "--key", str(key), "--type", kind, "--predicate", str(path), *self._flags(), "--yes",
                 *extra, image_by_digest)


class PrivateCA:
    """A private PKI acting as Fulcio: a root, an intermediate, and leaf certificates binding a cosign key pair's
    public key to an identity (a SAN URI or email, and Fulcio's OIDC issuer extension), as cosign's
    ``--certificate``/``--certificate-chain`` take them."""

    ISSUER_OID = "1.3.6.1.4.1.57264.1.8"

    def __init__(self, directory: Path, name: str = "Example") -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.root = self._ca(f"{name} Root", self.root_key, None, None)
        self.inter_key = ec.generate_private_key(ec.SECP256R1())
        self.inter = self._ca(f"{name} Signing CA", self.inter_key, self.root, self.root_key)
        self.root_pem = directory / "root.pem"
        self.root_pem.write_bytes(self._pem(self.root))
        self.chain_pem = directory / "chain.pem"
        self.chain_pem.write_bytes(self._pem(self.inter) + self._pem(self.root))

    @staticmethod
    def _pem(cert) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return cert.public_bytes(serialization.Encoding.PEM)

    @staticmethod
    def _name(cn: str):
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def _ca(self, cn: str, key, issuer, issuer_key):
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        now = datetime.datetime.now(datetime.timezone.utc)
        signer = issuer_key or key
        return (x509.CertificateBuilder().subject_name(self._name(cn))
                .issuer_name(issuer.subject if issuer is not None else self._name(cn))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
                .sign(signer, hashes.SHA256()))

    def issue(self, public_key: Path, subject: str, issuer: str, name: str = "leaf") -> Path:
        """A code-signing certificate for the PEM ``public_key`` (e.g. ``cosign.pub``), identity ``subject`` (an
        email, or a URI) from OIDC issuer ``issuer``; its PEM file."""
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

        now = datetime.datetime.now(datetime.timezone.utc)
        san = x509.RFC822Name(subject) if "@" in subject and "://" not in subject else \
            x509.UniformResourceIdentifier(subject)
        raw = issuer.encode()
        cert = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.inter.subject)
                .public_key(serialization.load_pem_public_key(public_key.read_bytes()))
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([san]), critical=True)
                .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                               critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.inter_key.public_key()),
                               critical=False)
                .add_extension(x509.UnrecognizedExtension(ObjectIdentifier(self.ISSUER_OID),
                                                          bytes([0x0C, len(raw)]) + raw), critical=False)
                .sign(self.inter_key, hashes.SHA256()))
        path = self.dir / f"{name}.pem"
        path.write_bytes(self._pem(cert))
        return path

    def certificate_flags(self, leaf: Path) -> tuple[str, ...]:
        return ("--certificate", str(leaf), "--certificate-chain", str(self.chain_pem))
