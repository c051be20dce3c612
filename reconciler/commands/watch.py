"""`reconciler watch`: keep a cluster equal to a working tree or a remote branch, tag or commit."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TextIO

from reconciler.commands.common import COMMANDS, add_cluster_args, add_fleet_arg, add_trust_args, trust_from
from reconciler.errors import EXIT_OK

EPILOG = """\
A revision that fails to load, resolve or convert is never applied: the last
good one stays applied (and keeps being corrected for drift), and the error
is logged, counted in /metrics and recorded as a Warning Event on the
Operator status objects. With --trusted-keys, a commit that is not signed by
a trusted key (or moves the branch back) is rejected the same way, before
anything of it is read.

exit codes:
  0  stopped by SIGTERM or SIGINT after finishing (or safely aborting) the current step
  2  bad arguments or source (for example a missing directory or an invalid commit id)
  3  no cluster is configured
"""


def register(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser(
        "watch", help=COMMANDS["watch"],
        description="Reconcile on every change of the source and every --interval seconds to correct drift. "
                    "A local directory is watched for saved changes (the reconciler's own olm.lock writes are "
                    "ignored); a URL is fetched every --poll seconds, or at once on a signed push to /hook. A fetched "
                    "commit that changes nothing this run reads (with --cluster: another cluster's lockfile, a "
                    "declaration placed only elsewhere; a README) is skipped, its last good state kept.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    w.add_argument("source", metavar="REPO_OR_URL",
                   help="a working-tree directory, or a git URL (https://, ssh://, git://, file://, user@host:path)")
    ref = w.add_mutually_exclusive_group()
    ref.add_argument("--branch", help="remote branch to follow (default: the remote's default branch)")
    ref.add_argument("--tag", help="remote tag to follow")
    ref.add_argument("--commit", help="remote commit to pin (full 40-character id)")
    w.add_argument("--interval", type=float, default=300.0,
                   help="seconds between drift corrections (default 300)")
    w.add_argument("--poll", type=float, default=30.0, help="seconds between fetches of a remote (default 30)")
    w.add_argument("--debounce", type=float, default=0.3,
                   help="seconds a working tree must stay quiet after a change before reconciling (default 0.3)")
    w.add_argument("--wait-for-source", type=float, default=0, metavar="SECONDS",
                   help="wait this long for a working-tree directory to appear (a sidecar's first checkout)")
    w.add_argument("--dry-run", action="store_true", help="plan and report, never write to the cluster")
    w.add_argument("--repository", metavar="ADDRESS", default=os.environ.get("RECONCILER_REPOSITORY") or None,
                   help="the repository's address, recorded on the Operators it installs (default: the URL "
                        "followed, or the working tree's origin remote; $RECONCILER_REPOSITORY; "
                        "reconciler.yaml's 'repository:' wins; see docs/ownership.md)")
    w.add_argument("--read-only", action="store_true",
                   help="never write olm.lock into a working tree (for a checkout another process owns, such as "
                        "a git-sync sidecar's); remote sources are never written to")
    add_cluster_args(w)
    add_fleet_arg(w)
    w.set_defaults(cluster=os.environ.get("RECONCILER_CLUSTER") or None)   # deploy/ sets it in a fleet
    w.add_argument("--listen", default="",
                   help="serve /healthz, /readyz, /metrics and /hook on HOST:PORT (e.g. :8080); off by default")
    w.add_argument("--hook-secret-file", type=Path,
                   help="enable POST /hook, verifying X-Hub-Signature-256, X-Hub-Signature (sha1 or sha256: "
                        "GitHub's legacy header, Bitbucket), X-Gitea-Signature or X-Gitlab-Token with this secret; "
                        "with --leader-elect a standby passes the hook to the leader through the ConfigMap "
                        "LEASE_NAME-hook")
    w.add_argument("--leader-elect", action="store_true",
                   help="reconcile only while holding a coordination.k8s.io Lease (for several replicas)")
    w.add_argument("-n", "--namespace", default="",
                   help="namespace of the Lease and of the Events about cluster-scoped objects (default: the "
                        "kubeconfig context's namespace, else the pod's, else reconciler-system for the Lease "
                        "and default for the Events)")
    w.add_argument("--lease-namespace", default="", help="namespace of the Lease (default: -n)")
    w.add_argument("--lease-name", default="reconciler", help="name of the Lease (default reconciler)")
    w.add_argument("--identity", default="", help="this replica's name in the Lease (default: hostname_pid)")
    w.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    w.add_argument("--events-namespace", default="",
                   help="namespace for Events about the cluster-scoped Operator status objects (default: -n)")
    w.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                   help="least severe level logged (default info; -v means debug, -q error)")
    w.add_argument("--report", action="store_true",
                   help="also print, on stdout, the change report `reconcile` prints, after each step that changes "
                        "something (off by default: the log on stderr is the one stream of events)")
    w.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="text, or one JSON object a line with the fields operator, revision, object, action, "
                        "duration, reason and outcome where they apply (default text)")
    add_trust_args(w)
    auth = w.add_argument_group("remote authentication")
    auth.add_argument("--git-username", help="user name for HTTPS (any non-empty name works with most tokens)")
    auth.add_argument("--git-token-file", type=Path, help="file holding an HTTPS token or password")
    auth.add_argument("--ssh-key", type=Path, help="SSH private key (public key read from KEY.pub if present)")
    auth.add_argument("--ssh-passphrase-file", type=Path, help="file holding the SSH key's passphrase")
    auth.add_argument("--ssh-known-hosts", type=Path, help="known_hosts file that the SSH host key must be in")
    auth.add_argument("--cache-dir", type=Path,
                      help="where the bare clone is kept (default: $XDG_CACHE_HOME/reconciler/git)")
    w.set_defaults(run=run)


def _secret(path: Path | None, what: str) -> str | None:
    from reconciler.errors import InputError

    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", path=str(path)) from None


def build_source(args: argparse.Namespace):
    from reconciler.errors import InputError
    from reconciler.loop import LocalSource, RemoteSource
    from reconciler.repo.git import Auth, Ref, RemoteRepository, is_remote

    if not is_remote(args.source):
        if args.branch or args.tag or args.commit:
            raise InputError("--branch, --tag and --commit apply to a remote URL, not a working tree",
                             path=args.source, hint="a working tree is reconciled as it is on disk")
        deadline = time.monotonic() + args.wait_for_source
        while not Path(args.source).is_dir() and time.monotonic() < deadline:
            time.sleep(0.5)
        if not Path(args.source).is_dir():
            raise InputError("repository directory does not exist", path=args.source,
                             hint="give a working-tree directory or a git URL")
        return LocalSource(Path(args.source), debounce=args.debounce, write_lockfile=not args.read_only,
                           repository=_repository(args))
    auth = Auth(username=args.git_username, password=_secret(args.git_token_file, "token file"),
                ssh_key=args.ssh_key, ssh_passphrase=_secret(args.ssh_passphrase_file, "passphrase file") or "",
                known_hosts=args.ssh_known_hosts)
    cache = args.cache_dir or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reconciler" / "git"
    remote = RemoteRepository(args.source, Ref(branch=args.branch, tag=args.tag, commit=args.commit), cache, auth)
    return RemoteSource(remote, poll_interval=args.poll, repository=_repository(args))


def _repository(args: argparse.Namespace) -> str | None:
    from reconciler.repo.identity import from_setting

    return from_setting(args.repository) if args.repository else None


def _listen(value: str) -> tuple[str, int]:
    from reconciler.errors import InputError

    host, _, port = value.rpartition(":")
    if not port.isdigit():
        raise InputError(f"--listen {value!r} is not HOST:PORT", hint="for example :8080 or 127.0.0.1:8080")
    return host or "0.0.0.0", int(port)


def _context_namespace(args: argparse.Namespace) -> str:
    """-n, else the kubeconfig context's namespace (as kubectl defaults it), else empty."""
    from reconciler.kube.kubeconfig import load_kubeconfig

    if args.namespace:
        return args.namespace
    merged = load_kubeconfig(args.kubeconfig)
    return merged.namespace(args.context) if merged is not None else ""


def _lease_namespace(args: argparse.Namespace) -> str:
    namespace = args.lease_namespace or _context_namespace(args)
    if namespace:
        return namespace
    sa_ns = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    return sa_ns.read_text().strip() if sa_ns.is_file() else "reconciler-system"


def run(args: argparse.Namespace, out: TextIO) -> int:
    import logging  # imported here, as the rest: `reconciler --help` loads only the parsers
    import signal
    import socket

    from reconciler.kube.client import Kube, load_api_client
    from reconciler.commands.reconcile import print_outcome
    from reconciler.errors import ClusterError
    from reconciler.loop import LeaderElector, LocalSource, Loop, StepResult
    from reconciler.loop.server import Server

    from reconciler.report import logs

    logs.setup(args.log_level or logs.level_for(args.verbose, args.quiet, default="info"), args.log_format)
    source = build_source(args)
    listen = _listen(args.listen) if args.listen else None
    hook_secret = _secret(args.hook_secret_file, "webhook secret file")
    preferred = None
    if isinstance(source, LocalSource):   # a remote's clusters are known once it is fetched
        from reconciler.repo.fleet import cluster_context

        preferred = cluster_context(source.root, args.cluster)
    api = load_api_client(args.kubeconfig, args.context, preferred=preferred)
    if api is None:
        raise ClusterError("no cluster is configured",
                           hint="pass --kubeconfig, set $KUBECONFIG, or run in a pod with a service account")
    kube = Kube(api)
    identity = args.identity or f"{socket.gethostname()}_{os.getpid()}"

    def report(result: StepResult) -> None:
        if result.outcome_detail is not None and result.outcome_detail.sync.changed:
            print_outcome(result.outcome_detail, out, dry_run=args.dry_run, server=kube.server)
            out.flush()

    elector = None
    if args.leader_elect:
        d = args.lease_duration
        elector = LeaderElector(Kube(api), _lease_namespace(args), args.lease_name, identity,
                                lease_duration=d, renew_deadline=d * 2 / 3, retry_period=d / 7.5)
    source.trust = trust_from(args)
    loop = Loop(source, kube, interval=args.interval, dry_run=args.dry_run, elector=elector,
                events_namespace=args.events_namespace or _context_namespace(args) or "default",
                identity=identity, report=report if args.report else None, cluster=args.cluster)
    if elector is not None:
        elector.on_change = lambda leading: loop.trigger("leadership acquired") if leading else None
    relay = None
    if elector is not None and hook_secret:
        from reconciler.loop.relay import HookRelay

        relay = HookRelay(elector, period=max(1.0, elector.retry_period))
    server = Server(loop, listen[0], listen[1], hook_secret.encode() if hook_secret else None,
                    relay=relay) if listen else None

    def on_signal(signum: int, _frame: object) -> None:
        logging.getLogger("reconciler.loop").info("%s received: stopping after the current step",
                                                  signal.Signals(signum).name)
        loop.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    logging.getLogger("reconciler.loop").info("watching %s; applying to %s as %s", source.description,
                                              kube.server, identity)
    try:
        if server:
            server.start()
        if elector:
            elector.start()
        if relay and elector:
            relay.start(lambda: elector.leading, loop.trigger)
        loop.run()
    finally:
        if relay:
            relay.stop()
        if elector:
            elector.stop(release=True)
        if server:
            server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
    return EXIT_OK
