"""Fields other managers own, on the real API server: an autoscaler's replicas reverted without a rule and kept
with one; a field a client-side apply once wrote removed when the bundle drops it; a create-only object edited by
its user and left alone."""

from __future__ import annotations

import pytest

from reconciler.kube.client import Kube
from tests.support.repo import GitOpsRepo

from .support import cli, get, reconcile
from .test_reconcile import repo  # noqa: F401 - fixture: the example, everything uninstalled afterwards

pytestmark = pytest.mark.cluster

DEPLOYMENT = ("apps/v1", "Deployment", "plumbus-controller-manager", "plumbus-system")
GADGET = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: gadget
spec:
  bundle:
    name: gadget.v{version}
    spec:
      refs: [file://bundles/gadget/{version}]
      class: plain+v0
  install:
    namespace: gadget-system
"""


def scale(k8s: Kube, replicas: int) -> None:
    """What an autoscaler does: the scale subresource, under its own field manager."""
    info = k8s.resource("apps/v1", "Deployment")
    k8s.request("PATCH", info.path(DEPLOYMENT[3], DEPLOYMENT[2]) + "/scale",
                query=[("fieldManager", "hpa-controller")], body={"spec": {"replicas": replicas}},
                content_type="application/merge-patch+json")


def replicas(k8s: Kube) -> int:
    return get(k8s, *DEPLOYMENT)["spec"]["replicas"]


def test_an_autoscalers_replicas_are_reverted_without_a_rule_and_kept_with_one(repo, kc, k8s, capsys):
    assert reconcile(repo, kc, "--no-wait", capsys=capsys).code == 0
    scale(k8s, 3)
    run = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert run.code == 0, run.err
    assert replicas(k8s) == 1 and "Deployment.apps plumbus-system/plumbus-controller-manager  configured" in run.out

    repo.write("reconciler.yaml", "defaultInstallNamespace: operators\nignoreDifferences:\n"
               "- group: apps\n  kind: Deployment\n  name: plumbus-controller-manager\n"
               "  managedFieldsManagers: [hpa-controller]\n"
               "- group: apps\n  kind: StatefulSet\n  jsonPointers: [/spec/replicas]\n")
    repo.commit("leave replicas to the autoscaler")
    scale(k8s, 3)
    for _ in range(2):   # neither written nor reported as drift, run after run
        run = reconcile(repo, kc, "--no-wait", capsys=capsys)
        assert run.code == 0, run.err
        assert replicas(k8s) == 3
        assert "Summary: 0 created, 0 configured" in run.out, run.out
        assert "ignoreDifferences reconciler.yaml: ignoreDifferences[1] (StatefulSet.apps) matches no object" \
            in run.out
    status = get(k8s, "reconciler.dev/v1alpha1", "Operator", "plumbus")["status"]
    drift = next(c for c in status["conditions"] if c["type"] == "ComponentsDiverge")
    assert drift["status"] == "False"


def _gadget(repo: GitOpsRepo, version: str, config: str, settings: str) -> None:
    """A new version of the plain bundle gadget (bundles are immutable: a change is a new version)."""
    repo.write("operators/gadget.yaml", GADGET.format(version=version))
    repo.write(f"bundles/gadget/{version}/manifests/config.yaml", config)
    repo.write(f"bundles/gadget/{version}/manifests/settings.yaml", settings)


CONFIG = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: gadget-config, namespace: gadget-system}}\n"
          "data: {data}\n")
SETTINGS = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gadget-settings\n  namespace: gadget-system\n"
            "  annotations: {{reconciler.dev/create-only: \"true\"}}\ndata: {{mode: {mode}}}\n")


def test_a_client_side_field_goes_when_the_bundle_drops_it_and_create_only_stays_as_edited(repo, kc, k8s, capsys):
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gadget-system"}},
              field_manager="user", dry_run=False)
    cm = k8s.resource("v1", "ConfigMap")
    # written long ago by a client-side `kubectl apply`, then handed to the reconciler
    k8s.request("POST", cm.path("gadget-system"), query=[("fieldManager", "kubectl-client-side-apply")],
                body={"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "gadget-config", "namespace": "gadget-system",
                                   "annotations": {"reconciler.dev/adopt": "true"}},
                      "data": {"a": "1", "b": "2"}})
    _gadget(repo, "1.0.0", CONFIG.format(data="{a: '1', b: '2'}"), SETTINGS.format(mode="default"))
    repo.commit("gadget")
    assert cli("approve", str(repo.path), "gadget", capsys=capsys).code == 0
    repo.commit("approve gadget")
    run = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert run.code == 0, run.err

    # the user makes the create-only object theirs
    k8s.request("PATCH", cm.path("gadget-system", "gadget-settings"), query=[("fieldManager", "user")],
                body={"data": {"mode": "custom"}}, content_type="application/merge-patch+json")
    # the bundle drops b, and would reset the settings
    _gadget(repo, "1.1.0", CONFIG.format(data="{a: '1'}"), SETTINGS.format(mode="reset"))
    repo.commit("gadget without b")
    assert cli("approve", str(repo.path), "gadget", capsys=capsys).code == 0
    repo.commit("approve gadget again")
    run = reconcile(repo, kc, "--no-wait", capsys=capsys)
    assert run.code == 0, run.err + run.out
    live = get(k8s, "v1", "ConfigMap", "gadget-config", "gadget-system")
    assert live["data"] == {"a": "1"}, live["data"]
    assert not [m for m in live["metadata"]["managedFields"] if m["manager"] == "kubectl-client-side-apply"]
    settings = get(k8s, "v1", "ConfigMap", "gadget-settings", "gadget-system")
    assert settings["data"] == {"mode": "custom"}
    assert "ConfigMap gadget-system/gadget-settings  unchanged" not in run.out   # unchanged is not listed...
    again = reconcile(repo, kc, "--no-wait", "--show-unchanged", capsys=capsys)
    assert "gadget-settings  unchanged  [gadget]: create-only: it exists, left as it is" in again.out, again.out
    assert get(k8s, "v1", "ConfigMap", "gadget-settings", "gadget-system")["data"] == {"mode": "custom"}


def test_a_plain_bundle_that_ships_its_own_namespace_is_planned_once_and_applied(repo, kc, k8s, capsys):
    """The dry-run listed the namespace twice and predicted success; the real run then refused the bundle's own
    Namespace as a foreign object. A dry run must never promise what the run refuses."""
    repo.write("operators/gadget.yaml", GADGET.format(version="2.0.0").replace("gadget-system", "gadget-own"))
    repo.write("bundles/gadget/2.0.0/manifests/namespace.yaml",
               "apiVersion: v1\nkind: Namespace\nmetadata: {name: gadget-own}\n")
    repo.write("bundles/gadget/2.0.0/manifests/config.yaml",
               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gadget-config, namespace: gadget-own}\ndata: {a: '1'}\n")
    repo.commit("gadget in its own namespace")
    assert cli("approve", str(repo.path), "gadget", capsys=capsys).code == 0
    repo.commit("approve gadget")
    for extra in (("--dry-run",), ()):
        run = reconcile(repo, kc, "--no-wait", *extra, capsys=capsys)
        assert run.code in (0, 1), run.err + run.out
        assert run.out.count(" Namespace gadget-own ") == 1, run.out
    assert get(k8s, "v1", "ConfigMap", "gadget-config", "gadget-own") is not None
    ns = get(k8s, "v1", "Namespace", "gadget-own")
    assert ns["metadata"]["labels"]["reconciler.dev/operator"] == "gadget"


def test_a_dry_run_shows_a_unified_diff_of_whole_values_and_honours_an_external_diff(repo, kc, k8s, capsys,
                                                                                        monkeypatch):
    """As kubectl diff: a one-line change in a long multi-line value is that line, and KUBECTL_EXTERNAL_DIFF gets
    the live and proposed objects as two directories."""
    long = "\n".join(f"      line {i}: value" for i in range(120))
    config = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gadget-config, namespace: gadget-system}\n"
              "data:\n  settings.conf: |\n" + long + "\n")
    ns = k8s.resource("v1", "Namespace")
    k8s.apply(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gadget-system"}},
              field_manager="user", dry_run=False)
    _gadget(repo, "1.0.0", config, SETTINGS.format(mode="default"))
    repo.commit("gadget")
    assert cli("approve", str(repo.path), "gadget", capsys=capsys).code == 0
    repo.commit("approve")
    assert reconcile(repo, kc, "--no-wait", capsys=capsys).code == 0
    _gadget(repo, "1.1.0", config.replace("line 60: value", "line 60: changed"), SETTINGS.format(mode="default"))
    repo.commit("one line")
    assert cli("approve", str(repo.path), "gadget", capsys=capsys).code == 0
    repo.commit("approve again")
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 1, run.err
    assert "      -    line 60: value" in run.out and "      +    line 60: changed" in run.out, run.out
    assert "line 59: value" in run.out and "line 40: value" not in run.out   # context, not the whole value
    monkeypatch.setenv("KUBECTL_EXTERNAL_DIFF", "diff -u -N")
    run = reconcile(repo, kc, "--dry-run", capsys=capsys)
    assert run.code == 1, run.err
    assert "/LIVE/v1.ConfigMap.gadget-system.gadget-config" in run.out
    assert "/MERGED/v1.ConfigMap.gadget-system.gadget-config" in run.out
    assert "+    line 60: changed" in run.out
