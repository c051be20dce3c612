"""The planner's request-free decisions: the applied digest, ownership of our fields, and the diff."""

from __future__ import annotations

import copy
import json

from reconciler.cluster.apply import ANNOTATION_DIGEST, describe_diff, is_current, with_digest

DESIRED = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "team", "labels": {"app": "web"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:1", "args": ["--serve"],
                                     "ports": [{"containerPort": 80}]}]},
        },
    },
}


def _key(**fields: object) -> str:
    return "k:" + json.dumps(fields, separators=(",", ":"))


def _managed(manager: str = "reconciler", operation: str = "Apply", **extra: object) -> dict:
    """managedFields as the API server records them after applying DESIRED (ports keyed with a defaulted protocol)."""
    fields = {
        "f:metadata": {"f:annotations": {f"f:{ANNOTATION_DIGEST}": {}}, "f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {_key(name="web"): {
                    ".": {}, "f:name": {}, "f:image": {}, "f:args": {},
                    "f:ports": {_key(containerPort=80, protocol="TCP"): {".": {}, "f:containerPort": {}}},
                }}},
            },
        },
    }
    return {"manager": manager, "operation": operation, "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": fields, **extra}


def _live(sent: dict) -> dict:
    """The object as the API server serves it after our apply: defaults added, our managedFields entry."""
    live = copy.deepcopy(sent)
    live["metadata"].update(uid="u1", resourceVersion="7", managedFields=[_managed()])
    container = live["spec"]["template"]["spec"]["containers"][0]
    container.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
    container["ports"][0]["protocol"] = "TCP"
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["status"] = {"replicas": 1}
    return live


def test_an_object_we_applied_and_nobody_touched_is_current():
    sent = with_digest(DESIRED)
    assert is_current(sent, _live(sent))


def test_the_digest_covers_the_whole_configuration_and_is_stable():
    sent = with_digest(DESIRED)
    assert sent["metadata"]["annotations"][ANNOTATION_DIGEST].startswith("sha256:")
    assert with_digest(sent) == sent  # recomputing over an already annotated object changes nothing
    changed = copy.deepcopy(DESIRED)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "web:2"
    assert with_digest(changed)["metadata"]["annotations"][ANNOTATION_DIGEST] != \
        sent["metadata"]["annotations"][ANNOTATION_DIGEST]
    assert "annotations" not in DESIRED["metadata"]  # the input is not modified


def test_a_changed_desired_configuration_is_not_current():
    live = _live(with_digest(DESIRED))
    changed = copy.deepcopy(DESIRED)
    changed["spec"]["replicas"] = 2
    assert not is_current(with_digest(changed), live)


def test_a_field_another_manager_took_is_drift():
    sent = with_digest(DESIRED)
    live = _live(sent)
    live["spec"]["replicas"] = 3  # kubectl edit: the API server moves spec.replicas to its manager
    del live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:replicas"]
    live["metadata"]["managedFields"].append(_managed("kubectl-edit", "Update", fieldsV1={"f:spec": {"f:replicas": {}}}))
    assert not is_current(sent, live)


def test_a_list_item_removed_by_someone_else_is_drift():
    sent = with_digest(DESIRED)
    live = _live(sent)
    live["spec"]["template"]["spec"]["containers"][0]["ports"] = []
    containers = live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    del containers[_key(name="web")]["f:ports"]
    assert not is_current(sent, live)


def test_an_atomic_value_is_owned_as_a_whole():
    sent = with_digest(DESIRED)
    live = _live(sent)
    live["spec"]["selector"]["matchExpressions"] = []  # a server default inside an atomic value is no drift
    assert is_current(sent, live)
    live["spec"]["selector"] = {"matchLabels": {"app": "other"}}  # another writer: the whole leaf moves to them
    del live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:selector"]
    assert not is_current(sent, live)


def test_no_entry_of_our_manager_or_a_terminating_object_is_not_current():
    sent = with_digest(DESIRED)
    live = _live(sent)
    live["metadata"]["managedFields"] = [_managed("someone-else")]
    assert not is_current(sent, live)
    live = _live(sent)
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_current(sent, live)
    live = _live(sent)
    live["metadata"]["managedFields"][0]["apiVersion"] = "apps/v1beta2"
    assert not is_current(sent, live)


def test_an_object_without_our_digest_is_not_current():
    live = _live(DESIRED)
    assert not is_current(with_digest(DESIRED), live)


def test_describe_diff_names_each_changed_path_and_ignores_bookkeeping():
    live = _live(with_digest(DESIRED))
    proposed = copy.deepcopy(live)
    proposed["metadata"]["annotations"][ANNOTATION_DIGEST] = "sha256:other"
    proposed["metadata"]["resourceVersion"] = "8"
    proposed["spec"]["replicas"] = 3
    proposed["spec"]["template"]["spec"]["containers"][0]["args"].append("--verbose")
    proposed["metadata"]["labels"]["tier"] = "front"
    del proposed["spec"]["strategy"]
    proposed["status"] = {"replicas": 3}
    assert describe_diff(live, proposed) == (
        "metadata.labels.tier: added front",
        "spec.template.spec.containers[0].args[1]: added --verbose",
        "spec.strategy: removed",
        "spec.replicas: 1 -> 3",
    )
    assert describe_diff(live, copy.deepcopy(live)) == ()


def test_describe_diff_is_bounded():
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {f"k{i:03d}": "a" for i in range(500)}}
    proposed = copy.deepcopy(live)
    proposed["data"] = {k: "b" for k in live["data"]}
    lines = describe_diff(live, proposed, limit=10)
    assert len(lines) == 11
    assert lines[0] == "data.k000: a -> b"
    assert lines[-1] == "... and 490 more changed paths"


def test_describe_diff_reports_a_type_change():
    live = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"port": 80}}
    assert describe_diff(live, {**live, "spec": {"port": "80"}}) == ("spec.port: 80 -> 80",)


def test_a_secret_written_through_string_data_is_checked_by_its_stored_value():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key", "namespace": "team"},
              "type": "Opaque", "stringData": {"token": "s3cret"}}
    sent = with_digest(secret)
    live = {k: v for k, v in copy.deepcopy(sent).items() if k != "stringData"}
    live["data"] = {"token": "czNjcmV0"}
    live["metadata"]["managedFields"] = [_managed(fieldsV1={
        "f:metadata": {"f:annotations": {f"f:{ANNOTATION_DIGEST}": {}}},
        "f:stringData": {"f:token": {}}, "f:type": {}}) | {"apiVersion": "v1"}]
    assert is_current(sent, live)
    live["data"] = {"token": "b3RoZXI="}  # another writer changed data; our stringData entry stays in our set
    assert not is_current(sent, live)
