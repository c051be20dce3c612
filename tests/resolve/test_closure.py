"""Resolution pays only for what is declared: the universe holds the declarations' closure, nothing else.

The closure is the declared packages plus, transitively, every package that
may provide what a bundle in it requires (an API, a package, a label). A
catalog read from the cache keeps its bundles per package, undecoded; these
tests assert that a resolution builds candidates for, and decodes, exactly
the closure's packages, with unrelated packages and a whole unused catalog
beside them. (How long it takes is measured by bench/resolve_repo.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import pipeline, yamlio
from reconciler.model.catalog import ShelfView
from reconciler.repo import read_repository
from reconciler.resolve import ResolutionRequest, SatResolver, universe


def _bundle(pkg: str, *props: dict) -> dict:
    return {"schema": "olm.bundle", "package": pkg, "name": f"{pkg}.v1.0.0", "image": f"registry.invalid/{pkg}:1",
            "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": "1.0.0"}}, *props]}


def _package(pkg: str, *props: dict) -> list[dict]:
    return [{"schema": "olm.package", "name": pkg, "defaultChannel": "stable"},
            {"schema": "olm.channel", "package": pkg, "name": "stable", "entries": [{"name": f"{pkg}.v1.0.0"}]},
            _bundle(pkg, *props)]


API = {"group": "x.example.com", "version": "v1", "kind": "X"}


def _repo(root: Path) -> Path:
    """a needs API X (b and d provide it); b needs package c; e..t and a whole catalog are unrelated."""
    community = [*_package("a", {"type": "olm.gvk.required", "value": API}),
                 *_package("b", {"type": "olm.gvk", "value": API},
                           {"type": "olm.package.required", "value": {"packageName": "c", "versionRange": ">=1.0.0"}}),
                 *_package("c"), *_package("d", {"type": "olm.gvk", "value": API})]
    for pkg in "efghijklmnopqrst":
        community += _package(pkg, {"type": "olm.gvk", "value": {**API, "kind": pkg.upper()}})
    (root / "catalogs" / "community").mkdir(parents=True)
    (root / "catalogs" / "community" / "catalog.yaml").write_text(yamlio.dump_all(community))
    (root / "catalogs" / "unused").mkdir(parents=True)
    (root / "catalogs" / "unused" / "catalog.yaml").write_text(yamlio.dump_all(
        [blob for pkg in ("u1", "u2", "u3") for blob in _package(pkg)]))
    (root / "operators.yaml").write_text(yamlio.dump({
        "apiVersion": "operators.coreos.com/v1", "kind": "Operator", "metadata": {"name": "a"},
        "spec": {"catalog": {"name": "community", "package": "a"}}}))
    return root


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    return _repo(tmp_path / "repo")


def _resolve(repo: Path) -> tuple[SatResolver, dict]:
    """A resolution as a new process makes it: no candidates kept from an earlier one (universe's caches)."""
    universe._BY_OBJECT.clear()
    universe._BY_DIGEST.clear()
    snapshot = read_repository(repo)
    resolver = SatResolver()
    catalogs = pipeline.load_catalogs(snapshot, snapshot.operators)
    resolution = resolver.resolve(ResolutionRequest(snapshot.operators, catalogs))
    return resolver, {"catalogs": catalogs, "bundles": {s.owner: s.bundle_name for s in resolution.selections}}


def test_the_universe_holds_only_the_closure_of_the_declarations(repo):
    resolver, first = _resolve(repo)          # fills the catalog cache
    assert first["bundles"] == {"a": "a.v1.0.0", "b": "b.v1.0.0", "c": "c.v1.0.0"}
    assert set(resolver.universe.built) == {"a", "b", "c", "d"}   # d provides X too: a candidate, not chosen

    resolver, again = _resolve(repo)          # from the cache: bundles kept per package, undecoded
    assert again["bundles"] == first["bundles"]
    assert set(resolver.universe.built) == {"a", "b", "c", "d"}
    community, unused = again["catalogs"]["community"], again["catalogs"]["unused"]
    assert isinstance(community.bundles, ShelfView) and isinstance(unused.bundles, ShelfView)
    assert set(community.bundles.shelf.decoded) == {"a", "b", "c", "d"}   # e..t never decoded
    assert unused.bundles.shelf.decoded == {}                            # nor anything of the unused catalog


def test_a_predicate_no_index_narrows_reads_every_package(repo):
    """An Input asking by CEL alone may be met by any bundle: that resolution looks at every package."""
    (repo / "operators.yaml").write_text(yamlio.dump({
        "apiVersion": "deppy.io/v1", "kind": "Input", "metadata": {"name": "by-rule"},
        "spec": {"constraints": [{"type": "olm.constraint", "value": {"cel": {
            "rule": "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'u2')"}}}]}}))
    _resolve(repo)
    resolver, result = _resolve(repo)
    assert result["bundles"] == {"by-rule": "u2.v1.0.0"}
    assert {"a", "e", "t", "u1", "u2", "u3"} <= set(resolver.universe.built)
    assert set(result["catalogs"]["unused"].bundles.shelf.decoded) == {"u1", "u2", "u3"}
