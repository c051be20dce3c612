"""No input ends in "internal error": every YAML example of the design documents, committed as a repository's
declarations, through every command that reads a repository.

Each example is the working tree's change on top of an empty first commit, so ``diff`` reviews it too. The
run is offline (no cluster configured, no network): what an example cannot do without one is refused with an
``error:`` line of its own, never a traceback turned into exit 70. ``tests/unit/test_seed_declarations.py``
says what each declaration example becomes; the hostile cases (``tests/hostile``) check the same for hostile
repositories, command by command.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler import network
from reconciler.cli import EXIT_INTERNAL
from tests.e2e.support import cli
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


def _repository(path: Path, text: str) -> Path:
    git = pygit2.init_repository(str(path), initial_head="main")
    sig = pygit2.Signature("Test", "test@example.invalid")
    git.create_commit("HEAD", sig, sig, "empty", git.index.write_tree(), [])
    (path / "declarations.yaml").write_text(text)
    return path


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds is absent")
@pytest.mark.parametrize("ident", sorted(BLOCKS))
def test_a_design_document_example_never_ends_in_an_internal_error(tmp_path, capsys, ident):
    repo = _repository(tmp_path / "repo", BLOCKS[ident])
    for command in COMMANDS:
        args = [a.format(repo=repo) for a in command]
        with network.offline():
            run = cli(*args, capsys=capsys)
        said = f"{' '.join(command)}: exit {run.code}\n{run.out}{run.err}"
        assert run.code != EXIT_INTERNAL and "internal error" not in run.err, said
        if run.code >= 2:   # a refusal says what is wrong on its own error line
            assert run.err.startswith("error: ") or "\nerror: " in run.err, said
