"""Run every command that reads a repository, offline, in this one process, on the repository given as argv[1];
print one JSON line per command: [command, exit code, whether stderr said "internal error", its last line].

A driver for ``test_every_command.py``: one process per hostile case, so that a crash of the interpreter fails
that case alone, and one process for all its commands, so that the suite stays as fast as the cases are many.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pygit2

from reconciler import network
from reconciler.cli.parser import main

COMMANDS = [
    ["resolve", "{repo}", "--offline", "--no-write"],
    ["resolve", "{repo}", "--offline", "--no-write", "--explain", "-o", "json"],
    ["diff", "{repo}", "--offline"],
    ["reconcile", "{repo}", "--dry-run"],
    ["update", "{repo}"],
    ["approve", "{repo}", "--all", "--offline"],
    ["status", "{repo}"],
    ["catalog", "validate", "{repo}/catalogs"],
    ["catalog", "list", "bundles", "{repo}/catalogs"],
]


def run(repo: str) -> None:
    try:   # an empty first commit: diff reviews the whole tree
        git = pygit2.init_repository(repo, initial_head="main")
        sig = pygit2.Signature("Test", "test@example.invalid")
        git.create_commit("HEAD", sig, sig, "empty", git.TreeBuilder().write(), [])
    except pygit2.GitError:
        pass   # a case whose .git is itself hostile: diff says what it cannot open
    for argv in COMMANDS:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                with network.offline():
                    code = main([a.replace("{repo}", repo) for a in argv], out=io.StringIO())
            except SystemExit as exc:   # argparse's own exits
                code = exc.code
        text = err.getvalue()
        print(json.dumps([" ".join(argv[:2]), code, "internal error" in text, (text.strip().splitlines() or [""])[-1]]),
              flush=True)


if __name__ == "__main__":
    run(sys.argv[1])
