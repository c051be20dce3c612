"""``pipeline.same_intent``: whether applying a newly prepared commit would ask of the cluster, and record about
it, what the last good commit did (the loop then skips it after reading, docs/loop.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

from reconciler import pipeline
from reconciler.cluster.status import objects as status_objects
from tests.support.paths import EXAMPLE


def prepared(root: Path) -> pipeline.Prepared:
    return pipeline.prepare(root)


def test_a_commit_that_asks_the_same_is_the_same_whatever_else_it_changes(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    before = prepared(root)
    (root / "reconciler.yaml").write_text((root / "reconciler.yaml").read_text() + "# a comment\n")
    (root / "README.md").write_text("notes\n")
    after = prepared(root)
    # every condition stamped a second after the one before: the two runs' transition times all differ, and
    # are not compared
    stamps = (f"2026-01-01T00:00:{second:02d}Z" for second in range(60))
    read: list[str] = []
    monkeypatch.setattr(status_objects, "now", lambda: read.append(next(stamps)) or read[-1])
    assert pipeline.same_intent(before, after)
    assert len(read) >= 2 and len(set(read)) == len(read)   # conditions were stamped, each at another time


def test_what_the_cluster_would_get_or_record_differently_is_not_the_same(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    before = prepared(root)
    declaration = root / "operators" / "plumbus.yaml"
    original = declaration.read_text()
    # another install namespace: other objects
    declaration.write_text(original.replace("namespace: plumbus-system", "namespace: plumbus-elsewhere"))
    assert not pipeline.same_intent(before, prepared(root))
    # the same bundle and objects, but the declaration the status object records differs
    declaration.write_text(original.replace('version: ">=1.0.0 <2.0.0"', 'version: ">=1.0.0 <1.99.0"'))
    after = prepared(root)
    assert after.lockfile.render() == before.lockfile.render()
    assert not pipeline.same_intent(before, after)
