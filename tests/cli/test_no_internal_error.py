"""No input ends in "internal error": every YAML example of the design documents, committed as a repository's
declarations, through every command that reads a repository.

Each example is the working tree's change on top of a first commit, empty or the example repository (whose
catalog the documents' Operators name), so ``diff`` reviews it too. The
run is offline (no cluster configured, no network): what an example cannot do without one is refused with an
``error:`` line of its own, never a traceback turned into exit 70. ``tests/unit/repo/test_seed_declarations.py``
says what each declaration example becomes; the hostile cases (``tests/hostile``) check the same for hostile
repositories, command by command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import network
from reconciler.cli.parser import EXIT_INTERNAL
from tests.e2e.support import cli
from tests.support.repo import commit_all, example_copy
from tests.seeds import SEEDS, all_blocks
from tests.unit.helpers import no_cluster  # noqa: F401 (fixture)

BLOCKS = all_blocks()
COMMANDS = [
    ("resolve", "{repo}", "--offline", "--no-write"),
    ("resolve", "{repo}", "--offline", "--no-write", "--graph", "-o", "json"),
    ("resolve", "{repo}", "--offline", "--no-write", "--explain"),
    ("diff", "{repo}", "--offline"),
    ("reconcile", "{repo}", "--dry-run"),
    ("update", "{repo}"),
    ("approve", "{repo}", "--all", "--offline"),
    ("status", "{repo}"),
    ("catalog", "validate", "{repo}"),
    ("catalog", "list", "packages", "{repo}"),
    ("catalog", "graph", "plumbus", "{repo}"),
]


pytestmark = pytest.mark.usefixtures("no_cluster")


def _repository(path: Path, text: str, *, example: bool) -> Path:
    """A git repository whose first commit is empty (or, with ``example``, the example repository without its
    Operator, so that an example naming the community catalog and plumbus resolves and converts against them),
    with the example in the working tree."""
    if example:
        example_copy(path)
        (path / "operators" / "plumbus.yaml").unlink()
    else:
        path.mkdir()
    commit_all(path, "base")
    (path / "declarations.yaml").write_text(text)
    return path


@pytest.mark.seeds(missing=not SEEDS.is_dir(), reason="../shared/seeds is absent")
@pytest.mark.parametrize("example", [False, True], ids=["alone", "in-the-example"])
@pytest.mark.parametrize("ident", sorted(BLOCKS))
def test_a_design_document_example_never_ends_in_an_internal_error(tmp_path, capsys, ident, example):
    repo = _repository(tmp_path / "repo", BLOCKS[ident], example=example)
    for command in COMMANDS:
        args = [a.format(repo=repo) for a in command]
        with network.offline():
            run = cli(*args, capsys=capsys)
        said = f"{' '.join(command)}: exit {run.code}\n{run.out}{run.err}"
        assert run.code != EXIT_INTERNAL and "internal error" not in run.err, said
        if run.code >= 2:   # a refusal says what is wrong on its own error line
            assert run.err.startswith("error: ") or "\nerror: " in run.err, said
