"""`reconciler cluster up|down|kubeconfig`: a local control plane for users without a cluster."""

from __future__ import annotations

import argparse
from typing import TextIO

from reconciler.commands import COMMANDS
from reconciler.errors import EXIT_OK


CLUSTER_EXIT = """\
exit codes:
  0   done
  2   the control plane could not be built, started or stopped (the message names its log)
  64  a usage error
"""


def register(sub: argparse._SubParsersAction) -> None:
    cl = sub.add_parser("cluster", help=COMMANDS["cluster"],
                        description="Start, stop or locate a local Kubernetes cluster on loopback: etcd, "
                                    "kube-apiserver, kube-controller-manager, kube-scheduler and kwok with three "
                                    "simulated nodes (pods become Running and Ready; no container runs), built "
                                    "once from pinned sources and cached.",
                        epilog=CLUSTER_EXIT)
    cl_sub = cl.add_subparsers(dest="action", required=True, metavar="ACTION")
    cl_sub.add_parser("up", help="build if needed, then start the control plane in the background",
                      epilog=CLUSTER_EXIT)
    cl_sub.add_parser("down", help="stop the control plane and remove its state", epilog=CLUSTER_EXIT)
    cl_sub.add_parser("kubeconfig", help="print the path of the admin kubeconfig", epilog=CLUSTER_EXIT)
    cl.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import localcluster

    if args.action == "up":
        localcluster.cluster_up(log=lambda m: print(m, file=out))
        print(f"export KUBECONFIG={localcluster.cluster_kubeconfig()}", file=out)
        return EXIT_OK
    if args.action == "down":
        localcluster.cluster_down(log=lambda m: print(m, file=out))
        return EXIT_OK
    print(localcluster.cluster_kubeconfig(), file=out)
    return EXIT_OK
