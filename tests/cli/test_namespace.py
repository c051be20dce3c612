"""-n/--namespace wherever a kubectl user types it: taken where a namespace means something, else a usage
error that says where the namespace comes from (never "unrecognized arguments", never a value taken for REPO)."""

from __future__ import annotations

import pytest

from reconciler.cli.parser import build_parser, main, namespace_last, subcommands
from reconciler.commands import NO_NAMESPACE
from reconciler.errors import EXIT_USAGE

TAKES_A_NAMESPACE = {"status", "watch", "bundle render", "bundle validate", "adopt"}


def test_commands_that_take_a_namespace_define_it():
    parsers = subcommands(build_parser())
    for path in TAKES_A_NAMESPACE:
        action = parsers[path]._option_string_actions["-n"]
        assert action.dest in ("namespace", "namespaces") and action.help, path


@pytest.mark.parametrize("path", sorted(set(subcommands(build_parser())) - TAKES_A_NAMESPACE - {""}))
@pytest.mark.parametrize("where", ["after", "before"])
def test_every_other_command_says_why_it_takes_none(path, where, capsys):
    words = path.split()
    argv = [*words, "-n", "team-a"] if where == "after" else ["-n", "team-a", *words]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    why = NO_NAMESPACE.get(path) or NO_NAMESPACE.get(words[0]) or f"`reconciler {path}` takes no namespace"
    assert f"reconciler {path}: error: -n: {why}" in " ".join(err.split()), err
    assert "unrecognized arguments" not in err


def test_the_declared_namespace_is_named_by_the_commands_that_read_declarations(capsys):
    with pytest.raises(SystemExit):
        main(["reconcile", ".", "--namespace=team-a"])
    err = " ".join(capsys.readouterr().err.split())
    assert "error: --namespace: each Operator's install namespace is declared" in err
    assert "spec.install.namespace" in err and "`reconciler status -n NS`" in err


@pytest.mark.parametrize("argv, expected", [
    (["-n", "a", "status"], ["status", "-n", "a"]),
    (["--namespace", "a", "-v", "bundle", "render", "d"], ["-v", "bundle", "render", "d", "--namespace", "a"]),
    (["-na", "status", "."], ["status", ".", "-na"]),
    (["--namespace=a", "status"], ["status", "--namespace=a"]),
    (["status", "-n", "a", "--", "-n", "b"], ["status", "-n", "a", "--", "-n", "b"]),
    (["status", "-n"], ["status", "-n"]),           # no value: argparse says so
    (["reconcile", ".", "--no-wait"], ["reconcile", ".", "--no-wait"]),
])
def test_namespace_last(argv, expected):
    assert namespace_last(argv) == expected
