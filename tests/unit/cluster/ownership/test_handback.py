"""The handback's pure parts: what OLM v0 would write for a Deployment, what is refused and why, the declaration edit.

The behaviour against the real OLM v0 is tests/olm/test_handback.py; here each refusal and each part of the
prediction is checked on its own, on objects shaped as OLM and the converter make them.
"""

from __future__ import annotations

import copy

import pytest

from reconciler.adopt.handback import annotated
from reconciler.cluster.ownership.takeover import handback as hb
from reconciler.cluster.status.objects import Recorded
from reconciler.errors import DeclarationError
from reconciler.model.declarations import Origin, parse_operator

CSV = "demo.v0.1.0"
CSV_ANNOTATIONS = {"alm-examples": "[]", "capabilities": "Basic Install"}
RENDERED = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo", "namespace": "demo-ns"},
            "spec": {"selector": {"matchLabels": {"app": "demo"}}, "template": {
                "metadata": {"labels": {"app": "demo"}, "annotations": {"olm.targetNamespaces": "",
                                                                        "olm.operatorNamespace": "demo-ns"}},
                "spec": {"containers": [{"name": "manager", "image": "example.com/demo:v0.1.0",
                                         "env": [{"name": "LOG", "value": "info"}]}]}}}}


def live_as_olm_wrote_it(proxy: list[dict] = ()) -> dict:
    """``RENDERED`` as olm-operator installed it: the CSV's annotations and its group's on the pod template, the
    proxy and condition variables after the bundle's, the API server's defaults."""
    live = copy.deepcopy(RENDERED)
    template = live["spec"]["template"]
    template["metadata"]["annotations"] = {**template["metadata"]["annotations"], **CSV_ANNOTATIONS,
                                           "olm.operatorGroup": "global-operators",
                                           "operatorframework.io/properties": '{"properties":[]}'}
    container = template["spec"]["containers"][0]
    container["env"] += [*proxy, {"name": "OPERATOR_CONDITION_NAME", "value": CSV}]
    container["imagePullPolicy"] = "IfNotPresent"
    template["spec"]["restartPolicy"] = "Always"
    return live


def annotations(properties: bool = True) -> dict:
    out = {**CSV_ANNOTATIONS, "olm.operatorGroup": "global-operators", "olm.operatorNamespace": "demo-ns",
           "olm.targetNamespaces": ""}
    if properties:
        out["operatorframework.io/properties"] = '{"properties":[]}'
    return out


def test_a_template_olm_wrote_is_what_olm_would_write_again():
    assert hb.template_problems(live_as_olm_wrote_it(), RENDERED, annotations(), CSV, []) == []


def test_properties_are_compared_only_once_olm_planned_them():
    live = live_as_olm_wrote_it()
    assert hb.template_problems(live, RENDERED, annotations(properties=False), CSV, [],
                                skip=frozenset({hb.PROPERTIES})) == []
    changed = dict(annotations(), **{hb.PROPERTIES: '{"properties":[{"type":"olm.package"}]}'})
    assert hb.template_problems(live, RENDERED, changed, CSV, []) == [
        "Deployment demo: OLM would change the pod annotation operatorframework.io/properties"]


def test_a_template_upgraded_through_the_repository_would_be_rolled():
    # the reconciler upgraded the bundle after the takeover: the new CSV's annotations are not the ones OLM wrote
    newer = dict(annotations(), **{"alm-examples": '[{"kind": "Demo"}]', "containerImage": "example.com/demo:v2"})
    assert hb.template_problems(live_as_olm_wrote_it(), RENDERED, newer, CSV, []) == [
        "Deployment demo: OLM would change the pod annotation alm-examples",
        "Deployment demo: OLM would add the pod annotation containerImage"]


def test_an_install_the_reconciler_made_lacks_what_olm_adds():
    live = copy.deepcopy(RENDERED)
    problems = hb.template_problems(live, RENDERED, annotations(), CSV, [])
    assert "Deployment demo: OLM would add the pod annotation alm-examples" in problems
    assert ("Deployment demo: OLM would set container manager's env to LOG, OPERATOR_CONDITION_NAME (it runs with "
            "LOG)") in problems


def test_an_annotation_olm_would_not_write_is_a_restart_too():
    live = live_as_olm_wrote_it()
    live["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "2025-01-01T00:00:00Z"
    assert hb.template_problems(live, RENDERED, annotations(), CSV, []) == [
        "Deployment demo: OLM would remove the pod annotation kubectl.kubernetes.io/restartedAt (OLM does not write "
        "it)"]


def test_another_image_than_the_bundle_s_is_found():
    live = live_as_olm_wrote_it()
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/demo:patched"
    assert hb.template_problems(live, RENDERED, annotations(), CSV, []) == [
        "Deployment demo: the running pod template differs from the bundle's at .spec.containers[0].image"]


PROXY = {"status": {"httpProxy": "http://proxy:3128", "httpsProxy": "", "noProxy": ".svc"}}


def test_the_proxy_olm_injects_unless_spec_config_sets_a_proxy_variable():
    injected = [{"name": "HTTP_PROXY", "value": "http://proxy:3128"}, {"name": "NO_PROXY", "value": ".svc"}]
    assert hb.proxy_env({}, PROXY) == injected   # an empty value is not injected
    assert hb.proxy_env({}, None) == []          # no Proxy: nothing
    assert hb.proxy_env({"env": [{"name": "NO_PROXY", "value": "x"}]}, PROXY) == []   # one set: none injected
    live = live_as_olm_wrote_it(injected)
    assert hb.template_problems(live, RENDERED, annotations(), CSV, injected) == []
    assert hb.template_problems(live, RENDERED, annotations(), CSV, []) == [
        "Deployment demo: OLM would set container manager's env to LOG, OPERATOR_CONDITION_NAME (it runs with LOG, "
        "HTTP_PROXY, NO_PROXY, OPERATOR_CONDITION_NAME)"]


def test_the_env_olm_sets_replaces_a_variable_in_place():
    env = hb.container_env([{"name": "HTTP_PROXY", "value": "mine"}, {"name": "A", "value": "1"}], CSV,
                           [{"name": "HTTP_PROXY", "value": "cluster's"}])
    assert env == [{"name": "HTTP_PROXY", "value": "cluster's"}, {"name": "A", "value": "1"},
                   {"name": "OPERATOR_CONDITION_NAME", "value": CSV}]


def handback(**kw) -> hb.HandBack:
    csv = {"metadata": {"name": CSV, "annotations": CSV_ANNOTATIONS}, "spec": {}}
    return hb.HandBack(**{"operator": "demo", "source_namespace": "olm", "source": "corpus", "package": "demo",
                          "channel": "stable", "csv": CSV, "namespace": "demo-ns", "targets": (),
                          "csv_obj": csv, "deployments": (RENDERED,), **kw})


def live(**kw) -> hb.Live:
    source = {"metadata": {"name": "corpus", "namespace": "olm"},
              "status": {"connectionState": {"lastObservedState": "READY"}}}
    record = Recorded("demo", (), {}, {"bundle": {"name": CSV}})
    return hb.Live(**{"operator": "demo", "record": record, "deployments": {"demo": live_as_olm_wrote_it()}, "groups": [],
                      "subscriptions": [], "source": source, "proxy": None, "csvs": [], **kw})


def test_what_olm_can_take_back_is_not_refused():
    assert hb.refusals(handback(), live()) == []


@pytest.mark.parametrize("change, reason", [
    (dict(mediatype="plain+v0"), "its bundle is plain+v0: OLM v0 installs registry+v1 bundles only"),
    (dict(csv_obj={"metadata": {"annotations": CSV_ANNOTATIONS}, "spec": {"webhookdefinitions": [{}]}}),
     "its ClusterServiceVersion serves webhooks or APIServices: OLM v0 issues its own CA"),
    (dict(dependencies=(("cert-manager", "cert-manager.v1.10.0"),)),
     "its dependency cert-manager.v1.10.0 (Operator cert-manager) is not run by OLM v0 in namespace demo-ns: OLM "
     "would install it again"),
])
def test_what_olm_cannot_take_back_is_refused_with_why(change, reason):
    assert any(r.startswith(reason) for r in hb.refusals(handback(**change), live())), hb.refusals(handback(**change),
                                                                                                   live())


@pytest.mark.parametrize("change, reason", [
    (dict(record=Recorded("demo", (), {}, {"bundle": {"name": "demo.v0.0.9"}})),
     "it runs demo.v0.0.9, but olm.lock pins demo.v0.1.0"),
    (dict(subscriptions=[{"metadata": {"name": "demo", "namespace": "other"}, "spec": {"name": "demo"}}]),
     "OLM v0 already subscribes to demo (Subscription other/demo)"),
    (dict(subscriptions=[{"metadata": {"name": "demo", "namespace": "demo-ns",
                                       "labels": {"reconciler.dev/handback-of": "another"}}, "spec": {"name": "demo"}}]),
     "OLM v0 already subscribes to demo (Subscription demo-ns/demo)"),
    (dict(groups=[{"metadata": {"name": "a", "namespace": "demo-ns"}}, {"metadata": {"name": "b"}}]),
     "namespace demo-ns has 2 OperatorGroups"),
    (dict(groups=[{"metadata": {"name": "global-operators", "namespace": "demo-ns"},
                   "status": {"namespaces": ["team-a"]}}]),
     "OperatorGroup demo-ns/global-operators targets team-a, the declaration all namespaces"),
    (dict(source=None), "CatalogSource olm/corpus does not exist"),
    (dict(source={"metadata": {"name": "corpus"}, "status": {"connectionState": {"lastObservedState": "CONNECTING"}}}),
     "CatalogSource olm/corpus cannot be read (connection CONNECTING)"),
    (dict(deployments={}), "Deployment demo-ns/demo does not run"),
])
def test_what_the_cluster_makes_impossible_is_refused_with_why(change, reason):
    found = hb.refusals(handback(), live(**change))
    assert any(r.startswith(reason) for r in found), found


def test_the_group_is_named_as_olm_named_it():
    assert hb.group_name(handback(), live()) == "global-operators"   # from the running pod template
    other = [{"metadata": {"name": "og", "namespace": "demo-ns"}, "status": {"namespaces": [""]}}]
    assert hb.group_name(handback(), live(groups=other)) == "og"
    # a group of another name than OLM wrote on the pod template changes it
    assert hb.refusals(handback(), live(groups=other)) == [
        "Deployment demo: OLM would change the pod annotation olm.operatorGroup"]


def test_the_rbac_the_reconciler_made_is_covered_by_olm_s():
    def binding(kind, name, role, ns=""):
        meta = {"name": name, **({"namespace": ns} if ns else {})}
        return {"kind": kind, "metadata": meta, "roleRef": {"kind": role[0], "name": role[1]},
                "subjects": [{"kind": "ServiceAccount", "name": "demo-sa", "namespace": "demo-ns"}]}
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
    mine = [{"kind": "ClusterRole", "metadata": {"name": "demo.v0.1.0-demo-sa"}, "rules": [rule]},
            binding("ClusterRoleBinding", "demo.v0.1.0-demo-sa", ("ClusterRole", "demo.v0.1.0-demo-sa"))]
    theirs = [{"kind": "Role", "metadata": {"name": "x", "namespace": "demo-ns"}, "rules": [rule]},
              binding("RoleBinding", "x", ("Role", "x"), "demo-ns")]
    granted = hb.granted(theirs, "demo-ns", "demo-sa")
    assert not granted.covers(hb.granted(mine, "demo-ns", "demo-sa"))   # a Role does not cover a ClusterRole
    assert hb.granted(mine, "demo-ns", "demo-sa").covers(granted)


DECLARATION = """\
# Adopted from OLM v0: Subscription demo-ns/demo (AllNamespaces, installPlanApproval Automatic).
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: demo
  annotations:
    reconciler.dev/adopted-from: olm-v0/demo-ns/demo   # kept as adopt wrote it
    team: ops
spec:
  catalog:
    name: corpus
    package: demo
  install:
    namespace: demo-ns
"""


def test_the_declaration_gets_the_annotation_and_keeps_its_lines():
    out = annotated(DECLARATION, "demo", "olm-v0/olm/corpus", "operators/demo.yaml")
    assert out == DECLARATION.replace("    reconciler.dev/adopted-from: olm-v0/demo-ns/demo   # kept as adopt wrote it\n",
                                      "    reconciler.dev/handback: olm-v0/olm/corpus\n")
    decl = parse_operator(__import__("reconciler.yamlio", fromlist=["x"]).load_one(out, "d"), Origin("d"))
    assert decl.handback == "olm-v0/olm/corpus" and decl.adopted_from == ""


def test_a_declaration_without_annotations_gets_them():
    text = "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n    name: demo\nspec:\n" \
           "    catalog: {name: corpus, package: demo}\n---\napiVersion: operators.coreos.com/v1\nkind: Operator\n" \
           "metadata:\n    name: other\nspec:\n    catalog: {name: corpus, package: other}\n"
    out = annotated(text, "demo", "olm-v0/olm/corpus", "operators/all.yaml")
    assert out.startswith("apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n    annotations:\n"
                          "        reconciler.dev/handback: olm-v0/olm/corpus\n    name: demo\n")
    assert out.endswith(text.split("---\n")[1])   # the other Operator untouched


def test_a_layout_that_cannot_be_edited_in_place_is_an_error_saying_what_to_write():
    text = "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata: {name: demo, annotations: {a: b}}\n" \
           "spec: {catalog: {name: corpus, package: demo}}\n"
    with pytest.raises(DeclarationError) as err:
        annotated(text, "demo", "olm-v0/olm/corpus", "operators/demo.yaml")
    assert "add `reconciler.dev/handback: olm-v0/olm/corpus` under metadata.annotations by hand" in err.value.hint


@pytest.mark.parametrize("annotations, message", [
    ({"reconciler.dev/handback": "olm-v1/x"}, "must be olm-v0/<namespace>/<catalogsource>"),
    ({"reconciler.dev/handback": "olm-v0/olm/corpus", "reconciler.dev/adopted-from": "olm-v0/ns/sub"},
     "reconciler.dev/handback and reconciler.dev/adopted-from are both set"),
    ({"reconciler.dev/handback": "olm-v0/olm/corpus", "reconciler.dev/adopt": "true"},
     "reconciler.dev/handback and reconciler.dev/adopt are both set"),
])
def test_a_wrong_handback_annotation_is_refused(annotations, message):
    doc = {"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
           "metadata": {"name": "demo", "annotations": annotations},
           "spec": {"catalog": {"name": "corpus", "package": "demo"}}}
    with pytest.raises(DeclarationError) as err:
        parse_operator(doc, Origin("operators/demo.yaml"))
    assert message in err.value.message


def plan(csv: dict | None = None, names=(CSV,), manifest: str | None = None) -> dict:
    import json

    body = manifest if manifest is not None else json.dumps(csv)
    return {"metadata": {"name": "install-abc", "namespace": "demo-ns"},
            "spec": {"clusterServiceVersionNames": list(names), "approved": False},
            "status": {"plan": [{"resource": {"kind": "ClusterServiceVersion", "name": CSV, "manifest": body}}]}}


def test_the_plan_is_approved_only_when_it_installs_the_csv_alone_with_the_running_templates():
    planned = {"kind": "ClusterServiceVersion", "metadata": {"name": CSV, "annotations": {
        **CSV_ANNOTATIONS, "operatorframework.io/properties": '{"properties":[]}'}}}
    assert hb.plan_problems(handback(), live(), plan(planned)) == []
    assert hb.plan_problems(handback(), live(), plan(planned, names=(CSV, "cert-manager.v1.10.0"))) == [
        "it installs demo.v0.1.0, cert-manager.v1.10.0, not demo.v0.1.0 alone"]
    other = {**planned, "metadata": {**planned["metadata"], "annotations": {
        **planned["metadata"]["annotations"], "operatorframework.io/properties": '{"properties":[{"x":1}]}'}}}
    assert hb.plan_problems(handback(), live(), plan(other)) == [
        "Deployment demo: OLM would change the pod annotation operatorframework.io/properties"]
    # an unpacked bundle's step names a ConfigMap: the bundle's CSV, with the properties the plan carries
    import json

    ref = json.dumps({"kind": "ConfigMap", "name": "b", "namespace": "olm", "catalogSourceName": "corpus",
                      "catalogSourceNamespace": "olm", "properties": '{"properties":[]}'})
    assert hb.plan_problems(handback(), live(), plan(manifest=ref)) == []
