"""Commits the reconciler writes into the repository it reads: promotions and updates.

Every git write of the project is here, so that one place decides the
signature (the user's git configuration, else a fixed one), how paths of the
working tree become index entries, and how a commit lands on a new branch
without touching the checkout (a promotion proposed as a pull request).
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from reconciler.errors import InputError, UsageError

FALLBACK_SIGNATURE = ("reconciler", "reconciler@localhost")


def open_work_tree(root: str | Path, why: str, hint: str = "pass --no-commit to only write the files"
                   ) -> pygit2.Repository:
    """The git repository whose working tree holds ``root``; ``why`` says what needed it, ``hint`` what else the
    command can do."""
    found = pygit2.discover_repository(str(root))
    if not found:
        raise UsageError(f"the repository is not in a git work tree, so {why}", path=str(root), hint=hint)
    return pygit2.Repository(found)


def signature(repo: pygit2.Repository) -> pygit2.Signature:
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature(*FALLBACK_SIGNATURE)


def commit_paths(repo: pygit2.Repository, paths: list[Path], message: str) -> str:
    """Stage ``paths`` (files of the working tree) and commit them on HEAD; returns the commit id."""
    workdir = Path(repo.workdir).resolve()
    index = repo.index
    index.read()
    for path in paths:
        index.add(path.resolve().relative_to(workdir).as_posix())
    index.write()
    sig = signature(repo)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, index.write_tree(), parents))


def commit_on_new_branch(repo: pygit2.Repository, root: str | Path, files: dict[str, str], message: str,
                         branch: str) -> str:
    """Commit ``files`` (path relative to ``root`` -> text) on a new ``branch`` made from HEAD, leaving the
    working tree, the index and HEAD as they are; returns the commit id.

    Raises InputError when HEAD has no commit or the branch exists, UsageError for a name git refuses.
    """
    ref = f"refs/heads/{branch}"
    if not pygit2.reference_is_valid_name(ref):
        raise UsageError(f"--branch {branch!r} is not a valid branch name",
                         hint="a branch name has no spaces, '..', '~', '^', ':' or '\\' and does not end in '/' or "
                              "'.lock' (git check-ref-format)")
    if ref in repo.references:
        raise InputError(f"branch {branch} already exists", path=str(root),
                         hint="pass --branch with another name, or delete the branch")
    if repo.head_is_unborn:
        raise InputError("the repository has no commit to branch from", path=str(root),
                         hint="commit the repository first")
    head = repo.head.peel(pygit2.Commit)
    prefix = Path(root).resolve().relative_to(Path(repo.workdir).resolve()).as_posix()
    tree = head.tree
    for rel, text in sorted(files.items()):
        full = rel if prefix == "." else f"{prefix}/{rel}"
        tree = repo[_put(repo, tree, full.split("/"), repo.create_blob(text.encode()))]
    sig = signature(repo)
    commit = repo.create_commit(None, sig, sig, message, tree.id, [head.id])
    repo.references.create(ref, commit)
    return str(commit)


def _put(repo: pygit2.Repository, tree: pygit2.Tree | None, parts: list[str], blob: pygit2.Oid) -> pygit2.Oid:
    """``tree`` with the file at ``parts`` set to ``blob`` (directories made as needed), as a new tree id."""
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    if len(parts) == 1:
        builder.insert(parts[0], blob, pygit2.enums.FileMode.BLOB)
    else:
        entry = tree[parts[0]] if tree is not None and parts[0] in tree else None
        sub = repo[entry.id] if entry is not None and entry.type_str == "tree" else None
        builder.insert(parts[0], _put(repo, sub, parts[1:], blob), pygit2.enums.FileMode.TREE)
    return builder.write()
