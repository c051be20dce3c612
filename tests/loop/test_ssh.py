"""Fetching over SSH with a key and a known_hosts file, from a real sshd on loopback (skipped without sshd)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.repo.git import Auth, Ref, RemoteRepository, SourceError
from tests.support.wait import wait_until

SSHD = "/usr/sbin/sshd"
pytestmark = pytest.mark.sshd(missing=not (Path(SSHD).is_file() and shutil.which("ssh-keygen")),
                              reason="needs openssh-server (sshd) and ssh-keygen")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[dict]:
    d = tmp_path / "sshd"
    d.mkdir()
    _keygen(d / "host")
    _keygen(d / "client")
    shutil.copy(d / "client.pub", d / "authorized_keys")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host'}
AuthorizedKeysFile {d / 'authorized_keys'}
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile {d / 'sshd.pid'}
""")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory, needed when root
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "config")], stderr=(d / "log").open("w"))
    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(d / 'log').read_text()}")
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True

    wait_until(listening, f"sshd to listen on 127.0.0.1:{port}", timeout=30, every=0.05, ignoring=OSError,
               diagnose=lambda: f"its log: {(d / 'log').read_text()}")
    host_key = (d / "host.pub").read_text().split()[:2]
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
    _keygen(d / "other")
    (d / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join((d / 'other.pub').read_text().split()[:2])}\n")
    yield {"port": port, "dir": d}
    proc.terminate()
    proc.wait(10)


def test_fetch_over_ssh_with_a_key_and_known_hosts(gitops, sshd, tmp_path):
    import getpass

    d = sshd["dir"]
    url = f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}{gitops.path}/.git"
    remote = RemoteRepository(url, Ref(branch="main"), tmp_path / "cache",
                              Auth(ssh_key=d / "client", known_hosts=d / "known_hosts"))
    assert remote.fetch() == str(gitops.git.head.target)

    untrusted = RemoteRepository(url, Ref(branch="main"), tmp_path / "cache2",
                                 Auth(ssh_key=d / "client", known_hosts=d / "wrong_known_hosts"))
    with pytest.raises(SourceError) as err:
        untrusted.fetch()
    assert "host key of 127.0.0.1 is not trusted" in err.value.render()

    _keygen(tmp_path / "stranger")
    refused = RemoteRepository(url, Ref(branch="main"), tmp_path / "cache3",
                               Auth(ssh_key=tmp_path / "stranger", known_hosts=d / "known_hosts"))
    with pytest.raises(SourceError) as err:
        refused.fetch()
    assert "rejected authentication" in err.value.render() and "credentials" in (err.value.hint or "")
