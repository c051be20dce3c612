"""``opm`` from operator-registry, as ``cluster up --serve-catalog`` builds it (``reconciler.localcluster.catalogs``:
the pin in ``reconciler/localcluster/opm/``, cgo and opm's own build tags), for the peers that compare with it.

The catalog benchmarks and the verdict-comparison tests run ``opm validate`` and ``opm render`` on the same
content as ``reconciler catalog``; ``serve`` runs ``opm serve`` for a test's own catalog.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.peers import stop
from reconciler.localcluster.catalogs import OPM_DIR as MODULE_DIR, OPM_MODULE as MODULE, OPM_TOOL as TOOL
from reconciler.localcluster.catalogs import OPM_VERSION as VERSION
from reconciler.localcluster.gobuild import tail

__all__ = ["MODULE", "MODULE_DIR", "TOOL", "VERSION", "opm_binary", "serve"]


def opm_binary(log: Callable[[str], object] = print) -> Path:
    """The opm executable, built into the cache first when missing (a cold build takes minutes)."""
    return TOOL.ensure(log)["opm"]


@contextlib.contextmanager
def serve(catalog_dir: Path, workdir: Path, timeout: float = 60.0) -> Iterator[str]:
    """``opm serve`` of a file-based catalog for the block; yields the address a CatalogSource dials.

    OLM's catalog-operator reads a CatalogSource with ``spec.address`` over
    gRPC, so a catalog is served as a registry pod would serve it, without a
    pod. opm listens on the port on every interface, but only this machine
    dials it (the address yielded is on loopback); its profiling endpoint is
    off (by default it takes port 6060, so a second catalog could not
    start) and its termination log goes to ``workdir``, not /dev/termination-log.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "opm-serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(opm_binary()), "serve", str(catalog_dir), "-p", str(port), "--pprof-addr=",
             "-t", str(workdir / "termination.log")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "TMPDIR": str(workdir)})   # its cache of the catalog, removed when it stops
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while b"serving registry" not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"opm serve {catalog_dir} did not start:\n{tail(log_path)}")
            time.sleep(0.1)
        yield address
    finally:
        stop(proc)
