"""How long the local cluster takes to start, phase by phase.

  python -m bench.cluster_start [--repeat 3]

Starts and stops the test fixture's cluster (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok with its simulated nodes)
--repeat times from a warm binary cache, and reports the time at which each
phase began and when the cluster was ready: the API server serving, then the
controllers and kwok until the nodes are Ready and the default
ServiceAccount exists.
"""

from __future__ import annotations

import argparse
import statistics
import time

from reconciler.localcluster import ControlPlane, ensure_binaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    binaries = ensure_binaries()
    marks: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        started = time.monotonic()

        def log(message: str) -> None:
            marks.setdefault(message.split(" at ")[0], []).append(time.monotonic() - started)

        plane = ControlPlane(None, binaries, log=log)
        try:
            plane.start()
        finally:
            plane.stop()
    print(f"{'phase':<45} {'median s':>9} {'min s':>7} {'max s':>7}")
    for phase, values in marks.items():
        print(f"{phase:<45} {statistics.median(values):9.2f} {min(values):7.2f} {max(values):7.2f}")


if __name__ == "__main__":
    main()
