"""`reconciler status` as kubectl users read it: every instance's Operators with an INSTANCE and a NAMESPACE
column, -n before or after the command, and a STATUS that is the Ready reason, not a message cut short."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.support.repo import commit_all
from tests.unit.helpers import operator_doc, write, write_docs

from .support import cli, reconcile

pytestmark = pytest.mark.cluster

APPROVE_ALL = ("apiVersion: rukpak.io/v1\nkind: ProvisionerClass\nmetadata: {name: approve-everything}\n"
               "provisioner: operators.coreos.com/operators\nparameters: {approval: AllowAll}\n")


def _repository(root: Path, instance: str, operators: dict[str, tuple[str, bool]]) -> str:
    """A committed repository of reconciler instance ``instance``: per Operator name, its namespace and whether
    its plain bundle's Deployment can ever become available (one whose pods no node accepts cannot)."""
    write(root, "reconciler.yaml", f"instance: {instance}\nallowEmpty: true\n"
                                   "provisionerClassName: approve-everything\n")
    write(root, "classes/approve-everything.yaml", APPROVE_ALL)
    for name, (namespace, schedulable) in operators.items():
        pod: dict = {"containers": [{"name": "main", "image": "registry.example.com/demo:v1"}]}
        if not schedulable:
            pod["nodeSelector"] = {"reconciler.test/no-such-node": "x"}
        dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
               "spec": {"selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}}
        write_docs(root, f"bundles/{name}/manifests/objects.yaml", dep)
        write_docs(root, f"operators/{name}.yaml", operator_doc(
            name, bundle={"name": name, "spec": {"refs": [f"file://bundles/{name}"]}},
            install={"namespace": namespace}))
    return commit_all(root, "declare")


def _rows(table: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = table.split("\n\n", 1)[0].splitlines()
    header = lines[0].split()
    return header, {cells[header.index("NAME")]: cells for cells in (line.split() for line in lines[1:])}


@pytest.fixture
def two_instances(tmp_path, kc, capsys):
    uid = uuid.uuid4().hex[:6]
    a, b = tmp_path / "team-a", tmp_path / "team-b"
    names = {"a": f"web-{uid}", "b": f"db-{uid}", "stuck": f"stuck-{uid}"}
    spaces = {"a": f"st-a-{uid}", "b": f"st-b-{uid}"}
    rev_a = _repository(a, f"team-a-{uid}", {names["a"]: (spaces["a"], True)})
    _repository(b, f"team-b-{uid}", {names["b"]: (spaces["b"], True), names["stuck"]: (spaces["b"], False)})
    try:
        run = reconcile(a, kc, "--timeout", "120s", capsys=capsys)
        assert run.code == 0, run.out + run.err
        run = reconcile(b, kc, "--timeout", "10s", capsys=capsys)
        assert run.code == 5, run.out + run.err   # the stuck one is not healthy in time; the other is
        yield {"uid": uid, "a": a, "b": b, "names": names, "spaces": spaces, "rev_a": rev_a}
    finally:
        for root in (a, b):
            for p in (root / "operators").glob("*.yaml"):
                p.unlink()
            commit_all(root, "declare")
            run = reconcile(root, kc, "--no-wait", capsys=capsys)
            assert run.code == 0, run.out + run.err


def test_every_instance_with_its_namespace_and_a_status_that_is_a_reason(two_instances, kc, capsys):
    t = two_instances
    uid, names, spaces = t["uid"], t["names"], t["spaces"]
    run = cli("status", "--kubeconfig", str(kc), capsys=capsys)
    assert run.code == 0, run.err
    header, rows = _rows(run.out)
    assert header[:7] == ["INSTANCE", "NAME", "NAMESPACE", "PACKAGE", "VERSION", "READY", "STATUS"]
    col = {h: i for i, h in enumerate(header)}
    web, db, stuck = rows[names["a"]], rows[names["b"]], rows[names["stuck"]]
    assert (web[col["INSTANCE"]], web[col["NAMESPACE"]]) == (f"team-a-{uid}", spaces["a"])
    assert (db[col["INSTANCE"]], db[col["NAMESPACE"]]) == (f"team-b-{uid}", spaces["b"])
    assert (web[col["READY"]], web[col["STATUS"]]) == ("True", "Healthy")
    assert (stuck[col["READY"]], stuck[col["STATUS"]]) == ("False", "HealthTimeout")
    assert web[col["REVISION"]] == t["rev_a"][:12]
    assert "applied at" not in run.out.split("\n\n", 1)[0]   # no message, no revision cut to fit a cell
    # the message of the one that is not ready follows the table, whole
    [message] = [ln for ln in run.out.splitlines() if ln.startswith(f"{names['stuck']}: ")]
    assert re.fullmatch(rf"{names['stuck']}: HealthTimeout: Deployment\.apps {spaces['b']}/{names['stuck']}: .* "
                        r"\(not healthy after \d+s\)", message), message

    doc = json.loads(cli("status", "--kubeconfig", str(kc), "-o", "json", capsys=capsys).out)
    by_name = {r["name"]: r for r in doc["operators"]}
    assert (by_name[names["b"]]["instance"], by_name[names["b"]]["namespace"]) == (f"team-b-{uid}", spaces["b"])


@pytest.mark.parametrize("position", ["after", "before"])
def test_namespace_as_kubectl_takes_it(two_instances, kc, capsys, position):
    t = two_instances
    names, spaces = t["names"], t["spaces"]
    flags = ["-n", spaces["b"]] if position == "after" else [f"--namespace={spaces['b']}"]
    argv = ["status", "--kubeconfig", str(kc), *flags] if position == "after" else \
        [*flags, "status", "--kubeconfig", str(kc)]
    run = cli(*argv, capsys=capsys)
    assert run.code == 0, run.err
    assert set(_rows(run.out)[1]) == {names["b"], names["stuck"]}
    empty = cli("status", "--kubeconfig", str(kc), "-n", f"nowhere-{t['uid']}", capsys=capsys)
    assert (empty.code, empty.out) == (0, f"No Operators installed in namespace nowhere-{t['uid']}.\n")


def test_with_a_repository_only_its_instance_and_no_instance_column(two_instances, kc, capsys):
    t = two_instances
    run = cli("status", str(t["a"]), "--kubeconfig", str(kc), capsys=capsys)
    assert run.code == 0, run.err
    header, rows = _rows(run.out)
    assert header[0] == "NAME" and "INSTANCE" not in header and header[-1] == "LOCK"
    assert list(rows) == [t["names"]["a"]]



def test_a_declared_operator_not_installed_yet_is_listed_in_its_namespace(two_instances, kc, capsys):
    t = two_instances
    root, later = t["a"], f"later-{t['uid']}"
    write_docs(root, f"bundles/{later}/manifests/objects.yaml",
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": later, "namespace": t["spaces"]["a"]}})
    write_docs(root, f"operators/{later}.yaml", operator_doc(
        later, bundle={"name": later, "spec": {"refs": [f"file://bundles/{later}"]}},
        install={"namespace": t["spaces"]["a"]}))
    commit_all(root, "declare")
    assert cli("resolve", str(root), "--kubeconfig", str(kc), capsys=capsys).code == 0   # locked, not applied
    run = cli("status", str(root), "--kubeconfig", str(kc), "-n", t["spaces"]["a"], capsys=capsys)
    assert run.code == 0, run.err
    header, rows = _rows(run.out)
    assert set(rows) == {t["names"]["a"], later}
    assert rows[later][header.index("NAMESPACE")] == t["spaces"]["a"]
    assert "not installed" in " ".join(rows[later])
