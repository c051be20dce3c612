"""`reconciler bundle render|validate|build`: the bundle stage on its own, for authors and debugging.

``render`` and ``validate`` call ``reconciler.bundle.render``, the same code
path the reconciler uses, so what they print is what would be applied.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from reconciler.commands.common import COMMANDS
from reconciler.errors import EXIT_ERROR, EXIT_OK, BundleError, ReconcilerError
from reconciler.report.words import counted

BUNDLE_EXIT_CODES = """\
exit codes:
  0  done (render/validate: the bundle converts; build: the image was built and pushed)
  2  the bundle is invalid or unsupported (one line on stderr says why), or the source cannot be fetched
"""

# Labels a bundle image carries, copied from metadata/annotations.yaml (the bundle format spec).
BUNDLE_LABELS = ("operators.operatorframework.io.bundle.mediatype.v1",
                 "operators.operatorframework.io.bundle.manifests.v1",
                 "operators.operatorframework.io.bundle.metadata.v1",
                 "operators.operatorframework.io.bundle.package.v1",
                 "operators.operatorframework.io.bundle.channels.v1",
                 "operators.operatorframework.io.bundle.channel.default.v1")


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bundle", help=COMMANDS["bundle"],
                       description="Work with one bundle (registry+v1, k8s+v1 or plain+v0): print the plain manifests "
                                   "it becomes, validate it, or build and push it as an OCI image.",
                       epilog=BUNDLE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    bs = b.add_subparsers(dest="action", required=True, metavar="ACTION")
    r = bs.add_parser("render", help="print the plain manifests a bundle becomes", epilog=BUNDLE_EXIT_CODES,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("source", metavar="SOURCE", help="a bundle directory, or an OCI image reference")
    _add_install_args(r)
    r.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    r.add_argument("--cert-provider", choices=("self-signed", "cert-manager"), default="self-signed",
                   help="who issues webhook and APIService serving certificates")
    r.set_defaults(run=run_render)
    v = bs.add_parser("validate", help="check that a bundle converts, and say what it is",
                      description="Convert the bundle as the reconciler would (for the install -n and "
                                  "--watch-namespace describe, else its default one) and say what it is. With -o "
                                  "json the verdict is a document on stdout, invalid bundles included: "
                                  '{"valid": false, "error": {"message", "file", "object", "hint"}}.',
                      epilog=BUNDLE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("source", metavar="DIR", help="a bundle directory (or an OCI image reference)")
    _add_install_args(v)
    v.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="text: one line; json: the bundle's identity, install, objects and warnings (or the "
                        "error) as a document")
    v.set_defaults(run=run_validate)
    bu = bs.add_parser("build", help="build a bundle image (OCI layout, no container engine) and push it",
                       epilog=BUNDLE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    bu.add_argument("source", metavar="DIR", help="the bundle directory (manifests/ and metadata/)")
    bu.add_argument("--tag", required=True, metavar="REF", help="image reference to push to, e.g. "
                                                                "quay.io/org/op-bundle:v1.0.0")
    bu.add_argument("--layout", type=Path, metavar="DIR", help="also keep the OCI image layout in DIR")
    bu.add_argument("--no-push", action="store_true", help="only build the layout (needs --layout)")
    bu.set_defaults(run=run_build)
    cv = bs.add_parser("convert", help="convert a k8s+v1 bundle to a registry+v1 bundle with a synthesized CSV",
                       epilog=BUNDLE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    cv.add_argument("source", metavar="DIR", help="the k8s+v1 bundle directory")
    cv.add_argument("--to", choices=("registry+v1",), default="registry+v1", help="the format to write")
    cv.add_argument("--output", "-o", type=Path, required=True, metavar="DIR", help="an empty or new directory")
    cv.add_argument("--catalog", action="append", default=[], metavar="DIR",
                    help="a file-based catalog whose bundles may provide the APIs the bundle's RBAC requires: "
                         "their CRDs name the kinds written to metadata/dependencies.yaml (repeatable)")
    cv.set_defaults(run=run_convert)


def _add_install_args(p: argparse.ArgumentParser) -> None:
    """The install a bundle is converted for, as in a declaration's spec.install."""
    p.add_argument("-n", "--namespace", help="install namespace (default: the CSV's suggested namespace, else "
                                       "'operators')")
    p.add_argument("--watch-namespace", action="append", dest="watch", metavar="NS",
                   help="a target namespace (repeat for several; '' for all namespaces; default: all if the "
                        "bundle supports it, else its own)")


def _render(source: str, namespace: str | None, watch: list[str] | None, provider: str = "self-signed"):
    from reconciler.bundle import render
    from reconciler.bundle.certs import CertManagerProvider, SelfSignedProvider
    from reconciler.model.declarations import InstallSettings

    path = Path(source)
    if path.is_dir():
        root, ref = path.resolve().parent, f"file://{path.resolve().name}"
    elif "/" in source and not path.exists() and (":" in source or "@" in source or "." in source.split("/")[0]):
        root, ref = Path.cwd(), source
    else:
        raise BundleError(f"{source!r} is neither a bundle directory nor an image reference",
                          hint="pass a directory holding manifests/ (and metadata/), or registry/repo:tag")
    targets = tuple(watch) if watch is not None else None
    if targets is not None and all(t == "" for t in targets):
        targets = ()
    certs = CertManagerProvider() if provider == "cert-manager" else SelfSignedProvider()
    return render(ref, root, InstallSettings(namespace, targets), "operators", certs)


def _warn(rendered) -> None:
    """Warnings go to stderr, so the rendered objects on stdout stay a clean stream."""
    import sys

    for warning in rendered.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _one_line(exc: ReconcilerError, out: TextIO) -> int:
    import sys

    text = exc.render().replace("\n  hint: ", " (hint: ")
    if exc.hint:
        text += ")"
    print(f"error: {text}", file=sys.stderr)
    return exc.exit_code


def run_render(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import yamlio

    try:
        rendered = _render(args.source, args.namespace, args.watch, args.cert_provider)
    except ReconcilerError as exc:
        return _one_line(exc, out)
    _warn(rendered)
    if args.output == "json":
        out.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(rendered.objects)}, indent=2,
                             sort_keys=True) + "\n")
    else:
        out.write(yamlio.dump_all(list(rendered.objects)))
    return EXIT_OK


def run_validate(args: argparse.Namespace, out: TextIO) -> int:
    try:
        rendered = _render(args.source, args.namespace, args.watch)
    except ReconcilerError as exc:
        if args.output == "json":
            error = {"message": exc.message, "file": exc.path or "", "object": exc.obj or "", "hint": exc.hint or ""}
            out.write(json.dumps({"valid": False, "source": args.source, "error": error}, indent=2) + "\n")
        return _one_line(exc, out)
    _warn(rendered)
    if args.output == "json":
        from reconciler.model.kube import ObjectRef

        out.write(json.dumps({
            "valid": True, "source": args.source, "mediatype": rendered.mediatype, "package": rendered.package,
            "name": rendered.name, "version": rendered.version, "digest": rendered.digest,
            "namespace": rendered.namespace, "targetNamespaces": list(rendered.target_namespaces),
            "objects": [ObjectRef.of(o).to_dict() for o in rendered.objects],
            "warnings": list(rendered.warnings)}, indent=2) + "\n")
        return EXIT_OK
    what = f"{rendered.name} {rendered.version}".strip()
    print(f"valid {rendered.mediatype} bundle {what} ({rendered.digest}): {counted(len(rendered.objects), 'object')} for "
          f"namespace {rendered.namespace}", file=out)
    return EXIT_OK


def run_build(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler import oci
    from reconciler.bundle import fetch, read_content

    src = Path(args.source)
    if not src.is_dir():
        return _one_line(BundleError(f"{args.source!r} is not a directory"), out)
    if args.no_push and not args.layout:
        return _one_line(BundleError("--no-push needs --layout DIR to keep the image"), out)
    try:
        _render(str(src), None, None)  # never publish a bundle the reconciler itself would refuse
        content = read_content(fetch(f"file://{src.resolve().name}", src.resolve().parent))
        labels = {k: content.annotations[k] for k in BUNDLE_LABELS if k in content.annotations}
        labels.setdefault(BUNDLE_LABELS[0], content.mediatype)
        include = tuple(p for p in ("manifests", "metadata") if (src / p).is_dir())
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            layout = oci.build_layout(src, args.layout or Path(tmp) / "layout", labels, include=include)
            if not args.no_push:
                oci.push_layout(layout.path, args.tag)
    except ReconcilerError as exc:
        return _one_line(exc, out)
    where = "built" if args.no_push else f"pushed {args.tag}"
    print(f"{where}@{layout.digest}" if not args.no_push else f"built {layout.path} ({layout.digest})", file=out)
    return EXIT_OK if layout else EXIT_ERROR


def run_convert(args: argparse.Namespace, out: TextIO) -> int:
    import sys

    from reconciler.bundle import fetch, k8s_v1, read_content
    from reconciler.authoring.render import api_kinds_of_catalogs

    src = Path(args.source).resolve()
    try:
        content = read_content(fetch(f"file://{src.name}", src.parent))
        if content.mediatype != k8s_v1.MEDIATYPE:
            raise BundleError(f"{args.source} is a {content.mediatype} bundle; only k8s+v1 bundles are converted",
                              hint="registry+v1 bundles need no conversion")
        dest = k8s_v1.export_registry_v1(content, args.output, api_kinds_of_catalogs(args.catalog),
                                         warn=lambda text: print(f"warning: {text}", file=sys.stderr))
        _render(str(dest), None, None)  # the written bundle must itself convert
    except ReconcilerError as exc:
        return _one_line(exc, out)
    print(f"wrote registry+v1 bundle {dest}", file=out)
    return EXIT_OK
