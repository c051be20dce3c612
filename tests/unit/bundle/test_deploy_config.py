"""spec.config: read from a declaration, and merged into a bundle's Deployments as OLM v0 merges a Subscription's."""

from __future__ import annotations

import pytest

from reconciler.bundle.overrides import apply, merge_affinity
from reconciler.errors import DeclarationError
from reconciler.model.declarations import Origin, parse_operator
from reconciler.model.deployconfig import DeploymentConfig

ORIGIN = Origin("operators/demo.yaml")


def decl(config) -> dict:
    return {"apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": "demo"},
            "spec": {"catalog": {"name": "c", "package": "demo"}, "config": config}}


def dep(**pod) -> dict:
    containers = pod.pop("containers", None) or [
        {"name": "manager", "image": "m", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "volumeMounts": [{"name": "data", "mountPath": "/data"}], "resources": {"requests": {"cpu": "10m"}}},
        {"name": "proxy", "image": "p"}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"template": {"metadata": {"annotations": {"kept": "csv"}},
                                  "spec": {"containers": containers, "initContainers": [{"name": "init", "image": "i"}],
                                           **pod}}}}


def merged(config: dict, **pod) -> dict:
    return apply(dep(**pod), DeploymentConfig.of(config))["spec"]["template"]


def containers(template: dict) -> list[dict]:
    return template["spec"]["containers"]


def test_env_replaces_by_name_in_place_and_appends_the_rest_in_every_container():
    t = merged({"env": [{"name": "C", "value": "3"}, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]})
    assert containers(t)[0]["env"] == [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                                       {"name": "B", "value": "2"}, {"name": "C", "value": "3"}]
    assert containers(t)[1]["env"] == [{"name": "C", "value": "3"},
                                       {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]
    assert "env" not in t["spec"]["initContainers"][0]   # OLM v0 leaves init containers alone


def test_env_named_twice_the_last_wins():
    t = merged({"env": [{"name": "C", "value": "3"}, {"name": "C", "value": "4"}]})
    assert containers(t)[1]["env"] == [{"name": "C", "value": "4"}]


def test_env_from_appends_sources_not_already_there():
    have = {"configMapRef": {"name": "base"}}
    t = merged({"envFrom": [{"configMapRef": {"name": "base"}}, {"secretRef": {"name": "s"}, "prefix": "S_"},
                            {"configMapRef": {"name": "base"}, "prefix": "P_"}]},
               containers=[{"name": "m", "image": "m", "envFrom": [have]}])
    assert containers(t)[0]["envFrom"] == [have, {"secretRef": {"name": "s"}, "prefix": "S_"},
                                           {"configMapRef": {"name": "base"}, "prefix": "P_"}]


def test_volumes_and_mounts_replace_by_name_and_append():
    t = merged({"volumes": [{"name": "data", "emptyDir": {}}, {"name": "extra", "configMap": {"name": "x"}}],
                "volumeMounts": [{"name": "data", "mountPath": "/var/data"}, {"name": "extra", "mountPath": "/x"}]},
               volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}, {"name": "tmp", "emptyDir": {}}])
    assert t["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
                                    {"name": "extra", "configMap": {"name": "x"}}]
    assert containers(t)[0]["volumeMounts"] == [{"name": "data", "mountPath": "/var/data"},
                                                {"name": "extra", "mountPath": "/x"}]
    assert containers(t)[1]["volumeMounts"] == [{"name": "data", "mountPath": "/var/data"},
                                                {"name": "extra", "mountPath": "/x"}]


def test_tolerations_append_unless_equal():
    old = {"key": "a", "operator": "Exists"}
    t = merged({"tolerations": [old, {"key": "b", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]},
               tolerations=[old])
    assert t["spec"]["tolerations"] == [old, {"key": "b", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]


def test_resources_replace_every_containers_resources():
    t = merged({"resources": {"limits": {"memory": "64Mi"}}})
    assert [c["resources"] for c in containers(t)] == [{"limits": {"memory": "64Mi"}}] * 2


def test_empty_resources_and_node_selector_clear_the_bundles():
    t = merged({"resources": {}, "nodeSelector": {}}, nodeSelector={"zone": "a"})
    assert [c.get("resources") for c in containers(t)] == [{}, {}]
    assert "nodeSelector" not in t["spec"]


def test_node_selector_replaces_the_pods():
    t = merged({"nodeSelector": {"disk": "ssd"}}, nodeSelector={"zone": "a", "disk": "hdd"})
    assert t["spec"]["nodeSelector"] == {"disk": "ssd"}


NODE = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}
POD = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}}]}


def test_affinity_replaces_each_part_given():
    t = merged({"affinity": {"nodeAffinity": NODE}}, affinity={"podAffinity": POD, "nodeAffinity": {"x": 1}})
    assert t["spec"]["affinity"] == {"podAffinity": POD, "nodeAffinity": NODE}
    assert merged({"affinity": {"podAffinity": POD}})["spec"]["affinity"] == {"podAffinity": POD}


def test_affinity_empty_removes():
    assert "affinity" not in merged({"affinity": {}}, affinity={"podAffinity": POD})["spec"]
    assert merge_affinity({"podAffinity": POD, "nodeAffinity": NODE}, {"nodeAffinity": {}}) == {"podAffinity": POD}
    assert merge_affinity({"podAffinity": POD}, {"podAffinity": {}}) is None
    # OLM v0's rule: an empty podAntiAffinity drops the whole affinity when the pod has one
    assert merge_affinity({"podAffinity": POD}, {"podAntiAffinity": {}}) is None
    assert merge_affinity(None, {"nodeAffinity": NODE}) == {"nodeAffinity": NODE}


def test_annotations_are_added_never_replacing():
    out = apply(dep(), DeploymentConfig.of({"annotations": {"kept": "config", "new": "x"}}))
    assert out["metadata"]["annotations"] == {"kept": "config", "new": "x"}
    assert out["spec"]["template"]["metadata"]["annotations"] == {"kept": "csv", "new": "x"}


def test_no_config_leaves_the_deployment_as_it_is():
    d = dep()
    assert apply(d, DeploymentConfig.of({"env": [], "nodeSelector": None, "annotations": {}})) is d
    assert not DeploymentConfig.of({"env": [], "nodeSelector": None, "tolerations": [], "annotations": {}})


def test_a_declaration_carries_spec_config():
    config = {"env": [{"name": "LOG_LEVEL", "value": "debug"}], "resources": {"limits": {"cpu": 1}}}
    parsed = parse_operator(decl(config), ORIGIN)
    assert parsed.install.config.value == config
    assert parse_operator(decl({"env": [{"name": "A", "value": "1"}]}), ORIGIN).install.config == \
        parse_operator(decl({"env": [{"name": "A", "value": "1"}], "volumes": []}), ORIGIN).install.config


@pytest.mark.parametrize("config, message", [
    ([], "spec.config must be a mapping, not a list"),
    ({"env": {"A": "1"}}, "spec.config.env: must be a list, not a mapping"),
    ({"env": [{"value": "1"}]}, "spec.config.env[0].name: is required"),
    ({"env": [{"name": "A", "value": 1}]}, "spec.config.env[0].value: must be a string, not a number"),
    ({"nodeSelector": {"disk": True}}, "spec.config.nodeSelector.disk: must be a string, not a boolean"),
    ({"resources": {"limit": {"cpu": "1"}}}, "unknown field spec.config.resources.limit"),
    ({"resources": {"limits": {"cpu": [1]}}}, "spec.config.resources.limits.cpu: must be a quantity"),
    ({"volumeMounts": [{"name": "v"}]}, "spec.config.volumeMounts[0].mountPath: is required"),
    ({"affinity": {"nodeAffinity": []}}, "spec.config.affinity.nodeAffinity: must be a mapping, not a list"),
    ({"replicas": 2}, "unknown field spec.config.replicas; known fields of spec.config: env, envFrom"),
    ({"selector": {"matchLabels": {"a": "b"}}}, "spec.config.selector has no effect"),
])
def test_a_bad_spec_config_names_file_object_and_field(config, message):
    with pytest.raises(DeclarationError) as err:
        parse_operator(decl(config), ORIGIN)
    text = str(err.value)
    assert message in text, text
    assert "operators/demo.yaml" in text and "Operator demo" in text


def test_the_documented_example_is_applied_to_every_deployment(tmp_path):
    """docs/declarations.md's spec.config example, read as printed and rendered with a bundle of two Deployments."""
    from reconciler import yamlio
    from reconciler.bundle import render
    from tests.docblocks import fenced_block
    from tests.unit.helpers import csv_doc, deployment, write_bundle

    text = "\n".join(fenced_block("docs/declarations.md", "apiVersion: operators.coreos.com/v1"))
    parsed = parse_operator(yamlio.load_one(text, "docs/declarations.md"), Origin("docs/declarations.md"))
    csv = csv_doc(deployments=[deployment("demo-controller", "demo-sa"), deployment("demo-webhook", "demo-sa")])
    ref = write_bundle(tmp_path, "bundles/demo", csv)
    out = render(ref, tmp_path, parsed.install, "operators")
    deployments = [o for o in out.objects if o["kind"] == "Deployment"]
    assert out.namespace == "tuned-operator" and len(deployments) == 2
    for d in deployments:
        pod = d["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
        assert container["resources"] == {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
        assert pod["nodeSelector"] == {"node-role.kubernetes.io/infra": ""}
        assert pod["tolerations"] == [{"key": "node-role.kubernetes.io/infra", "operator": "Exists",
                                       "effect": "NoSchedule"}]
