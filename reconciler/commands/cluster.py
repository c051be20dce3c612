"""`reconciler cluster up|down|kubeconfig`: a local control plane for users without a cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from reconciler.commands.common import COMMANDS
from reconciler.errors import EXIT_OK


CLUSTER_EXIT = """\
exit codes:
  0   done
  2   the control plane could not be built, started or stopped (the message names its log), or a catalog
      to serve is invalid (the message names its file)
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
    for action, text in (("up", "build if needed, then start the control plane in the background"),
                         ("down", "stop the control plane and remove its state"),
                         ("kubeconfig", "print the path of the admin kubeconfig")):
        a = cl_sub.add_parser(action, help=text, epilog=CLUSTER_EXIT)
        where = a.add_mutually_exclusive_group()
        where.add_argument("--name", default="", metavar="NAME",
                           help="a private cluster of this name (lowercase letters, digits, '-'), beside the "
                                "default one: its own processes, ports and state, which `down` of another name "
                                "leaves alone")
        where.add_argument("--state-dir", type=Path, metavar="DIR",
                           help="keep the cluster's state (and find it) in DIR instead")
        if action == "up":
            a.add_argument("--with-olm", action="store_true",
                           help="run OLM v0 (olm-operator and catalog-operator, built once from pinned sources) "
                                "on the cluster too, or add it to the running one")
            a.add_argument("--openshift", action="store_true",
                           help="with --with-olm: lay OLM out as OpenShift does, to rehearse a migration of such a "
                                "cluster: its global catalog namespace is openshift-marketplace (where "
                                "--serve-catalog registers catalogs) and openshift-operators holds the "
                                "AllNamespaces OperatorGroup global-operators (chosen when OLM starts)")
            a.add_argument("--serve-catalog", action="append", default=[], type=Path, metavar="DIR",
                           help="serve the repository catalog DIR (REPO/catalogs/NAME) to OLM as CatalogSource "
                                "NAME in OLM's catalog namespace (olm, or openshift-marketplace): rendered with its "
                                "bundles' objects inline (no image OLM would unpack) and served by opm on loopback "
                                "(built once); repeatable, and given again it serves the catalog's current content")
    cl.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import localcluster

    state_dir = args.state_dir or (localcluster.named_state_dir(args.name) if args.name else None)
    if args.action == "up":
        if args.openshift and not args.with_olm:
            from reconciler.errors import UsageError

            raise UsageError("--openshift lays out OLM, and OLM runs only with --with-olm",
                             hint="run `reconciler cluster up --with-olm --openshift`")
        localcluster.cluster_up(state_dir, log=lambda m: print(m, file=out), with_olm=args.with_olm,
                                serve=args.serve_catalog, openshift=args.openshift)
        print(f"export KUBECONFIG={localcluster.cluster_kubeconfig(state_dir)}", file=out)
        return EXIT_OK
    if args.action == "down":
        localcluster.cluster_down(state_dir, log=lambda m: print(m, file=out))
        return EXIT_OK
    print(localcluster.cluster_kubeconfig(state_dir), file=out)
    return EXIT_OK
