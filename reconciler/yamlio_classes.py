"""PyYAML's loader and dumper classes as ``reconciler.yamlio`` uses them.

Defined apart so that importing ``yamlio`` does not import PyYAML: it is
loaded on the first YAML text (``yamlio._pyyaml``); JSON never needs it.
"""

from __future__ import annotations


import yaml

from reconciler.yamlbounds import MAX_INT_DIGITS, DuplicateKey, LongNumber

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


class _ReadableDumper(_NoAliasDumper):
    """Multi-line strings as literal blocks, so a diff of them is a diff of their lines."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_ReadableDumper.add_representer(str, _represent_str)
