"""k8s+v1 bundles (seed 000): plain manifests plus ``metadata/olm.yaml``, installed through a synthesized CSV.

The format's own rule is that OLM synthesizes a ClusterServiceVersion from
the manifests and installs that; so do we. ``synthesize`` checks the
required manifests and ``olm.yaml`` fields, infers the provided, required,
optional and native APIs from CRDs, APIServices and the RBAC bound to the
deployments' service accounts, refuses wildcard rules in that RBAC (the
inference depends on explicit resources), and projects the deployments,
that RBAC, APIServices and webhooks onto a CSV. The result is an ordinary
registry+v1 bundle content, converted by ``registry_v1`` like any other, and
written out by ``export_registry_v1`` for legacy OLM.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.bundle import keyed, typed
from reconciler.bundle.apikinds import APIKinds, api_kinds_of_objects, group_constraint, kube_version_key
from reconciler.bundle.content import (ANNOTATION_MANIFESTS, ANNOTATION_MEDIATYPE, ANNOTATION_PACKAGE,
                                       BundleContent, ParsedManifest)
from reconciler.errors import BundleError, InputError, UnsupportedBundleError
from reconciler.bundle.shapes import OLM_YAML as OLM_YAML_SHAPE
from reconciler.model.shape import check
from reconciler.model.kube import Manifest, split_api_version
from reconciler.model.properties import PROP_CONSTRAINT, PROP_GVK_REQUIRED
from reconciler.report.words import agree

MEDIATYPE = "k8s+v1"
OLM_YAML = "metadata/olm.yaml"
REQUIRED_FIELDS = ("name", "version", "minKubeVersion", "installModes")
OPTIONAL_DEPENDENCY = "operators.operatorframework.io.bundle.dependency"
RBAC = "rbac.authorization.k8s.io"
_CSV_FIELDS = ("displayName", "description", "keywords", "maintainers", "provider", "links", "maturity",
               "minKubeVersion", "installModes", "replaces", "skips", "labels", "icon")


@dataclass(frozen=True)
class InferredAPIs:
    provided: tuple[str, ...]   # "<resource or kind>.<group>/<version>" for CRDs, "<resource>.<group>" via RBAC
    required: tuple[str, ...]
    optional: tuple[str, ...]
    native: tuple[str, ...]     # nonResourceURLs


def _gk(obj: Manifest) -> tuple[str, str]:
    return split_api_version(obj.get("apiVersion", ""))[0], obj.get("kind", "")


def _name(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def read_olm_yaml(content: BundleContent) -> dict[str, Any]:
    path = content.fetched.path / OLM_YAML
    if not path.is_file():
        raise BundleError(f"a k8s+v1 bundle needs {OLM_YAML}", obj=content.name,
                          hint=f"add {OLM_YAML} with {', '.join(REQUIRED_FIELDS)}")
    try:
        # strict: a key written twice (seed 000's example repeats ``name:`` under a mis-indented ``provider:``)
        # would otherwise rename the bundle to whatever came last
        doc = yamlio.load_one(yamlio.read_text(path, OLM_YAML), OLM_YAML, strict=True)
    except InputError as exc:
        raise BundleError(exc.message, path=OLM_YAML, obj=content.name, hint=exc.hint) from None
    if not isinstance(doc, dict):
        raise BundleError("olm.yaml must be a mapping", path=OLM_YAML, obj=content.name)
    missing = [f for f in REQUIRED_FIELDS if not doc.get(f)]
    if missing:
        raise BundleError(f"olm.yaml lacks the required {agree(len(missing), 'field', 'fields')} {', '.join(missing)}", path=OLM_YAML,
                          obj=content.name)
    modes = doc["installModes"]
    if not isinstance(modes, list) or not all(isinstance(m, dict) and m.get("type") for m in modes):
        raise BundleError("olm.yaml installModes must be a list of {type, supported}", path=OLM_YAML,
                          obj=content.name)
    check(doc, OLM_YAML_SHAPE, path=OLM_YAML, obj=content.name, error=BundleError)
    return doc


def _deployment_accounts(deployments: list[ParsedManifest]) -> set[str]:
    return {((d.obj.get("spec") or {}).get("template", {}).get("spec") or {}).get("serviceAccountName") or "default"
            for d in deployments}


def _bound_roles(content: BundleContent, accounts: set[str]) -> dict[tuple[str, str], list[ParsedManifest]]:
    """(role kind, role name) -> the bindings that bind it to one of ``accounts``."""
    out: dict[tuple[str, str], list[ParsedManifest]] = {}
    for m in content.manifests:
        if _gk(m.obj) not in ((RBAC, "RoleBinding"), (RBAC, "ClusterRoleBinding")):
            continue
        subjects = m.obj.get("subjects") or []
        if any(s.get("kind") == "ServiceAccount" and s.get("name") in accounts for s in subjects):
            ref = m.obj.get("roleRef") or {}
            out.setdefault((str(ref.get("kind")), str(ref.get("name"))), []).append(m)
    return out


# Kinds projected onto the synthesized CSV, which OLM decodes into Go types like those it creates typed.
_PROJECTED = frozenset({("apps", "Deployment"), ("apiregistration.k8s.io", "APIService"),
                        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration")})


def _read_typed(content: BundleContent) -> tuple[BundleContent, list[str]]:
    """Every manifest read through its kind's API type (``typed``), and the notes."""
    notes: list[str] = []
    manifests = []
    for m in content.manifests:
        mode = typed.FOLD if _gk(m.obj) in typed.OLM_DECODED | _PROJECTED else typed.DROP
        obj, found = typed.read_object(m.obj, f"{m.file}: {_gk(m.obj)[1]} {_name(m.obj)}", mode)
        notes += found
        manifests.append(ParsedManifest(m.file, obj) if found else m)
    return dataclasses.replace(content, manifests=tuple(manifests)), notes


def synthesize(content: BundleContent) -> tuple[BundleContent, InferredAPIs]:
    """A registry+v1 ``BundleContent`` (synthesized CSV + remaining manifests) and the inferred APIs."""
    meta = read_olm_yaml(content)
    # objects are read through their API types and duplicate keyed-list entries resolved here, so that the
    # notes name each object's own file (the synthesized CSV is no file of the bundle)
    content, repairs = _read_typed(content)
    deployments = []
    for m in content.manifests:
        if _gk(m.obj) == ("apps", "Deployment"):
            obj, notes = keyed.normalise(m.obj, m.file, content.name)
            repairs += notes
            deployments.append(ParsedManifest(m.file, obj) if notes else m)
    if not deployments:
        raise BundleError("a k8s+v1 bundle needs a Deployment for the operator", obj=content.name)
    accounts = _deployment_accounts(deployments)
    services = {_name(m.obj): m for m in content.manifests if _gk(m.obj) == ("", "Service")}
    crds = [m for m in content.manifests if _gk(m.obj) == ("apiextensions.k8s.io", "CustomResourceDefinition")]
    apiservices = [m for m in content.manifests if _gk(m.obj) == ("apiregistration.k8s.io", "APIService")]
    webhooks = [m for m in content.manifests if _gk(m.obj) in (
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"))]
    bound = _bound_roles(content, accounts)
    roles = {(_gk(m.obj)[1], _name(m.obj)): m for m in content.manifests
             if _gk(m.obj) in ((RBAC, "Role"), (RBAC, "ClusterRole"))}

    def service_deployment(svc_name: str, where: ParsedManifest, what: str) -> str:
        svc = services.get(svc_name)
        if svc is None:
            raise BundleError(f"{what} references Service {svc_name!r}, which the bundle does not contain",
                              path=where.file, obj=content.name)
        selector = (svc.obj.get("spec") or {}).get("selector") or {}
        for d in deployments:
            labels = ((d.obj.get("spec") or {}).get("template", {}).get("metadata") or {}).get("labels") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                return _name(d.obj)
        raise BundleError(f"Service {svc_name!r} ({what}) selects no Deployment of the bundle",
                          path=svc.file, obj=content.name)

    api_groups = {(str((a.obj.get("spec") or {}).get("group")), str((a.obj.get("spec") or {}).get("version")))
                  for a in apiservices}
    crd_groups = {str((c.obj.get("spec") or {}).get("group")) for c in crds}
    provided, required, optional, native = set(), set(), set(), set()
    for c in crds:
        spec = c.obj.get("spec") or {}
        for v in spec.get("versions") or ([{"name": spec.get("version")}] if spec.get("version") else []):
            provided.add(f"{(spec.get('names') or {}).get('kind')}.{spec.get('group')}/{v.get('name')}")
    permissions: list[dict[str, Any]] = []
    cluster_permissions: list[dict[str, Any]] = []
    consumed: set[int] = set()
    for (kind, name), bindings in sorted(bound.items()):
        role = roles.get((kind, name))
        is_optional = any(((b.obj.get("metadata") or {}).get("annotations") or {}).get(OPTIONAL_DEPENDENCY)
                          == "optional" for b in bindings)
        rules = (role.obj.get("rules") if role else []) or []
        for i, rule in enumerate(rules):
            wild = [f for f in ("apiGroups", "resources", "verbs") if "*" in (rule.get(f) or [])]
            if wild:
                raise UnsupportedBundleError(
                    f"{kind} {name} rule {i} uses a wildcard in {', '.join(wild)} ({json.dumps(rule, sort_keys=True)})"
                    f" and is bound to the operator's service account; k8s+v1 bundles must name every API "
                    f"group, resource and verb", path=role.file if role else None, obj=content.name,
                    hint="list the groups, resources and verbs the operator needs")
            native.update(rule.get("nonResourceURLs") or [])
            for group in rule.get("apiGroups") or []:
                for res in rule.get("resources") or []:
                    api = f"{res}.{group}" if group else res
                    if is_optional:
                        optional.add(api)
                    elif any(group == g for g, _ in api_groups):
                        provided.add(api)
                    elif group not in crd_groups and group != "" and not group.endswith(".k8s.io") \
                            and group not in ("apps", "batch", "policy", "autoscaling", "extensions"):
                        required.add(api)
        if role is None:
            continue
        for b in bindings:
            consumed.add(id(b))
        consumed.add(id(role))
        accounts_bound = sorted({s.get("name") for b in bindings for s in b.obj.get("subjects") or []
                                 if s.get("kind") == "ServiceAccount" and s.get("name") in accounts})
        for sa in accounts_bound:
            entry = {"serviceAccountName": sa, "rules": rules}
            (cluster_permissions if kind == "ClusterRole" else permissions).append(entry)
    webhook_defs = []
    for w in webhooks:
        kind = _gk(w.obj)[1]
        for hook in w.obj.get("webhooks") or []:
            svc = ((hook.get("clientConfig") or {}).get("service") or {})
            dep = service_deployment(str(svc.get("name")), w, f"{kind} {_name(w.obj)}")
            d = {"type": "ValidatingAdmissionWebhook" if kind.startswith("Validating") else "MutatingAdmissionWebhook",
                 "generateName": hook.get("name"), "deploymentName": dep,
                 "containerPort": int(svc.get("port") or 443), "webhookPath": svc.get("path") or "/"}
            for k in ("admissionReviewVersions", "failurePolicy", "matchPolicy", "objectSelector", "rules",
                      "sideEffects", "timeoutSeconds", "reinvocationPolicy"):
                if hook.get(k) is not None:
                    d[k] = hook[k]
            webhook_defs.append(d)
        consumed.add(id(w))
        consumed.add(id(services[str(svc.get("name"))]))
    owned_api = []
    for a in apiservices:
        spec = a.obj.get("spec") or {}
        svc = spec.get("service") or {}
        dep = service_deployment(str(svc.get("name")), a, f"APIService {_name(a.obj)}")
        port = next((p.get("targetPort") for p in (services[str(svc.get("name"))].obj.get("spec") or {}).get("ports")
                     or [] if p.get("port") == (svc.get("port") or 443)), 443)
        served = sorted({resource.partition("/")[0] for resource, _, group in (api.partition(".") for api in provided)
                         if group == spec.get("group")})
        # RBAC names the resources an APIService serves, never their kinds: each is listed by its resource,
        # with no kind, rather than a guessed one (a group serving none that RBAC names is listed once, bare)
        for resource in served or [""]:
            owned_api.append({"group": spec.get("group"), "version": spec.get("version"), "kind": "",
                              "name": resource, "deploymentName": dep,
                              "containerPort": int(port) if str(port).isdigit() else 443})
        consumed.add(id(a))
        consumed.add(id(services[str(svc.get("name"))]))
    csv_spec: dict[str, Any] = {k: meta[k] for k in _CSV_FIELDS if k in meta and k not in ("labels", "icon")}
    csv_spec["version"] = str(meta["version"])
    if meta.get("icon"):
        csv_spec["icon"] = [{"base64data": meta["icon"], "mediatype": "image/png"}]
    csv_spec["install"] = {"strategy": "deployment", "spec": {
        "deployments": [{"name": _name(d.obj), "spec": d.obj.get("spec") or {},
                         **({"label": (d.obj.get("metadata") or {}).get("labels")}
                            if (d.obj.get("metadata") or {}).get("labels") else {})} for d in deployments],
        "permissions": permissions, "clusterPermissions": cluster_permissions}}
    csv_spec["customresourcedefinitions"] = {"owned": [
        {"name": _name(c.obj), "kind": (c.obj["spec"].get("names") or {}).get("kind"),
         "version": next((v["name"] for v in c.obj["spec"].get("versions") or [] if v.get("storage")),
                         c.obj["spec"].get("version"))} for c in crds]}
    if owned_api:
        csv_spec["apiservicedefinitions"] = {"owned": owned_api}
    if webhook_defs:
        csv_spec["webhookdefinitions"] = webhook_defs
    if native:
        csv_spec["nativeAPIs"] = []  # nonResourceURLs have no GVK; recorded in the annotation below
    inferred = InferredAPIs(tuple(sorted(provided)), tuple(sorted(required)), tuple(sorted(optional)),
                            tuple(sorted(native)))
    csv: Manifest = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                     "metadata": {"name": str(meta["name"]),
                                  "labels": dict(meta.get("labels") or {}),
                                  "annotations": {"reconciler.dev/inferred-apis": json.dumps(
                                      dataclasses.asdict(inferred), sort_keys=True)}},
                     "spec": csv_spec}
    if not csv["metadata"]["labels"]:
        del csv["metadata"]["labels"]
    for m in content.manifests:
        if _gk(m.obj) == ("apps", "Deployment"):
            consumed.add(id(m))
    rest = [m for m in content.manifests if id(m) not in consumed]
    manifests = (ParsedManifest(f"manifests/{meta['name']}.clusterserviceversion.yaml", csv), *rest)
    annotations = {**content.annotations, ANNOTATION_MEDIATYPE: "registry+v1"}
    annotations.setdefault(ANNOTATION_PACKAGE, str(meta.get("package") or str(meta["name"]).split(".v")[0]))
    return dataclasses.replace(content, mediatype="registry+v1", annotations=annotations, manifests=manifests,
                               warnings=(*content.warnings, *repairs)), inferred


def required_apis(inferred: InferredAPIs, kinds: Any) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """The inferred required APIs as ``olm.gvk.required`` values, and the (group, resource)s with no known kind.

    RBAC names a group and a resource (a plural) but no kind and no version;
    ``kinds`` (``reconciler.bundle.apikinds.APIKinds``: the bundle's own CRDs and
    the providers in the catalogs at hand) maps the plural to the kind. The
    version is the provider's highest by Kubernetes' version priority (RBAC
    grants every version; a required GVK names one). Built-in groups are never
    required (the inference leaves them out: the cluster serves them).
    """

    gvks: list[dict[str, str]] = []
    unmapped: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for api in inferred.required:
        resource, _, group = api.partition(".")
        resource = resource.partition("/")[0]          # a subresource needs its resource
        if (group, resource) in seen:
            continue
        seen.add((group, resource))
        found = kinds.lookup(group, resource)
        if found is None or not found[1]:
            unmapped.append((group, resource))
            continue
        kind, versions = found
        gvks.append({"group": group, "kind": kind, "version": max(versions, key=kube_version_key)})
    return gvks, unmapped


def status_requires(inferred: InferredAPIs) -> list[dict[str, str]]:
    """The inferred required APIs in the shape of the Operator status' ``apis.requires``.

    RBAC names a group and a resource, not a kind or version (another
    Operator's CRD would say, and the bundle does not ship it), so those stay
    empty: the status still says which group and resource the Operator needs.
    """
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for api in inferred.required:
        resource, _, group = api.partition(".")
        resource = resource.partition("/")[0]          # a subresource needs its resource
        if (group, resource) not in seen:
            seen.add((group, resource))
            out.append({"group": group, "version": "", "kind": "", "plural": resource, "singular": ""})
    return out


def export_registry_v1(content: BundleContent, dest: Path, providers: Any = None,
                       warn: Any = None) -> Path:
    """Write the synthesized registry+v1 bundle (manifests/ and metadata/annotations.yaml) under ``dest``.

    The required APIs go to ``metadata/dependencies.yaml`` (an ``olm.gvk``, or
    an ``olm.constraint`` on the group; see ``required_properties``),
    so that opm renders the written bundle with the requirements ``catalog
    render`` gives the k8s+v1 one.
    """

    converted, inferred = synthesize(content)
    required = required_properties(content, inferred, providers, content.name, warn)
    if dest.exists() and any(dest.iterdir()):
        raise BundleError(f"{dest} is not empty", hint="choose a new output directory")
    (dest / "manifests").mkdir(parents=True)
    (dest / "metadata").mkdir()
    for i, m in enumerate(converted.manifests):
        name = Path(m.file).name if i == 0 else f"{i:02d}-{Path(m.file).name}"
        (dest / "manifests" / name).write_text(yamlio.dump(m.obj))
    annotations = {k: v for k, v in converted.annotations.items()}
    annotations[ANNOTATION_MANIFESTS] = "manifests/"
    annotations["operators.operatorframework.io.bundle.metadata.v1"] = "metadata/"
    (dest / "metadata" / "annotations.yaml").write_text(yamlio.dump({"annotations": annotations}))
    if required:
        deps = [{"type": "olm.gvk" if p["type"] == "olm.gvk.required" else p["type"], "value": p["value"]}
                for p in required]
        (dest / "metadata" / "dependencies.yaml").write_text(yamlio.dump({"dependencies": deps}))
    return dest


def required_properties(content: BundleContent, inferred: Any, providers: APIKinds | None, name: str,
                        warn: Callable[[str], object] | None) -> list[dict[str, Any]]:
    """A k8s+v1 bundle's required APIs as properties: ``olm.gvk.required``, or an ``olm.constraint`` on the group.

    The kinds come from the bundle's own CRDs and ``providers``; a resource
    neither defines is required by its group, and ``warn`` hears of it.
    """
    from reconciler.bundle.k8s_v1 import required_apis

    own = api_kinds_of_objects([m.obj for m in content.manifests])
    required, unmapped = required_apis(inferred, own.merged(providers) if providers else own)
    for group, resource in unmapped:
        if warn is not None:
            warn(f"{name}: the operator's RBAC names {resource}.{group}, which neither the bundle nor the given "
                 f"catalogs define: required as any API of group {group} (an olm.constraint); "
                 f"pass the provider's catalog (--catalog) to require its kind")
    return [{"type": PROP_GVK_REQUIRED, "value": g} for g in required] + [
        {"type": PROP_CONSTRAINT, "value": group_constraint(group, resource)} for group, resource in unmapped]
