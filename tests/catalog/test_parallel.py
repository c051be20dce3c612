"""A large catalog is parsed on two processes: the result must be exactly a serial load's, whatever happens.

Each case runs in a fresh interpreter, since only a single-threaded process forks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONE_CPU = len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True

# Loads the catalog at argv[1] twice, two-process and serial, and prints what a test compares.
CHILD = """
import json, os, sys
from reconciler.catalog import load, parallel

forks = []
fork = parallel._fork
parallel._fork = lambda work: forks.append(1) or fork(work)
parent = os.getpid()
parallel.MIN_BYTES = parallel.SPLIT_BYTES = 1
unit = parallel._parse_unit
if "--child-dies" in sys.argv:
    parallel._parse_unit = lambda files, u: os._exit(3) if os.getpid() != parent else unit(files, u)
if "--parent-fails" in sys.argv:
    parallel._parse_unit = lambda files, u: unit(files, u) if os.getpid() != parent else 1 / 0
    try:
        load(sys.argv[1], use_cache=False)
    except ZeroDivisionError:
        try:
            left = "running" if os.waitpid(-1, os.WNOHANG) == (0, 0) else "unreaped"
        except ChildProcessError:
            left = "none"
        print(json.dumps({"forks": forks, "children": left}))
        sys.exit(0)
if "--thread" in sys.argv:
    import threading
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
splits = []
pieces = parallel._pieces
def split(f):
    got = pieces(f)
    if got:
        splits.append(f.rel)
    return got
parallel._pieces = split
parallel.MIN_BYTES = parallel.SPLIT_BYTES = 1
two = load(sys.argv[1], use_cache=False)
parallel.MIN_BYTES = 1 << 60
one = load(sys.argv[1], use_cache=False)
print(json.dumps({"forks": forks, "splits": sorted(set(splits)), "same": two.catalog == one.catalog and two.findings == one.findings,
                  "bundles": len(two.catalog.bundles),
                  "findings": [(f.rule, f.path, f.message) for f in two.findings]}))
"""


def _package(root: Path, name: str, versions: int, *, as_json: bool) -> None:
    d = root / name
    d.mkdir()
    blobs = [{"schema": "olm.package", "name": name, "defaultChannel": "stable"},
             {"schema": "olm.channel", "package": name, "name": "stable",
              "entries": [{"name": f"{name}.v1.0.{i}", **({"replaces": f"{name}.v1.0.{i - 1}"} if i else {})}
                          for i in range(versions)]}]
    blobs += [{"schema": "olm.bundle", "package": name, "name": f"{name}.v1.0.{i}",
               "image": f"quay.io/example/{name}:v1.0.{i}",
               "properties": [{"type": "olm.package", "value": {"packageName": name, "version": f"1.0.{i}"}},
                              {"type": "olm.gvk", "value": {"group": f"{name}.example.com", "kind": "Thing",
                                                            "version": "v1"}}]}
              for i in range(versions)]
    if as_json:
        (d / "catalog.json").write_text("\n".join(json.dumps(b) for b in blobs))
    else:
        (d / "catalog.yaml").write_text("".join("---\n" + json.dumps(b) + "\n" for b in blobs))


def _run(catalog: Path, *flags: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(catalog), *flags], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    root = tmp_path / "index"
    root.mkdir()
    for i in range(7):
        _package(root, f"pkg{i}", 5 + 3 * i, as_json=i % 2 == 0)
    # Files the parser refuses, in both halves: their findings come in load order, as a serial load gives them.
    (root / "broken-a").mkdir()
    (root / "broken-a" / "catalog.yaml").write_text(
        "schema: olm.package\nname: broken-a\n---\nschema: olm.channel\npackage: broken-a\nname: [unclosed\n")
    # A directive belongs to the document after it: such a stream is never split.
    (root / "directive").mkdir()
    (root / "directive" / "catalog.yaml").write_text(
        "schema: olm.package\nname: directive\n...\n%YAML 1.1\n---\nschema: olm.channel\npackage: directive\n"
        "name: stable\nentries: []\n")
    (root / "broken-b").mkdir()
    (root / "broken-b" / "catalog.json").write_text('{"schema": "olm.package", "name": ')
    # Empty documents (opm refuses them), one in each piece of a split file: found in the whole file's text.
    (root / "empties").mkdir()
    (root / "empties" / "catalog.yaml").write_text(
        "# a comment before the first marker\n---\nschema: olm.package\nname: empties\ndefaultChannel: stable\n"
        "---\n# only a comment\n---\nschema: olm.channel\npackage: empties\nname: stable\n"
        "entries: [{name: empties.v1.0.0}]\n---\nschema: olm.bundle\npackage: empties\nname: empties.v1.0.0\n"
        "image: quay.io/example/empties:v1.0.0\n")
    return root


def _forked(result: dict) -> bool:
    return bool(result["forks"])


@pytest.mark.parallel(missing=ONE_CPU, reason="a second CPU is needed for the two-process path")
def test_a_two_process_load_equals_a_serial_one(catalog):
    result = _run(catalog)
    assert _forked(result) and result["same"]
    assert result["bundles"] == sum(5 + 3 * i for i in range(7)) + 1  # and the one of "empties"
    parse_findings = [(path, message) for rule, path, message in result["findings"] if rule == "parse"]
    assert [p.split("/")[-2] for p, _ in parse_findings] == ["broken-a", "broken-b"]
    assert "line 6" in parse_findings[0][1]  # the whole file's line, not its second piece's
    empty = [message for rule, path, message in result["findings"] if rule == "blob-shape" and "empties/" in path]
    assert [m.split(" is empty")[0] for m in empty] == ["the YAML document at line 1", "the YAML document at line 7"]
    # Every YAML stream with a document marker past its start is split, except the one with a directive.
    assert result["splits"] == ["broken-a/catalog.yaml", "empties/catalog.yaml",
                                *(f"pkg{i}/catalog.yaml" for i in (1, 3, 5))]


@pytest.mark.parallel(missing=ONE_CPU, reason="a second CPU is needed for the two-process path")
def test_a_child_that_dies_costs_only_time(catalog):
    result = _run(catalog, "--child-dies")
    assert _forked(result) and result["same"]


@pytest.mark.parallel(missing=ONE_CPU, reason="a second CPU is needed for the two-process path")
def test_a_failure_in_the_parent_leaves_no_child_behind(catalog):
    result = _run(catalog, "--parent-fails")
    assert _forked(result) and result["children"] == "none"


def test_a_process_with_other_threads_does_not_fork(catalog):
    result = _run(catalog, "--thread")
    assert not _forked(result) and result["same"]


def test_the_halves_balance_cost_and_keep_json_with_the_parent():
    from reconciler.catalog.parallel import _halves

    assert _halves([5, 4, 3, 3, 1], [False] * 5) == ([0, 3], [1, 2, 4])
    # JSON (pinned) is never handed to the child: its documents unpickle no faster than they parse.
    mine, theirs = _halves([90, 40, 30, 20], [True, False, False, True])
    assert {0, 3} <= set(mine) and theirs and not {0, 3} & set(theirs)
    assert _halves([10, 10], [True, True]) == ([0, 1], [])


# The child hands back 24 strings of 1 MB; the parent's Python allocations while collecting them are measured.
HANDED = """
import json, tracemalloc
from reconciler.catalog import parallel
child = parallel._fork(lambda: [chr(65 + i) * (1 << 20) for i in range(24)])
tracemalloc.start()
handed = parallel._collect(child)
print(json.dumps({"strings": len(handed), "peak_mb": tracemalloc.get_traced_memory()[1] / (1 << 20)}))
"""


def test_the_parent_unpickles_the_childs_half_as_it_streams():
    """The parent never holds the pickled half besides the objects made from it (before: both, and a joined
    copy of the pickle, three times what the half costs)."""
    proc = subprocess.run([sys.executable, "-c", HANDED], capture_output=True, text=True, cwd=ROOT, timeout=120)
    result = json.loads(proc.stdout)
    assert result["strings"] == 24 and result["peak_mb"] < 24 * 1.25, result
