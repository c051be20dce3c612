"""The import graph of reconciler/ has no cycle, and every import points down the stage order ARCHITECTURE.md states.

Every import counts, at the top of a module, inside a function (a lazy import is still a dependency) or under
``if TYPE_CHECKING:`` (a type a module names is a dependency of its design, if not of its run). Importing
``a.b.c`` runs the packages ``a`` and ``a.b`` first, so it depends on their ``__init__`` too: that is an edge to
each package around the module imported, but for the packages around the importer itself, which Python has run
already. A package's ``__init__`` that re-exports its submodules is not a cycle with them: Python runs a package
before its submodules by design.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from tests.support.paths import RECONCILER

ROOT = RECONCILER
ARCHITECTURE = ROOT.parent / "ARCHITECTURE.md"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_only: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not type_only and isinstance(child, ast.If) and _type_checking_only(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def graph(type_only: bool = True) -> dict[str, set[str]]:
    """Module -> the modules it imports; ``type_only=False`` leaves out what is imported for type checkers only."""
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text()), type_only):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
                    edges[name].update(_packages_run(target, name))
    return edges


def _packages_run(target: str, importer: str) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs that ``importer`` has not run already: those
    around ``target`` below the top package, but for the ones around ``importer`` (and ``importer`` itself)."""
    parts = target.split(".")
    around = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in around if p != importer and not importer.startswith(p + ".")]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(graph()) == []


def test_importing_a_submodule_depends_on_the_packages_it_runs():
    assert _packages_run("reconciler.cluster.apply.plan", "reconciler.pipeline") == [
        "reconciler.cluster", "reconciler.cluster.apply"]
    assert _packages_run("reconciler.cluster.apply.plan", "reconciler.cluster.ownership.sync") == [
        "reconciler.cluster.apply"]
    assert _packages_run("reconciler.cluster.apply.plan", "reconciler.cluster.apply.write") == []
    edges = graph()
    assert "reconciler.cluster.ownership" in edges["reconciler.pipeline.outcome"]   # the package's face runs too


def test_the_walk_finds_a_cycle_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = graph()
    assert "reconciler.cluster.ownership.prune" in edges["reconciler.cluster.ownership.sync"]   # it reads real imports
    assert "reconciler.cluster.health.wait" not in graph(type_only=False)["reconciler.cluster.ownership.sync"]
    assert "reconciler.cluster.health.wait" in edges["reconciler.cluster.ownership.sync"]      # TYPE_CHECKING counts


def stage_order(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The rows of ARCHITECTURE.md's stage order, first (lowest) first: (stage, folders and files of reconciler/)."""
    block = text.split("<!-- stage order -->", 2)[1]
    rows = []
    for line in block.splitlines():
        match = re.match(r"^\s*\d+\s+(\S+)\s+(.+)$", line)
        if match:
            rows.append((match.group(1), tuple(match.group(2).split())))
    return rows


def _entry(path: str) -> tuple[str, bool]:
    """A table entry as a module name, and whether it is a folder (everything under it) or one file."""
    if path.endswith("/"):
        return "reconciler." + path.rstrip("/").replace("/", "."), True
    if path == "__init__.py":
        return "reconciler", False
    return "reconciler." + path.removesuffix(".py").replace("/", "."), False


def stage_of(module: str, rows: list[tuple[str, tuple[str, ...]]]) -> int | None:
    """The row of ``module``: the one naming its file, else the deepest folder around it."""
    best: tuple[int, int] | None = None
    for index, (_, paths) in enumerate(rows):
        for path in paths:
            full, folder = _entry(path)
            if (module == full or (folder and module.startswith(full + "."))) and (
                    best is None or len(full) > best[1]):
                best = (index, len(full))
    return None if best is None else best[0]


def test_the_stage_order_names_folders_and_files_only():
    """A row names whole folders (``cluster/apply/``) or top-level files (``errors.py``), never a part of a folder:
    a folder is one stage."""
    rows = stage_order(ARCHITECTURE.read_text())
    entries = [path for _, paths in rows for path in paths]
    assert len(entries) == len(set(entries))
    for path in entries:
        assert path.endswith("/") and (ROOT / path).is_dir() or "/" not in path and (ROOT / path).is_file(), path
    folders = [p for p in entries if p.endswith("/")]
    for path in folders:   # no folder of the table holds another one of a different row
        row = next(i for i, (_, paths) in enumerate(rows) if path in paths)
        for other in folders:
            if other != path and other.startswith(path):
                assert next(i for i, (_, paths) in enumerate(rows) if other in paths) == row, (path, other)


def upward(edges: dict[str, set[str]], rows: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Every import from a module to one of a later stage, as ``a -> b``."""
    out = []
    for module in sorted(edges):
        for target in sorted(edges[module]):
            row = stage_of(target, rows)   # None: a face that imports nothing, so it cannot point up
            if row is not None and row > stage_of(module, rows):
                out.append(f"{module} -> {target}")
    return out


# Imports against the stage order that the code has, each to be removed by moving what it takes to the stage that
# owns it (none today). The list only shrinks: an entry that no longer holds fails the test too.
ALLOWED_UPWARD: set[str] = set()


def test_architecture_states_a_stage_for_every_module():
    """Every module has its row, but for a package face that imports nothing (a folder of folders, ``cluster/``):
    with no import it points nowhere."""
    rows = stage_order(ARCHITECTURE.read_text())
    assert [name for name, _ in rows][:9] == [
        "foundation", "repo", "catalog", "resolve", "bundle", "approve", "plan/apply", "health", "status"]
    edges = graph()
    assert [m for m in sorted(_modules()) if stage_of(m, rows) is None and edges[m]] == []


def test_every_import_points_down_the_stage_order():
    found = upward(graph(), stage_order(ARCHITECTURE.read_text()))
    assert [e for e in found if e not in ALLOWED_UPWARD] == []
    assert sorted(ALLOWED_UPWARD - set(found)) == [], "remove what no longer holds from ALLOWED_UPWARD"


def test_the_stage_check_finds_an_import_against_the_order():
    rows = [("foundation", ("model/",)), ("repo", ("repo/",)), ("approve", ("approve/",))]
    edges = {"reconciler.repo": {"reconciler.approve.records", "reconciler.model.kube"},
             "reconciler.approve.records": {"reconciler.model.kube"}, "reconciler.model.kube": set()}
    assert upward(edges, rows) == ["reconciler.repo -> reconciler.approve.records"]


# Packages whose face is the only door: no module outside one imports a submodule of it.
FACES = ("reconciler.cluster.apply",)


def test_the_engine_is_reached_through_its_face():
    edges = graph()
    through = [f"{m} -> {t}" for m in sorted(edges) for t in sorted(edges[m]) for face in FACES
               if t.startswith(face + ".") and not (m == face or m.startswith(face + "."))]
    assert through == []


def _face_problems(source: str) -> list[str]:
    """What a package's ``__init__`` holds beyond a face: a docstring, imports, ``__all__`` (and the package's
    ``__version__``)."""
    out = []
    for i, node in enumerate(ast.parse(source).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] in (["__all__"],
                                                                                               ["__version__"]):
            continue
        out.append(f"line {node.lineno}: {type(node).__name__}")
    return out


def test_every_package_init_is_a_face():
    found = {str(path.relative_to(ROOT.parent)): problems for path in sorted(ROOT.rglob("__init__.py"))
             if (problems := _face_problems(path.read_text()))}
    assert found == {}


def test_the_face_check_sees_logic():
    assert _face_problems('"""doc"""\nfrom a import b\n__all__ = ["b"]\n') == []
    assert _face_problems('"""doc"""\ndef f():\n    pass\nX = 1\n') == ["line 2: FunctionDef", "line 4: Assign"]
