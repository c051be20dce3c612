"""The cache key of a pinned Go tool: any input of the build gives a new directory."""

from __future__ import annotations

from reconciler.gobuild import GoTool, pinned


def _tool(module_dir, **kw) -> GoTool:
    return GoTool(label="peer", version=pinned(module_dir, "example.com/dep"), module_dir=module_dir,
                  packages=(".",), outputs=("peer",), **kw)


def test_sources_are_part_of_the_cache_key(tmp_path, monkeypatch):
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "go.mod").write_text("module example.com/peer\n\ngo 1.24\n\nrequire example.com/dep v1.2.3\n")
    (tmp_path / "go.sum").write_text("")
    (tmp_path / "main.go").write_text("package main\n\nfunc main() {}\n")
    plain, with_main = _tool(tmp_path), _tool(tmp_path, sources=("main.go",))
    assert plain.version == "v1.2.3" and plain.directory.name.startswith("v1.2.3-")
    assert with_main.directory != plain.directory   # a tool that compiles its own main.go keys on it
    before = with_main.directory
    (tmp_path / "main.go").write_text("package main\n\nfunc main() { println() }\n")
    assert with_main.directory != before            # an edited main is never served from an old build
    assert plain.directory == _tool(tmp_path).directory
    assert not with_main.present()
