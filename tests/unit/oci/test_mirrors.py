"""Registry mirror rules: registries.conf's matching, ImageDigestMirrorSet / ImageTagMirrorSet semantics."""

from __future__ import annotations

import pytest

from reconciler.errors import InputError
from reconciler.oci.mirrors import ALL, DIGESTS, TAGS, MirrorRule, candidates, from_cluster_objects, parse_settings

DIGEST = "sha256:" + "a" * 64


def where(registry: str, repository: str, by_digest: bool, rules) -> list[str]:
    return [f"{r}/{p}" + (" (mirror)" if m else "") for r, p, m in candidates(registry, repository, by_digest, rules)]


def test_a_digest_reference_goes_through_digest_mirrors_then_the_source():
    rules = [MirrorRule("registry.redhat.io/redhat", ("mirror.local:5000/rh", "backup.local/rh"), DIGESTS)]
    assert where("registry.redhat.io", "redhat/redhat-operator-index", True, rules) == [
        "mirror.local:5000/rh/redhat-operator-index (mirror)", "backup.local/rh/redhat-operator-index (mirror)",
        "registry.redhat.io/redhat/redhat-operator-index"]


def test_a_tag_reference_never_goes_through_a_digest_mirror():
    rules = [MirrorRule("registry.redhat.io/redhat", ("mirror.local/rh",), DIGESTS),
             MirrorRule("registry.redhat.io", ("tags.local/rhio",), TAGS)]
    # the longest source decides, as registries.conf does: its mirrors are for digests only
    assert where("registry.redhat.io", "redhat/index", False, rules) == ["registry.redhat.io/redhat/index"]
    assert where("registry.redhat.io", "other/index", False, rules) == ["tags.local/rhio/other/index (mirror)",
                                                                        "registry.redhat.io/other/index"]
    assert where("registry.redhat.io", "other/index", True, rules) == ["registry.redhat.io/other/index"]


def test_never_contact_source_leaves_only_the_mirrors():
    rules = [MirrorRule("quay.io/org", ("mirror.local/org",), ALL, never_contact_source=True)]
    assert where("quay.io", "org/bundle", True, rules) == ["mirror.local/org/bundle (mirror)"]
    assert where("quay.io", "org/bundle", False, rules) == ["mirror.local/org/bundle (mirror)"]


def test_a_source_matches_at_a_path_boundary_and_wildcards_match_hosts():
    rules = [MirrorRule("quay.io/org", ("m.local/org",)), MirrorRule("*.example.com", ("m.local/ex",))]
    assert where("quay.io", "organisation/x", True, rules) == ["quay.io/organisation/x"]
    assert where("quay.io", "org", True, rules)[0] == "m.local/org (mirror)"
    assert where("registry.example.com", "team/x", True, rules)[0] == "m.local/ex/team/x (mirror)"
    assert where("example.com", "team/x", True, rules) == ["example.com/team/x"]


def test_cluster_objects_become_rules_of_their_kind():
    rules = from_cluster_objects({
        "ImageDigestMirrorSet": [{"metadata": {"name": "idms"}, "spec": {"imageDigestMirrors": [
            {"source": "registry.redhat.io", "mirrors": ["m.local/rh"], "mirrorSourcePolicy": "NeverContactSource"}]}}],
        "ImageTagMirrorSet": [{"metadata": {"name": "itms"}, "spec": {"imageTagMirrors": [
            {"source": "quay.io", "mirrors": ["m.local/quay"]}]}}],
        "ImageContentSourcePolicy": [{"metadata": {"name": "icsp"}, "spec": {"repositoryDigestMirrors": [
            {"source": "docker.io", "mirrors": ["m.local/hub"]}]}}]})
    assert [(r.source, r.mirrors, r.pull_from, r.never_contact_source, r.origin) for r in rules] == [
        ("registry.redhat.io", ("m.local/rh",), DIGESTS, True, "ImageDigestMirrorSet idms"),
        ("quay.io", ("m.local/quay",), TAGS, False, "ImageTagMirrorSet itms"),
        ("docker.io", ("m.local/hub",), DIGESTS, False, "ImageContentSourcePolicy icsp")]


def test_settings_are_parsed_and_bad_ones_refused():
    (rule,) = parse_settings([{"source": "registry.redhat.io", "mirrors": ["m.local:5000/rh"],
                               "pullFromMirror": "digest-only", "mirrorSourcePolicy": "NeverContactSource"}],
                             "reconciler.yaml")
    assert (rule.pull_from, rule.never_contact_source) == (DIGESTS, True)
    for bad, message in ((["x"], "mirrors\\[0\\] must be a mapping"),
                         ([{"source": "quay.io/x:v1", "mirrors": ["m"]}], "is not a registry or repository"),
                         ([{"source": "quay.io/x@sha256:1", "mirrors": ["m"]}], "is not a registry or repository"),
                         ([{"source": "quay.io"}], "must list one or more mirrors"),
                         ([{"source": "quay.io", "mirrors": ["m"], "pullFromMirror": "some"}], "digest-only or tag-only"),
                         ([{"source": "a*.io", "mirrors": ["m"]}], "wildcard"),
                         ({"source": "quay.io"}, "must be a list")):
        with pytest.raises(InputError, match=message) as info:
            parse_settings(bad, "reconciler.yaml")
        assert info.value.path == "reconciler.yaml"


def test_blocks_of_threads_may_end_in_any_order():
    from reconciler.oci.mirrors import active, using

    a, b = MirrorRule("a.example", ("m/a",)), MirrorRule("b.example", ("m/b",))
    first, second = using([a]), using([b])
    first.__enter__()
    second.__enter__()
    assert active() == (b, a)
    first.__exit__(None, None, None)     # the block that began first ends first: the other's rules stay
    assert active() == (b,)
    second.__exit__(None, None, None)
    assert active() == ()
