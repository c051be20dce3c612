"""Peer tools built from pinned Go modules with ``reconciler.localcluster.gobuild``, one module per tool.

Each tool has a directory ``bench/peers/<tool>/`` holding its go.mod and
go.sum, and a Python module ``bench/peers/<tool>.py`` exposing a function that
returns the built executable's path (building it into the cache if missing).
"""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a peer started for a block: SIGTERM, then SIGKILL after ``grace`` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
