"""Small catalog builders for the catalog tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.catalog import Finding, load
from tests.unit.helpers import write_docs

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"

# Documents that hold nothing (PyYAML drops them; opm reads each as a blob with no schema and refuses the catalog)
EMPTY_DOCUMENTS = [
    ("# licence header\n---\nschema: example.note\n", [1]),  # a comment before the first '---'
    ("schema: example.note\n---\n\n", [3]),                     # a '---' and then a blank line
    ("schema: example.note\n---\n---\n", [3]),
    ("---\n", [1]),
    ("\n", [1]),
    ("schema: example.note\n---\nnull  # nothing\n\n", [3]),
    ("~\n", [1]),
    ("---\nnullable: true\nschema: example.note\n", []),
    ("---\nschema: example.note\n---\n", []),  # a '---' that opens the stream, or ends it, is no document
    ("# note\nschema: example.note\n", []),
    ("", []),
]


def package(name="demo", default="stable", **extra):
    blob = {"schema": "olm.package", "name": name, **extra}
    if default:
        blob["defaultChannel"] = default
    return blob


def channel(name="stable", pkg="demo", entries=(("demo.v1.0.0", None),)):
    out = []
    for e in entries:
        if isinstance(e, dict):
            out.append(e)
        else:
            n, r = e
            out.append({"name": n, **({"replaces": r} if r else {})})
    return {"schema": "olm.channel", "package": pkg, "name": name, "entries": out}


def bundle(name="demo.v1.0.0", pkg="demo", version="1.0.0", props=None, **extra):
    if props is None:
        props = [{"type": "olm.package", "value": {"packageName": pkg, "version": version}}]
    return {"schema": "olm.bundle", "package": pkg, "name": name, "image": f"quay.io/demo/{name}:latest",
            "properties": props, **extra}


def findings(root: Path, *docs: Any, use_cache: bool = False) -> list[Finding]:
    if docs:
        write_docs(root, "catalog.yaml", *docs)
    return list(load(root, "test", "catalogs/test", use_cache=use_cache).findings)


def rules(found: list[Finding]) -> list[str]:
    return [f.rule for f in found]
