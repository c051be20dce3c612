"""`adopt --namespace/--package` names what the cluster runs: a name nothing on it has is a usage error naming
it, with the nearest names and the whole list, so a typo never adopts nothing silently."""

from __future__ import annotations

import pytest

from reconciler.adopt import Selection
from reconciler.adopt.olmv0 import Unmapped
from reconciler.errors import UsageError

# installs the survey left with a reason count as run: they are what a selection may narrow to
LEFT = [Unmapped("CatalogSourceUnready", "Subscription team-a/etcd", "its CatalogSource cannot be read",
                 namespace="team-a", package="etcd"),
        Unmapped("NotInRepository", "Subscription team-b/prometheus", "no catalog of the repository has it",
                 namespace="team-b", package="prometheus")]


def test_a_selection_of_what_runs_is_accepted():
    Selection(frozenset({"team-a"}), frozenset({"etcd", "prometheus"})).check([], LEFT)
    Selection().check([], [])


@pytest.mark.parametrize("select, said", [
    (Selection(packages=frozenset({"etdc"})),
     ["--package etdc: OLM runs no install of that package on this cluster", "did you mean etcd?",
      "what OLM runs: etcd, prometheus"]),
    (Selection(namespaces=frozenset({"team-c", "team-a"})),
     ["--namespace team-c: OLM runs no install of that namespace", "what OLM runs: team-a, team-b"]),
])
def test_a_name_nothing_runs_under_is_a_usage_error_naming_it(select, said):
    with pytest.raises(UsageError) as caught:
        select.check([], LEFT)
    message = caught.value.render()
    for text in said:
        assert text in message, message
    assert "team-a:" not in message   # only what is missing is named as missing


def test_an_empty_cluster_says_it_runs_nothing():
    with pytest.raises(UsageError, match="what OLM runs: nothing"):
        Selection(packages=frozenset({"etcd"})).check([], [])
