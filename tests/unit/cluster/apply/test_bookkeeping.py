"""Each accepted write as a change set entry (cluster/apply/bookkeeping.py)."""

from __future__ import annotations

from reconciler.cluster.apply.bookkeeping import entry
from reconciler.cluster.apply.changes import Action

KINDS = {("v1", "secrets"): "Secret", ("reconciler.dev/v1alpha1", "operators"): "Operator"}


def kind_of(api_version: str, plural: str) -> str | None:
    return KINDS.get((api_version, plural))


def test_the_object_answered_names_the_entry_and_the_status_code_its_action():
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "parent", "namespace": "reconciler-system"}}
    created = entry("PATCH", "/api/v1/namespaces/reconciler-system/configmaps/parent", 201, cm, kind_of)
    assert created is not None and created.action == Action.CREATED and created.operator == ""
    assert created.ref.key == ("", "ConfigMap", "reconciler-system", "parent")
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
        "name": "install-a", "namespace": "ns", "labels": {"reconciler.dev/installer-for": "a"}}}
    configured = entry("PATCH", "/api/v1/namespaces/ns/serviceaccounts/install-a", 200, sa, kind_of)
    assert configured is not None and (configured.action, configured.operator) == (Action.CONFIGURED, "a")


def test_a_subresource_is_said_and_a_status_answer_falls_back_to_the_path():
    op = {"apiVersion": "reconciler.dev/v1alpha1", "kind": "Operator", "metadata": {"name": "plumbus"}}
    status = entry("PATCH", "/apis/reconciler.dev/v1alpha1/operators/plumbus/status", 200, op, kind_of)
    assert status is not None and (status.operator, status.detail) == ("plumbus", "its status")
    gone = entry("DELETE", "/apis/reconciler.dev/v1alpha1/operators/plumbus", 200,
                 {"kind": "Status", "status": "Success"}, kind_of)
    assert gone is not None and gone.action == Action.DELETED and gone.operator == "plumbus"
    assert gone.ref.key == ("reconciler.dev", "Operator", "", "plumbus")
    secret = entry("DELETE", "/api/v1/namespaces/ns/secrets/cert", 200, None, kind_of)
    assert secret is not None and secret.ref.key == ("", "Secret", "ns", "cert")
    unknown = entry("DELETE", "/apis/example.com/v1/namespaces/ns/widgets/w", 200, None, kind_of)
    assert unknown is not None and unknown.ref.kind == "widgets"   # discovery does not know it: its resource
    assert entry("POST", "/api/v1/namespaces/ns/events", 201, None, kind_of) is None   # names no object
