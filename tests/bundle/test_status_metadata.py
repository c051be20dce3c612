"""The Operator status' metadata (seed 001) comes from the CSV: names, version, APIs provided and required."""

from __future__ import annotations

from bench import bundle_corpus as bc
from reconciler.bundle import fetch, read_content, render_content
from reconciler.model.declarations import InstallSettings
from tests.support.parts import not_tested

BUNDLE = "rabbitmq-messaging-topology-operator/1.19.3"


def test_a_real_operator_reports_what_it_provides_and_requires() -> None:
    if not (bc.DEFAULT_CORPUS / BUNDLE).is_dir():
        not_tested("corpus", f"no corpus at {bc.DEFAULT_CORPUS}")
    rendered = render_content(read_content(fetch(f"file://{BUNDLE}", bc.DEFAULT_CORPUS)),
                              InstallSettings(), "operators")
    meta = rendered.metadata
    assert meta["displayName"] == "rabbitmq-messaging-topology-operator"
    assert meta["version"] == "1.19.3"
    assert meta["description"]
    provides = {api["kind"]: api for api in meta["apis"]["provides"]}
    assert len(provides) == 13
    assert provides["Queue"] == {"group": "rabbitmq.com", "version": "v1beta1", "kind": "Queue",
                                 "plural": "queues", "singular": "queue"}
    assert meta["apis"]["requires"] == [{"group": "rabbitmq.com", "version": "v1beta1", "kind": "RabbitmqCluster",
                                         "plural": "rabbitmqclusters", "singular": "rabbitmqcluster"}]


def test_a_plain_bundle_has_no_csv_metadata(tmp_path) -> None:
    bundle = tmp_path / "b"
    (bundle / "manifests").mkdir(parents=True)
    (bundle / "manifests" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    rendered = render_content(read_content(fetch("file://b", tmp_path)), InstallSettings(), "default")
    assert rendered.metadata == {}


def test_operand_conditions_come_from_the_status_descriptors() -> None:
    from reconciler.bundle.registry_v1 import Csv, operand_conditions

    csv = Csv({"metadata": {"name": "x"}, "spec": {"customresourcedefinitions": {"owned": [
        {"name": "as.example.com", "kind": "A", "version": "v1", "statusDescriptors": [
            {"path": "phase", "x-descriptors": ["urn:alm:descriptor:io.kubernetes.phase"]},
            {"path": "health.conditions", "x-descriptors": ["urn:alm:descriptor:io.kubernetes.conditions"]}]},
        {"name": "bs.example.com", "kind": "B", "version": "v1"}]}}}, "csv.yaml")
    assert operand_conditions(csv) == {"as.example.com": "health.conditions", "bs.example.com": "conditions"}
