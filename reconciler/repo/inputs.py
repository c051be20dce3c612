"""What one run read of a repository, as a rule over paths: which commits change nothing for it.

A run (``pipeline.prepare``, for one cluster of a fleet or for a repository
without clusters) reads the repository as ``read_repository`` and
``select_cluster`` do, then resolves and converts what that view holds. The
rule below is traced from those readers, and errs towards "read":

* ``reconciler.yaml`` and the root ``olm.lock`` (and a file named as a
  directory of the layout, which is an error);
* everything under ``catalogs/``, ``approvals/`` and ``policies/``, and
  every ``clusters/<name>.yaml`` (each cluster's labels and stage decide
  placement and which lockfiles a stage reads);
* every file of a local bundle directory the run fetched (``file://``
  sources of what it resolved, its lockfile and its declarations: only a
  selected bundle is fetched, so ``bundles/`` is otherwise not read), and
  every key file ``reconciler.yaml`` names for cosign verification;
* under ``clusters/<name>/``, only the lockfiles this run reads: its own, and
  in a fleet with stages those of the clusters of each stage that comes before
  this cluster's for an Operator placed here (``repo/fleet.hold_details``).
  When this cluster's own lockfile pins every such Operator, the earlier
  stage's pins are not used (a pin holds a package to itself), and their
  lockfiles count only when a change leaves one that no longer parses;
* every ``*.yaml``/``*.yml`` file outside those directories and outside
  hidden ones (a declaration file), except one whose every document is an
  Operator or Input placed only on other clusters. A change to such a file,
  or a new declaration file, is read from the new commit, and is this
  cluster's unless the new content holds only Operators and Inputs placed
  elsewhere that pass the checks ``read_repository`` makes across files
  (a name not taken elsewhere, classes that exist): anything else, a file
  that does not parse included, counts;
* any path deeper than the tree depth the readers accept.

Everything else (a README, a non-YAML file outside the layout, another
cluster's lockfile no stage of this one reads, files in hidden directories)
is read by nobody for this cluster. A symbolic link or a submodule anywhere
in either commit, or a local source that is not a plain path of the tree,
makes every path count: what a link points to is read under another name.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.lock import LOCK_FILENAME
from reconciler.repo import (
    APPROVALS_DIR, BUNDLES_DIR, CATALOGS_DIR, CLUSTERS_DIR, MAX_TREE_DEPTH, POLICIES_DIR, SETTINGS_FILE,
    RepoSnapshot,
)

_READ_WHOLE = (CATALOGS_DIR, APPROVALS_DIR, POLICIES_DIR)
_FILE_SCHEME = "file://"


@dataclass(frozen=True)
class Change:
    """One path that differs between two commits, with its git file mode on each side (0: absent)."""

    path: str
    old_mode: int
    new_mode: int


@dataclass(frozen=True)
class Inputs:
    """The path rule of one run: ``touched`` says which of a commit's changes it reads."""

    cluster: Any                         # model.fleet.ClusterDecl, or None outside a fleet
    locks: frozenset[str]                # lockfiles under clusters/ the run reads
    foreign: frozenset[str]              # declaration files holding only declarations placed elsewhere
    referenced: tuple[str, ...]          # local bundle directories and key files, relative to the root
    names: Mapping[str, str]             # every declaration's name -> the file declaring it
    input_classes: frozenset[str]
    provisioner_classes: frozenset[str]
    ignore: tuple[str, ...] = ()         # reconciler.yaml's ignore globs (files never read as declarations)
    parsed: frozenset[str] = frozenset()   # lockfiles read only to be parsed: what they pin is not used
    everything: bool = False             # a reference this rule cannot place: every path counts

    def reads(self, path: str) -> bool | None:
        """True when the run reads ``path``, False when it does not; None when the new content decides
        (``touched``): a declaration file placed only elsewhere, and another stage's lockfile that the run
        parses without using what it pins."""
        kind = self._kind(path)
        if kind == "declaration":
            return None if path in self.foreign else True
        return None if kind == "parsed" else kind == "read"

    def _kind(self, path: str) -> str:
        """``read``, ``unread``, or ``declaration`` (a file read as declarations, whose content decides)."""
        parts = path.split("/")
        if self.everything or len(parts) > MAX_TREE_DEPTH:
            return "read"
        if any(path == r or path.startswith(r + "/") for r in self.referenced):
            return "read"
        top = parts[0]
        if len(parts) == 1 and top in (SETTINGS_FILE, LOCK_FILENAME, *_READ_WHOLE, BUNDLES_DIR, CLUSTERS_DIR):
            return "read"   # the settings, the root lockfile, or a file where the layout wants a directory
        if top in _READ_WHOLE:
            return "read"
        if top == CLUSTERS_DIR:
            return "read" if len(parts) == 2 or path in self.locks else "parsed" if path in self.parsed else "unread"
        if top == BUNDLES_DIR:
            return "unread"   # a bundle directory is read when a run fetches it: ``referenced``, above
        if any(p.startswith(".") for p in parts):
            return "unread"   # hidden directories and files are skipped by every reader (catalogs/ aside)
        return "declaration" if parts[-1].endswith((".yaml", ".yml")) else "unread"

    def touched(self, changes: Iterable[Change], new_text: Callable[[str], str | None]) -> list[str]:
        """The changed paths this run reads (empty: the commit changes nothing it reads). ``new_text`` gives a
        path's content in the new commit (None when it is not a regular file of it)."""
        found, claimed = [], set()   # claimed: the names the changed files placed elsewhere declare now
        for change in changes:
            kind = "read" if _LINKS & {change.old_mode, change.new_mode} else self._kind(change.path)
            if kind == "declaration":
                if change.old_mode != 0 and change.path not in self.foreign:
                    read = True   # it declared something this run reads: whatever it says now matters
                elif change.new_mode == 0:
                    read = False  # a file placed only elsewhere, removed
                else:             # placed only elsewhere before, or new: its new content decides
                    names = self._placed_elsewhere(change.path, new_text(change.path))
                    read = names is None or bool(names & claimed)
                    claimed |= names or set()
            elif kind == "parsed":   # read if it no longer parses: the run would fail on it
                read = change.new_mode != 0 and not _parses(change.path, new_text(change.path))
            else:
                read = kind == "read"
            if read:
                found.append(change.path)
        return found

    def _placed_elsewhere(self, path: str, text: str | None) -> set[str] | None:
        """The names ``text`` (a declaration file's new content) declares when it holds only Operators and
        Inputs that read well, pass the checks read_repository makes across files, and are placed on other
        clusters only; None otherwise."""
        from reconciler import yamlio
        from reconciler.errors import ReconcilerError
        from reconciler.model.declarations import (
            INPUT_API_VERSIONS, OPERATOR_API_VERSIONS, Origin, parse_input, parse_operator,
        )
        from reconciler.model.fleet import for_cluster

        if text is None or self.cluster is None or any(fnmatch.fnmatch(path, g) for g in self.ignore):
            return None
        try:
            docs = yamlio.load_all(text, path, strict=True)
        except ReconcilerError:
            return None
        seen: set[str] = set()
        for index, doc in enumerate(docs):
            if not isinstance(doc, dict):
                return None
            kind, api_version = doc.get("kind"), doc.get("apiVersion")
            try:
                if kind == "Operator" and api_version in OPERATOR_API_VERSIONS:
                    decl = parse_operator(doc, Origin(path, index))
                elif kind == "Input" and api_version in INPUT_API_VERSIONS:
                    decl = parse_input(doc, Origin(path, index))
                else:
                    return None
            except ReconcilerError:
                return None
            if decl.placement is None or for_cluster(decl, self.cluster) is not None:
                return None
            if decl.name in seen or self.names.get(decl.name, path) != path:
                return None
            seen.add(decl.name)
            classes = [decl.provisioner_class, *(o.provisioner_class for o in decl.placement.overrides)]
            if decl.input_class not in self.input_classes or \
                    any(c is not None and c not in self.provisioner_classes for c in classes):
                return None
        return seen if docs else None


_LINKS = {0o120000, 0o160000}   # symbolic links and submodules (gitlinks)


def _parses(path: str, text: str | None) -> bool:
    from reconciler.errors import ReconcilerError
    from reconciler.model.lock import Lockfile

    if text is None:
        return False
    try:
        Lockfile.parse(text, path)
    except ReconcilerError:
        return False
    return True


def inputs_of(full: RepoSnapshot, view: RepoSnapshot, sources: Iterable[str]) -> Inputs:
    """The path rule of a run that read ``full`` as ``view`` (``select_cluster``) and fetched ``sources``."""
    from reconciler.repo.fleet import lock_file_of, lock_owners, previous_stage

    cluster = view.cluster
    locks = {view.lock_file} if cluster is not None else set()
    stages = {previous_stage(view, op.name) for op in view.operators} - {None}
    earlier = {lock_file_of(name) for name, c in full.clusters.items() if c.stage in stages}
    # A package this cluster pins is held to its own pin; the stage before only holds what it does not pin yet
    # (hold_details), and its lockfiles are still parsed.
    pinned = {o for e in view.lock.entries for o in lock_owners(e)} if view.lock is not None else set()
    everyone_pinned = all(op.name in pinned for op in view.operators if previous_stage(view, op.name))
    referenced, everything = [], False
    for source in sources:
        if source.startswith(_FILE_SCHEME):
            referenced.append(posixpath.normpath(source[len(_FILE_SCHEME):].strip("/") or "."))
        elif "file:" in source.split("://", 1)[0]:   # git+file:// and the like: a repository inside the tree
            everything = True
    for catalog in full.settings.catalogs.values():
        referenced += [posixpath.normpath(k.strip("/") or ".") for k in (*catalog.verify.keys, *catalog.verify_bundles.keys)]
    everything = everything or any(r == "." or r.startswith("..") for r in referenced)
    foreign: frozenset[str] = frozenset()
    if cluster is not None:
        here = {op.origin.path for op in view.operators}
        others = {c.origin.path for c in full.input_classes.values() if getattr(c, "origin", None)}
        others |= {str(p.origin).split(" (document ")[0] for p in full.provisioner_classes.values()}
        others |= {b.origin.path for b in full.bundles.values()}
        foreign = frozenset({op.origin.path for op in full.operators} - here - others)
    return Inputs(cluster, frozenset(locks if everyone_pinned else locks | earlier), foreign,
                  tuple(sorted(set(referenced))), {op.name: op.origin.path for op in full.operators},
                  frozenset(full.input_classes), frozenset(full.provisioner_classes), full.settings.ignore,
                  parsed=frozenset(earlier - locks) if everyone_pinned else frozenset(), everything=everything)


# -- two commits of a git repository ------------------------------------------------------------


def changes(git_dir: Any, old: str, new: str) -> list[Change]:
    """The paths that differ between commits ``old`` and ``new`` of the repository at ``git_dir`` (renames as a
    removal and an addition); when either tree holds a symbolic link or a submodule, one change of that entry
    is added, so that ``Inputs.touched`` counts it."""
    import pygit2

    repo = pygit2.Repository(str(git_dir))
    trees = [repo.revparse_single(c).peel(pygit2.Commit).tree for c in (old, new)]
    out = [Change(d.new_file.path if d.status != pygit2.enums.DeltaStatus.DELETED else d.old_file.path,
                  0 if d.status == pygit2.enums.DeltaStatus.ADDED else d.old_file.mode,
                  0 if d.status == pygit2.enums.DeltaStatus.DELETED else d.new_file.mode)
           for d in repo.diff(trees[0], trees[1]).deltas]
    for tree in trees:
        link = _first_link(repo, tree)
        if link is not None and all(c.path != link for c in out):
            out.append(Change(link, 0o120000, 0o120000))
    return out


_LINKED: dict[str, str | None] = {}   # tree id -> a link in it, or None: a commit's tree never changes


def _first_link(repo: Any, tree: Any, prefix: str = "") -> str | None:
    key = str(tree.id)
    if key in _LINKED:
        return _LINKED[key]
    found = None
    for entry in tree:
        if entry.filemode in _LINKS:
            found = prefix + entry.name
        elif entry.type_str == "tree":
            found = _first_link(repo, repo[entry.id], f"{prefix}{entry.name}/")
        if found is not None:
            break
    if len(_LINKED) > 100_000:
        _LINKED.clear()
    _LINKED[key] = found
    return found


def blob_text(git_dir: Any, commit: str, path: str) -> str | None:
    """A regular file's text in ``commit`` (None when it is not one, is too large, or is not UTF-8)."""
    import pygit2

    from reconciler import yamlio

    repo = pygit2.Repository(str(git_dir))
    try:
        entry = repo.revparse_single(commit).peel(pygit2.Commit).tree[path]
    except KeyError:
        return None
    if not isinstance(entry, pygit2.Blob) or entry.filemode not in (0o100644, 0o100755) \
            or entry.size > yamlio.MAX_FILE_BYTES:
        return None
    try:
        return entry.data.decode("utf-8")
    except UnicodeDecodeError:
        return None
