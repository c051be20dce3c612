"""Regenerate the bundle stage's field table (``bundle/apitypes.py``) from what an API server serves.

    .venv/bin/python -m reconciler.localcluster.apitypes [--kubeconfig FILE] [-o FILE]

Without ``--kubeconfig`` a local control plane at the pinned Kubernetes version is started for the occasion.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reconciler.bundle.apitypes import TABLE, build, from_server, write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", help="read the schema this API server serves, not the local control plane's")
    p.add_argument("-o", "--output", type=Path, default=TABLE)
    args = p.parse_args(argv)
    from reconciler.kube.client import Kube

    def generate(kube: Kube) -> dict[str, Any]:
        return build(from_server(kube), str(kube.request("GET", "/version").get("gitVersion", "")))

    if args.kubeconfig:
        from reconciler.kube.client import load_api_client

        api = load_api_client(args.kubeconfig, None)
        if api is None:
            print(f"cannot read {args.kubeconfig}", file=sys.stderr)
            return 2
        table = generate(Kube(api))
    else:
        import tempfile

        from reconciler.localcluster import ControlPlane, ensure_binaries

        with tempfile.TemporaryDirectory() as tmp:
            plane = ControlPlane(Path(tmp), ensure_binaries(log=lambda line: print(line, file=sys.stderr)))
            plane.start()
            try:
                with plane.admin_client() as api:
                    table = generate(Kube(api))
            finally:
                plane.stop()
    write(table, args.output)
    print(f"{args.output}: {len(table['kinds'])} kinds, {len(table['types'])} types "
          f"(Kubernetes {table['kubernetes']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
