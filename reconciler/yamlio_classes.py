"""PyYAML's loader and dumper classes as ``reconciler.yamlio`` uses them.

Defined apart so that importing ``yamlio`` does not import PyYAML: it is
loaded on the first YAML text (``yamlio._pyyaml``); JSON never needs it.
"""

from __future__ import annotations


import yaml

from reconciler.yamlio import MAX_INT_DIGITS, _DuplicateKey, _LongNumber

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
        raise _LongNumber(len(text), node.start_mark.line + 1)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


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
                    raise _DuplicateKey(key, seen[key], line)
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
