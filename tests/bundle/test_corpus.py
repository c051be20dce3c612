"""The real-world corpus: every bundle converts, or is rejected for a known reason; converted objects
pass a server-side dry-run on the real control plane.

Skipped when ../shared/corpus is absent. Takes a few minutes (about 700
bundles converted, then roughly 15,000 dry-run requests).
"""

from __future__ import annotations

import pytest

from bench import bundle_corpus as bc
from reconciler.kube.client import Kube
from tests.support.parts import not_tested

pytestmark = [pytest.mark.corpus, pytest.mark.timeout(1200)]

# Bundles the API server refuses after a correct conversion, with the part of its message that says why.
# Each would be a defect in the bundle as published, not in the converter. (jhipster-online-operator 0.1.0
# was one, with runAsNonRoot in its pod spec: now read as OLM reads it, see reconciler/bundle/typed.py.)
KNOWN_REFUSALS: dict[str, str] = {}


@pytest.fixture(scope="module")
def corpus():
    if not bc.DEFAULT_CORPUS.is_dir():
        not_tested("corpus", f"no corpus at {bc.DEFAULT_CORPUS}")
    return bc.DEFAULT_CORPUS


@pytest.fixture(scope="module")
def outcomes(corpus):
    bundles, _ = bc.find_bundles(corpus)
    return bc.convert_all(corpus, bundles)


def test_every_bundle_converted_or_rejected_for_a_known_reason(outcomes):
    unexpected = [f"{o.bundle}: {o.message}" for o in outcomes if o.status == "unexpected"]
    assert not unexpected, "\n".join(unexpected)
    assert len(outcomes) >= 700
    converted = [o for o in outcomes if o.status == "converted"]
    assert len(converted) >= 0.95 * len(outcomes)
    known = {reason for reason, _ in bc.REASONS}
    assert {o.reason for o in outcomes if o.status == "rejected"} <= known


def test_shadow_kinds_are_matched_by_group(outcomes):
    # ecr-secret-operator ships custom resources of kind Secret in its own group: never taken for core Secrets
    ecr = [o for o in outcomes if o.bundle.startswith("ecr-secret-operator/")]
    assert ecr and all(o.reason == "custom resource shipped in the bundle" for o in ecr)
    assert all("in API group ecr.mobb.redhat.com" in o.message for o in ecr)


def test_converted_objects_pass_server_side_dry_run(outcomes, control_plane):
    with control_plane.admin_client() as api:
        bc.dry_run_all(Kube(api), outcomes)
    refused = {o.bundle: o.message for o in outcomes if o.status == "dry-run failed"}
    assert set(refused) == set(KNOWN_REFUSALS), "\n".join(f"{b}: {m[:400]}" for b, m in refused.items())
    for bundle, why in KNOWN_REFUSALS.items():
        assert why in refused[bundle]


@pytest.fixture(scope="module")
def other_modes(corpus):
    bundles, _ = bc.find_bundles(corpus)
    return [o for b in bundles for o in bc.convert_every_mode(corpus, b, beyond_default=True)]


def test_every_supported_install_mode_converts_and_passes_server_side_dry_run(other_modes, control_plane):
    # the default mode is checked above; here every other mode each bundle's CSV supports
    unexpected = [f"{o.bundle}: {o.message}" for o in other_modes if o.status == "unexpected"]
    assert not unexpected, "\n".join(unexpected)
    assert {o.mode for o in other_modes} == {"OwnNamespace", "SingleNamespace", "MultiNamespace"}
    with control_plane.admin_client() as api:
        bc.dry_run_all(Kube(api), other_modes)
    refused = {o.bundle: o.message for o in other_modes if o.status == "dry-run failed"}
    unknown = {b: m for b, m in refused.items() if b.split(" [")[0] not in KNOWN_REFUSALS}
    assert not unknown, "\n".join(f"{b}: {m[:400]}" for b, m in unknown.items())


def test_unquoted_equals_sign_does_not_break_loading(outcomes):
    # observability-operator writes enum: [=, !=, ...] unquoted; YAML 1.1's "value" tag must not be resolved
    obs = [o for o in outcomes if o.bundle.startswith("observability-operator/")]
    assert obs and all(o.status == "converted" for o in obs), [o.message for o in obs if o.status != "converted"]
