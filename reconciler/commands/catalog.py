"""`reconciler catalog`: validate, list, graph and render file-based catalogs; import a cluster's catalogs."""

from __future__ import annotations

import argparse
import sys

from reconciler.commands.common import COMMANDS, namespaced_arg
from reconciler.errors import EXIT_CHANGES, EXIT_OK, CatalogError
from reconciler.report.words import counted

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import TextIO

CATALOG_EXIT = """\
exit codes:
  0  the catalog is valid (validate), or the command succeeded
  1  validate found problems (every one is listed)
  2  the input could not be read (missing directory, unreadable bundle, unknown package)
"""


def register(sub: argparse._SubParsersAction) -> None:
    cat = sub.add_parser("catalog", help=COMMANDS["catalog"],
                         description="Work with file-based catalogs (FBC): validate them with the rules opm "
                                     "validate enforces, list their content, draw upgrade graphs, render bundles, "
                                     "import the catalogs a cluster uses into the repository.",
                         epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = cat.add_subparsers(dest="catalog_command", required=True, metavar="SUBCOMMAND")

    v = csub.add_parser("validate", help="report every problem in a catalog directory",
                        epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("directory", metavar="DIR")
    v.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    v.add_argument("--no-cache", action="store_true", help="do not read or write the catalog cache")
    v.set_defaults(run=run_validate)

    ls = csub.add_parser("list", help="list packages, channels or bundles",
                         epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    ls.add_argument("what", choices=("packages", "channels", "bundles"))
    _catalog_arguments(ls)
    ls.add_argument("--package", help="package name (glob)")
    ls.add_argument("--channel", help="channel name (glob)")
    ls.add_argument("--name", help="bundle name (glob)")
    ls.add_argument("--provides", metavar="KIND|GROUP/VERSION/KIND", help="bundles providing this API")
    dep = ls.add_mutually_exclusive_group()
    dep.add_argument("--deprecated", dest="deprecated", action="store_const", const=True, default=None,
                     help="only deprecated entries")
    dep.add_argument("--current", dest="deprecated", action="store_const", const=False,
                     help="only entries that are not deprecated")
    ls.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    ls.set_defaults(run=run_list)

    g = csub.add_parser("graph", help="draw a package's upgrade graph (Mermaid, DOT or SVG)",
                        description="Draw a package's upgrade graph: an arrow from each bundle to one that may "
                                    "replace it (replaces, skips, skipRange). Every node's label names the bundle "
                                    "and its channel, '(head)' when it heads it, so a node read on its own still "
                                    "says where it belongs; each channel is also drawn in a box of its own.",
                        epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("package", metavar="PACKAGE")
    _catalog_arguments(g)
    g.add_argument("--channel", help="one channel (default: all channels of the package)")
    g.add_argument("--since", metavar="VERSION", help="only bundles at this version or later (a window on a long "
                                                       "package)")
    g.add_argument("--group-by", choices=("channel", "none"), default="channel",
                   help="draw each channel in a box of its own, a bundle in several channels in each (default), "
                        "or one graph of all bundles")
    g.add_argument("--fan", type=int, default=4, metavar="N",
                   help="collapse a bundle's skipRange fan of more than N edges into one node (default 4; 0 never)")
    g.add_argument("-f", "--format", choices=("mermaid", "dot", "svg"), default="mermaid",
                   help="svg needs Graphviz's dot on PATH")
    g.add_argument("--installed", metavar="BUNDLE", help="highlight this bundle as the one installed")
    g.add_argument("--target", metavar="BUNDLE", help="highlight this bundle as the one a resolution chose")
    g.add_argument("--lock", metavar="FILE",
                   help="highlight the package's bundle in this olm.lock as installed (e.g. the committed lock)")
    g.set_defaults(run=run_graph)

    r = csub.add_parser("render", help="render a bundle directory into an olm.bundle blob",
                        epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("bundle", metavar="BUNDLE_DIR")
    r.add_argument("--image", default="", help="the bundle's image reference to record")
    r.add_argument("--package", help="package name (plain+v0 bundles only)")
    r.add_argument("--version", help="version (plain+v0 bundles only)")
    r.add_argument("-o", "--output", choices=("json", "yaml"), default="json")
    r.add_argument("--migrate", action="store_true",
                   help="with --image: one olm.csv.metadata property instead of an olm.bundle.object per manifest "
                        "(opm's bundle-object-to-csv-metadata migration; opm renders a directory without it)")
    r.add_argument("--catalog", action="append", default=[], metavar="DIR",
                   help="a file-based catalog whose bundles may provide the APIs a k8s+v1 bundle's RBAC names: "
                        "their CRDs map each resource to the kind required (repeatable)")
    r.set_defaults(run=run_render)
    _register_template(csub)
    _register_import(csub)


IMPORT_EXIT = """\
exit codes:
  0  the packages were written into the repository (or were already as the source has them)
  1  --dry-run: files would change (each is listed)
  2  the source or the repository is wrong: an image that is not a catalog, a package the source lacks (the
     nearest names are listed), a catalog directory the import did not write, a registry that refuses the pull
  3  the cluster: unreachable, no such CatalogSource, a pull secret that is missing or cannot be read
  64 a usage error: neither --image nor --catalog-source, or no package to import
"""


def _register_import(csub: argparse._SubParsersAction) -> None:
    from reconciler.commands import add_cluster_args

    i = csub.add_parser("import", help="write packages of an index image or a CatalogSource into the repository",
                        description="Write into the repository, as file-based catalogs (one directory per package "
                                    "under catalogs/CATALOG/), packages of a catalog as a cluster gets it: an index "
                                    "image named with --image, or a CatalogSource of the cluster (--catalog-source: "
                                    "spec.image is read here, spec.address through the registry gRPC API, "
                                    "sourceType configmap from its ConfigMap). From a CatalogSource the packages its "
                                    "Subscriptions use are imported, and those named with --package. The source and "
                                    "its digest are recorded in catalogs/CATALOG/import.yaml; importing again "
                                    "updates every package imported before and says what changed.",
                        epilog=IMPORT_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("repo", metavar="REPO", help="the GitOps repository's working tree")
    what = i.add_mutually_exclusive_group()
    what.add_argument("--image", metavar="REF", help="an index image (registry/repository:tag or @sha256:...)")
    what.add_argument("--catalog-source", metavar="NAMESPACE/NAME", help="a CatalogSource of the cluster")
    i.add_argument("--name", metavar="CATALOG", help="the repository catalog to write (default: the CatalogSource's "
                                                     "name, else the image repository's last part)")
    i.add_argument("--package", action="append", default=[], metavar="NAME",
                   help="a package to import (repeatable), beside those in use and those imported before")
    i.add_argument("--all", action="store_true", help="every package of the source")
    i.add_argument("--pull-secret", action="append", default=[], metavar="NAMESPACE/NAME",
                   help="read the registry credentials of this kubernetes.io/dockerconfigjson Secret of the cluster "
                        "(repeatable; a CatalogSource's spec.secrets are read without it)")
    i.add_argument("--mirrors-from-cluster", action="store_true",
                   help="pull through the mirrors of the cluster's ImageDigestMirrorSets, ImageTagMirrorSets and "
                        "ImageContentSourcePolicies (beside those of reconciler.yaml)")
    i.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    add_cluster_args(i)
    i.set_defaults(run=run_import)


def run_import(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.errors import UsageError

    if not args.image and not args.catalog_source:
        raise UsageError("say what to import: --image REF (an index image) or --catalog-source NAMESPACE/NAME",
                         hint="`kubectl get catalogsources -A` lists a cluster's CatalogSources")
    if args.all and args.package:
        raise UsageError("--all imports every package; --package names some: give one of them")
    if args.catalog_source:
        namespaced_arg("--catalog-source", args.catalog_source, "openshift-marketplace/redhat-operators",
                       "`kubectl get catalogsources -A` lists them")
    for named in args.pull_secret or ():
        namespaced_arg("--pull-secret", named, "openshift-config/pull-secret")
    kube = None
    if args.catalog_source or args.pull_secret or args.mirrors_from_cluster:
        from reconciler.kube.client import Kube, load_api_client
        from reconciler.errors import ClusterError

        api = load_api_client(args.kubeconfig, args.context)
        if api is None:
            raise ClusterError("no cluster is configured: a CatalogSource, a pull Secret and the cluster's mirrors are "
                               "read from one", hint="pass --kubeconfig, set $KUBECONFIG, or import an index image "
                                                     "with --image")
        kube = Kube(api)
    return import_catalog(args.repo, kube, out, image=args.image, catalog_source=args.catalog_source, name=args.name,
                          packages=args.package, every=args.all, pull_secrets=args.pull_secret,
                          mirrors_from_cluster=args.mirrors_from_cluster, dry_run=args.dry_run)


def import_catalog(repo_dir: str, kube, out: TextIO, *, image: str | None = None,  # noqa: ANN001 - a Kube
                   catalog_source: str | None = None, name: str | None = None, packages: list[str] = (),
                   every: bool = False, pull_secrets: list[str] = (), mirrors_from_cluster: bool = False,
                   dry_run: bool = False) -> int:
    """One `catalog import`, of an image or a CatalogSource (``kube`` given for a CatalogSource, a pull secret or the
    cluster's mirrors); prints what changed and what it wrote; the command's exit code."""
    from contextlib import ExitStack
    from pathlib import Path

    from reconciler.authoring import importer
    from reconciler.errors import UsageError
    from reconciler.oci import auth, mirrors
    from reconciler.repo import read_repository

    repo = Path(repo_dir)
    settings = read_repository(repo).settings
    rules = list(settings.mirrors) + (list(mirrors.read_cluster(kube)) if mirrors_from_cluster else [])
    secrets = []
    for named in pull_secrets:
        ns, _, secret = named.partition("/")   # checked by run_import
        what = f"Secret {named} (--pull-secret)"
        secrets.append((what, auth.secret_config(importer.read_secret(kube, ns, secret, what), what)))
    view = importer.read_catalog_source(kube, catalog_source) if catalog_source else None
    if view is not None:
        secrets += list(view.secrets)
    catalog = name or (view.name if view else str(image).split("@")[0].rsplit("/", 1)[-1].split(":")[0])
    previous = importer.previous_import(repo.resolve(), catalog)
    if previous[0] is not None and view is not None and previous[0].catalog_source not in ("", view.where):
        from reconciler.errors import InputError

        raise InputError(f"catalogs/{catalog} was imported from CatalogSource {previous[0].catalog_source}, not "
                         f"{view.where}", path=f"catalogs/{catalog}/{importer.METADATA}",
                         hint=f"import it under another name: --name {view.name}-{view.namespace}")
    asked = set(packages) | set(view.in_use if view else ())
    wanted = None if every else frozenset(asked | set(previous[1]))
    if wanted is not None and not wanted:
        where = f"no Subscription uses CatalogSource {view.where}" if view else "an index holds hundreds of packages"
        raise UsageError(f"no package to import: {where}", hint="name them with --package NAME (repeatable), or "
                                                                 "import every package with --all")
    with ExitStack() as stack:
        stack.enter_context(mirrors.using(rules))
        stack.enter_context(auth.pull_secrets(secrets))
        source = importer.read_source_of(kube, view, wanted) if view is not None else \
            importer.read_image(str(image), wanted)
    importer.check_wanted(source, asked)
    imported = importer.plan(repo.resolve(), catalog, source, previous)
    for line in imported.lines():
        print(line, file=out)
    root = repo.resolve()
    if dry_run:
        changing = [rel for rel, text in imported.files.items()
                    if not ((root / rel).is_file() and (root / rel).read_text() == text)]
        for rel in changing:
            print(f"would write {rel}", file=out)
        for rel in imported.deleted:
            print(f"would remove {rel}", file=out)
        return EXIT_CHANGES if changing or imported.deleted else EXIT_OK
    written = importer.write(root, imported)
    for rel in written:
        print(f"wrote {rel}", file=out)
    for rel in imported.deleted:
        print(f"removed {rel}", file=out)
    if not written and not imported.deleted:
        print(f"catalogs/{catalog} is as the source has it: nothing written", file=out)
    return EXIT_OK


def _register_template(csub: argparse._SubParsersAction) -> None:
    t = csub.add_parser("template", help="expand a basic or semver catalog template into FBC",
                        description="Expand an olm.template.basic or olm.semver template into file-based catalog "
                                    "blobs, rendering each bundle reference (a bundle directory relative to the "
                                    "template, or an OCI image).",
                        epilog=CATALOG_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("kind", choices=("basic", "semver"))
    t.add_argument("file", metavar="FILE", help="the template file ('-' for standard input)")
    t.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    t.add_argument("--catalog", action="append", default=[], metavar="DIR",
                   help="a file-based catalog whose bundles may provide the APIs a k8s+v1 bundle's RBAC names "
                        "(repeatable; see catalog render --catalog)")
    t.set_defaults(run=run_template)


def run_template(args: argparse.Namespace, out: TextIO) -> int:
    import json
    from pathlib import Path

    from reconciler import yamlio
    from reconciler.authoring.render import api_kinds_of_catalogs
    from reconciler.authoring.template import bundle_renderer, render_template

    if args.file == "-":
        text, base, source = sys.stdin.read(), Path.cwd(), "<stdin>"
    else:
        path = Path(args.file)
        text, base, source = yamlio.read_text(path, args.file), path.parent, args.file
    renderer = bundle_renderer(base, api_kinds_of_catalogs(args.catalog),
                               warn=lambda text: print(f"warning: {text}", file=sys.stderr))
    blobs = render_template(args.kind, yamlio.load_one(text, source, go=True), base, source, renderer)
    if args.output == "json":
        out.write("".join(json.dumps(b, indent=2, ensure_ascii=False) + "\n" for b in blobs))
    else:
        out.write(yamlio.dump_all(blobs))
    return EXIT_OK


def _catalog_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", nargs="?",
                        help="catalog directory, as for validate (default: ./catalogs at a repository's root, "
                             "else .)")
    parser.add_argument("-c", "--catalog", metavar="DIR", help="the same as DIR")


def _catalog_directory(args: argparse.Namespace) -> str:
    """DIR or -c; without either, a repository's catalogs/ when run at its root (not the whole tree, .git/
    included), else the current directory."""
    from reconciler.errors import UsageError

    if args.directory and args.catalog and args.directory != args.catalog:
        raise UsageError(f"two catalog directories given: {args.directory} and -c {args.catalog}",
                         hint="give the directory once, as DIR")
    chosen = args.directory or args.catalog
    if chosen:
        return chosen
    import os

    return "catalogs" if os.path.isdir("catalogs") else "."


def _load(directory: str, use_cache: bool = True):
    from reconciler.catalog import load
    return load(directory, display_root=directory.rstrip("/") or directory, use_cache=use_cache)


def run_validate(args: argparse.Namespace, out: TextIO) -> int:
    loaded = _load(args.directory, not args.no_cache)
    errors = loaded.errors
    if args.output in ("json", "yaml"):
        import json

        from reconciler import yamlio

        doc = {"valid": not errors, "findings": [f.as_dict() for f in loaded.findings]}
        out.write(json.dumps(doc, indent=2) + "\n" if args.output == "json" else yamlio.dump(doc))
    else:
        for f in loaded.findings:
            out.write(f.render() + "\n")
        cat = loaded.catalog
        summary = (f"{counted(len(cat.packages), 'package')}, {counted(len(cat.channels), 'channel')}, "
                   f"{counted(len(cat.bundles), 'bundle')}: " + (counted(len(errors), "problem") if errors else "valid"))
        warnings = len(loaded.findings) - len(errors)
        out.write(summary + (f" ({counted(warnings, 'warning')})" if warnings else "") + "\n")
    return EXIT_CHANGES if errors else EXIT_OK


def _note_invalid(loaded) -> None:
    if loaded.errors:
        print(f"warning: the catalog has {counted(len(loaded.errors), 'problem')}; run `reconciler catalog validate`",
              file=sys.stderr)


def run_list(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.catalog import query
    loaded = _load(_catalog_directory(args))
    _note_invalid(loaded)
    filters = query.Filters(package=args.package, channel=args.channel, name=args.name, provides=args.provides,
                            deprecated=args.deprecated)
    rows = getattr(query, args.what)(loaded.catalog, filters)
    out.write(query.render(rows, args.what, args.output))
    return EXIT_OK


def run_graph(args: argparse.Namespace, out: TextIO) -> int:
    from reconciler.catalog import graph
    loaded = _load(_catalog_directory(args))
    _note_invalid(loaded)
    g = graph.build(loaded.catalog, args.package, args.channel)
    if args.since:
        g = graph.window(g, args.since)
    if args.fan > 0:
        g = graph.collapse_fans(g, args.fan)
    group = args.group_by == "channel" and len(g.channels) > 1
    marks: dict[str, str] = {}
    if args.lock:
        from reconciler import yamlio
        from reconciler.model.lock import Lockfile

        lock = Lockfile.parse(yamlio.read_text(args.lock, args.lock), args.lock)
        marks.update({e.name: "installed" for e in lock.entries if e.package == args.package})
    for flag, name, mark in (("--installed", args.installed, "installed"), ("--target", args.target, "target")):
        if not name:
            continue
        if (args.package, name) not in loaded.catalog.bundles:  # a typo would draw the graph with no mark
            have = sorted(b for p, b in loaded.catalog.bundles if p == args.package)
            raise CatalogError(f"{flag} {name}: no such bundle in package {args.package!r}",
                               hint=f"bundles of the package: {', '.join(have[-5:])}"
                                    f"{f' (the last 5 of {len(have)})' if len(have) > 5 else ''}")
        marks[name] = mark
    render = {"mermaid": graph.to_mermaid, "dot": graph.to_dot, "svg": graph.to_svg}[args.format]
    out.write(render(g, group=group, marks=marks))
    return EXIT_OK


def run_render(args: argparse.Namespace, out: TextIO) -> int:
    from pathlib import Path

    from reconciler import yamlio
    from reconciler.authoring.render import api_kinds_of_catalogs, blob_json, render_bundle_dir

    path = Path(args.bundle)
    if not path.is_dir():
        raise CatalogError(f"{args.bundle} is not a bundle directory",
                           hint="give a directory with manifests/ and metadata/ (bundle images: not yet)")
    if args.migrate and not args.image:
        print("warning: --migrate without --image keeps the olm.bundle.object properties, as opm does for a "
              "bundle without an image", file=sys.stderr)
    blob = render_bundle_dir(path, args.image, package=args.package, version=args.version, display=args.bundle,
                             migrate=args.migrate, providers=api_kinds_of_catalogs(args.catalog),
                             warn=lambda text: print(f"warning: {text}", file=sys.stderr))
    out.write(blob_json(blob) if args.output == "json" else yamlio.dump(blob))
    return EXIT_OK
