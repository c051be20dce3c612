"""Convert every bundle of the real-world corpus and, optionally, server-side dry-run the result.

    .venv/bin/python -m bench.bundle_corpus [CORPUS/operators] [--dry-run-cluster] [--kubeconfig FILE]

Prints one table: how many bundles were converted, and how many were
rejected for each reason (with an example bundle). With ``--dry-run-cluster``
(and no ``--kubeconfig``) it starts the local control plane, creates each
install's namespaces and dry-runs every converted object with server-side
apply; an object the API server refuses is reported as its own outcome.

The same functions drive ``tests/bundle/test_corpus.py``.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from reconciler.bundle import RenderedBundle, fetch, read_content, render_content
from reconciler.errors import ReconcilerError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import ObjectRef, bounded_name

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "operators"

# Every rejection the corpus may produce, as (reason, pattern on the error message). A bundle whose
# error matches none of them is reported as "unexpected" and fails the corpus test.
REASONS: tuple[tuple[str, str], ...] = (
    ("custom resource shipped in the bundle", r"is a custom resource of the bundle's own CRDs"),
    ("object kind not allowed in registry+v1", r"is not an object a registry\+v1 bundle may carry"),
    ("CSV apiVersion lacks the operators.coreos.com group", r"the ClusterServiceVersion has apiVersion"),
    ("no ClusterServiceVersion", r"needs exactly one ClusterServiceVersion"),
    ("manifest without apiVersion or kind", r"every manifest needs apiVersion and kind"),
    ("CRD in a protected group without api-approved.kubernetes.io", r"is in the protected group"),
    ("v1 CRD without scope", r"has no spec.scope"),
    ("YAML the loader refuses", r"invalid YAML"),
    ("conversion webhook outside AllNamespaces", r"conversion webhook, which needs the AllNamespaces"),
    ("webhook or APIService names an unknown deployment", r"which the install strategy does not define"),
    ("conversion webhook for a CRD not in the bundle", r"conversion webhook for CRDs"),
    ("no supported install mode", r"supports only|no install mode|is not supported by the bundle"),
)

# Optional object kinds whose CRDs a bare API server lacks: the dry-run installs permissive stand-ins.
STAND_IN_CRDS = (("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", "Namespaced"),
                 ("monitoring.coreos.com", "PrometheusRule", "prometheusrules", "Namespaced"),
                 ("autoscaling.k8s.io", "VerticalPodAutoscaler", "verticalpodautoscalers", "Namespaced"),
                 ("console.openshift.io", "ConsoleYAMLSample", "consoleyamlsamples", "Cluster"),
                 ("console.openshift.io", "ConsoleQuickStart", "consolequickstarts", "Cluster"),
                 ("console.openshift.io", "ConsoleCLIDownload", "consoleclidownloads", "Cluster"),
                 ("console.openshift.io", "ConsoleLink", "consolelinks", "Cluster"))


@dataclass
class Outcome:
    bundle: str                 # <package>/<version>[/bundle]
    status: str                 # converted | rejected | unexpected | dry-run failed
    reason: str = ""
    message: str = ""
    objects: int = 0
    mode: str = ""
    rendered: RenderedBundle | None = field(default=None, repr=False)


def find_bundles(corpus: Path) -> tuple[list[Path], list[Path]]:
    """(bundle roots, version directories that hold no bundle). A nested ``bundle/`` folder is a bundle root."""
    bundles, others = [], []
    for version_dir in sorted(p for p in corpus.glob("*/*") if p.is_dir()):
        if (version_dir / "manifests").is_dir():
            bundles.append(version_dir)
        elif (version_dir / "bundle" / "manifests").is_dir():
            bundles.append(version_dir / "bundle")
        else:
            others.append(version_dir)
    return bundles, others


def classify(message: str) -> tuple[str, str]:
    for reason, pattern in REASONS:
        if re.search(pattern, message):
            return "rejected", reason
    return "unexpected", message.splitlines()[0][:120]


def convert_one(corpus: Path, root: Path) -> Outcome:
    name = root.relative_to(corpus).as_posix()
    package = name.split("/")[0]
    try:
        content = read_content(fetch(f"file://{name}", corpus))
        default_ns = bounded_name("corpus", package)
        try:
            rendered = render_content(content, InstallSettings(), default_ns)
        except ReconcilerError as exc:
            if "the target namespaces must be chosen" not in exc.message:
                raise
            # SingleNamespace/MultiNamespace-only operators: install watching one other namespace
            rendered = render_content(content, InstallSettings(None, (bounded_name(package, "watched"),)),
                                      default_ns)
    except ReconcilerError as exc:
        status, reason = classify(exc.message)
        return Outcome(name, status, reason, exc.render())
    except Exception as exc:  # a crash is a bug in the converter, never a reason
        return Outcome(name, "unexpected", f"crash: {type(exc).__name__}", repr(exc))
    mode = "AllNamespaces" if not rendered.target_namespaces else (
        "OwnNamespace" if rendered.target_namespaces == (rendered.namespace,) else "Single/MultiNamespace")
    return Outcome(name, "converted", "", "", len(rendered.objects), mode, rendered)


def convert_all(corpus: Path, bundles: Iterable[Path]) -> list[Outcome]:
    return [convert_one(corpus, b) for b in bundles]


MODES = ("AllNamespaces", "OwnNamespace", "SingleNamespace", "MultiNamespace")


def convert_every_mode(corpus: Path, root: Path, beyond_default: bool = False) -> list[Outcome]:
    """One outcome per install mode the bundle's CSV supports, named ``<bundle> [<mode>]``.

    ``beyond_default`` leaves out the mode ``convert_one`` already converts in
    (AllNamespaces when supported, else OwnNamespace).
    A bundle that cannot be read at all gives none: its default conversion
    (``convert_one``) already reports why.
    """
    from reconciler.bundle import registry_v1

    name = root.relative_to(corpus).as_posix()
    package = name.split("/")[0]
    ns = bounded_name("corpus", package)
    watched = (bounded_name(package, "watched"), bounded_name(package, "watched-2"))
    targets = {"AllNamespaces": (), "OwnNamespace": (ns,), "SingleNamespace": watched[:1],
               "MultiNamespace": watched}
    try:
        content = read_content(fetch(f"file://{name}", corpus))
        if content.mediatype != "registry+v1":
            return []
        supported = registry_v1.find_csv(content).supported_modes
    except ReconcilerError:
        return []
    default = next((m for m in MODES[:2] if m in supported), None)
    out = []
    for mode in MODES:
        if mode not in supported or (beyond_default and mode == default):
            continue
        label = f"{name} [{mode}]"
        try:
            rendered = render_content(content, InstallSettings(ns, targets[mode]), ns)
        except ReconcilerError as exc:
            status, reason = classify(exc.message)
            out.append(Outcome(label, status, reason, exc.render(), mode=mode))
            continue
        except Exception as exc:  # a crash is a bug in the converter, never a reason
            out.append(Outcome(label, "unexpected", f"crash: {type(exc).__name__}", repr(exc), mode=mode))
            continue
        out.append(Outcome(label, "converted", "", "", len(rendered.objects), mode, rendered))
    return out


# --- server-side dry-run ------------------------------------------------------------------------


def install_stand_ins(kube: Any) -> None:
    from reconciler.model.kube import FIELD_MANAGER

    crd_info = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    for group, kind, plural, scope in STAND_IN_CRDS:
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.{group}",
                            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/autoscaler"}},
               "spec": {"group": group, "scope": scope,
                        "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                                  "listKind": f"{kind}List"},
                        "versions": [{"name": v, "served": True, "storage": v == "v1",
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}}}
                                     for v in ("v1", "v1alpha1", "v1beta1", "v1beta2")]}}
        kube.apply(crd_info, crd, field_manager=FIELD_MANAGER, dry_run=False)
    deadline = time.monotonic() + 60
    for group, kind, _, _ in STAND_IN_CRDS:
        while kube.resource(f"{group}/v1", kind) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"stand-in CRD for {kind}.{group} never became served")
            time.sleep(0.2)
            kube.forget_discovery()


def dry_run(kube: Any, outcome: Outcome) -> None:
    """Dry-run apply every object of a converted bundle (its namespaces exist); the first refusal fails it."""
    from reconciler.kube.client import ApiError
    from reconciler.model.kube import FIELD_MANAGER

    rendered = outcome.rendered
    assert rendered is not None
    for obj in rendered.objects:
        try:
            kube.apply(kube.require_resource(obj), obj, field_manager=FIELD_MANAGER, dry_run=True)
        except (ApiError, ReconcilerError) as exc:
            message = str(getattr(exc, "message", exc))
            short = message.rsplit("): ", 1)[-1] if "): " in message else message
            outcome.status = "dry-run failed"
            outcome.reason = f"{ObjectRef.of(obj).kind} refused by the API server: {short[:100]}"
            outcome.message = f"{ObjectRef.of(obj)}: {message}"[:2000]
            return


def dry_run_all(kube: Any, outcomes: list[Outcome], workers: int = 4) -> None:
    install_stand_ins(kube)
    made: set[str] = set()
    converted = [o for o in outcomes if o.status == "converted"]
    # namespaces first (serially), then the objects of many bundles at once
    for o in converted:
        assert o.rendered is not None
        for ns in {o.rendered.namespace, *o.rendered.target_namespaces} - made:
            dry_run_namespace(kube, ns)
            made.add(ns)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda o: dry_run(kube, o), converted))


def dry_run_namespace(kube: Any, ns: str) -> None:
    from reconciler.model.kube import FIELD_MANAGER

    kube.apply(kube.resource("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
               field_manager=FIELD_MANAGER, dry_run=False)


# --- report -------------------------------------------------------------------------------------


def table(outcomes: list[Outcome], others: list[Path], corpus: Path) -> str:
    counts = collections.Counter((o.status, o.reason) for o in outcomes)
    example: dict[tuple[str, str], str] = {}
    for o in outcomes:
        example.setdefault((o.status, o.reason), o.bundle)
    lines = ["| outcome | reason | bundles | example |", "| --- | --- | ---: | --- |"]
    order = {"converted": 0, "dry-run failed": 1, "rejected": 2, "unexpected": 3}
    for (status, reason), n in sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 9), -kv[1], kv[0][1])):
        lines.append(f"| {status} | {reason or '-'} | {n} | {example[(status, reason)]} |")
    lines.append(f"| not a bundle | version directory with no manifests/ (e.g. catalog templates) | {len(others)} | "
                 f"{others[0].relative_to(corpus).as_posix() if others else '-'} |")
    modes = collections.Counter(o.mode for o in outcomes if o.status == "converted")
    lines.append("")
    lines.append("Converted bundles by install mode: " + ", ".join(f"{m} {n}" for m, n in sorted(modes.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--dry-run-cluster", action="store_true", help="server-side dry-run the converted objects")
    p.add_argument("--kubeconfig", help="dry-run against this cluster instead of a fresh local control plane")
    p.add_argument("--details", action="store_true", help="print every rejection message")
    args = p.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 2
    bundles, others = find_bundles(args.corpus)
    started = time.monotonic()
    outcomes = convert_all(args.corpus, bundles)
    converted_in = time.monotonic() - started
    if args.dry_run_cluster:
        started = time.monotonic()
        _with_cluster(args.kubeconfig, lambda kube: dry_run_all(kube, outcomes))
        print(f"dry-run of converted bundles: {time.monotonic() - started:.1f}s")
    print(f"{len(bundles)} bundles converted or rejected in {converted_in:.1f}s")
    print(table(outcomes, others, args.corpus))
    if args.details:
        for o in outcomes:
            if o.status != "converted":
                print(f"\n{o.bundle} [{o.status}: {o.reason}]\n  {o.message}")
    return 1 if any(o.status in ("unexpected", "dry-run failed") for o in outcomes) else 0


def _with_cluster(kubeconfig: str | None, fn: Any) -> None:
    import tempfile

    from reconciler.kube.client import Kube, load_api_client

    if kubeconfig:
        api = load_api_client(kubeconfig, None)
        assert api is not None
        fn(Kube(api))
        return
    from reconciler.localcluster import ControlPlane, ensure_binaries

    with tempfile.TemporaryDirectory() as tmp:
        plane = ControlPlane(Path(tmp), ensure_binaries())
        plane.start()
        try:
            with plane.admin_client() as api:
                fn(Kube(api))
        finally:
            plane.stop()


if __name__ == "__main__":
    sys.exit(main())
