"""Safe YAML loading that remembers where every key is, and deep merge that keeps those marks.

Mappings load as :class:`YMap` (a ``dict`` whose ``marks`` give the 1-based line/column of every
key) and sequences as :class:`YList` (marks per item). Only the YAML core schema is accepted (no
Python objects); aliases are bounded so an alias bomb fails fast instead of eating memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import inputs

Mark = tuple[int, int]  # 1-based line, column

MAX_ALIASES = 200
MAX_NODES = 200_000


class RecipeError(ValueError):
    """A recipe (or YAML) that cannot be read; carries the position for ``path:line:col:``."""

    def __init__(self, msg: str, line: int | None = None, col: int | None = None) -> None:
        super().__init__(msg)
        self.line = line
        self.col = col
        self.violations: list[tuple[str, int | None, int | None]] = []   # every schema error, when known


class YMap(dict[str, Any]):
    """A mapping that knows the position of each key and of itself."""

    def __init__(self, *args: Any, mark: Mark | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.mark: Mark | None = mark
        self.marks: dict[str, Mark] = {}


class YList(list[Any]):
    """A sequence that knows the position of each item and of itself."""

    def __init__(self, *args: Any, mark: Mark | None = None) -> None:
        super().__init__(*args)
        self.mark: Mark | None = mark
        self.marks: list[Mark | None] = []


def _mark(node: Node) -> Mark:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts aliases and builds YMap/YList with marks."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_count = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases (alias bomb?)", event.start_mark)
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


def _construct_map(loader: _Loader, node: MappingNode) -> YMap:
    loader.flatten_mapping(node)
    out = YMap(mark=_mark(node))
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping keys must be scalars", key_node.start_mark)
        key = str(key) if not isinstance(key, str) else key
        out[key] = loader.construct_object(value_node, deep=True)
        out.marks[key] = _mark(key_node)
    return out


def _construct_seq(loader: _Loader, node: SequenceNode) -> YList:
    out = YList(mark=_mark(node))
    for item in node.value:
        out.append(loader.construct_object(item, deep=True))
        out.marks.append(_mark(item))
    return out


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)  # type: ignore[arg-type]
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)  # type: ignore[arg-type]


def _expanded_size(node: Node, memo: dict[int, int]) -> int:
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # cycles count once
    if isinstance(node, ScalarNode):
        size = 1
    elif isinstance(node, SequenceNode):
        size = 1 + sum(_expanded_size(n, memo) for n in node.value)
    else:
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    memo[key] = size
    return size


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely; raises :class:`RecipeError` with the position on failure."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # control characters (NUL, ...) are rejected before parsing
        before = text[:exc.position]
        raise RecipeError("unacceptable control character (NUL or similar): YAML does not allow it",
                          before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_NODES:
            raise RecipeError(f"document expands to {size} nodes (limit {MAX_NODES}); alias bomb?", 1, 1)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        msg = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise RecipeError(msg, mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise RecipeError(str(exc)) from None
    except RecursionError:
        raise RecipeError("document nests too deeply") from None
    finally:
        loader.dispose()


def load_yaml_file(path: Path) -> Any:
    try:
        text = inputs.read_text(path, errors="strict")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"not UTF-8 text ({exc.reason})", 1, 1) from None
    return load_yaml(text)


# --- navigation ------------------------------------------------------------------------------------

def mark_of(root: Any, path: tuple[str | int, ...]) -> Mark | None:
    """Position of the deepest existing key along ``path`` (the key itself, else its parent)."""
    best: Mark | None = getattr(root, "mark", None)
    node = root
    for part in path:
        if isinstance(node, YMap) and isinstance(part, str) and part in node:
            best = node.marks.get(part, best)
            node = node[part]
        elif isinstance(node, YList) and isinstance(part, int) and 0 <= part < len(node):
            best = node.marks[part] or best
            node = node[part]
        else:
            break
    return best


def get_path(root: Any, path: tuple[str | int, ...], default: Any = None) -> Any:
    node = root
    for part in path:
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            node = node[part]
        else:
            return default
    return node


# --- deep merge (srtctl override semantics) ------------------------------------------------------

def deep_merge(base: Any, over: Any) -> Any:
    """Scalars replace, mappings merge, lists replace, ``null`` deletes the key. Marks follow values."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy_tree(over)
    out = YMap(mark=getattr(over, "mark", None) or getattr(base, "mark", None))
    for key, value in base.items():
        out[key] = copy_tree(value)
        if isinstance(base, YMap) and key in base.marks:
            out.marks[key] = base.marks[key]
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
            out.marks.pop(key, None)
            continue
        out[key] = deep_merge(out[key], value) if key in out else copy_tree(value)
        if isinstance(over, YMap) and key in over.marks:
            out.marks[key] = over.marks[key]
    return out


def copy_tree(value: Any) -> Any:
    """A deep copy that keeps YMap/YList marks."""
    if isinstance(value, dict):
        out = YMap(mark=getattr(value, "mark", None))
        for key, item in value.items():
            out[key] = copy_tree(item)
            if isinstance(value, YMap) and key in value.marks:
                out.marks[key] = value.marks[key]
        return out
    if isinstance(value, list):
        lst = YList((copy_tree(v) for v in value), mark=getattr(value, "mark", None))
        lst.marks = list(value.marks) if isinstance(value, YList) else [None] * len(value)
        return lst
    return value


def walk_strings(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string leaf with its key path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk_strings(item, (*path, key))
    elif isinstance(value, list):
        for idx, item in enumerate(value):
            yield from walk_strings(item, (*path, idx))
    elif isinstance(value, str):
        yield path, value


def map_strings(value: Any, fn: Any) -> Any:
    """A copy with ``fn`` applied to every string leaf (marks kept)."""
    if isinstance(value, dict):
        out = YMap(mark=getattr(value, "mark", None))
        for key, item in value.items():
            out[key] = map_strings(item, fn)
            if isinstance(value, YMap) and key in value.marks:
                out.marks[key] = value.marks[key]
        return out
    if isinstance(value, list):
        lst = YList((map_strings(v, fn) for v in value), mark=getattr(value, "mark", None))
        lst.marks = list(value.marks) if isinstance(value, YList) else [None] * len(value)
        return lst
    if isinstance(value, str):
        return fn(value)
    return value


class SourceMark(tuple):
    """A mark in another file than the recipe: where a flag or variable that *ran* was written (the
    orchestrator log's ``Command:``/``Env:`` line, a worker's ``non-default args``). Unpacks like a
    :data:`Mark`; ``path`` names the file."""

    path: str

    def __new__(cls, path: str, line: int, col: int = 1) -> SourceMark:
        self = super().__new__(cls, (line, col))
        self.path = path
        return self
