"""Parsing and writing YAML and JSON documents.

Real operator content is messy: unquoted timestamps (which plain YAML loaders
turn into datetimes), duplicate mapping keys, multi-document files and
concatenated JSON streams. The loader here keeps scalars that look like
timestamps as strings, and lets the last duplicate key win in content the
reconciler did not write (published bundles carry duplicates, and OLM takes
the last); ``strict=True`` refuses duplicates instead, as kubectl's strict
decoding does, for what a user writes (declarations, settings, the lockfile,
plain manifests).

Everything read here is hostile input, so every cost is bounded before it is
paid: only regular files are read (never a FIFO, a device or a socket), their
size is capped, nesting depth is checked before the C parser recurses (it
would overflow the C stack and kill the process), and the bytes that aliases
add when expanded are budgeted (a few aliases of a large scalar or of nested
lists would otherwise expand to gigabytes in whoever walks or re-serialises
the result).
"""

from __future__ import annotations

import os
import re
import stat

from reconciler.errors import InputError
from reconciler.yamlio.bounds import MAX_INT_DIGITS, DuplicateKey, LongNumber

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any, Iterator

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ALIAS_EXPANSION = 8_000_000  # nodes plus scalar characters aliases may add beyond the text itself
MAX_DEPTH = 128  # nesting of mappings and lists; real content stays under 40 (CRD schemas)
_SAFE_COMPOSE_DEPTH = 2000  # the C composer recurses per level: above this, measure before composing
_PYYAML = ("yaml", "_Loader", "_GoLoader", "_StrictLoader", "_NoAliasDumper", "_ReadableDumper")


def import_pyyaml() -> None:
    """Import PyYAML and the loader and dumper classes (``reconciler.yamlio.classes``) on first use.

    PyYAML's import is a large share of a short command's start-up (its reader
    compiles a big regular expression), and a JSON text never needs it.
    """
    global yaml, _Loader, _GoLoader, _StrictLoader, _NoAliasDumper, _ReadableDumper
    if "yaml" in globals():
        return
    from reconciler.yamlio import classes as c

    yaml, _Loader, _GoLoader, _StrictLoader, _NoAliasDumper, _ReadableDumper = (
        c.yaml, c._Loader, c._GoLoader, c._StrictLoader, c._NoAliasDumper, c._ReadableDumper)


def __getattr__(name: str) -> Any:
    """``codec._Loader`` and the others, for code outside this module: imported on first access."""
    if name in _PYYAML:
        import_pyyaml()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _json_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise LongNumber(len(text), None)
    return int(text)


def _json_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def _json_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999999: JSON has no infinity, and nothing can write it back
        raise _NotJson(f"the number {text[:40]} is too large for a float")
    return value


# A \uD800-\uDFFF escape that is not half of a pair: Python's decoder keeps it as a lone surrogate, which no
# UTF-8 output (a report, the lockfile, a request to the API server) can encode.
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _find_lone_surrogate(text: str) -> re.Match[str] | None:
    """An escape of half a surrogate pair with no other half, looked for only where a ``\\uD`` escape
    starts: the expression run over a whole large catalog costs a second per 50 MB."""
    for marker in ("\\ud", "\\uD"):
        at = text.find(marker)
        while at != -1:
            if found := _LONE_SURROGATE.match(text, at):
                return found
            at = text.find(marker, at + 1)
    return None


def _check_surrogates(text: str, docs: list[Any], source: str) -> None:
    """Refuse a string decoded from JSON that holds half of a UTF-16 surrogate pair."""
    import json

    try:
        json.dumps(docs, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        found = _find_lone_surrogate(text)
        where = f" (line {text.count(chr(10), 0, found.start()) + 1}: {found.group()})" if found else ""
        raise InputError(f"invalid JSON: a string holds an unpaired UTF-16 surrogate{where}", path=source,
                         hint="a \\uD800-\\uDFFF escape must be half of a pair; write the character itself") from None


class _NotJson(Exception):
    pass


def _long_number_error(exc: LongNumber, source: str) -> InputError:
    where = f" (line {exc.line})" if exc.line else ""
    return InputError(f"a number of {exc.digits} digits{where}; at most {MAX_INT_DIGITS} are read", path=source,
                      hint="write the number as a string if it is meant as text")


def _duplicate_error(exc: DuplicateKey, source: str) -> InputError:
    where = f" (line {exc.line})" if exc.line else ""
    first = f"; it is first set on line {exc.first}" if exc.first else ""
    return InputError(f"duplicate key {exc.key!r}{where}{first}", path=source,
                      hint="a key may appear once per mapping; remove one of them (which one wins is ambiguous)")


def _syntax_hint(text: str, line: int | None, start: Any) -> str:
    """What to write instead, for the mistakes a YAML parser names least clearly."""
    lines = text.splitlines()
    at = lines[line] if line is not None and line < len(lines) else ""
    begun = lines[start.line] if start is not None and start.line < len(lines) else ""
    if "\t" in at[:len(at) - len(at.lstrip(" \t"))] or (begun and "\t" in begun[:start.column + 1]):
        return f"YAML indents with spaces, never tabs: replace the tab on line {(line or 0) + 1} with spaces"
    if start is not None and begun[start.column:start.column + 1] in (">", "|") \
            and begun[start.column + 1:start.column + 2] not in ("", "-", "+", " ") and \
            not begun[start.column + 1].isdigit():
        value = begun[start.column:].strip()
        return (f"a value that starts with '{begun[start.column]}' begins a block scalar; quote it: "
                f"\"{value}\"")
    if start is not None and begun[start.column:start.column + 1] in ("{", "["):
        closing = "}" if begun[start.column] == "{" else "]"
        return (f"the '{begun[start.column]}' at line {start.line + 1}, column {start.column + 1} is not closed "
                f"where the next entry begins: check its '{closing}' and the commas between its entries")
    if "-|" in at or "-|" in begun or "-|" in "".join(lines[max(0, (line or 0) - 2):(line or 0) + 1]):
        return "'-|' is not a block scalar indicator; write '|-' (a literal block without its final newline)"
    return "fix the YAML syntax at that line; quote a value that holds ': ' or starts with a special character"


def _json_error(text: str) -> str | None:
    """Where a JSON stream (one or more documents) first goes wrong, as "(line L, column C): what"."""
    import json

    decoder, at = json.JSONDecoder(), 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at >= len(text):
            return None
        try:
            _, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            return f"(line {exc.lineno}, column {exc.colno}): {exc.msg}"


def load_all(text: str, source: str, *, strict: bool = False, go: bool = False) -> list[Any]:
    """Parse every document of a YAML (or JSON) text; empty documents are dropped.

    ``strict`` refuses duplicate keys instead of letting the last one win.
    ``go`` resolves plain scalars as Go's YAML 1.1 decoder does (``y`` is
    true, ``1e5`` a number, ``1:20`` text: ``yamlio.classes._GoLoader``), for
    content whose meaning is opm's (catalogs).
    """
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"file is larger than {MAX_FILE_BYTES} bytes", path=source)
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            spans = list(_json_stream(text, strict))
        except RecursionError:
            raise _too_deep(source, None) from None
        except DuplicateKey as exc:
            raise _duplicate_error(exc, source) from None
        except LongNumber as exc:
            raise _long_number_error(exc, source) from None
        except _NotJson as exc:
            raise InputError(f"invalid JSON: {exc}", path=source,
                             hint="JSON has no NaN or Infinity; write the value as a string") from None
        except ValueError:
            pass  # not a JSON stream; YAML is a superset, try that
        else:
            # Bound each document by its own brackets: the whole stream's count passes the limit in any
            # catalog of a few blobs, and walking every document is most of a large JSON catalog's load.
            for doc, start, end in spans:
                if text.count("[", start, end) + text.count("{", start, end) > MAX_DEPTH:
                    _walk_depth([doc], source)
            if _find_lone_surrogate(text):
                _check_surrogates(text, [doc for doc, _, _ in spans], source)
            return [doc for doc, _, _ in spans]
    import_pyyaml()
    if not strict:
        try:
            built, aliased = _build(text, source, go)
        except _Unusual:
            pass  # the composer and constructor below build it, or say what is wrong with it
        except LongNumber as exc:
            raise _long_number_error(exc, source) from None
        else:
            docs = [d for d in built if d is not None]
            if aliased:  # a cycle or an alias bomb first, then the depth that aliases can add
                _check_expansion(docs, len(text) + MAX_ALIAS_EXPANSION, source)
                _walk_depth(docs, source)
            return docs
    if _depth_bound(text) > _SAFE_COMPOSE_DEPTH:
        _check_event_depth(text, source)
    try:
        loader = _StrictLoader if strict else _GoLoader if go else _Loader
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except DuplicateKey as exc:
        raise _duplicate_error(exc, source) from None
    except LongNumber as exc:
        raise _long_number_error(exc, source) from None
    except yaml.YAMLError as exc:
        if _parser_too_deep(exc):
            raise _too_deep(source, _error_line(exc)) from None
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if source.lower().endswith(".json") and text.lstrip()[:1] in ("{", "[") and \
                (json_error := _json_error(text)):
            raise InputError(f"invalid JSON {json_error}", path=source,
                             hint="fix the JSON syntax there (a .json file is read as JSON first, then as YAML, "
                                  "which fails too)") from None
        if context and cmark:
            problem += f", {context} that starts at line {cmark.line + 1}, column {cmark.column + 1}"
        raise InputError(f"invalid YAML{where}: {problem}", path=source,
                         hint=_syntax_hint(text, mark.line if mark else None, cmark)) from None
    _check_depth(docs, text, source)
    if "*" in text and "&" in text:
        _check_expansion(docs, len(text) + MAX_ALIAS_EXPANSION, source)
    return docs


_BLOCK_PREFIX = re.compile(r"(?m)^[ \t?:-]*")


def _depth_bound(text: str) -> int:
    """A cheap upper bound of a YAML text's nesting depth.

    Flow collections nest only through ``[`` and ``{``; block collections only
    by indenting further (or by ``- ``/``? `` indicators, which also move the
    column), plus one sequence per mapping level written at the mapping's own
    column. So depth is at most the bracket count plus twice the longest line
    prefix of blanks and indicators.
    """
    prefix = max((len(m) for m in _BLOCK_PREFIX.findall(text)), default=0)
    return text.count("[") + text.count("{") + 2 * (prefix + 1)


def _check_event_depth(text: str, source: str) -> None:
    """Measure nesting on the parser's event stream (iterative in C) and stop at the limit, before composing."""
    import_pyyaml()
    depth = 0
    opens = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    closes = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, opens):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(source, event.start_mark.line + 1)
            elif isinstance(event, closes):
                depth -= 1
    except yaml.YAMLError as exc:
        if _parser_too_deep(exc):
            raise _too_deep(source, _error_line(exc)) from None
        return  # the real parse reports it with its line


def _parser_too_deep(exc: Exception) -> bool:
    """Whether the parser refused the text for its nesting (libyaml has a limit of its own since 0.2.5/PyYAML 6.0.4).

    Its scanner reads ahead through flow collections, so it may notice before
    the event count reaches ``MAX_DEPTH``; either way the user gets one message.
    """
    return "nesting depth" in str(getattr(exc, "problem", None) or "")


def _error_line(exc: Exception) -> int | None:
    mark = getattr(exc, "problem_mark", None)
    return mark.line + 1 if mark else None


def _too_deep(source: str, line: int | None) -> InputError:
    where = f" (line {line})" if line else ""
    return InputError(f"mappings and lists are nested more than {MAX_DEPTH} levels deep{where}; refusing to parse",
                      path=source, hint="no Kubernetes object or catalog blob is nested this deeply")


def _check_depth(docs: list[Any], text: str, source: str) -> None:
    """Refuse parsed documents nested deeper than ``MAX_DEPTH`` (skipped when the text cannot be that deep)."""
    if _depth_bound(text) <= MAX_DEPTH:
        return
    _walk_depth(docs, source)


def _walk_depth(docs: list[Any], source: str) -> None:
    for root in docs:
        stack = [(root, 1)]
        seen: dict[int, int] = {}  # a shared (aliased) node is walked again only when met deeper
        while stack:
            obj, depth = stack.pop()
            if isinstance(obj, dict):
                kids: Any = obj.values()
            elif isinstance(obj, list):
                kids = obj
            else:
                continue
            if depth > MAX_DEPTH:
                raise _too_deep(source, None)
            if seen.get(id(obj), 0) >= depth:
                continue
            seen[id(obj)] = depth
            stack.extend((k, depth + 1) for k in kids if isinstance(k, (dict, list)))


def _check_expansion(docs: list[Any], limit: int, source: str) -> None:
    """Refuse documents whose aliases expand past ``limit`` or refer to themselves.

    The loader shares one object per anchor, so a few dozen nested aliases
    load instantly yet expand to billions of nodes for whoever walks or
    re-serialises the result; one alias of a large scalar repeated a few
    hundred times does the same in bytes. The size counted is a node for each
    collection and, for each scalar, its length in characters. Sizes are
    memoised per shared object, so this costs one pass over the distinct nodes.
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
                    frame[2] += 1 + len(child) if isinstance(child, str) else 1
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
                    raise InputError(f"YAML aliases expand to more than {limit} nodes and characters; "
                                     f"refusing to expand (possible alias bomb)", path=source,
                                     hint="write the repeated content out, or repeat it fewer times")
                if stack:
                    stack[-1][2] += frame[2]


class _Unusual(Exception):
    """Content the event builder leaves to PyYAML's composer and constructor (and their error messages)."""


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"


def _build(text: str, source: str, go: bool = False) -> tuple[list[Any], bool]:
    """Documents built straight from the C parser's event stream; and whether any alias was met.

    The same values as PyYAML's safe composer and constructor (with the
    resolvers of ``_Loader``, or ``_GoLoader`` with ``go``), in one iterative pass: about three times
    faster on large catalogs, and nesting is counted as it is read, so
    ``MAX_DEPTH`` stops a deep document before anything recursive sees it.
    Anything uncommon (merge keys, explicit collection tags, a collection as
    a key, duplicate or unknown anchors, a syntax error) raises ``_Unusual``
    and is left to the general path, which builds it or reports it.
    """
    import_pyyaml()
    cls = _GoLoader if go else _Loader
    loader = cls(text)
    resolvers = cls.yaml_implicit_resolvers
    wildcard = resolvers.get(None, [])
    constructors = cls.yaml_constructors
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    map_start, seq_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    docs: list[Any] = []
    anchors: dict[str, Any] = {}
    # The open collection (None at a document's top), whether it is a mapping, the key read for the value to
    # come and whether there is one; the enclosing collections' as a stack of the same four.
    top: Any = None
    is_map, key, keyed = False, None, False
    stack: list[tuple[Any, bool, Any, bool]] = []
    root: Any = None
    aliased = False
    plain: dict[str, Any] = {}  # plain scalar text -> its value: keys and values repeat, and values are immutable
    get_event = loader.get_event
    try:
        while (event := get_event()) is not None:
            kind = type(event)
            if kind is scalar_event:   # most events: tested first
                tag, obj = event.tag, event.value
                if tag is None or tag == "!":
                    if event.implicit[0]:  # plain: the implicit resolvers decide (null, bool, int, float)
                        try:
                            obj = plain[obj]
                        except KeyError:
                            plain[obj] = obj = _plain(loader, event, resolvers, wildcard, constructors)
                elif tag != _STR:
                    make = constructors.get(tag)
                    if tag == _MERGE or make is None:
                        raise _Unusual
                    obj = make(loader, yaml.ScalarNode(tag, obj, event.start_mark, event.end_mark, event.style))
                anchor, opened = event.anchor, False
            elif kind is map_start or kind is seq_start:
                if event.tag not in (None, "!", _MAP if kind is map_start else _SEQ):
                    raise _Unusual
                obj, anchor, opened = ({} if kind is map_start else []), event.anchor, True
            elif kind in ends:
                top, is_map, key, keyed = stack.pop()
                continue
            elif kind is alias_event:
                if event.anchor not in anchors:
                    raise _Unusual
                obj, anchor, opened, aliased = anchors[event.anchor], None, False, True
            elif kind is yaml.DocumentStartEvent:
                anchors = {}
                continue
            elif kind is yaml.DocumentEndEvent:
                docs.append(root)
                root = None
                continue
            else:  # the stream's start and end
                continue
            if anchor is not None:
                if anchor in anchors:
                    raise _Unusual
                anchors[anchor] = obj
            if top is None:
                root = obj
            elif not is_map:
                top.append(obj)
            elif keyed:
                top[key] = obj
                keyed = False
            else:   # a key: a scalar that hashes (a collection as a key is left to the general path)
                if type(obj) is not str:
                    if isinstance(obj, (dict, list)):
                        raise _Unusual
                    try:
                        hash(obj)
                    except TypeError:
                        raise _Unusual from None
                key, keyed = obj, True
            if opened:
                stack.append((top, is_map, key, keyed))
                if len(stack) > MAX_DEPTH:
                    raise _too_deep(source, event.start_mark.line + 1)
                top, is_map, key, keyed = obj, kind is map_start, None, False
    except yaml.YAMLError:
        raise _Unusual from None
    finally:
        loader.dispose()
    return docs, aliased


def _plain(loader: Any, event: Any, resolvers: dict, wildcard: list, constructors: dict) -> Any:
    """The value of a plain scalar: its text, or what the first matching implicit resolver's tag constructs."""
    text = event.value
    for tag, rx in [*resolvers.get(text[0] if text else "", ()), *wildcard]:
        if rx.match(text):
            break
    else:
        return text
    make = constructors.get(tag)
    if tag == _MERGE or make is None:
        raise _Unusual
    return make(loader, yaml.ScalarNode(tag, text, event.start_mark, event.end_mark, event.style))


def _children(obj: Any) -> list[Any] | None:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set)):
        return list(obj)
    return None


def load_one(text: str, source: str, *, strict: bool = False, go: bool = False) -> Any:
    docs = load_all(text, source, strict=strict, go=go)
    if len(docs) != 1:
        raise InputError(f"expected exactly one YAML document, found {len(docs)}", path=source)
    return docs[0]


def read_text(path: str | os.PathLike[str], display: str | None = None) -> str:
    """A file's UTF-8 text, size-bounded, naming it by ``display`` (a repository-relative path) in errors.

    Only a regular file is read: the file is opened without blocking and
    checked on the open descriptor, so a FIFO (which would block forever), a
    device such as ``/dev/zero`` (which never ends) or a socket is refused,
    even when reached through a symbolic link.
    """
    name = display or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 6:  # ENXIO: a socket, or a FIFO with no writer on some systems
            raise InputError("not a regular file (a socket or a pipe); refusing to read it", path=name,
                             hint="replace it with a regular file") from None
        raise InputError(f"cannot read file: {exc.strerror}", path=name) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file ({_file_type(info.st_mode)}); refusing to read it", path=name,
                             hint="replace it with a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise InputError(f"file is {info.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit", path=name)
        want = min(info.st_size, MAX_FILE_BYTES) + 1   # a read of the bound would allocate the bound for each file
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(want)
            if len(data) == want:   # it grew since fstat: read on, up to the bound
                data += fh.read(MAX_FILE_BYTES + 1 - len(data))
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"file is over the {MAX_FILE_BYTES}-byte limit", path=name)
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", path=name) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=name) from None
    finally:
        os.close(fd)


def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def read_all(path: str | os.PathLike[str], display: str | None = None, *, strict: bool = False,
             go: bool = False) -> list[Any]:
    """Read and parse every document of a file."""
    name = display or str(path)
    return load_all(read_text(path, name), name, strict=strict, go=go)


def _json_pairs_strict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key, 0, 0)
        out[key] = value
    return out


def _json_stream(text: str, strict: bool = False) -> Iterator[tuple[Any, int, int]]:
    """Each JSON value of a stream of them, with where its text starts and ends."""
    import json  # here, not at the top: a YAML catalog's load never needs it

    decoder = json.JSONDecoder(object_pairs_hook=_json_pairs_strict if strict else None, parse_int=_json_int,
                               parse_float=_json_float, parse_constant=_json_constant)
    idx, end = 0, len(text)
    while True:
        while idx < end and text[idx].isspace():
            idx += 1
        if idx >= end:
            return
        obj, stop = decoder.raw_decode(text, idx)
        yield obj, idx, stop
        idx = stop


def dump(obj: Any) -> str:
    """Deterministic block YAML: sorted keys, no aliases, unicode kept."""
    import_pyyaml()
    return yaml.dump(obj, Dumper=_NoAliasDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=100)


def dump_record(obj: Any) -> str:
    """YAML for a file people review line by line: keys in the order given, a list of scalars on one line."""
    import_pyyaml()
    return yaml.dump(obj, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=None, width=120)


def dump_all(objs: list[Any]) -> str:
    import_pyyaml()
    return yaml.dump_all(objs, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100, explicit_start=True)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write a repository file whole or not at all (a reader never sees half of it)."""
    target = os.fspath(path)
    tmp = f"{target}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)


def dump_json(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dump_readable(obj: Any) -> str:
    """Like ``dump``, for people reading a diff: multi-line strings keep their lines."""
    import_pyyaml()
    return yaml.dump(obj, Dumper=_ReadableDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=100)
