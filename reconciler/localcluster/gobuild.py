"""Build the commands of a pinned Go module once, and cache them per pin.

Used for the local control plane (kube-apiserver, etcd) and for the peer
tools tests and benchmarks compare against (opm, an OCI registry). A Go
module directory (go.mod + go.sum) pins and checksums every input, so there is
no release URL or checksum list to maintain. The cache key is a label plus a
hash of go.mod and go.sum: any change to the pins builds into a new
directory, and an old build is never reused by mistake. A file lock makes
concurrent callers wait for one build instead of racing.

A tool may also need data files its module ships (OLM's CRDs): ``module_files``
copies them from the module cache into the same directory in the same build, so
the cache entry is complete or absent, and later runs never read the module cache.
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

from reconciler import cachedir
from reconciler.errors import ControlPlaneError

_PROGRESS_EVERY = 60.0


def cache_dir() -> Path:
    """The reconciler's cache root (``cachedir.root``): $RECONCILER_CACHE_DIR, else the XDG cache home."""
    return Path(cachedir.root())


def pinned(module_dir: Path, module: str) -> str:
    """The version go.mod in ``module_dir`` requires for ``module``."""
    text = (module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise ControlPlaneError(f"{module_dir / 'go.mod'} does not require {module}")
    return match.group(1)


@dataclass(frozen=True)
class GoTool:
    """The commands ``packages`` of the module in ``module_dir``, producing ``outputs``."""

    label: str                       # cache subdirectory and log name, e.g. "controlplane"
    version: str                     # shown to users, part of the cache key
    module_dir: Path
    packages: tuple[str, ...]        # import paths or ./relative packages to build
    outputs: tuple[str, ...]         # the executables the build leaves in the output directory
    ldflags: tuple[str, ...] = ("-s", "-w")
    tags: tuple[str, ...] = ()       # build tags, as the module's own release build sets them
    cgo: bool = False
    sources: tuple[str, ...] = ()    # files of module_dir beside go.mod that the build compiles (a peer's own main)
    # (module, glob inside it, subdirectory): files of a required module copied beside the executables
    module_files: tuple[tuple[str, str, str], ...] = ()

    @property
    def directory(self) -> Path:
        digest = hashlib.sha256()
        digest.update((self.module_dir / "go.mod").read_bytes())
        digest.update((self.module_dir / "go.sum").read_bytes())
        for name in self.sources:
            digest.update(name.encode() + b"\0" + (self.module_dir / name).read_bytes())
        return cache_dir() / self.label / f"{self.version}-{digest.hexdigest()[:12]}"

    def paths(self) -> dict[str, Path]:
        return {name: self.directory / name for name in self.outputs}

    def files_dir(self, subdirectory: str) -> Path:
        """Where the build put the ``module_files`` of ``subdirectory``."""
        return self.directory / subdirectory

    def _built(self) -> bool:
        return all(p.is_file() and os.access(p, os.X_OK) for p in self.paths().values())

    def _missing_files(self) -> list[tuple[str, str, str]]:
        return [f for f in self.module_files
                if not (self.files_dir(f[2]).is_dir() and any(self.files_dir(f[2]).iterdir()))]

    def present(self) -> bool:
        return self._built() and not self._missing_files()

    def ensure(self, log: Callable[[str], object] = print) -> dict[str, Path]:
        """The cached executables by name, built first when missing."""
        if self.present():
            return self.paths()
        final = self.directory
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(final.parent / f"{final.name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"waiting for another process that is building {self.label} into {final}")
                fcntl.flock(lock, fcntl.LOCK_EX)
            missing = self._missing_files()
            if self._built() and missing:
                # a build from before a data file was added to module_files: copied, not built again
                go = shutil.which("go")
                if go is None:
                    raise ControlPlaneError(f"{self.label} {self.version}'s files {missing[0][1]} are not in its "
                                            f"cache ({final}) and `go` is not on PATH to fetch them",
                                            hint="install Go (https://go.dev/dl/) and retry")
                self._copy_module_files(go, final, missing)
            elif not self.present():
                self._build(final, log)
        return self.paths()

    def _build(self, final: Path, log: Callable[[str], object]) -> None:
        what = f"{', '.join(self.outputs)} ({self.label} {self.version})"
        go = shutil.which("go")
        if go is None:
            raise ControlPlaneError(f"{what} is not built yet and `go` is not on PATH",
                                    hint=f"install Go (https://go.dev/dl/) and retry; it is built once and "
                                         f"cached in {final.parent}")
        log(f"building {what} into {final}")
        log("a cold build downloads Go modules and compiles them: expect minutes")
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        build_log = staging / "build.log"
        started = time.monotonic()
        command = [go, "build", "-trimpath", f"-ldflags={' '.join(self.ldflags)}",
                   *([f"-tags={','.join(self.tags)}"] if self.tags else []), "-o", f"{staging}{os.sep}",
                   *self.packages]
        try:
            with open(build_log, "wb") as out:
                proc = subprocess.Popen(command, cwd=self.module_dir, env=self._env(), stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
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
                raise ControlPlaneError(f"`go build` of {what} failed (exit {proc.returncode}):\n"
                                        + tail(build_log),
                                        hint="check access to the Go module proxy and the Go version")
            self._copy_module_files(go, staging)
            build_log.unlink()
            staging.chmod(0o755)  # mkdtemp's 0700 would hide the binaries in a shared cache
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        log(f"built {what} in {time.monotonic() - started:.0f}s")

    def _copy_module_files(self, go: str, staging: Path,
                           which: list[tuple[str, str, str]] | None = None) -> None:
        """Copy ``module_files`` (or ``which`` of them) out of the module cache the build filled (read-only files
        made writable)."""
        for module, pattern, subdirectory in self.module_files if which is None else which:
            found = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", module], cwd=self.module_dir,
                                   env=self._env(), stdin=subprocess.DEVNULL, capture_output=True, text=True)
            source = Path(found.stdout.strip())
            matches = sorted(source.glob(pattern)) if found.returncode == 0 and found.stdout.strip() else []
            if not matches:
                raise ControlPlaneError(f"{module} has no files {pattern} in the module cache "
                                        f"({found.stderr.strip() or source})")
            target = staging / subdirectory
            target.mkdir(exist_ok=True)
            for path in matches:
                shutil.copyfile(path, target / path.name)
                (target / path.name).chmod(0o644)
            target.chmod(0o755)

    def _env(self) -> dict[str, str]:
        """The caller's environment, minus settings that would change what gets built.

        A user's go.work or GOFLAGS (e.g. -mod=vendor) must not redirect the
        pinned module; -mod=readonly makes a go.sum mismatch an error rather
        than an edit of the packaged go.sum.
        """
        return {**os.environ, "CGO_ENABLED": "1" if self.cgo else "0", "GOWORK": "off",
                "GOFLAGS": "-mod=readonly"}


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, indented for inclusion in an error message."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"    ({path} is missing)"
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:])
