"""OpenShift's upgrade gates: a bundle's olm.maxOpenShiftVersion recorded and judged as OLM v0's ClusterOperator
judges it, and an operator's OperatorCondition Upgradeable judged as olm-operator judges it."""

from __future__ import annotations

import io
import json

import pytest

from bench import bundle_corpus as bc
from reconciler.bundle import fetch, read_content, render_content
from reconciler.bundle.openshift import blocks, declared, next_minor, parse, recorded
from reconciler.cluster.status.gates import judged
from reconciler.commands.status import print_table, summarize
from reconciler.model.declarations import InstallSettings
from tests.unit.helpers import csv_doc, write_bundle

GATED = "ibmcloud-operator/1.0.11"   # a real bundle declaring it in its CSV's olm.properties


@pytest.mark.corpus(missing=not (bc.DEFAULT_CORPUS / GATED).is_dir(), reason="../shared/corpus is absent")
def test_a_real_bundle_s_maximum_is_recorded_in_the_status_metadata():
    rendered = render_content(read_content(fetch(f"file://{GATED}", bc.DEFAULT_CORPUS)), InstallSettings(),
                              "operators")
    assert rendered.metadata["maxOpenShiftVersion"] == "4.8"


def test_the_maximum_comes_from_metadata_properties_and_the_csv_annotation(tmp_path):
    annotation = json.dumps([{"type": "olm.maxOpenShiftVersion", "value": "4.14"}])
    ref = write_bundle(tmp_path, "bundles/a", csv_doc(annotations={"olm.properties": annotation}))
    rendered = render_content(read_content(fetch(ref, tmp_path)), InstallSettings("ns"), "operators")
    assert rendered.metadata["maxOpenShiftVersion"] == "4.14"
    (tmp_path / "bundles" / "a" / "metadata" / "properties.yaml").write_text(
        "properties:\n- type: olm.maxOpenShiftVersion\n  value: \"4.12\"\n")
    listed = read_content(fetch(ref, tmp_path)).properties
    assert declared({"olm.properties": annotation}, listed) == ["4.12", "4.14"]
    assert recorded({}, listed) == {"maxOpenShiftVersion": "4.12"}
    assert render_content(read_content(fetch(ref, tmp_path)), InstallSettings("ns"),
                          "operators").metadata["maxOpenShiftVersion"] == "4.12,4.14"
    plain = write_bundle(tmp_path, "bundles/b", csv_doc())
    assert "maxOpenShiftVersion" not in render_content(read_content(fetch(plain, tmp_path)), InstallSettings("ns"),
                                                       "operators").metadata


@pytest.mark.parametrize("values, expected", [
    (["4.8"], ((4, 8), "")), (['"4.10"'], ((4, 10), "")), (["v4.9"], ((4, 9), "")), ([], (None, "")),
    (["4.8", "4.9"], (None, 'defining more than one "olm.maxOpenShiftVersion" property is not allowed')),
    (["4.8.1"], (None, "olm.maxOpenShiftVersion must specify only <major>.<minor>, got 4.8.1")),
    ([""], (None, 'value cannot be "" (an empty string)')),
    (["four"], (None, 'failed to parse "four" as a version')),
])
def test_the_value_is_read_as_olm_reads_it(values, expected):
    assert parse(values) == expected


def test_a_maximum_below_the_next_minor_blocks_the_cluster_upgrade():
    assert blocks("4.8", "4.8.3") == ("it supports OpenShift up to 4.8 (olm.maxOpenShiftVersion): the cluster, at "
                                      "4.8.3, cannot be upgraded to 4.9 while it runs")
    assert blocks("4.9", "4.8.3") == ""
    assert blocks("4.9", "4.9") != ""
    assert next_minor("4.23") == (5, 1) and blocks("5.0", "4.22") == ""   # 4.23 and 5.0 are one release to OLM
    assert blocks("4.8.1", "4.8").startswith("its olm.maxOpenShiftVersion is invalid")


def condition(status: str, generation: int = 1, observed: int | None = 1) -> dict:
    cond = {"type": "Upgradeable", "status": status, "reason": "Migrating", "message": "a migration runs"}
    if observed is not None:
        cond["observedGeneration"] = observed
    return cond


def operator_condition(**kw) -> dict:
    return {"metadata": {"name": "demo.v1", "namespace": "ns", "generation": kw.pop("generation", 1)}, **kw}


def test_the_operator_s_upgradeable_false_is_its_status_condition():
    got = judged(operator_condition(status={"conditions": [condition("False")]}))
    assert (got["type"], got["status"], got["reason"]) == ("Upgradeable", "False", "Migrating")
    assert got["message"] == "OperatorCondition ns/demo.v1: a migration runs"
    assert judged(operator_condition(status={"conditions": [condition("True")]}))["status"] == "True"
    assert judged(operator_condition(status={})) is None


def test_an_override_wins_and_an_outdated_condition_holds_upgrades():
    over = {"type": "Upgradeable", "status": "True", "message": "admin says so"}
    got = judged(operator_condition(spec={"overrides": [over]}, status={"conditions": [condition("False")]}))
    assert (got["status"], got["reason"]) == ("True", "Overridden")
    stale = judged(operator_condition(generation=2, status={"conditions": [condition("True", observed=1)]}))
    assert (stale["status"], stale["reason"]) == ("False", "Outdated")


def test_status_shows_each_gate_after_the_table():
    status = {"bundle": {"name": "demo.v1", "namespace": "ns", "package": "demo", "version": "1.0.0"},
              "metadata": {"maxOpenShiftVersion": "4.8"},
              "conditions": [{"type": "Ready", "status": "True", "reason": "Healthy", "message": "ok"},
                             {"type": "Upgradeable", "status": "False", "reason": "Migrating",
                              "message": "OperatorCondition ns/demo.v1: a migration runs"}]}
    rows = summarize({"demo": status}, None)
    rows[0]["openshift"] = {"version": "4.8.2", "from": "the cluster's ClusterVersion",
                            "blocksNextMinor": blocks("4.8", "4.8.2")}
    out = io.StringIO()
    print_table(rows, out, with_lock=False)
    text = out.getvalue()
    assert ("  demo: olm.maxOpenShiftVersion 4.8: blocks the cluster's OpenShift upgrade: it supports OpenShift up "
            "to 4.8 (olm.maxOpenShiftVersion): the cluster, at 4.8.2, cannot be upgraded to 4.9 while it runs (the "
            "cluster's ClusterVersion)") in text, text
    assert "  demo: Upgradeable=False (Migrating): OperatorCondition ns/demo.v1: a migration runs" in text
