"""Scenario files (docs/scenario-format.md): reading and validating YAML, writing scenarios back.

YAML is read by ``GuardedLoader``: PyYAML's safe loader that refuses what a scenario file never
needs and a hostile file uses — a key given twice in one mapping (PyYAML keeps the last one
silently), nesting deeper than ``MAX_DEPTH`` levels (PyYAML composes recursively) and aliases
that expand to more than ``MAX_ALIAS_EXPANSION`` values (an "anchor bomb": 1 KB of aliases can
stand for 10^30 values) or refer to themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import yaml
import yaml.cyaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from emulator.bounds import short_repr
from emulator.families import Family, family_of_document
from emulator.scenario import Scenario, ScenarioError, parse_scenario

MAX_DEPTH = 32  # a scenario file nests ~8 levels (expect.<variant>.at_step.<n>.replicas.<id>.log.<record>)
MAX_ALIAS_EXPANSION = 10_000  # values an alias may stand for, summed over a document's aliases
# Size: what a file may cost to decode (docs/scenario-format.md).  A decoded value (scalar, list,
# map) takes ~100 bytes; a node of GuardedLoader's tree ~400 (the node, two marks, its value).
MAX_FILE_BYTES = 64 << 20  # refused before reading: ~2,000,000 steps of a generated workload
MAX_VALUES = 12_000_000  # values of one document: ~1.2 GiB decoded (a 1,000,000-step workload has ~7.9 million)
MAX_GUARDED_NODES = 3_000_000  # nodes of a document GuardedLoader composes (anchors, tags, merge keys)


class _Refused(yaml.YAMLError):
    def __init__(self, mark, problem: str) -> None:
        super().__init__(problem)
        self.problem_mark, self.problem = mark, problem


class _CEvents:
    """Events from libyaml's C parser (when PyYAML has it), for the Python composer above: the
    composing stays in Python, where the guards are, and the scanning — most of the time of a
    large file — runs in C."""

    def __init__(self, stream) -> None:
        self._parser = yaml.cyaml.CParser(stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)

    def check_event(self, *choices):
        return self._parser.check_event(*choices)

    def peek_event(self):
        return self._parser.peek_event()

    def get_event(self):
        return self._parser.get_event()

    def dispose(self) -> None:
        self._parser.dispose()


_BASES = ((_CEvents, yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver)
          if getattr(yaml, "__with_libyaml__", False) else (yaml.SafeLoader,))


class GuardedLoader(*_BASES):
    """PyYAML's safe loading with duplicate keys, deep nesting and alias bombs refused."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values it stands for, once composed
        self._expanded = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                size = self._sizes.get(id(node))
                if size is None:
                    raise _Refused(event.start_mark, f"alias *{short_repr(event.anchor, 40)} refers to a value that contains it")
                self._expanded += size
                if self._expanded > MAX_ALIAS_EXPANSION:
                    raise _Refused(event.start_mark, f"aliases expand to more than {MAX_ALIAS_EXPANSION} values")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(self.peek_event().start_mark, f"nested deeper than {MAX_DEPTH} levels")
        self._nodes += 1
        if self._nodes > MAX_GUARDED_NODES:
            raise _Refused(self.peek_event().start_mark, f"more than {MAX_GUARDED_NODES:,} values in a file the guarded "
                                                          "loader reads (anchors, aliases, tags, merge keys, a key given "
                                                          f"twice, more than one document; otherwise the limit is {MAX_VALUES:,})")
        node = super().compose_node(parent, index)
        self._depth -= 1
        if isinstance(node, ScalarNode):
            size = 1
        elif isinstance(node, SequenceNode):
            size = 1 + sum(self._sizes[id(child)] for child in node.value)
        else:
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        self._sizes[id(node)] = size
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if first is not key_node:
                    raise _Refused(key_node.start_mark, f"key {short_repr(key, 40)} given twice in one mapping "
                                                        f"(first on line {first.start_mark.line + 1})")
        return super().construct_mapping(node, deep=deep)


class _Unusual(Exception):
    """Something ``_load_plain`` leaves to ``GuardedLoader`` (which then decodes the text from its start)."""


_PLAIN_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("null", "bool", "int", "float", "str", "timestamp"))
_STR_TAG = "tag:yaml.org,2002:str"
_UNDECODED = object()


def _load_plain(text: str) -> Any:
    """The data of a YAML text of plain data — scalars of the safe loader's implicit types,
    sequences, mappings with scalar keys met once, at most ``MAX_DEPTH`` levels, no tag, anchor
    or alias, one document — built straight from libyaml's events: no node tree (a node and its
    two marks per value of a 27 MB file are gigabytes), one pass in C and one loop in Python.

    The same values as ``GuardedLoader``'s (the same resolver and constructors decide each
    scalar); anything else raises ``_Unusual`` where the guarded loader, which gives the exact
    value or error, takes over; the parser's own errors (the text is not YAML) propagate.
    """
    parser = yaml.cyaml.CParser(text)
    resolver = yaml.resolver.Resolver()
    if resolver.yaml_path_resolvers or None in resolver.yaml_implicit_resolvers:
        parser.dispose()
        raise _Unusual("path or wildcard resolvers")
    constructor = yaml.constructor.SafeConstructor()
    constructors, first_chars, resolve = constructor.yaml_constructors, resolver.yaml_implicit_resolvers, resolver.resolve
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    starts = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    nothing = object()
    known: dict[str, Any] = {}  # plain scalar -> its value, for immutable values
    values = 0
    # open collections: [container, is_mapping, pending key (nothing when none)]
    stack: list[list[Any]] = []
    get = parser.get_event
    try:
        get()  # StreamStartEvent
        if isinstance(get(), yaml.StreamEndEvent):
            return None
        root: Any = nothing
        while True:
            event = get()
            kind = event.__class__
            if kind is scalar_event or kind in starts:
                values += 1
                if values > MAX_VALUES:
                    raise _Refused(event.start_mark, f"more than {MAX_VALUES:,} values (scalars, lists, maps) in one file")
            if kind is scalar_event:
                if event.anchor is not None or event.tag is not None or len(stack) >= MAX_DEPTH:
                    raise _Unusual("anchor, tag or depth")
                item = event.value
                if event.implicit[0] and (not item or item[0] in first_chars):
                    if item in known:
                        item = known[item]
                    elif item.isdigit() and item.isascii() and (item[0] != "0" or len(item) == 1) and len(item) < 19:
                        item = int(item)  # what the resolver and construct_yaml_int make of it, sooner
                    else:
                        tag = resolve(ScalarNode, item, (True, False))
                        value = item
                        if tag != _STR_TAG:
                            if tag not in _PLAIN_TAGS:
                                raise _Unusual(tag)
                            try:
                                value = constructors[tag](constructor, ScalarNode(tag, item))
                            except (ValueError, OverflowError, yaml.YAMLError):
                                raise _Unusual("scalar") from None
                        if len(known) < 4096 and isinstance(value, (str, bool, int, float, type(None))):
                            known[item] = value  # (words and numbers recur: step kinds, argument names, ids)
                        item = value
            elif kind in starts:
                if event.anchor is not None or event.tag is not None or len(stack) >= MAX_DEPTH:
                    raise _Unusual("anchor, tag or depth")
                mapping = kind is yaml.MappingStartEvent
                stack.append([{} if mapping else [], mapping, nothing])
                continue
            elif kind in ends:
                item = stack.pop()[0]
            elif kind is alias_event:
                raise _Unusual("alias")
            else:  # DocumentEndEvent
                break
            if not stack:
                root = item
                continue
            top = stack[-1]
            if not top[1]:
                top[0].append(item)
            elif top[2] is nothing:
                if isinstance(item, (list, dict)):
                    raise _Unusual("a collection as a key")
                if item in top[0]:
                    raise _Unusual("a key given twice")
                top[2] = item
            else:
                top[0][top[2]] = item
                top[2] = nothing
        if not isinstance(get(), yaml.StreamEndEvent):
            raise _Unusual("more than one document")
        return root
    finally:
        parser.dispose()


def parse_yaml_text(text: str, source: str, what: str = "file") -> Any:
    """Decode YAML text with ``GuardedLoader``; errors name ``source`` and the line, and raise ``ScenarioError``.

    Plain data (nearly every scenario) is built by ``_load_plain`` when PyYAML has libyaml: the
    same values, a fraction of the time and memory."""
    loader, data = None, _UNDECODED
    try:
        if _BASES[0] is _CEvents:
            try:
                data = _load_plain(text)
            except _Unusual:
                pass
        if data is _UNDECODED:
            loader = GuardedLoader(text)
            data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
            line = text.count("\n", 0, exc.position) + 1
            raise ScenarioError(f"{source}: invalid YAML: line {line}: character #x{exc.character:04x} "
                                f"is not allowed in YAML (control characters)") from None
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        problem = f"{context}, {problem}" if context and not isinstance(exc, _Refused) else problem
        raise ScenarioError(f"{source}: invalid YAML: {where}{str(problem).splitlines()[0][:200] if str(problem) else ''}") from None
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot convert (an int of 5,000 digits)
        raise ScenarioError(f"{source}: invalid YAML: {str(exc)[:200]}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        raise ScenarioError(f"{source}: the {what} is empty")
    return data


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """Decode a YAML file; errors name the file (and line) and raise ``ScenarioError``."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES and path.is_file():
            raise ScenarioError(f"{path}: {size:,} bytes; a {what} may have at most {MAX_FILE_BYTES:,} "
                                f"({MAX_FILE_BYTES >> 20} MiB: the memory a replay needs grows with it)")
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_yaml_text(text, str(path), what)


def _resolver(path: Path) -> Callable[[str], str]:
    """How a scenario file's paths (``initial_state``) resolve: relative to the file, to a directory."""
    def resolve(value: str) -> str:
        resolved = (path.parent / value).resolve()
        if not resolved.is_dir():
            raise ValueError(f"initial_state {short_repr(value)} is not a directory")
        return str(resolved)
    return resolve


def load_scenario(path: str | Path, data: Any = None) -> Scenario:
    """Read and validate one partition scenario file; raises ``ScenarioError`` naming the file.
    ``data``: the file's decoded document when the caller has read it already."""
    path = Path(path)
    if data is None:
        data = read_yaml(path)
    return parse_scenario(data, source=str(path), resolve_initial_state=_resolver(path))


def load_family_scenario(path: str | Path) -> tuple[Family, Any]:
    """A scenario file of any protocol family (``emulator.families.family_of_document``: a
    metadata-quorum scenario when it names ``voters``) and its family; raises ``ScenarioError``
    naming the file."""
    data = read_yaml(path)  # once: a large file's decoding is most of its replay
    family = family_of_document(data)
    return family, family.parse_file(data, str(path), _resolver(Path(path)))


def load_any_scenario(path: str | Path) -> Any:
    """A scenario file of any protocol family (``load_family_scenario`` without the family)."""
    return load_family_scenario(path)[1]


def write_scenario(data: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))
    return path
