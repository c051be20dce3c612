"""The cache key of a pinned Go tool: any input of the build gives a new directory."""

from __future__ import annotations

from reconciler.localcluster.gobuild import GoTool, pinned


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


def test_a_build_with_module_files_is_present_only_with_them(tmp_path, monkeypatch):
    """OLM's CRDs come with its binaries: a cache entry without them is not a build to reuse."""
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "go.mod").write_text("module example.com/peer\n\ngo 1.24\n\nrequire example.com/dep v1.2.3\n")
    (tmp_path / "go.sum").write_text("")
    tool = _tool(tmp_path, module_files=(("example.com/dep", "crds/*.yaml", "crds"),))
    assert tool.directory == _tool(tmp_path).directory
    tool.directory.mkdir(parents=True)
    (tool.directory / "peer").write_text("#!/bin/sh\n")
    (tool.directory / "peer").chmod(0o755)
    assert _tool(tmp_path).present() and not tool.present()
    tool.files_dir("crds").mkdir()
    assert not tool.present()
    (tool.files_dir("crds") / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    assert tool.present()
