"""Build and cache the kube-apiserver and etcd binaries pinned by ``gomod/``.

The binaries are compiled from source with the local Go toolchain instead of
downloaded: the Go module (go.mod + go.sum) pins and checksums every input, so
there is no release URL or checksum list to maintain here. The cache key is
the Kubernetes version plus a hash of go.mod and go.sum, so any change to the
pins builds into a new directory and old builds are never reused by mistake.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import ControlPlaneError

GOMOD_DIR = Path(__file__).with_name("gomod")
_GO_MOD = (GOMOD_DIR / "go.mod").read_text()


def _pinned(module: str) -> str:
    match = re.search(rf"^\s*{re.escape(module)}\s+(v\S+)", _GO_MOD, re.MULTILINE)
    if match is None:
        raise ControlPlaneError(f"{GOMOD_DIR / 'go.mod'} does not require {module}")
    return match.group(1)


KUBERNETES_VERSION = _pinned("k8s.io/kubernetes")
ETCD_VERSION = _pinned("go.etcd.io/etcd/server/v3")
_GO_VERSION = re.search(r"^go\s+(\S+)", _GO_MOD, re.MULTILINE).group(1)

_VERSION_PACKAGE = "k8s.io/component-base/version"
_PROGRESS_EVERY = 60.0


@dataclass(frozen=True)
class Binaries:
    """Paths of the two control-plane executables and the Kubernetes version they serve."""

    kube_apiserver: Path
    etcd: Path
    version: str


def cache_dir() -> Path:
    """The reconciler's cache root: $RECONCILER_CACHE_DIR, else the XDG cache home."""
    if explicit := os.environ.get("RECONCILER_CACHE_DIR"):
        return Path(explicit)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "reconciler"
    return Path.home() / ".cache" / "reconciler"


def binaries_dir() -> Path:
    """Where the binaries for the current pins live (built or not)."""
    digest = hashlib.sha256()
    digest.update((GOMOD_DIR / "go.mod").read_bytes())
    digest.update((GOMOD_DIR / "go.sum").read_bytes())
    return cache_dir() / "controlplane" / f"{KUBERNETES_VERSION}-{digest.hexdigest()[:12]}"


def ensure_binaries(log: Callable[[str], object] = print) -> Binaries:
    """Return the cached binaries, building them first if they are missing.

    A file lock serialises concurrent callers: the first one builds, the
    others wait and then find the finished directory.
    """
    final = binaries_dir()
    binaries = _binaries_in(final)
    if _present(binaries):
        return binaries
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{final.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process that is building the control plane into {final}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not _present(binaries):
            _build(final, log)
    return binaries


def _binaries_in(directory: Path) -> Binaries:
    return Binaries(kube_apiserver=directory / "kube-apiserver", etcd=directory / "etcd",
                    version=KUBERNETES_VERSION)


def _present(binaries: Binaries) -> bool:
    return all(path.is_file() and os.access(path, os.X_OK)
               for path in (binaries.kube_apiserver, binaries.etcd))


def _build(final: Path, log: Callable[[str], object]) -> None:
    go = shutil.which("go")
    if go is None:
        raise ControlPlaneError(
            f"kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} are not built yet "
            "and `go` is not on PATH",
            hint=f"install Go {_GO_VERSION} or newer (https://go.dev/dl/) and retry; "
                 f"the binaries are built once and cached in {final.parent}")
    log(f"building kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} into {final}")
    log("a cold build downloads the Go modules and compiles Kubernetes: expect several minutes")
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    build_log = staging / "build.log"
    started = time.monotonic()
    try:
        with open(build_log, "wb") as out:
            proc = subprocess.Popen(_go_build_command(go, staging), cwd=GOMOD_DIR, env=_go_env(),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                while True:
                    try:
                        proc.wait(timeout=_PROGRESS_EVERY)
                        break
                    except subprocess.TimeoutExpired:
                        log(f"  still building ({time.monotonic() - started:.0f}s)")
            except BaseException:  # e.g. KeyboardInterrupt: stop `go` and the compilers it runs
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        if proc.returncode != 0:
            raise ControlPlaneError(
                f"`go build` of the control plane failed (exit {proc.returncode}):\n"
                + tail(build_log),
                hint=f"check network access to the Go module proxy and that Go is {_GO_VERSION} "
                     "or newer")
        build_log.unlink()
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the binaries in a shared cache
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"built the control plane in {time.monotonic() - started:.0f}s")


def _go_build_command(go: str, outdir: Path) -> list[str]:
    """`go build` with the version stamps Kubernetes' own build scripts add.

    Without the -X flags a plain `go build` reports v0.0.0-master+$Format:%H$
    from /version, which clients and tests rightly reject.
    """
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    stamps = {"gitVersion": KUBERNETES_VERSION, "gitMajor": major, "gitMinor": minor,
              "gitTreeState": "clean"}
    ldflags = " ".join(["-s", "-w"] + [f"-X {_VERSION_PACKAGE}.{k}={v}" for k, v in stamps.items()])
    return [go, "build", "-trimpath", f"-ldflags={ldflags}", "-o", f"{outdir}{os.sep}",
            "k8s.io/kubernetes/cmd/kube-apiserver", "./etcd"]


def _go_env() -> dict[str, str]:
    """The caller's environment, minus settings that would change what gets built.

    A user's go.work or GOFLAGS (e.g. -mod=vendor) must not redirect the pinned
    module; -mod=readonly makes a go.sum mismatch an error rather than an edit
    of the packaged go.sum.
    """
    return {**os.environ, "CGO_ENABLED": "0", "GOWORK": "off", "GOFLAGS": "-mod=readonly"}


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, indented for inclusion in an error message."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"    ({path} is missing)"
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:])
