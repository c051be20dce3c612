"""A control plane that outlives the command that started it (`reconciler cluster ...`).

`up` launches the processes in their own sessions and records them in
``<cache>/cluster/state.json`` (``<cache>/clusters/<name>/`` for `--name`, or
any `--state-dir`); `down` and `kubeconfig` find them through that file, so
a private cluster is untouched by another's `down`. A lock next to the state directory keeps two concurrent `up`/`down`
commands from interleaving. State whose processes are gone (a reboot, a kill)
is stale: `up` stops whatever is left of it and starts afresh. `up --with-olm`
runs OLM v0 too, and adds it to a running cluster that has none; `down` stops it
with the rest.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.errors import ControlPlaneError

from .build import cache_dir, ensure_binaries
from .olmv0 import ensure_olm
from .plane import ControlPlane


def default_state_dir() -> Path:
    return cache_dir() / "cluster"


def named_state_dir(name: str) -> Path:
    """The state of the private cluster ``name`` (``cluster up --name``), beside the default one's."""
    from reconciler.errors import UsageError
    from reconciler.model.kube import is_dns1123_label

    if not is_dns1123_label(name):
        raise UsageError(f"--name {name!r}: a cluster name is lowercase letters, digits and '-'")
    return cache_dir() / "clusters" / name


def cluster_up(state_dir: Path | str | None = None,
               log: Callable[[str], object] = print, *, with_olm: bool = False,
               serve: Iterable[Path] = (), openshift: bool = False) -> ControlPlane:
    """Start the detached control plane, or return the one already running and healthy.

    ``with_olm``: OLM v0 runs on it as well (built first when missing), added to a running one that has none;
    ``openshift``: laid out as OpenShift lays it out (``ControlPlane(openshift=True)``; OLM's layout is chosen
    when OLM starts, so a running OLM laid out otherwise is refused).
    ``serve``: repository catalog directories served to OLM (``ControlPlane.serve_catalog``), each checked
    before anything starts; opm is built first when missing.
    """
    from .catalogs import ensure_opm, render_for_olm

    serve = [Path(d) for d in serve]
    for directory in serve:   # a catalog OLM cannot be given is refused before anything starts
        render_for_olm(directory)
    opm = ensure_opm(log) if serve else None
    state_dir = Path(state_dir) if state_dir else default_state_dir()
    with _locked(state_dir):
        existing = _recorded(state_dir, log)
        if existing is not None:
            if existing.healthy():
                if openshift and existing.olm_version and not existing.openshift:
                    raise ControlPlaneError(
                        f"the local cluster already runs OLM {existing.olm_version} laid out as upstream lays it out "
                        f"(catalogs in namespace olm), and --openshift cannot change that on a running OLM",
                        hint="run `reconciler cluster down` first (with the same --name or --state-dir), then "
                             "`cluster up --with-olm --openshift`")
                log(f"the local cluster ({existing.version}) is already running at {existing.server}"
                    + (f" with OLM {existing.olm_version}" if existing.olm_version else "")
                    + f": reusing it (its state: {state_dir})")
                if with_olm and not existing.olm_version:
                    existing.openshift = openshift
                    existing.start_olm(ensure_olm(log))
                _serve(existing, serve, opm)
                return existing
            log("cleaning up a local cluster that is no longer running")
            existing.stop()
        plane = ControlPlane(state_dir, ensure_binaries(log), detached=True, log=log,
                             olm=ensure_olm(log) if with_olm else None, openshift=openshift)
        plane.start()
        try:
            _serve(plane, serve, opm)
        except BaseException:
            plane.stop()
            raise
        log(f"kubeconfig: {plane.kubeconfig_path}")
        return plane


def _serve(plane: ControlPlane, directories: list[Path], opm: Path | None) -> None:
    for directory in directories:
        assert opm is not None
        plane.serve_catalog(directory, opm)


def cluster_down(state_dir: Path | str | None = None,
                 log: Callable[[str], object] = print) -> bool:
    """Stop the detached control plane and delete its state; False if none was recorded."""
    state_dir = Path(state_dir) if state_dir else default_state_dir()
    with _locked(state_dir):
        plane = _recorded(state_dir)
        if plane is not None:
            plane.stop()
        if state_dir.is_dir():
            ControlPlane(state_dir).reset()
            _remove_if_empty(state_dir)
        log("the local cluster is stopped" if plane else "no local cluster was running")
        return plane is not None


def cluster_kubeconfig(state_dir: Path | str | None = None) -> Path:
    """The admin kubeconfig of the running detached control plane."""
    state_dir = Path(state_dir) if state_dir else default_state_dir()
    plane = _recorded(state_dir)
    if plane is None or not plane.healthy():
        raise ControlPlaneError("the local cluster is not running",
                                hint="run `reconciler cluster up`")
    return plane.kubeconfig_path


def _recorded(state_dir: Path, log: Callable[[str], object] = lambda _: None) -> ControlPlane | None:
    """The control plane recorded in ``state_dir``, running or not.

    None if there is no record or it is unreadable (then there is nothing it could find to stop).
    """
    if not (state_dir / "state.json").exists():
        return None
    try:
        return ControlPlane.attach(state_dir, log)
    except ControlPlaneError:
        return None


@contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(state_dir.parent / f".{state_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
