"""Health of one live object, per kind, with kstatus' semantics."""

from __future__ import annotations

import pytest

from reconciler.cluster.health.judge import Health, Status, judge, operand, webhook_services, worst


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def deployment(want: int | None = 2, generation: int = 3, observed: int = 3, **status) -> dict:
    spec = {} if want is None else {"replicas": want}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "generation": generation},
            "spec": spec, "status": {"observedGeneration": observed, **status}}


AVAILABLE = [cond("Available", "True", "MinimumReplicasAvailable"),
             cond("Progressing", "True", "NewReplicaSetAvailable")]


def test_missing_object_is_not_found() -> None:
    assert judge(None).status == Status.NOT_FOUND


def test_rolled_out_deployment_is_current() -> None:
    h = judge(deployment(want=2, replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2,
                         conditions=AVAILABLE))
    assert h == Health(Status.CURRENT, "Deployment is available: 2/2 replicas", "Current")


def test_default_replicas_is_one() -> None:
    h = judge(deployment(want=None, replicas=1, updatedReplicas=1, readyReplicas=1, availableReplicas=1,
                         conditions=AVAILABLE))
    assert h.healthy


def test_deployment_whose_spec_is_not_observed_yet_is_in_progress() -> None:
    h = judge(deployment(generation=4, observed=3, want=1, **{"updatedReplicas": 1, "availableReplicas": 1,
                                                                   "readyReplicas": 1, "conditions": AVAILABLE}))
    assert h.status == Status.IN_PROGRESS
    assert "observedGeneration 3 < generation 4" in h.message


def test_deployment_without_available_replicas_names_the_condition() -> None:
    h = judge(deployment(want=1, **{"replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1, "conditions": [
        cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
        cond("Progressing", "True", "ReplicaSetUpdated")]}))
    assert h.status == Status.IN_PROGRESS
    assert h.message == ("available replicas: 0/1; Available=False: MinimumReplicasUnavailable: "
                         "Deployment does not have minimum availability.")


def test_deployment_past_its_progress_deadline_failed() -> None:
    h = judge(deployment(want=1, **{"replicas": 1, "updatedReplicas": 1, "conditions": [
        cond("Progressing", "False", "ProgressDeadlineExceeded", 'ReplicaSet "d-1" has timed out progressing.')]}))
    assert h.status == Status.FAILED
    assert h.reason == "ProgressDeadlineExceeded"
    assert "timed out progressing" in h.message


@pytest.mark.parametrize(("status", "expected"), [
    ({"replicas": 2, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2}, "updated replicas: 1/2"),
    ({"replicas": 3, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2},
     "pending termination: 1 old replica"),
    ({"replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 2}, "ready replicas: 1/2"),
])
def test_deployment_rollout_steps(status: dict, expected: str) -> None:
    h = judge(deployment(want=2, **status))
    assert (h.status, h.message) == (Status.IN_PROGRESS, expected)


def test_scaled_to_zero_deployment_is_current() -> None:
    assert judge(deployment(want=0)).healthy


def statefulset(**status) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "generation": 1},
            "spec": {"replicas": 3}, "status": {"observedGeneration": 1, **status}}


def test_statefulset_rolled_out_is_current() -> None:
    assert judge(statefulset(replicas=3, readyReplicas=3, currentReplicas=3, currentRevision="a",
                             updateRevision="a")).healthy


def test_statefulset_mid_rolling_update_is_in_progress() -> None:
    h = judge(statefulset(replicas=3, readyReplicas=3, currentReplicas=1, currentRevision="a", updateRevision="b"))
    assert h.status == Status.IN_PROGRESS and "revision b" in h.message


def test_statefulset_not_ready() -> None:
    h = judge(statefulset(replicas=3, readyReplicas=2))
    assert (h.status, h.message) == (Status.IN_PROGRESS, "ready replicas: 2/3")


def daemonset(**status) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "generation": 2},
            "status": {"observedGeneration": 2, **status}}


def test_daemonset_states() -> None:
    assert judge(daemonset()).status == Status.IN_PROGRESS
    full = dict(desiredNumberScheduled=3, currentNumberScheduled=3, updatedNumberScheduled=3, numberAvailable=3,
                numberReady=3)
    assert judge(daemonset(**full)).healthy
    h = judge(daemonset(**{**full, "updatedNumberScheduled": 1}))
    assert (h.status, h.message) == (Status.IN_PROGRESS, "updated pods: 1/3")


def crd(*conds: dict) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"}, "status": {"conditions": list(conds)}}


def test_crd_established_and_names_accepted_is_current() -> None:
    assert judge(crd(cond("NamesAccepted", "True"), cond("Established", "True"))).healthy


def test_crd_not_established_yet() -> None:
    assert judge(crd(cond("NamesAccepted", "True"))).status == Status.IN_PROGRESS


def test_crd_whose_names_clash_failed() -> None:
    h = judge(crd(cond("NamesAccepted", "False", "MultipleNamesNotAllowed", '"thing" is already in use'),
                  cond("Established", "False", "NotAccepted")))
    assert h.status == Status.FAILED
    assert "already in use" in h.message


def test_apiservice_availability() -> None:
    svc = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.x.io"}}
    assert judge({**svc, "status": {"conditions": [cond("Available", "True", "Passed")]}}).healthy
    h = judge({**svc, "status": {"conditions": [cond("Available", "False", "MissingEndpoints",
                                                      "endpoints for service/x in ns have no addresses")]}})
    assert h.status == Status.IN_PROGRESS and "MissingEndpoints" in h.message


def job(*conds: dict, **status) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": list(conds), **status}}


def test_job_states() -> None:
    assert judge(job(cond("Complete", "True"), succeeded=1)).healthy
    assert judge(job(active=1)).status == Status.IN_PROGRESS
    failed = judge(job(cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")))
    assert (failed.status, failed.reason) == (Status.FAILED, "BackoffLimitExceeded")


def service(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": "ns"},
            "spec": {"ports": [{"port": 443}], **spec}}


def slice_(*ready: bool) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "endpoints": [{"addresses": ["198.18.0.1"], "conditions": {"ready": r}} for r in ready]}


def test_plain_service_is_current_once_it_exists() -> None:
    assert judge(service()).healthy


def test_webhook_service_needs_a_ready_endpoint() -> None:
    assert judge(service(), endpoint_slices=[]).status == Status.IN_PROGRESS
    assert judge(service(), endpoint_slices=[slice_(False)]).status == Status.IN_PROGRESS
    h = judge(service(), endpoint_slices=[slice_(False), slice_(True, True)])
    assert h.healthy and "2 ready endpoints" in h.message


def test_pod_states() -> None:
    base = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert judge({**base, "status": {"phase": "Running", "conditions": [cond("Ready", "True")]}}).healthy
    pending = judge({**base, "status": {"phase": "Pending", "conditions": [
        cond("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")]}})
    assert pending.status == Status.IN_PROGRESS and "0/3 nodes" in pending.message
    crash = judge({**base, "status": {"phase": "Running", "containerStatuses": [
        {"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m"}}}]}})
    assert (crash.status, crash.reason) == (Status.FAILED, "CrashLoopBackOff")


def test_object_being_deleted_is_in_progress() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert judge(obj).reason == "Terminating"


def test_other_kinds_are_current_once_they_exist() -> None:
    assert judge({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}).healthy
    assert judge({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": "r"}}).healthy


def test_custom_resources_use_the_standard_conditions() -> None:
    base = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "generation": 2}}
    assert judge({**base, "status": {"observedGeneration": 1}}).status == Status.IN_PROGRESS
    stalled = judge({**base, "status": {"conditions": [cond("Stalled", "True", "BadSpec", "spec.size is negative")]}})
    assert stalled.status == Status.FAILED and "spec.size is negative" in stalled.message
    assert judge({**base, "status": {"conditions": [cond("Reconciling", "True")]}}).status == Status.IN_PROGRESS
    assert judge({**base, "status": {"conditions": [cond("Ready", "False", "Waiting")]}}).status == Status.IN_PROGRESS
    assert judge({**base, "status": {"conditions": [cond("Ready", "True")]}}).healthy


def test_worst_status_wins() -> None:
    ok, wip, bad = (Health(Status.CURRENT, ""), Health(Status.IN_PROGRESS, ""), Health(Status.FAILED, ""))
    assert worst([ok, ok]) == Status.CURRENT
    assert worst([ok, wip]) == Status.IN_PROGRESS
    assert worst([wip, bad, ok]) == Status.FAILED
    assert worst([]) == Status.CURRENT


def test_services_called_by_webhooks_apiservices_and_conversion() -> None:
    objects = [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "webhooks": [{"clientConfig": {"service": {"namespace": "ns", "name": "vhook"}}},
                      {"clientConfig": {"url": "https://example.invalid"}}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "spec": {"service": {"namespace": "ns", "name": "api"}}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {
             "service": {"namespace": "ns", "name": "conv"}}}}}},
        service(),
    ]
    assert webhook_services(objects) == {("ns", "vhook"), ("ns", "api"), ("ns", "conv")}


def cr(generation: int = 1, status: dict | None = None) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "generation": generation},
            "status": status or {}}


def test_operand_ready_by_its_ready_or_available_condition() -> None:
    assert operand(cr(status={"conditions": [cond("Ready", "True", "Done")]})).healthy
    assert operand(cr(status={"conditions": [cond("Available", "True")]})).healthy
    waiting = operand(cr(status={"conditions": [cond("Ready", "False", "Provisioning", "creating volumes")]}))
    assert (waiting.status, waiting.message) == (Status.IN_PROGRESS, "Ready=False: Provisioning: creating volumes")


def test_operand_condition_for_an_older_generation_does_not_count() -> None:
    stale = {"conditions": [{**cond("Ready", "True"), "observedGeneration": 1}]}
    assert operand(cr(generation=2, status=stale)).reason == "LatestGenerationNotObserved"
    assert operand(cr(generation=2, status={"observedGeneration": 1, "conditions": [cond("Ready", "True")]})
                   ).status == Status.IN_PROGRESS


def test_operand_conditions_at_the_path_the_csv_names() -> None:
    thing = cr(status={"health": {"conds": [cond("Ready", "False", "Broken")]}, "conditions": [cond("Ready", "True")]})
    assert operand(thing, "health.conds").reason == "Broken"
    assert operand(thing).healthy


def test_operand_without_ready_or_available_falls_back_to_the_generic_rules() -> None:
    assert operand(cr()).healthy
    assert operand(cr(status={"conditions": [cond("Stalled", "True", "Bad")]})).status == Status.FAILED
