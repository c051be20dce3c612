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


def test_a_build_from_before_a_module_file_was_added_gets_the_file_not_a_rebuild(tmp_path, monkeypatch):
    """A data file added to ``module_files`` later (OLM's quickstart beside its CRDs) is copied into the cached
    build from the module cache; the binaries are not built again (`go build` here would fail)."""
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path / "cache"))
    module = tmp_path / "module"
    (module / "deploy").mkdir(parents=True)
    (module / "deploy" / "olm.yaml").write_text("kind: ClusterServiceVersion\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(f"#!/bin/sh\n[ \"$1 $2\" = \"list -m\" ] && echo {module} && exit 0\n"
                                "echo 'no build expected' >&2; exit 1\n")
    (bin_dir / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    (tmp_path / "go.mod").write_text("module example.com/peer\n\ngo 1.24\n\nrequire example.com/dep v1.2.3\n")
    (tmp_path / "go.sum").write_text("")
    tool = _tool(tmp_path, module_files=(("example.com/dep", "deploy/olm.yaml", "quickstart"),))
    tool.directory.mkdir(parents=True)
    (tool.directory / "peer").write_text("#!/bin/sh\n")
    (tool.directory / "peer").chmod(0o755)
    assert not tool.present()
    assert tool.ensure(log=lambda _: None) == {"peer": tool.directory / "peer"}
    assert (tool.files_dir("quickstart") / "olm.yaml").read_text() == "kind: ClusterServiceVersion\n"
    assert tool.present()
