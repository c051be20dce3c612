"""PyYAML's loader and dumper classes as ``reconciler.yamlio`` uses them.

Defined apart so that importing ``yamlio`` does not import PyYAML: it is
loaded on the first YAML text (``codec.import_pyyaml``); JSON never needs it.
"""

from __future__ import annotations

import re

import yaml

from reconciler.yamlio.bounds import MAX_INT_DIGITS, DuplicateKey, LongNumber

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any

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


class _GoLoader(_Loader):  # type: ignore[misc,valid-type]
    """Plain scalars resolved as Go's YAML 1.1 decoder resolves them (opm, kubectl: sigs.k8s.io/yaml, yaml.v2).

    PyYAML and Go both read YAML 1.1, but disagree on a few plain scalars:
    Go reads ``y``, ``Y``, ``n`` and ``N`` as booleans (PyYAML: strings),
    ``1e5``, ``12e03``, ``1.e3`` and ``09`` as floats and ``0o17`` as an
    integer (PyYAML: strings), and ``1:20`` as a string (PyYAML: 80, base 60).
    Catalogs are read this way, so a catalog means here what it means to opm.
    """


class _GoNumber:
    """A resolver pattern matched as Go matches a number: underscores anywhere are dropped first."""

    def __init__(self, pattern: str) -> None:
        self.rx = re.compile(pattern)

    def match(self, text: str) -> Any:
        return self.rx.match(text.replace("_", ""))


_BOOL, _NULL, _INT, _FLOAT = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:int",
                              "tag:yaml.org,2002:float")
_GO_INT = _GoNumber(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")  # ParseInt, base 0
_GO_FLOAT = _GoNumber(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")   # yaml.v2's yamlStyleFloat
_GO_WORDS = {_BOOL: "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF",
             _NULL: "~ null Null NULL", _FLOAT: ".inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF .nan .NaN .NAN"}


def _go_resolvers() -> dict[Any, list[tuple[str, Any]]]:
    table: dict[Any, list[tuple[str, Any]]] = {"": [(_NULL, re.compile(r"$"))]}
    for tag, words in _GO_WORDS.items():
        pattern = re.compile("(?:" + "|".join(re.escape(w) for w in words.split()) + ")$")
        for first in sorted({w[0] for w in words.split()}):
            table.setdefault(first, []).append((tag, pattern))
    for first in "+-0123456789.":
        table.setdefault(first, []).extend([(_INT, _GO_INT), (_FLOAT, _GO_FLOAT)])
    return table


def _construct_go_int(loader: Any, node: Any) -> int:
    text = loader.construct_scalar(node).replace("_", "")
    if len(text) > MAX_INT_DIGITS:
        raise LongNumber(len(text), node.start_mark.line + 1)
    digits = text.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "01234567":
        return int(text, 8)   # Go reads a leading 0 as octal, as YAML 1.1 does
    return int(text, 0)


def _construct_go_float(loader: Any, node: Any) -> float:
    text = loader.construct_scalar(node)
    if text.lstrip("+-").lower() in (".inf", ".nan"):
        return yaml.SafeLoader.construct_yaml_float(loader, node)
    return float(text.replace("_", ""))


def _construct_go_bool(loader: Any, node: Any) -> bool:
    return loader.construct_scalar(node).lower() in ("y", "yes", "true", "on")


_GoLoader.yaml_implicit_resolvers = _go_resolvers()
_GoLoader.add_constructor(_BOOL, _construct_go_bool)
_GoLoader.add_constructor(_INT, _construct_go_int)
_GoLoader.add_constructor(_FLOAT, _construct_go_float)


def _construct_int(loader: Any, node: Any) -> int:
    text = loader.construct_scalar(node)
    if len(text) > MAX_INT_DIGITS:
        raise LongNumber(len(text), node.start_mark.line + 1)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


# Explicit tags whose values JSON cannot hold: everything read is Kubernetes content, sent and stored as JSON,
# so bytes, a set, pairs or a datetime would fail where they are written out (a request, the lockfile, a
# report) instead of where they were read. Real content never uses them.
_NOT_JSON = {"binary": ("bytes", "write the base64 text as a plain string"),
             "set": ("a set", "write a mapping or a list"),
             "omap": ("ordered pairs", "write a mapping"),
             "pairs": ("pairs", "write a mapping or a list"),
             "timestamp": ("a date and time", "write the time as a string")}


def _refuse_tag(loader: Any, node: Any) -> Any:
    name = node.tag.rpartition(":")[2]
    what, instead = _NOT_JSON[name]
    raise yaml.constructor.ConstructorError(
        None, None, f"the tag !!{name} makes {what}, which Kubernetes content (JSON) cannot hold; {instead}",
        node.start_mark)


for _name in _NOT_JSON:
    _Loader.add_constructor(f"tag:yaml.org,2002:{_name}", _refuse_tag)


class _StrictLoader(_Loader):  # type: ignore[misc,valid-type]
    """The loader that refuses a key written twice in one mapping, naming it and its line."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise DuplicateKey(key, seen[key], line)
                seen[key] = line
        return super().construct_mapping(node, deep)


class _NoAliasDumper(_Dumper):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


_NoAliasDumper.add_multi_representer(dict, _Dumper.represent_dict)  # a dict subclass is written as a mapping


# A string Go's YAML decoder would read as another type (y, 1e5, 0o17) is written quoted, so what is written means
# the same to opm and kubectl as to PyYAML.
_NoAliasDumper.yaml_implicit_resolvers = {
    first: [*_Dumper.yaml_implicit_resolvers.get(first, ()), *_GoLoader.yaml_implicit_resolvers.get(first, ())]
    for first in {*_Dumper.yaml_implicit_resolvers, *_GoLoader.yaml_implicit_resolvers}}


class _ReadableDumper(_NoAliasDumper):
    """Multi-line strings as literal blocks, so a diff of them is a diff of their lines."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_ReadableDumper.add_representer(str, _represent_str)
