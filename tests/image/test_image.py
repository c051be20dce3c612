"""The container image: built from the Dockerfile on a Debian base assembled from Debian's packages,
with buildah (no daemon, no Docker Hub), then started as its non-root user.

Skips only where no builder can run here, saying why; `make test` installs buildah and mmdebstrap
with apt-get when it runs as root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.parts import not_tested

ROOT = Path(__file__).resolve().parents[2]
TAG = "localhost/reconciler:test"
MAX_BYTES = 400e6  # measured 338 MB: Debian minbase + python3 (177 MB) and the virtualenv
ENV = {**os.environ, "STORAGE_DRIVER": "vfs", "BUILDAH_ISOLATION": "chroot"}
# A fresh machine assembles the Debian base (minutes) before the first build; the suite's 600 s is too short.
pytestmark = pytest.mark.timeout(2400)


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["buildah", *args], capture_output=True, text=True, env=ENV, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


@pytest.fixture(scope="module")
def image() -> str:
    missing = [t for t in ("buildah", "mmdebstrap") if shutil.which(t) is None]
    if missing:
        not_tested("image", f"{' and '.join(missing)} not installed (`make image-tools` installs them as root with apt-get)")
    probe = _buildah("from", "scratch", check=False)
    if probe.returncode != 0:
        not_tested("image", f"buildah cannot create a container here: {probe.stderr.strip()[:300]}")
    _buildah("rm", probe.stdout.strip(), check=False)
    build = subprocess.run([str(ROOT / "image" / "build"), TAG], capture_output=True, text=True, env=ENV,
                           timeout=1800, cwd=ROOT)
    assert build.returncode == 0, build.stderr[-3000:]
    yield TAG
    _buildah("rmi", TAG, check=False)


def _run(image: str, *args: str) -> subprocess.CompletedProcess:
    ctr = _buildah("from", image).stdout.strip()
    try:
        done = _buildah("run", ctr, "--", *args, check=False)
        if done.returncode == 0 and not done.stdout and not done.stderr:
            # Once in a loaded CI run, buildah's chroot isolation passed on nothing of what `reconciler --help`
            # printed (exit 0, no output at all); it never happened again in a loop. A second run tells that apart
            # from a command that really prints nothing, which fails the assertion after it either way.
            done = _buildah("run", ctr, "--", *args, check=False)
        return done
    finally:
        _buildah("rm", ctr, check=False)


def test_the_image_runs_the_cli_as_its_non_root_user(image):
    config = json.loads(_buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["reconciler"]
    who = _run(image, "id", "-u")
    assert who.stdout.strip() == "65532", who.stderr
    top = _run(image, "reconciler", "--help")
    assert top.returncode == 0 and "usage: reconciler" in top.stdout, top.stderr
    watch = _run(image, "reconciler", "watch", "--help")
    assert watch.returncode == 0 and "--leader-elect" in watch.stdout and "Examples:" in watch.stdout, watch.stderr
    # The verifiers of signed commits are there.
    assert _run(image, "sh", "-c", "gpg --version && ssh-keygen -Y 2>&1 | grep -q find-principals").returncode == 0
    # Nothing of the build stage: no pip, no sources, no compiler.
    assert _run(image, "sh", "-c", "test ! -e /opt/reconciler/bin/pip && test ! -e /src && ! command -v gcc"
                ).returncode == 0


def test_the_image_stays_small(image):
    number, unit = json.loads(_buildah("images", "--json", image).stdout)[0]["size"].split()
    size = float(number) * {"kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
    assert 50e6 < size < MAX_BYTES, f"{size / 1e6:.0f} MB"
