"""registry+v1 bundles -> plain manifests, through ``reconciler.bundle.render``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reconciler.bundle import render
from reconciler.bundle.source import directory_digest
from reconciler.errors import BundleError, UnsupportedBundleError
from reconciler.model.declarations import InstallSettings
from reconciler.model.kube import is_dns1123_subdomain
from tests.unit.helpers import by_kind, crd_doc, csv_doc, deployment, write, write_bundle
from tests.support.paths import EXAMPLE

RBAC = "rbac.authorization.k8s.io"
CSV_FILE = "manifests/demo.clusterserviceversion.yaml"


def render_demo(repo: Path, *extra, csv=None, namespace="demo-ns", targets=None, default="operators",
                rel="bundles/demo"):
    ref = write_bundle(repo, rel, csv, *extra)
    return render(ref, repo, InstallSettings(namespace, targets), default)


def unsupported(repo: Path, *extra, csv=None, **kw) -> UnsupportedBundleError:
    with pytest.raises(UnsupportedBundleError) as err:
        render_demo(repo, *extra, csv=csv, **kw)
    return err.value


def pod_annotations(objects) -> dict:
    (dep,) = by_kind(objects, "Deployment", "apps")
    return dep["spec"]["template"]["metadata"]["annotations"]


def names(objects, kind, group=RBAC):
    return sorted((o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in by_kind(objects, kind, group))


# --- the example bundles -------------------------------------------------------------------------


def test_example_bundle_all_namespaces_by_default():
    out = render("file://bundles/plumbus/1.1.0", EXAMPLE, InstallSettings(), "operators")
    assert (out.package, out.name, out.version, out.mediatype) == ("plumbus", "plumbus.v1.1.0", "1.1.0",
                                                                   "registry+v1")
    assert out.reference == "file://bundles/plumbus/1.1.0"
    assert out.digest.startswith("sha256:") and len(out.digest) == len("sha256:") + 64
    # no install namespace declared: the CSV's suggested namespace wins over the default
    assert out.namespace == "plumbus-system"
    assert out.target_namespaces == ()
    kinds = [(o["kind"], o["metadata"]["name"]) for o in out.objects]
    assert kinds == [
        ("CustomResourceDefinition", "plumbai.how.theydoit.com"),
        ("ServiceAccount", "plumbus-controller"),
        ("ClusterRole", "plumbus.v1.1.0-plumbus-controller-af1045a6"),
        ("ClusterRoleBinding", "plumbus.v1.1.0-plumbus-controller-af1045a6"),
        ("ClusterRole", "plumbus.v1.1.0-plumbus-controller-bf3d272b"),
        ("ClusterRoleBinding", "plumbus.v1.1.0-plumbus-controller-bf3d272b"),
        ("Deployment", "plumbus-controller-manager"),
    ]
    assert by_kind(out.objects, "Role") == [] and by_kind(out.objects, "RoleBinding") == []
    # permissions promoted to cluster scope keep their rules and bind the operator's service account
    role = by_kind(out.objects, "ClusterRole", RBAC)[0]
    assert role["rules"][1] == {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                "verbs": ["get", "create", "update"]}
    binding = by_kind(out.objects, "ClusterRoleBinding", RBAC)[0]
    assert binding["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "plumbus-controller",
                                    "namespace": "plumbus-system"}]
    (sa,) = by_kind(out.objects, "ServiceAccount", "")
    assert sa["metadata"] == {"name": "plumbus-controller", "namespace": "plumbus-system"}
    (dep,) = by_kind(out.objects, "Deployment", "apps")
    assert dep["metadata"] == {"name": "plumbus-controller-manager", "namespace": "plumbus-system",
                               "labels": {"app.kubernetes.io/name": "plumbus"}}
    # the CSV's annotations are copied onto the pod template, as OLM does
    assert pod_annotations(out.objects) == {"operatorframework.io/suggested-namespace": "plumbus-system",
                                            "capabilities": "Basic Install", "olm.targetNamespaces": "",
                                            "olm.operatorNamespace": "plumbus-system"}
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example.com/plumbus/controller:v1.1.0"


def test_example_bundle_install_namespace_overrides_suggestion():
    out = render("file://bundles/plumbus/1.0.0", EXAMPLE, InstallSettings(namespace="team-a"), "operators")
    assert out.namespace == "team-a"
    assert {o["metadata"].get("namespace") for o in out.objects if o["kind"] in ("ServiceAccount", "Deployment")} \
        == {"team-a"}
    assert pod_annotations(out.objects)["olm.operatorNamespace"] == "team-a"


def test_csv_annotations_on_pod_template_and_one_old_replica_set(tmp_path):
    # OLM merges the CSV's annotations into each deployment's pod template (the template's own value wins,
    # OLM's olm.* annotations win over both) and keeps one old ReplicaSet whatever the bundle asks for
    dep = deployment("demo-controller", "demo-sa")
    dep["spec"]["revisionHistoryLimit"] = 10
    dep["spec"]["template"]["metadata"]["annotations"] = {"shared": "from-template", "kubectl.kubernetes.io/x": "y"}
    csv = csv_doc(deployments=[dep], annotations={"capabilities": "Basic Install", "shared": "from-csv",
                                                  "olm.targetNamespaces": "stale", "alm-examples": "[]"})
    out = render_demo(tmp_path, csv=csv, targets=("watched",))
    assert pod_annotations(out.objects) == {"capabilities": "Basic Install", "shared": "from-template",
                                            "alm-examples": "[]", "kubectl.kubernetes.io/x": "y",
                                            "olm.targetNamespaces": "watched", "olm.operatorNamespace": "demo-ns"}
    (rendered,) = by_kind(out.objects, "Deployment", "apps")
    assert rendered["spec"]["revisionHistoryLimit"] == 1
    assert "annotations" not in rendered["metadata"]   # the Deployment itself gets none
    assert by_kind(render_demo(tmp_path, rel="bundles/other").objects, "Deployment", "apps")[0]["spec"][
        "revisionHistoryLimit"] == 1


def test_bundle_volume_at_the_certificate_path_is_removed_with_its_mount(tmp_path):
    # the bundle mounts its own secret volume where OLM mounts the serving certificate: OLM replaces the
    # mount and drops the volume, whose secret would otherwise have to exist before the pod can start
    dep = deployment("demo-controller", "demo-sa")
    pod = dep["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "cert", "secret": {"secretName": "made-by-kustomize"}},
                      {"name": "config", "configMap": {"name": "demo-config"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
                                            {"name": "config", "mountPath": "/etc/demo"}]
    pod["containers"].append({"name": "proxy", "image": "registry.example.com/proxy:1",
                              "volumeMounts": [{"name": "cert", "mountPath": "/certs"}]})
    csv = csv_doc(deployments=[dep], webhookdefinitions=[
        {"type": "ValidatingAdmissionWebhook", "generateName": "vwidget.demo.example.com",
         "deploymentName": "demo-controller", "containerPort": 443, "admissionReviewVersions": ["v1"],
         "sideEffects": "None", "webhookPath": "/validate"}])
    (rendered,) = by_kind(render_demo(tmp_path, crd_doc(), csv=csv).objects, "Deployment", "apps")
    pod = rendered["spec"]["template"]["spec"]
    # in OLM v0's order: its two volumes appended, apiservice-cert first; a mount on the certificate path
    # replaced in place
    assert [v["name"] for v in pod["volumes"]] == ["config", "apiservice-cert", "webhook-cert"]
    assert [[m["name"] for m in c["volumeMounts"]] for c in pod["containers"]] == [
        ["webhook-cert", "config", "apiservice-cert"], ["apiservice-cert", "webhook-cert"]]


def test_rendering_does_not_mutate_between_calls():
    a = render("file://bundles/plumbus/1.1.0", EXAMPLE, InstallSettings("x", ("x",)), "operators")
    b = render("file://bundles/plumbus/1.1.0", EXAMPLE, InstallSettings(), "operators")
    assert pod_annotations(a.objects)["olm.targetNamespaces"] == "x"
    assert pod_annotations(b.objects)["olm.targetNamespaces"] == ""


# --- install modes -------------------------------------------------------------------------------


def test_default_namespace_when_no_suggestion(tmp_path):
    out = render_demo(tmp_path, namespace=None, default="fallback-ns")
    assert out.namespace == "fallback-ns"


def test_suggested_namespace_annotation(tmp_path):
    csv = csv_doc(annotations={"operatorframework.io/suggested-namespace": "demo-system"})
    out = render_demo(tmp_path, csv=csv, namespace=None, default="fallback-ns")
    assert out.namespace == "demo-system"
    assert pod_annotations(out.objects)["olm.operatorNamespace"] == "demo-system"


def test_all_namespaces_explicit_empty_target(tmp_path):
    out = render_demo(tmp_path, targets=("",))
    assert out.target_namespaces == ()
    assert names(out.objects, "ClusterRole") == [("", "demo.v0.1.0-demo-sa-88a2372c"), ("", "demo.v0.1.0-demo-sa-a9a65343")]
    assert pod_annotations(out.objects)["olm.targetNamespaces"] == ""


def test_own_namespace(tmp_path):
    out = render_demo(tmp_path, targets=("demo-ns",))
    assert out.target_namespaces == ("demo-ns",)
    assert names(out.objects, "Role") == [("demo-ns", "demo.v0.1.0-demo-sa-88a2372c")]
    (rb,) = by_kind(out.objects, "RoleBinding", RBAC)
    assert rb["metadata"] == {"name": "demo.v0.1.0-demo-sa-88a2372c", "namespace": "demo-ns"}
    assert rb["roleRef"] == {"apiGroup": RBAC, "kind": "Role", "name": "demo.v0.1.0-demo-sa-88a2372c"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "demo-sa", "namespace": "demo-ns"}]
    # clusterPermissions stay cluster-scoped; permissions are no longer promoted
    assert names(out.objects, "ClusterRole") == [("", "demo.v0.1.0-demo-sa-a9a65343")]
    assert pod_annotations(out.objects) == {"olm.targetNamespaces": "demo-ns", "olm.operatorNamespace": "demo-ns"}


def test_own_namespace_chosen_when_all_namespaces_unsupported(tmp_path):
    out = render_demo(tmp_path, csv=csv_doc(modes=("OwnNamespace",)))
    assert out.target_namespaces == ("demo-ns",)
    assert names(out.objects, "Role") == [("demo-ns", "demo.v0.1.0-demo-sa-88a2372c")]


def test_single_namespace(tmp_path):
    out = render_demo(tmp_path, targets=("watched",))
    assert out.target_namespaces == ("watched",)
    assert names(out.objects, "Role") == [("demo-ns", "demo.v0.1.0-demo-sa-88a2372c"), ("watched", "demo.v0.1.0-demo-sa-88a2372c")]
    assert names(out.objects, "RoleBinding") == names(out.objects, "Role")
    for rb in by_kind(out.objects, "RoleBinding", RBAC):
        assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "demo-sa", "namespace": "demo-ns"}]
    assert pod_annotations(out.objects) == {"olm.targetNamespaces": "watched", "olm.operatorNamespace": "demo-ns"}


def test_multi_namespace_rejected_when_unsupported(tmp_path):
    err = unsupported(tmp_path, targets=("b", "a"))
    assert err.path == CSV_FILE and err.obj == "ClusterServiceVersion demo.v0.1.0"
    assert err.message == ("install mode MultiNamespace (target namespaces ['a', 'b']) is not supported by the "
                           "bundle, which supports AllNamespaces, OwnNamespace, SingleNamespace")
    assert "spec.install.targetNamespaces" in err.hint


def test_multi_namespace_when_supported(tmp_path):
    csv = csv_doc(modes=("MultiNamespace",))
    out = render_demo(tmp_path, csv=csv, targets=("b", "a", "b"))
    assert out.target_namespaces == ("a", "b")
    assert names(out.objects, "Role") == [("a", "demo.v0.1.0-demo-sa-88a2372c"), ("b", "demo.v0.1.0-demo-sa-88a2372c"),
                                          ("demo-ns", "demo.v0.1.0-demo-sa-88a2372c")]
    assert pod_annotations(out.objects)["olm.targetNamespaces"] == "a,b"


def test_all_namespaces_rejected_when_unsupported(tmp_path):
    err = unsupported(tmp_path, csv=csv_doc(modes=("OwnNamespace", "SingleNamespace")), targets=("",))
    assert err.message.startswith("install mode AllNamespaces (target namespaces all) is not supported")


def test_own_namespace_rejected_when_unsupported(tmp_path):
    err = unsupported(tmp_path, csv=csv_doc(modes=("AllNamespaces",)), targets=("demo-ns",))
    assert "install mode OwnNamespace" in err.message
    assert err.message.endswith("which supports AllNamespaces")


def test_single_namespace_only_without_targets(tmp_path):
    err = unsupported(tmp_path, csv=csv_doc(modes=("SingleNamespace",)))
    assert err.path == CSV_FILE and err.obj == "ClusterServiceVersion demo.v0.1.0"
    assert err.message == "the bundle supports only SingleNamespace; the target namespaces must be chosen"
    assert err.hint == "set spec.install.targetNamespaces in the Operator declaration"


def test_no_install_modes(tmp_path):
    err = unsupported(tmp_path, csv=csv_doc(modes=()))
    assert "supports only no install mode" in err.message


# --- service accounts ----------------------------------------------------------------------------


def test_service_accounts_from_permissions_and_deployments(tmp_path):
    csv = csv_doc(
        permissions=[{"serviceAccountName": "from-perms", "rules": []}],
        cluster_permissions=[{"serviceAccountName": "from-cluster-perms", "rules": []},
                             {"serviceAccountName": "default", "rules": []}],
        deployments=[deployment("one", "from-deployment"), deployment("two", None), deployment("three", "default")])
    out = render_demo(tmp_path, csv=csv)
    assert names(out.objects, "ServiceAccount", "") == [
        ("demo-ns", "from-cluster-perms"), ("demo-ns", "from-deployment"), ("demo-ns", "from-perms")]


def test_service_account_shipped_by_bundle_not_generated(tmp_path):
    shipped = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "demo-sa", "annotations": {"from": "bundle"}}}
    out = render_demo(tmp_path, shipped)
    sas = by_kind(out.objects, "ServiceAccount", "")
    assert len(sas) == 1
    assert sas[0]["metadata"] == {"name": "demo-sa", "annotations": {"from": "bundle"}, "namespace": "demo-ns"}


def test_permissions_without_service_account_bind_default(tmp_path):
    csv = csv_doc(permissions=[{"rules": []}], cluster_permissions=[])
    out = render_demo(tmp_path, csv=csv, targets=("demo-ns",))
    (rb,) = by_kind(out.objects, "RoleBinding", RBAC)
    assert rb["subjects"][0]["name"] == "default"
    assert names(out.objects, "ServiceAccount", "") == [("demo-ns", "demo-sa")]  # from the deployment only


def test_two_permission_entries_for_one_account_get_distinct_names(tmp_path):
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    csv = csv_doc(permissions=[{"serviceAccountName": "demo-sa", "rules": rules},
                               {"serviceAccountName": "demo-sa", "rules": []}])
    out = render_demo(tmp_path, csv=csv, targets=("demo-ns",))
    role_names = [n for _, n in names(out.objects, "Role")]
    assert len(role_names) == 2 and len(set(role_names)) == 2


# --- optional objects and unsupported content ----------------------------------------------------


def test_optional_objects_namespaced_by_scope(tmp_path):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "elsewhere"},
          "data": {"a": "b"}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "extra"},
            "rules": []}
    crole = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "extra-viewer"}, "rules": []}
    prio = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000}
    out = render_demo(tmp_path, cm, role, crole, prio)
    (got_cm,) = by_kind(out.objects, "ConfigMap", "")
    assert got_cm["metadata"]["namespace"] == "demo-ns" and got_cm["data"] == {"a": "b"}
    assert ("demo-ns", "extra") in names(out.objects, "Role")
    assert ("", "extra-viewer") in names(out.objects, "ClusterRole")
    (got_prio,) = by_kind(out.objects, "PriorityClass", "scheduling.k8s.io")
    assert "namespace" not in got_prio["metadata"]


def test_custom_resource_named_role_is_not_rbac(tmp_path):
    fake_role = {"apiVersion": "iam.example.com/v1", "kind": "Role", "metadata": {"name": "admin"}}
    err = unsupported(tmp_path, fake_role)
    assert err.path == "manifests/extra-0.yaml"
    assert err.obj == "file://bundles/demo"
    assert err.message == "Role in API group iam.example.com is not an object a registry+v1 bundle may carry"
    assert "ClusterRole" in err.hint


def test_core_kind_not_allowed(tmp_path):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    err = unsupported(tmp_path, pod)
    assert err.message == "Pod in API group core is not an object a registry+v1 bundle may carry"


def test_webhook_for_unknown_deployment_rejected(tmp_path):
    # webhooks are converted now (tests/bundle/test_registry_v1_golden.py); a dangling one is still refused
    csv = csv_doc(webhookdefinitions=[{"type": "ValidatingAdmissionWebhook", "generateName": "v.example.com",
                                       "deploymentName": "nope"}])
    err = unsupported(tmp_path, csv=csv)
    assert err.path == CSV_FILE and err.obj == "ClusterServiceVersion demo.v0.1.0"
    assert err.message == ("spec.webhookdefinitions[0] (v.example.com) names deployment 'nope', which the "
                           "install strategy does not define")


def test_owned_api_services_unsupported(tmp_path):
    csv = csv_doc(apiservicedefinitions={"owned": [{"name": "v1.demo", "group": "demo", "version": "v1"}]})
    err = unsupported(tmp_path, csv=csv)
    # owned APIServices are converted now; one without a deployment to serve it is refused
    assert err.message == "spec.apiservicedefinitions.owned[0] (v1.demo) names deployment None, which the " \
                          "install strategy does not define"


def test_an_api_service_is_served_on_its_container_port_as_olm_serves_it(tmp_path):
    """OLM v0 (pkg/controller/install: certresources.go, apiservice.go) gives an APIService's Service the port
    named and numbered as the container port, targets that port, and points the APIService at it: the Service
    a takeover applies over OLM's is the same, and so is the APIService."""
    csv = csv_doc(apiservicedefinitions={"owned": [{"name": "widgets", "group": "demo.example.com", "version": "v1",
                                                    "kind": "Widget", "deploymentName": "demo-controller",
                                                    "containerPort": 5443}]})
    out = render_demo(tmp_path, csv=csv)
    (svc,) = [s for s in by_kind(out.objects, "Service") if s["metadata"]["name"] == "demo-controller-service"]
    assert svc["spec"]["ports"] == [{"name": "5443", "port": 5443, "targetPort": 5443}]
    (api,) = by_kind(out.objects, "APIService", "apiregistration.k8s.io")
    assert api["spec"]["service"] == {"name": "demo-controller-service", "namespace": "demo-ns", "port": 5443}


def test_v1beta1_crd_converted_to_v1(tmp_path):
    # v1beta1 CRDs are converted now (golden tests in tests/bundle/); other apiextensions versions are not
    out = render_demo(tmp_path, crd_doc(api_version="apiextensions.k8s.io/v1beta1"))
    (crd,) = by_kind(out.objects, "CustomResourceDefinition", "apiextensions.k8s.io")
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    err = unsupported(tmp_path, crd_doc(api_version="apiextensions.k8s.io/v2"))
    assert err.path == "manifests/extra-0.yaml"
    assert err.message == ("CustomResourceDefinition in apiextensions.k8s.io/v2 is not supported "
                           "(only apiextensions.k8s.io/v1 and v1beta1)")


def test_v1_crd_copied(tmp_path):
    crd = crd_doc()
    out = render_demo(tmp_path, crd)
    assert by_kind(out.objects, "CustomResourceDefinition", "apiextensions.k8s.io") == [crd]


def test_non_deployment_strategy_unsupported(tmp_path):
    csv = csv_doc()
    csv["spec"]["install"]["strategy"] = "helm"
    err = unsupported(tmp_path, csv=csv)
    assert err.path == CSV_FILE
    assert err.message == "install strategy 'helm' is not supported (only 'deployment')"


def test_deployment_without_name(tmp_path):
    dep = deployment("x", "demo-sa")
    del dep["name"]
    err = unsupported(tmp_path, csv=csv_doc(deployments=[dep]))
    assert err.message == "a deployment in the install strategy has no name"


def test_bundle_without_csv(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo", crd_doc())
    (tmp_path / "bundles/demo" / CSV_FILE).write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(UnsupportedBundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert err.value.message == "a registry+v1 bundle needs exactly one ClusterServiceVersion, found 0"
    assert err.value.obj == "file://bundles/demo"


def test_manifest_without_kind(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    write(tmp_path, "bundles/demo/manifests/broken.yaml", "apiVersion: v1\nmetadata: {name: x}\n")
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert err.value.path == "manifests/broken.yaml"
    assert err.value.message == "every manifest needs apiVersion and kind"


def test_invalid_yaml_manifest_is_a_bundle_error(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    write(tmp_path, "bundles/demo/manifests/broken.yaml", "kind: [\n")
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert err.value.path == "manifests/broken.yaml" and err.value.obj == "file://bundles/demo"
    assert "invalid YAML" in err.value.message


def test_other_mediatype_unsupported(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo",
                       annotations={"operators.operatorframework.io.bundle.mediatype.v1": "helm+v1"})
    with pytest.raises(UnsupportedBundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    # k8s+v1 and plain+v0 are supported now (tests/bundle/)
    assert err.value.message == "bundle mediatype 'helm+v1' is not supported (supported: registry+v1, k8s+v1, " \
                                "plain+v0)"


# --- names ---------------------------------------------------------------------------------------


def test_long_names_bounded_and_deterministic(tmp_path):
    long_csv = "a-very-long-operator-name-that-goes-on-and-on.v10.200.3000-rc.1"
    sa1, sa2 = "controller-manager-service-account-one", "controller-manager-service-account-two"
    csv = csv_doc(long_csv,
                  permissions=[{"serviceAccountName": sa1, "rules": []}, {"serviceAccountName": sa2, "rules": []}],
                  cluster_permissions=[{"serviceAccountName": sa1, "rules": []},
                                       {"serviceAccountName": sa2, "rules": []}])
    first = render_demo(tmp_path, csv=csv, targets=("demo-ns",))
    again = render_demo(tmp_path, csv=csv, targets=("demo-ns",))
    generated = [o["metadata"]["name"] for o in first.objects
                 if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    assert len(generated) == 8
    assert all(len(n) <= 63 and is_dns1123_subdomain(n) for n in generated), generated
    assert generated == [o["metadata"]["name"] for o in again.objects
                         if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    roles = [n for _, n in names(first.objects, "Role")]
    croles = [n for _, n in names(first.objects, "ClusterRole")]
    assert len(set(roles)) == 2 and len(set(croles)) == 2 and not set(roles) & set(croles)


def test_generated_rbac_names_never_collide(tmp_path):
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    csv = csv_doc(permissions=[{"serviceAccountName": "ctrl-cluster", "rules": rules}],
                  cluster_permissions=[{"serviceAccountName": "ctrl", "rules": []}],
                  deployments=[deployment("demo", "ctrl")])
    out = render_demo(tmp_path, csv=csv)  # AllNamespaces: permissions become ClusterRoles too
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        generated = names(out.objects, kind)
        assert len(generated) == 2 and len(set(generated)) == 2, generated


# --- sources and digests -------------------------------------------------------------------------


def test_digest_stable_and_location_independent(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    d1 = render(ref, tmp_path, InstallSettings(), "operators").digest
    d2 = render(ref, tmp_path, InstallSettings(namespace="other"), "operators").digest
    assert d1 == d2
    shutil.copytree(tmp_path / "bundles/demo", tmp_path / "bundles/copy")
    assert render("file://bundles/copy", tmp_path, InstallSettings(), "operators").digest == d1


def test_digest_changes_when_a_file_changes(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    before = render(ref, tmp_path, InstallSettings(), "operators").digest
    csv_path = tmp_path / "bundles/demo" / CSV_FILE
    csv_path.write_text(csv_path.read_text() + "# a comment\n")
    changed = render(ref, tmp_path, InstallSettings(), "operators").digest
    assert changed != before
    (tmp_path / "bundles/demo/manifests/new.yaml").write_text("")  # an added (empty) file counts too
    assert render(ref, tmp_path, InstallSettings(), "operators").digest not in (before, changed)


def test_digest_depends_on_file_names(tmp_path):
    write(tmp_path, "a/x.yaml", "same\n")
    write(tmp_path, "b/y.yaml", "same\n")
    assert directory_digest(tmp_path / "a", "a") != directory_digest(tmp_path / "b", "b")


def test_example_digest_matches_committed_lock():
    out = render("file://bundles/plumbus/1.1.0", EXAMPLE, InstallSettings(), "operators")
    assert f"digest: {out.digest}" in (EXAMPLE / "olm.lock").read_text()


def test_reference_escaping_the_repository_refused(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    write_bundle(tmp_path, "outside")
    with pytest.raises(BundleError) as err:
        render("file://../outside", repo, InstallSettings(), "operators")
    assert err.value.message == "bundle reference 'file://../outside' points outside the repository"
    assert "inside the repository" in err.value.hint


def test_absolute_looking_reference_stays_relative(tmp_path):
    write_bundle(tmp_path, "bundles/demo")
    out = render("file:///bundles/demo", tmp_path, InstallSettings(), "operators")
    assert out.name == "demo.v0.1.0"


def test_symlinked_bundle_directory_outside_repository_refused(tmp_path):
    repo = tmp_path / "repo"
    write_bundle(tmp_path, "outside")
    (repo / "bundles").mkdir(parents=True)
    os.symlink(tmp_path / "outside", repo / "bundles" / "demo")
    with pytest.raises(BundleError, match="points outside the repository"):
        render("file://bundles/demo", repo, InstallSettings(), "operators")


def test_symlink_out_of_the_bundle_refused(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    write(tmp_path, "secrets/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n")
    os.symlink(tmp_path / "secrets" / "cm.yaml", tmp_path / "bundles/demo/manifests/cm.yaml")
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert err.value.message == "manifests/cm.yaml is a link out of the bundle"
    assert err.value.obj == "file://bundles/demo"


def test_symlink_inside_the_bundle_allowed(tmp_path):
    ref = write_bundle(tmp_path, "bundles/demo")
    os.symlink("../metadata/annotations.yaml", tmp_path / "bundles/demo/manifests/link.txt")
    assert render(ref, tmp_path, InstallSettings(), "operators").name == "demo.v0.1.0"


def test_manifests_annotation_escaping_the_bundle_refused(tmp_path):
    write(tmp_path, "secrets/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n")
    ref = write_bundle(tmp_path, "bundles/demo",
                       annotations={"operators.operatorframework.io.bundle.manifests.v1": "../../secrets/"})
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert err.value.obj == "file://bundles/demo"
    assert "outside the bundle" in err.value.message


def test_missing_bundle_directory(tmp_path):
    with pytest.raises(BundleError) as err:
        render("file://bundles/nope", tmp_path, InstallSettings(), "operators")
    assert err.value.message == "bundle directory 'bundles/nope' does not exist"


@pytest.mark.parametrize("ref", ["ftp://x/y", "s3://bucket/bundle"])
def test_other_sources_not_supported(tmp_path, ref):
    # file://, OCI images, git+ and https tarballs are supported (tests/bundle/test_sources.py); others are not
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert repr(ref) in err.value.message
    assert "supported are file://" in err.value.message
    assert "file://bundles/" in err.value.hint


@pytest.mark.parametrize("ref, message", [
    ("https://x/y.tar.gz", "needs #sha256=<64 hex digits>"),
    ("http://example.com/b.tgz#sha256=" + "0" * 64, "uses plain http; only https is allowed off loopback"),
    ("git+https://x/repo.git#bundles/a", "must be git+<url>@<40-hex commit>#<path>"),
    ("git+https://x/repo.git@main#bundles/a", "must be git+<url>@<40-hex commit>#<path>"),
    ("git+https://x/repo.git@" + "a" * 40 + "#../escape", "must stay inside the repository"),
])
def test_unpinned_or_unsafe_remote_sources_are_refused(tmp_path, ref, message):
    with pytest.raises(BundleError) as err:
        render(ref, tmp_path, InstallSettings(), "operators")
    assert message in err.value.message


def test_malformed_image_digest_is_a_bundle_error(tmp_path):
    with pytest.raises(BundleError, match="malformed digest"):
        render("quay.io/example/bundle@sha256:abc", tmp_path, InstallSettings(), "operators")
