"""The one place YAML and JSON documents are parsed and written.

Real operator content is messy: unquoted timestamps (which plain YAML loaders
turn into datetimes), duplicate mapping keys, multi-document files and
concatenated JSON streams. The loader here keeps scalars that look like
timestamps as strings, lets the last duplicate key win (as kubectl does), and
bounds the size of what it reads and the number of aliases it expands, so a
hostile file cannot exhaust memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import yaml

from reconciler.errors import InputError

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ALIAS_EXPANSION = 1_000_000  # nodes aliases may add beyond what the text itself spells out

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """SafeLoader without the timestamp and value resolvers.

    Timestamps stay strings (Kubernetes fields are strings); a plain ``=`` is
    YAML 1.1's obscure "value" type, which the safe constructor cannot build,
    so real files using ``=`` as text would otherwise fail to load.
    """


_DROPPED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}


def load_all(text: str, source: str) -> list[Any]:
    """Parse every document of a YAML (or JSON) text; empty documents are dropped."""
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"file is larger than {MAX_FILE_BYTES} bytes", path=source)
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            return list(_json_stream(text))
        except ValueError:
            pass  # not a JSON stream; YAML is a superset, try that
    try:
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and cmark:
            problem += f", {context} that starts at line {cmark.line + 1}, column {cmark.column + 1}"
        raise InputError(f"invalid YAML{where}: {problem}", path=source,
                         hint="fix the YAML syntax at that line") from None
    if "*" in text and "&" in text:
        _check_expansion(docs, len(text) + MAX_ALIAS_EXPANSION, source)
    return docs


def _check_expansion(docs: list[Any], limit: int, source: str) -> None:
    """Refuse documents whose aliases expand past ``limit`` nodes or refer to themselves.

    The loader shares one object per anchor, so a few dozen nested aliases
    load instantly yet expand to billions of nodes for whoever walks or
    re-serialises the result. Sizes are memoised per shared object, so this
    costs one pass over the distinct nodes.
    """
    sizes: dict[int, int] = {}
    for root in docs:
        kids = _children(root)
        if kids is None:
            continue
        active = {id(root)}
        stack: list[list[Any]] = [[root, iter(kids), 1]]
        while stack:
            frame = stack[-1]
            for child in frame[1]:
                grandkids = _children(child)
                if grandkids is None:
                    frame[2] += 1
                elif id(child) in sizes:
                    frame[2] += sizes[id(child)]
                elif id(child) in active:
                    raise InputError("a YAML alias refers to a node that contains it; refusing to expand",
                                     path=source)
                else:
                    active.add(id(child))
                    stack.append([child, iter(grandkids), 1])
                    break
            else:
                stack.pop()
                active.discard(id(frame[0]))
                sizes[id(frame[0])] = frame[2]
                if frame[2] > limit:
                    raise InputError(f"YAML aliases expand to more than {limit} nodes; refusing to expand "
                                     f"(possible alias bomb)", path=source)
                if stack:
                    stack[-1][2] += frame[2]


def _children(obj: Any) -> list[Any] | None:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set)):
        return list(obj)
    return None


def load_one(text: str, source: str) -> Any:
    docs = load_all(text, source)
    if len(docs) != 1:
        raise InputError(f"expected exactly one YAML document, found {len(docs)}", path=source)
    return docs[0]


def read_text(path: str | os.PathLike[str], display: str | None = None) -> str:
    """A file's UTF-8 text, size-bounded, naming it by ``display`` (a repository-relative path) in errors."""
    p = Path(path)
    name = display or str(p)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"file is {size} bytes, over the {MAX_FILE_BYTES}-byte limit", path=name)
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", path=name) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=name) from None


def read_all(path: str | os.PathLike[str], display: str | None = None) -> list[Any]:
    """Read and parse every document of a file."""
    name = display or str(path)
    return load_all(read_text(path, name), name)


def _json_stream(text: str) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    idx, end = 0, len(text)
    while True:
        while idx < end and text[idx].isspace():
            idx += 1
        if idx >= end:
            return
        obj, idx = decoder.raw_decode(text, idx)
        yield obj


def dump(obj: Any) -> str:
    """Deterministic block YAML: sorted keys, no aliases, unicode kept."""
    return yaml.dump(obj, Dumper=_NoAliasDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=100)


def dump_all(objs: list[Any]) -> str:
    return yaml.dump_all(objs, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100, explicit_start=True)


class _NoAliasDumper(_Dumper):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class _ReadableDumper(_NoAliasDumper):
    """Multi-line strings as literal blocks, so a diff of them is a diff of their lines."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_ReadableDumper.add_representer(str, _represent_str)


def dump_readable(obj: Any) -> str:
    """Like ``dump``, for people reading a diff: multi-line strings keep their lines."""
    return yaml.dump(obj, Dumper=_ReadableDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=100)
