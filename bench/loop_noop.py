"""The cost of a no-op reconcile (nothing changed) at 10 and 50 operators, and proof that it writes nothing.

  python -m bench.loop_noop [--sizes 10 50] [--repeat 5]

A repository of N distinct operators (the example bundle copied under N
package names, 7 objects each) is applied once; then the loop's drift step
runs --repeat times with nothing changed, against a control plane started
here. Requests are counted by kind: reads, server-side dry-run writes (the
planner validates every object this way; nothing is stored), and real
writes, which must be zero. The generation, digest annotation and our
managedFields entry of every object the reconciler manages are compared
before and after as a second check.

  local tree       the working tree is read, resolved and converted again, then planned
  remote, same commit   the commit's prepared state is reused; only the plan runs
  remote poll, no new commit   a fetch that finds nothing new: no cluster request at all
  local tree, signed (SSH | OpenPGP)   the local tree with --trusted-keys: its HEAD, an empty commit signed by
                   git with an ssh-keygen or gpg key made here, verified on every step (docs/security.md)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from typing import Any

from bench.loop_support import CountingKube, make_repo, start_plane
from reconciler.cluster.apply import ANNOTATION_DIGEST
from reconciler.kube.client import Kube
from reconciler.loop import LocalSource, Loop, RemoteSource
from reconciler.repo.git import Ref, RemoteRepository


def _versions(kube: Kube) -> dict[str, Any]:
    """What a write of ours would move: generation, digest annotation and our managedFields entry (the
    resourceVersion of a Deployment also moves when the cluster's controllers update its status)."""
    out = {}
    for api_version, kind in [("apps/v1", "Deployment"), ("v1", "ServiceAccount"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                              ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                              ("reconciler.dev/v1alpha1", "Operator")]:
        info = kube.resource(api_version, kind)
        for item in kube.list(info):
            m = item["metadata"]
            ours = [e for e in m.get("managedFields") or [] if e.get("manager") == "reconciler"
                    and not e.get("subresource")]
            out[f"{kind}/{m.get('namespace', '')}/{m['name']}"] = (
                m.get("generation"), (m.get("annotations") or {}).get(ANNOTATION_DIGEST), ours)
    return out


def _measure(loop: Loop, kube: CountingKube, repeat: int, *, drift: bool) -> tuple[list[float], dict[str, float]]:
    times = []
    kube.counts.clear()
    for _ in range(repeat):
        start = time.perf_counter()
        result = loop.step(drift=drift)
        times.append(time.perf_counter() - start)
        assert result.outcome in ("unchanged", "current"), result
    return times, {k: v / repeat for k, v in kube.counts.items()}


def _signed_heads(path: Path, keys: Path):
    """Sign an empty commit on top of ``path`` with an SSH key, then with an OpenPGP key (both made here with the
    real tools), yielding each time the verification that trusts it."""
    import os
    import subprocess

    from reconciler.repo.verify import Trust, TrustedKeys

    keys.mkdir()
    user = ["-c", "user.name=Bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "ssh")], check=True)
    kind, key = (keys / "ssh.pub").read_text().split()[:2]
    (keys / "trusted-ssh").write_text(f"bench@example.invalid {kind} {key}\n")
    subprocess.run(["git", *user, "-c", "gpg.format=ssh", "-c", f"user.signingkey={keys / 'ssh'}", "commit", "-S",
                    "--allow-empty", "-qm", "signed (ssh)"], cwd=path, check=True)
    yield "SSH", Trust(TrustedKeys.load(keys / "trusted-ssh"))
    home = keys / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Bench <bench@example.invalid>",
                    "ed25519", "sign", "never"], env=env, check=True, capture_output=True)
    armored = subprocess.run(["gpg", "--armor", "--export", "bench@example.invalid"], env=env, check=True,
                             capture_output=True).stdout
    (keys / "trusted-gpg").write_bytes(armored)
    subprocess.run(["git", *user, "-c", "user.signingkey=bench@example.invalid", "commit", "-S", "--allow-empty",
                    "-qm", "signed (openpgp)"], cwd=path, env=env, check=True)
    try:
        yield "OpenPGP", Trust(TrustedKeys.load(keys / "trusted-gpg"))
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True, check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    plane = start_plane()
    rows, alone = [], []
    try:
        admin = Kube(plane.admin_client())
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"repo-{n}"
                make_repo(path, n)
                kube = CountingKube(plane.admin_client())
                loop = Loop(LocalSource(path, watch=False), kube, interval=3600)
                first = loop.step()
                assert first.outcome == "applied", first
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:  # until the Deployments have rolled out: status writes stop
                    kube.counts.clear()
                    loop.step(drift=True)
                    if not kube.counts.get("write"):
                        break
                before = _versions(admin)
                times, counts = _measure(loop, kube, args.repeat, drift=True)
                rows.append((n, "local tree", times, counts))
                remote = RemoteRepository(path.as_uri(), Ref(branch="main"), Path(tmp) / "cache")
                rloop = Loop(RemoteSource(remote), kube, interval=3600)
                times, counts = _measure(rloop, kube, args.repeat + 1, drift=True)
                rows.append((n, "remote, same commit", times[1:], counts))  # the first step prepares the commit
                times, counts = _measure(rloop, kube, args.repeat, drift=False)
                rows.append((n, "remote poll, no new commit", times, counts))
                for label, trust in _signed_heads(path, Path(tmp) / "keys"):
                    sloop = Loop(LocalSource(path, watch=False, trust=trust), kube, interval=3600)
                    warm = sloop.step(drift=True)   # records the new (signed) revision on the status objects
                    assert warm.outcome in ("applied", "unchanged"), warm
                    times, counts = _measure(sloop, kube, args.repeat, drift=True)
                    rows.append((n, f"local tree, signed ({label})", times, counts))
                    alone.append((n, label, _verification_alone(path, trust, args.repeat * 5)))
                after = _versions(admin)
                assert after == before, "a no-op reconcile changed an object"
                print(f"{n} operators: {len(before)} objects unchanged (generation, digest and our managedFields identical)")
                from bench.loop_latency import _uninstall
                from reconciler.repo.identity import detect
                _uninstall(admin, detect(path))
    finally:
        plane.stop()
    print(f"\nno-op reconcile, median of {args.repeat} (per reconcile: requests by kind)\n")
    print(f"| {'operators':>9} | {'scenario':<34} | {'seconds':>7} | {'reads':>5} | {'dry-run':>7} | {'writes':>6} |")
    print(f"|{'-' * 11}|{'-' * 36}|{'-' * 9}|{'-' * 7}|{'-' * 9}|{'-' * 8}|")
    for n, label, times, counts in rows:
        print(f"| {n:>9} | {label:<34} | {statistics.median(times):7.3f} | {counts.get('read', 0):5.0f} | "
              f"{counts.get('dry-run', 0):7.0f} | {counts.get('write', 0):6.0f} |")

    print(f"\nverifying the signed HEAD alone (no cluster: the rollback check's LIST is the extra read above), "
          f"median of {args.repeat * 5}\n")
    print(f"| {'operators':>9} | {'key':<8} | {'ms':>6} |")
    print(f"|{'-' * 11}|{'-' * 10}|{'-' * 8}|")
    for n, label, times in alone:
        print(f"| {n:>9} | {label:<8} | {statistics.median(times) * 1000:6.1f} |")


def _verification_alone(path: Path, trust, repeat: int) -> list[float]:  # noqa: ANN001 - a repo.verify.Trust
    from reconciler.repo import git_revision
    from reconciler.repo.verify import verify_revision

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        verify_revision(path / ".git", git_revision(path), trust)
        times.append(time.perf_counter() - start)
    return times


if __name__ == "__main__":
    main()
