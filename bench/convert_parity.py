"""Conversion parity: the reconciler's registry+v1 converter against operator-controller's, on the corpus.

Every registry+v1 bundle of the corpus is rendered in every install mode its
CSV supports, by ``reconciler.bundle.render_content`` and by ``ocrender``
(operator-controller's own renderer, ``bench/peers/operator_controller.py``),
both with the cert-manager certificate provider (the deterministic one). Both
outputs pass through the same Go types (``ocrender normalize``) and are
compared object by object, keyed by apiVersion, kind, namespace and name.

What is set aside, each counted as a "deliberate:" class (docs/bundles.md,
"Parity with operator-controller" says why):

* names of the RBAC objects made from ``permissions``/``clusterPermissions``
  (each converter hashes its own way; matched by rules, bindings by role and
  subjects) and of long-named cert-manager Issuers (matched through the
  Certificate that uses them);
* ``status``, which is never applied;
* objects we upgrade and the peer passes on as written: v1beta1 CRDs, RBAC
  in retired versions, a core object without apiVersion;
* in SingleNamespace/MultiNamespace mode, the Roles and RoleBindings we also
  make in the install namespace (OLM v0's behaviour);
* the peer's own defects: a namespace on cluster-scoped webhook
  configurations, port 0 for a webhook without containerPort;
* the pod annotation ``olm.properties`` the peer builds from
  ``metadata/properties.yaml``.

    .venv/bin/python -m bench.convert_parity [--corpus DIR] [--limit N] [--show N]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.bundle_corpus import DEFAULT_CORPUS, MODES, find_bundles
from reconciler.bundle import read_content, registry_v1, render_content
from reconciler.bundle.certs import CertManagerProvider
from reconciler.bundle.source import fetch
from reconciler.errors import ReconcilerError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import bounded_name

RBAC = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "APIService", "PriorityClass", "ConsoleYAMLSample",
                  "ConsoleQuickStart", "ConsoleCLIDownload", "ConsoleLink"}


@dataclass
class Result:
    bundle: str
    mode: str
    status: str                        # identical | differing | peer refused | we refused | both refused
    classes: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def targets_for(package: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    ns = bounded_name("corpus", package)
    watched = (bounded_name(package, "watched"), bounded_name(package, "watched-2"))
    return ns, {"AllNamespaces": (), "OwnNamespace": (ns,), "SingleNamespace": watched[:1],
                "MultiNamespace": watched}


def peer_render(ocrender: Path, root: Path, namespace: str, targets: tuple[str, ...]) -> list[dict] | str:
    """The peer's objects, or its error message."""
    command = [str(ocrender), "render", "-bundle", str(root), "-namespace", namespace, "-cert-manager"]
    for t in targets or ("",):
        command += ["-watch", t]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        return proc.stderr.strip() or f"exit {proc.returncode}"
    return json.loads(proc.stdout)


def normalize(ocrender: Path, objects: list[dict]) -> list[dict]:
    proc = subprocess.run([str(ocrender), "normalize"], input=json.dumps(objects), capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def key(obj: dict) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace") or "", meta.get("name", "")


def _canonical_rbac(ours: list[dict], peer: list[dict]) -> tuple[list[dict], list[dict]]:
    """Generated RBAC renamed by content, so the two converters' hash-named objects line up.

    Only objects whose name the other side lacks are renamed (a Role the bundle
    ships keeps its name); a Role or ClusterRole becomes its rules, a binding
    the renamed role plus its subjects.
    """
    def names(objs):
        return {key(o) for o in objs if o.get("kind") in RBAC}

    shared = names(ours) & names(peer)
    out = []
    for side in (ours, peer):
        renamed = {}
        for obj in side:
            if obj.get("kind") in ("Role", "ClusterRole") and key(obj) not in shared:
                renamed[(obj["kind"], key(obj)[2], key(obj)[3])] = "rules:" + json.dumps(obj.get("rules"),
                                                                                          sort_keys=True)
        result = []
        for obj in side:
            obj = json.loads(json.dumps(obj))
            meta, kind = obj["metadata"], obj.get("kind")
            if kind in ("Role", "ClusterRole") and (kind, key(obj)[2], meta["name"]) in renamed:
                meta["name"] = renamed[(kind, key(obj)[2], meta["name"])]
            elif kind in ("RoleBinding", "ClusterRoleBinding") and key(obj) not in shared:
                ref = obj.get("roleRef") or {}
                ns = key(obj)[2] if ref.get("kind") == "Role" else ""
                role = renamed.get((ref.get("kind"), ns, ref.get("name")))
                if role is not None:
                    ref["name"] = role
                    meta["name"] = "binding:" + role + json.dumps(obj.get("subjects"), sort_keys=True)
            result.append(obj)
        out.append(result)
    return out[0], out[1]


def diff_paths(a, b, path="") -> list[str]:
    """The paths where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k} (peer only)")
            elif k not in b:
                out.append(f"{path}.{k} (ours only)")
            else:
                out += diff_paths(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff_paths(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [path or "."]


def _deliberate(ours: list[dict], peer: list[dict]) -> tuple[list[dict], list[dict], list[str]]:
    """Both lists without the deliberate differences, and the classes of those found."""
    classes = []
    ours, peer = _canonical_rbac(ours, peer)
    for obj in peer:
        if obj.get("kind") in CLUSTER_SCOPED and obj["metadata"].pop("namespace", None):
            classes.append(f"deliberate: peer sets a namespace on cluster-scoped {obj['kind']}")
    ours_keys = {key(o) for o in ours}
    for obj in peer:
        if not obj.get("apiVersion") and ("v1",) + key(obj)[1:] in ours_keys:
            obj["apiVersion"] = "v1"   # we read a core object without apiVersion as v1, the peer passes it on
            classes.append(f"deliberate: {obj['kind']} without apiVersion read as v1 (peer passes it on)")
    for side in (ours, peer):
        for obj in side:
            obj.pop("status", None)   # never applied (the Go types write an empty one; CRDs in bundles carry one)
    ours_keys = {key(o) for o in ours}
    for obj in peer:
        upgraded = _RETIRED_VERSIONS.get(obj.get("apiVersion", ""))
        if upgraded and (upgraded,) + key(obj)[1:] in ours_keys:
            obj["apiVersion"] = upgraded
            classes.append(f"deliberate: {obj['kind']} in a retired API version upgraded (peer passes it on)")
    if _issuer_names(ours) != _issuer_names(peer):
        classes.append("deliberate: long Issuer name bounded with a hash (peer truncates)")
    for side in (ours, peer):
        _canonical_issuers(side)
    ours_deployments = {key(o): o for o in ours if o.get("kind") == "Deployment"}
    for obj in peer:
        mine = ours_deployments.get(key(obj))
        pod_meta = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        if mine and "olm.properties" in (pod_meta.get("annotations") or {}) and \
                "olm.properties" not in mine["spec"]["template"]["metadata"].get("annotations", {}):
            pod_meta["annotations"].pop("olm.properties")
            classes.append("deliberate: metadata/properties.yaml not merged into the pod's olm.properties")
    for obj in peer:
        mine = ours_deployments.get(key(obj))
        if mine and _same_in_ours_order(mine["spec"]["template"].get("spec") or {},
                                        obj["spec"]["template"].get("spec") or {}):
            classes.append("deliberate: certificate volumes and mounts in OLM v0's order (apiservice-cert first)")
    ours_hooks = {key(o): o for o in ours if o.get("kind", "").endswith("WebhookConfiguration")}
    for obj in peer:
        mine = ours_hooks.get(key(obj))
        for i, hook in enumerate(obj.get("webhooks") or []):
            service = (hook.get("clientConfig") or {}).get("service") or {}
            if service.get("port") == 0 and mine and i < len(mine.get("webhooks") or []) and \
                    mine["webhooks"][i]["clientConfig"]["service"].get("port") == 443:
                service["port"] = 443
                classes.append("deliberate: no containerPort is port 443 (the CSV's default; peer writes 0)")
    ours_crds = {o["metadata"]["name"] for o in ours if key(o)[:2] == ("apiextensions.k8s.io/v1",
                                                                        "CustomResourceDefinition")}
    beta = [o for o in peer if key(o)[:2] == ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition")
            and o["metadata"]["name"] in ours_crds]
    if beta:
        classes.append("deliberate: v1beta1 CRD converted to v1 (peer passes v1beta1 on)")
        names = {o["metadata"]["name"] for o in beta}
        peer = [o for o in peer if not any(o is b for b in beta)]
        ours = [o for o in ours if not (key(o)[1] == "CustomResourceDefinition" and o["metadata"]["name"] in names)]
    return ours, peer, classes


_RETIRED_VERSIONS = registry_v1._RETIRED_VERSIONS


def _same_in_ours_order(ours: dict, peer: dict) -> bool:
    """Put the peer pod's volumes and mounts in our order where only the order differs; whether any did."""
    def by_name(items: list[dict]) -> list[str]:
        return sorted(json.dumps(i, sort_keys=True) for i in items)

    pairs = [(ours, peer, "volumes")] + [(c, p, "volumeMounts") for c, p in zip(ours.get("containers") or [],
                                                                              peer.get("containers") or [])]
    moved = False
    for mine, theirs, field in pairs:
        a, b = mine.get(field) or [], theirs.get(field) or []
        if a != b and by_name(a) == by_name(b):
            theirs[field] = [dict(i) for i in a]
            moved = True
    return moved


def _issuer_names(objects: list[dict]) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o.get("kind") == "Issuer"}


def _canonical_issuers(objects: list[dict]) -> None:
    """Name each generated Issuer after the Certificate that uses it (both converters make one per Certificate)."""
    renamed = {}
    for obj in objects:
        if obj.get("kind") == "Certificate" and obj.get("apiVersion", "").startswith("cert-manager.io/"):
            ref = (obj.get("spec") or {}).get("issuerRef") or {}
            if ref.get("name"):
                renamed[(key(obj)[2], ref["name"])] = "issuer-for:" + obj["metadata"]["name"]
                ref["name"] = renamed[(key(obj)[2], ref["name"])]
    for obj in objects:
        if obj.get("kind") == "Issuer" and (key(obj)[2], obj["metadata"]["name"]) in renamed:
            obj["metadata"]["name"] = renamed[(key(obj)[2], obj["metadata"]["name"])]


def compare(ours: list[dict], peer: list[dict], namespace: str = "",
            targets: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(difference classes, details) between two normalized object lists of one install."""
    ours, peer, classes = _deliberate(ours, peer)
    if targets and namespace not in targets:
        # OLM v0 grants the CSV's permissions in the operator's own namespace too, not only in the
        # target namespaces; operator-controller only in the targets (docs/bundles.md)
        peer_roles = {(k[1], k[3]) for k in map(key, peer) if k[1] in ("Role", "RoleBinding") and k[2] in targets}
        extra = [o for o in ours if key(o)[1] in ("Role", "RoleBinding") and key(o)[2] == namespace
                 and (key(o)[1], key(o)[3]) in peer_roles]
        if extra:
            classes.append("deliberate: permissions also granted in the install namespace (OLM v0)")
            ours = [o for o in ours if not any(o is e for e in extra)]
    ours_by = {key(o): o for o in ours}
    peer_by = {key(o): o for o in peer}
    details: list[str] = []
    for k in sorted(set(ours_by) | set(peer_by)):
        label = f"{k[1]} {k[2] + '/' if k[2] else ''}{k[3][:60]}"
        if k not in peer_by:
            classes.append(f"object only in ours: {k[1]}")
            details.append(f"only ours: {label}")
        elif k not in ours_by:
            classes.append(f"object only in peer's: {k[1]}")
            details.append(f"only peer: {label}")
        else:
            paths = diff_paths(ours_by[k], peer_by[k])
            for p in paths:
                classes.append(f"{k[1]} {_generalize(p)}")
            if paths:
                details.append(f"{label}: {', '.join(paths[:6])}")
    real = [c for c in classes if not c.startswith("deliberate:")]
    return sorted(set(classes)), details if real else []


def _generalize(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def sweep(corpus: Path, ocrender: Path, limit: int | None = None) -> list[Result]:
    bundles, _ = find_bundles(corpus)
    results = []
    for root in bundles[:limit]:
        name = root.relative_to(corpus).as_posix()
        try:
            content = read_content(fetch(f"file://{name}", corpus))
            if content.mediatype != "registry+v1":
                continue
            supported = registry_v1.find_csv(content).supported_modes
        except ReconcilerError:
            supported = set(MODES)   # unreadable for us: ask the peer in every mode
            content = None
        ns, targets = targets_for(name.split("/")[0])
        for mode in MODES:
            if mode not in supported:
                continue
            results.append(compare_one(content, root, name, mode, ns, targets[mode], ocrender))
    return results


def compare_one(content, root, name, mode, ns, targets, ocrender) -> Result:
    ours: list[dict] | str
    if content is None:
        ours = "unreadable"
    else:
        try:
            rendered = render_content(content, InstallSettings(ns, targets), ns, CertManagerProvider())
            ours = [dict(o) for o in rendered.objects]
        except ReconcilerError as exc:
            ours = exc.message
    peer = peer_render(ocrender, root, ns, targets)
    if isinstance(ours, str) and isinstance(peer, str):
        return Result(name, mode, "both refused", details=[f"ours: {ours}", f"peer: {peer}"])
    if isinstance(ours, str):
        return Result(name, mode, "we refused", details=[ours])
    if isinstance(peer, str):
        return Result(name, mode, "peer refused", details=[peer])
    classes, details = compare(normalize(ocrender, ours), peer, ns, targets)
    real = [c for c in classes if not c.startswith("deliberate:")]
    return Result(name, mode, "differing" if real else "identical", classes, details)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--show", type=int, default=3, help="example details per class")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args(argv)
    from bench.peers.operator_controller import VERSION, ocrender_binary
    ocrender = ocrender_binary(lambda m: print(m, file=sys.stderr))
    started = time.monotonic()
    results = sweep(args.corpus, ocrender, args.limit)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    print(f"peer: operator-controller {VERSION}; corpus: {args.corpus}")
    bundles = {r.bundle for r in results}
    status = collections.Counter(r.status for r in results)
    exact = sum(1 for r in results if r.status == "identical" and not r.classes)
    print("| bundles | bundle x mode | identical | of which with no deliberate difference | differing | peer refused "
          "| we refused | both refused |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {len(bundles)} | {len(results)} | {status['identical']} | {exact} | {status['differing']} | "
          f"{status['peer refused']} | {status['we refused']} | {status['both refused']} |")
    print(f"({time.monotonic() - started:.0f}s)")
    by_mode = collections.Counter((r.mode, r.status) for r in results)
    for mode in MODES:
        print(f"  {mode}: " + ", ".join(f"{s} {n}" for (m, s), n in sorted(by_mode.items()) if m == mode))
    classes = collections.defaultdict(list)
    for r in results:
        for c in r.classes:
            classes[c].append(r)
        if r.status in ("peer refused", "we refused", "both refused"):
            classes[f"{r.status}: {r.details[-1][:150]}"].append(r)
    print("\n| class | bundle x mode | example |")
    print("| --- | ---: | --- |")
    for c, rs in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"| {c} | {len(rs)} | {rs[0].bundle} [{rs[0].mode}] |")
    if args.show:
        print()
        for c, rs in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            print(f"## {c}")
            for r in rs[: args.show]:
                print(f"  {r.bundle} [{r.mode}]: " + "; ".join(d for d in r.details if True)[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
