"""registry+v1 bundles (a ClusterServiceVersion plus manifests) -> plain Kubernetes objects.

The conversion is a list of small generators, one per kind of object, each a
pure function of the bundle and the install plan (namespace and target
namespaces). OLM's runtime behaviour that the objects rely on is reproduced
here: one Role/RoleBinding per target namespace from ``permissions``
(promoted to cluster scope in AllNamespaces mode), ClusterRole/Binding from
``clusterPermissions``, and on the deployments' pod templates the CSV's
annotations plus ``olm.targetNamespaces`` / ``olm.operatorNamespace``.
Webhooks and APIServices get a Service per deployment (``<deployment>-service``,
OLM's name), a serving certificate from a ``CertificateProvider``, the
certificate mounted where OLM mounts it, and their configuration objects with
the CA bundle; conversion webhooks are written into their CRDs. CRDs in
apiextensions v1beta1 are converted to v1 (``crds.py``).

Objects are matched by API group and kind, never by kind alone.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from reconciler.bundle import crds, keyed, overrides, shapes, typed
from reconciler.bundle.certs import CertificateProvider, SelfSignedProvider, ServiceCert
from reconciler.bundle.content import BundleContent, ParsedManifest
from reconciler.errors import UnsupportedBundleError
from reconciler.model.deployconfig import DeploymentConfig
from reconciler.model.kube import Manifest, bounded_name, split_api_version

CSV_GROUP_KIND = ("operators.coreos.com", "ClusterServiceVersion")
CRD_GROUP_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")
SUGGESTED_NAMESPACE = "operatorframework.io/suggested-namespace"

ALL, OWN, SINGLE, MULTI = "AllNamespaces", "OwnNamespace", "SingleNamespace", "MultiNamespace"

# Objects a registry+v1 bundle may carry beside the CSV and CRDs, and whether
# they are namespaced (seed: "optional objects" of the bundle format; OLM v0.46's
# supportedresources.go, which added ConsolePlugin and NetworkPolicy).
OPTIONAL_KINDS: dict[tuple[str, str], bool] = {
    ("", "Secret"): True,
    ("", "ConfigMap"): True,
    ("", "Service"): True,
    ("", "ServiceAccount"): True,
    ("rbac.authorization.k8s.io", "Role"): True,
    ("rbac.authorization.k8s.io", "RoleBinding"): True,
    ("rbac.authorization.k8s.io", "ClusterRole"): False,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): False,
    ("monitoring.coreos.com", "PrometheusRule"): True,
    ("monitoring.coreos.com", "ServiceMonitor"): True,
    ("policy", "PodDisruptionBudget"): True,
    ("scheduling.k8s.io", "PriorityClass"): False,
    ("autoscaling.k8s.io", "VerticalPodAutoscaler"): True,
    ("console.openshift.io", "ConsoleYAMLSample"): False,
    ("console.openshift.io", "ConsoleQuickStart"): False,
    ("console.openshift.io", "ConsoleCLIDownload"): False,
    ("console.openshift.io", "ConsoleLink"): False,
    ("console.openshift.io", "ConsolePlugin"): False,
    ("networking.k8s.io", "NetworkPolicy"): True,
}


@dataclass(frozen=True)
class InstallPlan:
    """Where one bundle is installed: the operator's namespace and the namespaces it watches."""

    namespace: str
    target_namespaces: tuple[str, ...]  # () means all namespaces

    @property
    def mode(self) -> str:
        if not self.target_namespaces:
            return ALL
        if self.target_namespaces == (self.namespace,):
            return OWN
        return SINGLE if len(self.target_namespaces) == 1 else MULTI


@dataclass(frozen=True)
class Csv:
    """A typed view over the ClusterServiceVersion dict, its embedded objects read as OLM reads them."""

    obj: Manifest
    file: str
    notes: tuple[str, ...] = ()   # what that reading changed, each naming the file and field

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    @property
    def spec(self) -> dict[str, Any]:
        return self.obj.get("spec") or {}

    @property
    def version(self) -> str:
        return str(self.spec.get("version") or "")

    @property
    def annotations(self) -> dict[str, str]:
        return (self.obj.get("metadata") or {}).get("annotations") or {}

    @property
    def install_spec(self) -> dict[str, Any]:
        install = self.spec.get("install") or {}
        if install.get("strategy") != "deployment":
            raise UnsupportedBundleError(
                f"install strategy {install.get('strategy')!r} is not supported (only 'deployment')",
                path=self.file, obj=f"ClusterServiceVersion {self.name}")
        return install.get("spec") or {}

    @property
    def supported_modes(self) -> set[str]:
        return {m.get("type") for m in self.spec.get("installModes") or [] if m.get("supported") is True}


def find_csv(content: BundleContent) -> Csv:
    csvs = [m for m in content.manifests if _group_kind(m.obj) == CSV_GROUP_KIND]
    misgrouped = [m for m in content.manifests if m.obj.get("kind") == "ClusterServiceVersion"
                  and _group_kind(m.obj) != CSV_GROUP_KIND]
    if not csvs and misgrouped:
        raise UnsupportedBundleError(
            f"the ClusterServiceVersion has apiVersion {misgrouped[0].obj.get('apiVersion')!r}; it must be "
            f"operators.coreos.com/v1alpha1", path=misgrouped[0].file, obj=content.name)
    if len(csvs) != 1:
        raise UnsupportedBundleError(f"a registry+v1 bundle needs exactly one ClusterServiceVersion, "
                                     f"found {len(csvs)}", obj=content.name)
    obj, file = csvs[0].obj, csvs[0].file
    shapes.check_csv(obj, file, content.name)
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        raise UnsupportedBundleError("the ClusterServiceVersion has no metadata.name", path=file, obj=content.name)
    if not isinstance(obj.get("spec") or {}, dict):
        raise UnsupportedBundleError("the ClusterServiceVersion's spec is not a mapping", path=file,
                                     obj=content.name)
    return _typed_csv(obj, file, name)


# What a CSV embeds, and the OLM type it is decoded into (``typed``).
_EMBEDDED = (("install", "olm.NamedInstallStrategy"), ("webhookdefinitions", "[olm.WebhookDescription"),
             ("apiservicedefinitions", "olm.APIServiceDefinitions"))


def _typed_csv(obj: Manifest, file: str, name: str) -> Csv:
    """The CSV with its install strategy, webhook and APIService definitions read as OLM's Go types read them."""
    spec = obj.get("spec") or {}
    read: dict[str, Any] = {}
    notes: list[str] = []
    for key, ref in _EMBEDDED:
        if key in spec:
            value, found = typed.read(spec[key], ref, f"spec.{key}", f"{file}: ClusterServiceVersion {name}")
            if found:
                read[key], notes = value, notes + found
    if read:
        obj = dict(obj, spec=dict(spec, **read))
    return Csv(obj, file, tuple(notes))


def status_metadata(csv: Csv, objects: list[Manifest] | tuple[Manifest, ...] = ()) -> dict[str, Any]:
    """What an Operator's status says about it, from its CSV: names, version and the APIs it provides and requires.

    Each API is group, version, kind, plural and singular; plural and singular
    come from the bundle's own CRD when it ships one, else from the CRD name
    (``plural.group``) and the kind.
    """
    crds = {}
    for obj in objects:
        if _group_kind(obj) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            crds[(obj.get("metadata") or {}).get("name", "")] = (obj.get("spec") or {}).get("names") or {}

    def crd_api(entry: dict[str, Any]) -> dict[str, str]:
        name = str(entry.get("name") or "")
        plural, _, group = name.partition(".")
        names = crds.get(name, {})
        kind = str(entry.get("kind") or names.get("kind") or "")
        return {"group": group, "version": str(entry.get("version") or ""), "kind": kind,
                "plural": str(names.get("plural") or plural), "singular": str(names.get("singular") or kind.lower())}

    def apiservice_api(entry: dict[str, Any]) -> dict[str, str]:
        kind = str(entry.get("kind") or "")
        return {"group": str(entry.get("group") or ""), "version": str(entry.get("version") or ""), "kind": kind,
                "plural": str(entry.get("name") or ""), "singular": kind.lower()}

    def listed(section: str, which: str) -> list[dict[str, Any]]:
        entries = (csv.spec.get(section) or {}).get(which) or []
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    apis = {which: [crd_api(e) for e in listed("customresourcedefinitions", which)]
            + [apiservice_api(e) for e in listed("apiservicedefinitions", which)]
            for which in ("owned", "required")}
    return {"displayName": str(csv.spec.get("displayName") or ""),
            "description": str(csv.spec.get("description") or ""),
            "version": csv.version,
            "apis": {"provides": apis["owned"], "requires": apis["required"]}}


CONDITIONS_DESCRIPTOR = "urn:alm:descriptor:io.kubernetes.conditions"


def operand_conditions(csv: Csv) -> dict[str, str]:
    """Where each owned CRD's custom resources keep their conditions: CRD name -> path under ``status``.

    From the CSV's ``statusDescriptors`` carrying the conditions descriptor;
    a CRD without one gets the conventional ``conditions``.
    """
    out = {}
    owned = (csv.spec.get("customresourcedefinitions") or {}).get("owned") or []
    for entry in owned if isinstance(owned, list) else []:
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        path = "conditions"
        for desc in entry.get("statusDescriptors") or []:
            if isinstance(desc, dict) and CONDITIONS_DESCRIPTOR in (desc.get("x-descriptors") or []) and desc.get("path"):
                path = str(desc["path"])
                break
        out[str(entry["name"])] = path
    return out


def plan_install(csv: Csv, namespace: str, requested: tuple[str, ...] | None) -> InstallPlan:
    """Choose target namespaces: the request, else AllNamespaces if supported, else OwnNamespace."""
    supported = csv.supported_modes
    where = f"ClusterServiceVersion {csv.name}"
    if requested is None:
        if ALL in supported:
            return InstallPlan(namespace, ())
        if OWN in supported:
            return InstallPlan(namespace, (namespace,))
        raise UnsupportedBundleError(
            f"the bundle supports only {', '.join(sorted(supported)) or 'no install mode'}; "
            f"the target namespaces must be chosen", path=csv.file, obj=where,
            hint="set spec.install.targetNamespaces in the Operator declaration")
    targets = tuple(sorted(set(t for t in requested if t)))
    plan = InstallPlan(namespace, targets)
    if plan.mode not in supported:
        raise UnsupportedBundleError(
            f"install mode {plan.mode} (target namespaces {list(targets) or 'all'}) is not supported by "
            f"the bundle, which supports {', '.join(sorted(supported)) or 'none'}", path=csv.file, obj=where,
            hint="change spec.install.targetNamespaces to a supported mode")
    return plan


@dataclass(frozen=True)
class Conversion:
    """Everything a generator reads: the CSV, the bundle, the install plan and the services' certificates."""

    csv: Csv
    content: BundleContent
    plan: InstallPlan
    services: tuple[ServiceSpec, ...]
    certs: dict[str, ServiceCert]
    config: DeploymentConfig = DeploymentConfig()



@dataclass(frozen=True)
class ServiceSpec:
    """A Service OLM would create in front of a deployment for its webhooks or APIServices."""

    name: str
    deployment: str
    ports: tuple[tuple[int, int | str], ...]  # (port, targetPort)
    selector: dict[str, str]


WEBHOOK_TYPES = {
    "ValidatingAdmissionWebhook": ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    "MutatingAdmissionWebhook": ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    "ConversionWebhook": CRD_GROUP_KIND,
}
CERT_DIRS = {"apiservice-cert": ("/apiserver.local.config/certificates", {"tls.crt": "apiserver.crt",
                                                                          "tls.key": "apiserver.key"}),
             "webhook-cert": ("/tmp/k8s-webhook-server/serving-certs", {"tls.crt": "tls.crt", "tls.key": "tls.key"})}


def convert(content: BundleContent, plan: InstallPlan, certificates: CertificateProvider | None = None,
            config: DeploymentConfig = DeploymentConfig()) -> list[Manifest]:
    """All objects of the bundle, in generator order; each generator is a pure function of the conversion.
    ``config`` (an Operator's ``spec.config``) overrides every Deployment as OLM v0 applies it."""
    csv = find_csv(content)
    _reject_unsupported(csv, content, plan)
    services = _services(csv)
    provider = certificates or SelfSignedProvider()
    certs = {svc.name: provider.service_cert(plan.namespace, svc.name) for svc in services}
    conv = Conversion(csv, content, plan, services, certs, config)
    objects: list[Manifest] = []
    for generate in GENERATORS:
        objects.extend(generate(conv))
    return objects


def notes(content: BundleContent) -> tuple[str, ...]:
    """What conversion repairs in the bundle's manifests, each naming the file and field."""
    found: list[str] = []
    for m in content.manifests:
        if _group_kind(m.obj) == CRD_GROUP_KIND and m.obj.get("apiVersion") in (crds.V1, crds.V1BETA1):
            found += crds.normalise(m.obj, m.file, content.name)[1]
        elif _group_kind(m.obj) != CSV_GROUP_KIND:
            found += _read_manifest(m, content.name)[1]
    csv = find_csv(content)
    found += csv.notes
    for i, d in enumerate(csv.install_spec.get("deployments") or []):
        if isinstance(d, dict):
            found += _deployment_pod(csv, i, d, copy.deepcopy(((d.get("spec") or {}).get("template") or {})
                                                              .get("spec")), content.name)
    return tuple(found)


def _deployment_pod(csv: Csv, i: int, d: dict[str, Any], pod: Any, bundle: str) -> tuple[str, ...]:
    """Duplicate keyed-list entries in a CSV deployment's pod spec, normalised in place (``keyed``)."""
    return keyed.pod_spec(pod, f"spec.install.spec.deployments[{i}].spec.template.spec", csv.file, bundle,
                          f"{_where(csv)} deployment {d.get('name')}")


def _where(csv: Csv) -> str:
    return f"ClusterServiceVersion {csv.name}"


def _reject_unsupported(csv: Csv, content: BundleContent, plan: InstallPlan) -> None:
    deployments = {d.get("name") for d in csv.install_spec.get("deployments") or []}
    crd_names = {str((m.obj.get("metadata") or {}).get("name")) for m in content.manifests
                 if _group_kind(m.obj) == CRD_GROUP_KIND}
    for i, wh in enumerate(csv.spec.get("webhookdefinitions") or []):
        what = f"spec.webhookdefinitions[{i}] ({wh.get('generateName') or 'no generateName'})"
        if wh.get("type") not in WEBHOOK_TYPES:
            raise UnsupportedBundleError(f"{what} has type {wh.get('type')!r}; known types are "
                                         f"{', '.join(WEBHOOK_TYPES)}", path=csv.file, obj=_where(csv))
        if not wh.get("generateName"):
            raise UnsupportedBundleError(f"{what} has no generateName", path=csv.file, obj=_where(csv))
        if wh.get("deploymentName") not in deployments:
            raise UnsupportedBundleError(f"{what} names deployment {wh.get('deploymentName')!r}, which the "
                                         f"install strategy does not define", path=csv.file, obj=_where(csv))
        if wh["type"] == "ConversionWebhook":
            if plan.mode != ALL:
                raise UnsupportedBundleError(
                    f"{what} is a conversion webhook, which needs the AllNamespaces install mode (a CRD "
                    f"serves every namespace), but this install is {plan.mode}", path=csv.file, obj=_where(csv),
                    hint="install the operator for all namespaces (targetNamespaces: [\"\"])")
            missing = [n for n in wh.get("conversionCRDs") or [] if n not in crd_names]
            if missing or not wh.get("conversionCRDs"):
                raise UnsupportedBundleError(
                    f"{what} is a conversion webhook for CRDs {missing or '(none listed)'} that the bundle does "
                    f"not contain", path=csv.file, obj=_where(csv))
    served_by: dict[tuple[str, str], str] = {}
    for i, api in enumerate((csv.spec.get("apiservicedefinitions") or {}).get("owned") or []):
        what = f"spec.apiservicedefinitions.owned[{i}] ({api.get('version')}.{api.get('group')})"
        if not api.get("group") or not api.get("version"):
            raise UnsupportedBundleError(f"{what} needs a group and a version", path=csv.file, obj=_where(csv))
        if api.get("deploymentName") not in deployments:
            raise UnsupportedBundleError(f"{what} names deployment {api.get('deploymentName')!r}, which the "
                                         f"install strategy does not define", path=csv.file, obj=_where(csv))
        other = served_by.setdefault((api["group"], api["version"]), api["deploymentName"])
        if other != api["deploymentName"]:
            raise UnsupportedBundleError(f"{what} is served by deployment {api['deploymentName']!r}, but an "
                                         f"earlier entry of the same group and version names {other!r}; one "
                                         f"APIService has one backing Service", path=csv.file, obj=_where(csv))


def _group_kind(obj: Manifest) -> tuple[str, str]:
    return split_api_version(obj.get("apiVersion", ""))[0], obj.get("kind", "")


def _services(csv: Csv) -> tuple[ServiceSpec, ...]:
    """One Service per deployment that serves webhooks or APIServices, with every port they use."""
    ports: dict[str, dict[int, int | str]] = {}
    for wh in csv.spec.get("webhookdefinitions") or []:
        port = int(wh.get("containerPort") or 443)
        ports.setdefault(wh["deploymentName"], {})[port] = wh.get("targetPort") or port
    for api in (csv.spec.get("apiservicedefinitions") or {}).get("owned") or []:
        # as OLM v0 serves an APIService: the Service's port is the container's, and so is the APIService's
        port = int(api.get("containerPort") or 443)
        ports.setdefault(api["deploymentName"], {})[port] = port
    selectors = {d.get("name"): (((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
                 for d in csv.install_spec.get("deployments") or []}
    return tuple(ServiceSpec(_service_name(dep), dep, tuple(sorted(p.items())), dict(selectors[dep]))
                 for dep, p in sorted(ports.items()))


def _service_name(deployment: str) -> str:
    return bounded_name(deployment, "service")


def _service_for(conv: Conversion, deployment: str) -> ServiceSpec:
    return next(s for s in conv.services if s.deployment == deployment)


def _crds(conv: Conversion) -> Iterator[Manifest]:
    conversions = {}
    for wh in conv.csv.spec.get("webhookdefinitions") or []:
        if wh.get("type") == "ConversionWebhook":
            for name in wh.get("conversionCRDs") or []:
                conversions[name] = wh
    for m in conv.content.manifests:
        if _group_kind(m.obj) != CRD_GROUP_KIND:
            continue
        if m.obj["apiVersion"] not in (crds.V1, crds.V1BETA1):
            raise UnsupportedBundleError(f"CustomResourceDefinition in {m.obj['apiVersion']} is not supported "
                                         f"(only apiextensions.k8s.io/v1 and v1beta1)",
                                         path=m.file, obj=conv.content.name)
        crd = crds.normalise(m.obj, m.file, conv.content.name)[0]
        wh = conversions.get(str((crd.get("metadata") or {}).get("name")))
        if wh is not None:
            svc = _service_for(conv, wh["deploymentName"])
            cert = conv.certs[svc.name]
            client: dict[str, Any] = {"service": {"namespace": conv.plan.namespace, "name": svc.name,
                                                  "path": wh.get("webhookPath") or "/",
                                                  "port": int(wh.get("containerPort") or 443)}}
            if cert.ca_bundle:
                client["caBundle"] = cert.ca_bundle
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": client,
                "conversionReviewVersions": list(wh.get("admissionReviewVersions") or ["v1", "v1beta1"])}}
            crd["spec"].pop("preserveUnknownFields", None)
            _annotate(crd, cert.annotations)
        yield crd


def _annotate(obj: Manifest, annotations: dict[str, str]) -> None:
    if annotations:
        meta = obj.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}


def _service_accounts(conv: Conversion) -> Iterator[Manifest]:
    spec = conv.csv.install_spec
    names = {p.get("serviceAccountName") for key in ("permissions", "clusterPermissions")
             for p in spec.get(key) or []}
    names |= {((d.get("spec") or {}).get("template", {}).get("spec") or {}).get("serviceAccountName")
              for d in spec.get("deployments") or []}
    shipped = {(m.obj.get("metadata") or {}).get("name") for m in conv.content.manifests
               if _group_kind(m.obj) == ("", "ServiceAccount")}
    for name in sorted(n for n in names if n and n != "default" and n not in shipped):
        yield {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": conv.plan.namespace}}


def _rule_sets(csv: Csv, key: str) -> list[tuple[str, str, list[Any]]]:
    """(object name, service account, rules) for each entry of permissions/clusterPermissions.

    The name ends in a hash of (key, service account, position), so entries of
    the two lists, or two entries for one account, can never share a name.
    """
    out = []
    for i, entry in enumerate(csv.install_spec.get(key) or []):
        sa = entry.get("serviceAccountName") or "default"
        suffix = hashlib.sha256(f"{key}/{sa}/{i}".encode()).hexdigest()[:8]
        out.append((bounded_name(csv.name, sa, suffix), sa, entry.get("rules") or []))
    return out


def _permissions(conv: Conversion) -> Iterator[Manifest]:
    plan = conv.plan
    for name, sa, rules in _rule_sets(conv.csv, "permissions"):
        subject = [{"kind": "ServiceAccount", "name": sa, "namespace": plan.namespace}]
        if plan.mode == ALL:
            # promoted to cluster scope, as OLM does, with the rule OLM adds so the operator can see namespaces
            yield _cluster_role(name, [*rules, {"apiGroups": [""], "resources": ["namespaces"],
                                                "verbs": ["get", "list", "watch"]}])
            yield _cluster_role_binding(name, subject)
            continue
        for ns in sorted(set(plan.target_namespaces) | {plan.namespace}):
            yield {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": name, "namespace": ns}, "rules": copy.deepcopy(rules)}
            yield _role_binding(name, ns, "Role", name, subject)


def _cluster_permissions(conv: Conversion) -> Iterator[Manifest]:
    for name, sa, rules in _rule_sets(conv.csv, "clusterPermissions"):
        yield _cluster_role(name, rules)
        yield _cluster_role_binding(name, [{"kind": "ServiceAccount", "name": sa,
                                            "namespace": conv.plan.namespace}])


def _cluster_role(name: str, rules: list[Any]) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": copy.deepcopy(rules)}


def _cluster_role_binding(name: str, subjects: list[dict[str, str]], role: str | None = None) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role or name},
            "subjects": subjects}


def _role_binding(name: str, namespace: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": subjects}


def _webhook_services(conv: Conversion) -> Iterator[Manifest]:
    """The Services, their certificates, and (for APIServices) the delegated-auth bindings OLM adds."""
    api_deployments = {a["deploymentName"] for a in (conv.csv.spec.get("apiservicedefinitions") or {}).get("owned")
                       or []}
    ns = conv.plan.namespace
    for svc in conv.services:
        yield {"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc.name, "namespace": ns},
               "spec": {"selector": dict(svc.selector),
                        "ports": [{"name": str(port), "port": port, "targetPort": target}
                                  for port, target in svc.ports]}}
        yield from copy.deepcopy(list(conv.certs[svc.name].objects))
        if svc.deployment in api_deployments:
            sa = _deployment_service_account(conv.csv, svc.deployment)
            subject = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
            yield _cluster_role_binding(bounded_name(svc.name, "auth-delegator"), subject,
                                        role="system:auth-delegator")
            yield _role_binding(bounded_name(svc.name, "auth-reader"), "kube-system", "Role",
                                "extension-apiserver-authentication-reader", subject)


def _deployment_service_account(csv: Csv, deployment: str) -> str:
    for d in csv.install_spec.get("deployments") or []:
        if d.get("name") == deployment:
            return ((d.get("spec") or {}).get("template", {}).get("spec") or {}).get("serviceAccountName") or "default"
    return "default"


_WEBHOOK_FIELDS = ("admissionReviewVersions", "failurePolicy", "matchPolicy", "namespaceSelector",
                   "objectSelector", "rules", "sideEffects", "timeoutSeconds")


def _webhook_configurations(conv: Conversion) -> Iterator[Manifest]:
    plan = conv.plan
    for wh in conv.csv.spec.get("webhookdefinitions") or []:
        if wh["type"] == "ConversionWebhook":
            continue
        group, kind = WEBHOOK_TYPES[wh["type"]]
        svc = _service_for(conv, wh["deploymentName"])
        cert = conv.certs[svc.name]
        client: dict[str, Any] = {"service": {"namespace": plan.namespace, "name": svc.name,
                                              "path": wh.get("webhookPath") or "/",
                                              "port": int(wh.get("containerPort") or 443)}}
        if cert.ca_bundle:
            client["caBundle"] = cert.ca_bundle
        hook: dict[str, Any] = {"name": wh["generateName"], "clientConfig": client}
        hook.update({k: copy.deepcopy(wh[k]) for k in _WEBHOOK_FIELDS if wh.get(k) is not None})
        if kind == "MutatingWebhookConfiguration" and wh.get("reinvocationPolicy"):
            hook["reinvocationPolicy"] = wh["reinvocationPolicy"]
        hook.setdefault("admissionReviewVersions", ["v1"])
        hook.setdefault("sideEffects", "None")
        if plan.mode != ALL:
            hook["namespaceSelector"] = {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In",
                "values": sorted(set(plan.target_namespaces))}]}
        obj: Manifest = {"apiVersion": f"{group}/v1", "kind": kind,
                         "metadata": {"name": wh["generateName"]}, "webhooks": [hook]}
        _annotate(obj, cert.annotations)
        yield obj


def _api_services(conv: Conversion) -> Iterator[Manifest]:
    """One APIService per group and version, however many kinds of it the CSV lists (as OLM names it)."""
    seen = set()
    for api in (conv.csv.spec.get("apiservicedefinitions") or {}).get("owned") or []:
        if (api["group"], api["version"]) in seen:
            continue
        seen.add((api["group"], api["version"]))
        svc = _service_for(conv, api["deploymentName"])
        cert = conv.certs[svc.name]
        spec: dict[str, Any] = {"group": api["group"], "version": api["version"],
                                "service": {"name": svc.name, "namespace": conv.plan.namespace,
                                            "port": int(api.get("containerPort") or 443)},
                                "groupPriorityMinimum": 2000, "versionPriority": 15}
        if cert.ca_bundle:
            spec["caBundle"] = cert.ca_bundle
        obj: Manifest = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                         "metadata": {"name": f"{api['version']}.{api['group']}"}, "spec": spec}
        _annotate(obj, cert.annotations)
        yield obj


def _deployments(conv: Conversion) -> Iterator[Manifest]:
    plan, csv = conv.plan, conv.csv
    served = {s.deployment: s for s in conv.services}
    for i, d in enumerate(csv.install_spec.get("deployments") or []):
        name = d.get("name")
        if not name:
            raise UnsupportedBundleError("a deployment in the install strategy has no name",
                                         path=csv.file, obj=_where(csv))
        spec = copy.deepcopy(d.get("spec") or {})
        template = spec.setdefault("template", {})
        _deployment_pod(csv, i, d, template.get("spec"), conv.content.name)
        tmeta = template.setdefault("metadata", {})
        # OLM copies the CSV's annotations onto the pod template (the template's own win), then its own
        annotations = {**{str(k): str(v) for k, v in csv.annotations.items()}, **(tmeta.get("annotations") or {})}
        annotations["olm.targetNamespaces"] = ",".join(plan.target_namespaces)
        annotations["olm.operatorNamespace"] = plan.namespace
        tmeta["annotations"] = annotations
        spec["revisionHistoryLimit"] = 1  # OLM keeps one old ReplicaSet, whatever the bundle says
        if name in served:
            cert = conv.certs[served[name].name]
            _mount_certs(template.setdefault("spec", {}), cert.secret_name)
            annotations.update(cert.pod_annotations)   # the CA's hash: a new CA rolls the pods, as in OLM
        yield overrides.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": name, "namespace": plan.namespace,
                                            "labels": dict(d.get("label") or {})},
                               "spec": spec}, conv.config)


def _mount_certs(pod: dict[str, Any], secret: str) -> None:
    """Mount the serving certificate where and as OLM v0 does: its two volumes, ``apiservice-cert`` then
    ``webhook-cert``, each replacing in place a volume of its name (appended otherwise), and in each container
    a mount replacing in place the first of its name or path (appended otherwise). The pod template is then
    OLM's to the order of its lists, which a takeover must keep (another order is another pod template).

    Unlike OLM, a bundle's own volume mounted at one of those paths goes, with its mounts: left in the pod
    unmounted, its secret (often one the bundle's cert-manager setup would have made) would still have to exist
    before the pod can start.
    """
    paths = {path for path, _ in CERT_DIRS.values()}
    stale = {m.get("name") for c in pod.get("containers") or [] for m in c.get("volumeMounts") or []
             if m.get("mountPath") in paths} - set(CERT_DIRS)
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v.get("name") not in stale]
    for container in pod.get("containers") or []:
        container["volumeMounts"] = [m for m in container.get("volumeMounts") or []
                                     if m.get("name") not in stale or m.get("mountPath") in paths]
    for vol, (path, keys) in CERT_DIRS.items():
        _put(pod["volumes"], {"name": vol, "secret": {"secretName": secret,
                                                      "items": [{"key": k, "path": p} for k, p in keys.items()]}},
             lambda v, vol=vol: v.get("name") == vol)
        for container in pod.get("containers") or []:
            mount = {"name": vol, "mountPath": path}
            _put(container["volumeMounts"], mount,
                 lambda m, vol=vol, path=path: m.get("name") == vol or m.get("mountPath") == path)
            container["volumeMounts"] = [m for m in container["volumeMounts"] if m is mount
                                         or m.get("mountPath") != path]


def _put(items: list[dict[str, Any]], item: dict[str, Any], same: Callable[[dict[str, Any]], bool]) -> None:
    """Replace the first entry ``same`` picks with ``item``, or append it."""
    for i, existing in enumerate(items):
        if same(existing):
            items[i] = item
            return
    items.append(item)


def _optional_objects(conv: Conversion) -> Iterator[Manifest]:
    generated = {("", "Service", s.name) for s in conv.services} | \
                {("", "Secret", c.secret_name) for c in conv.certs.values()}
    crd_groups = {str((m.obj.get("spec") or {}).get("group")): str(((m.obj.get("spec") or {}).get("names") or {})
                                                                  .get("kind"))
                  for m in conv.content.manifests if _group_kind(m.obj) == CRD_GROUP_KIND}
    for m in conv.content.manifests:
        gk = _group_kind(m.obj)
        if gk in (CSV_GROUP_KIND, CRD_GROUP_KIND):
            continue
        if gk not in OPTIONAL_KINDS:
            if gk[0] in crd_groups:
                raise UnsupportedBundleError(
                    f"{gk[1]} {(m.obj.get('metadata') or {}).get('name')!r} in API group {gk[0]} is a custom "
                    f"resource of the bundle's own CRDs; a registry+v1 bundle may not carry custom resources",
                    path=m.file, obj=conv.content.name,
                    hint="create custom resources after installing, or list them as examples in the CSV's "
                         "alm-examples annotation")
            raise UnsupportedBundleError(
                f"{gk[1]} in API group {gk[0] or 'core'} is not an object a registry+v1 bundle may carry",
                path=m.file, obj=conv.content.name,
                hint="the bundle format allows CRDs, the CSV and: "
                     + ", ".join(sorted(k for _, k in OPTIONAL_KINDS)))
        if (gk[0], gk[1], (m.obj.get("metadata") or {}).get("name")) in generated:
            continue  # OLM replaces a shipped webhook Service or certificate Secret with its own
        obj = copy.deepcopy(_read_manifest(m, conv.content.name)[0])
        if OPTIONAL_KINDS[gk]:
            obj.setdefault("metadata", {})["namespace"] = conv.plan.namespace
        yield obj


def relocated(content: BundleContent) -> tuple[tuple[tuple[str, str, str], str], ...]:
    """The namespaced optional objects that name a namespace of their own, which ``_optional_objects`` replaces
    with the install namespace: ((group, kind, name), the namespace written)."""
    out = []
    for m in content.manifests:
        gk = _group_kind(m.obj)
        meta = m.obj.get("metadata")
        if not OPTIONAL_KINDS.get(gk) or not isinstance(meta, dict):
            continue
        ns = meta.get("namespace")
        if isinstance(ns, str) and ns:
            out.append(((gk[0], gk[1], str(meta.get("name") or "")), ns))
    return tuple(out)


def _read_manifest(m: ParsedManifest, bundle: str) -> tuple[Manifest, tuple[str, ...]]:
    """A manifest beside the CSV and CRDs as OLM creates it, and the notes: duplicate keyed-list entries
    resolved (``keyed``), a retired version upgraded, and the object read through its kind's type
    (``typed``: as OLM decodes the kinds it knows, as the API server reads the others)."""
    obj, notes = keyed.normalise(m.obj, m.file, bundle)
    if obj.get("apiVersion") in _RETIRED_VERSIONS:
        obj = dict(obj, apiVersion=_RETIRED_VERSIONS[obj["apiVersion"]])
    mode = typed.FOLD if _group_kind(obj) in typed.OLM_DECODED else typed.DROP
    obj, found = typed.read_object(obj, f"{m.file}: {obj.get('kind')} {(obj.get('metadata') or {}).get('name')}",
                                   mode)
    return obj, (*notes, *found)


# API versions Kubernetes no longer serves whose objects are unchanged in v1: upgraded in place.
_RETIRED_VERSIONS = {"rbac.authorization.k8s.io/v1beta1": "rbac.authorization.k8s.io/v1",
                     "rbac.authorization.k8s.io/v1alpha1": "rbac.authorization.k8s.io/v1",
                     "scheduling.k8s.io/v1beta1": "scheduling.k8s.io/v1",
                     "scheduling.k8s.io/v1alpha1": "scheduling.k8s.io/v1"}


GENERATORS: tuple[Callable[[Conversion], Iterator[Manifest]], ...] = (
    _crds, _service_accounts, _permissions, _cluster_permissions, _optional_objects, _webhook_services,
    _webhook_configurations, _api_services, _deployments,
)

__all__ = ["ALL", "OWN", "SINGLE", "MULTI", "Conversion", "Csv", "InstallPlan", "ParsedManifest", "convert",
           "find_csv", "plan_install", "relocated", "SUGGESTED_NAMESPACE"]
