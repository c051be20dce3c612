"""Signing keys for tests, made with the real tools (gpg, ssh-keygen), and signed commits and tags made by git.

Every key lives in the test's temporary directory: a GnuPG home of its own
for each OpenPGP signer, a key pair for each SSH signer. Commits and tags are
signed by the git command line, as a user signs them (`commit -S`, `tag -s`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

GIT_USER = ("-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
            "-c", "tag.gpgsign=false")


def tools_or_skip() -> None:
    for tool in ("git", "gpg", "ssh-keygen"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


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


def git(repo: Path, *args: str, signer: SshSigner | GpgSigner | None = None) -> str:
    extra = signer.git_args() if signer else ()
    done = subprocess.run(["git", *GIT_USER, *extra, *args], cwd=repo, env=signer.env() if signer else None,
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit(repo: Path, message: str, signer: SshSigner | GpgSigner | None = None) -> str:
    """Commit everything in the working tree (signed by ``signer`` when given); the new commit's id."""
    git(repo, "add", "-A")
    git(repo, "commit", "--allow-empty", "-q", "-m", message, *(("-S",) if signer else ("--no-gpg-sign",)),
        signer=signer)
    return git(repo, "rev-parse", "HEAD")


def tag(repo: Path, name: str, signer: SshSigner | GpgSigner | None = None) -> None:
    """An annotated tag at HEAD, signed by ``signer`` when given."""
    git(repo, "tag", *(("-s",) if signer else ("-a",)), name, "-m", f"release {name}", signer=signer)


class Cosign:
    """The real cosign (``bench.peers.cosign``), kept on loopback: no transparency log upload, and a dead proxy
    for anything that is not loopback, so a key-pair signature is all it makes."""

    PASSWORD = "cosign-test-password"

    def __init__(self, home: Path) -> None:
        from bench.peers.cosign import cosign_binary

        self.binary = str(cosign_binary())
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

    def sign(self, image_by_digest: str, key: Path) -> None:
        self.run("sign", "--key", str(key), "--tlog-upload=false", "--allow-http-registry", "--yes",
                 image_by_digest)
