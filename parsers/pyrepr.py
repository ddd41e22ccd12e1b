"""Parse Python ``repr`` text (vLLM's ``non-default args: {...}``, config dumps) into plain values.

A pyparsing grammar for cold, structured values (a few lines per worker log, never the per-line
hot path). It accepts what ``ast.literal_eval`` accepts plus the things vLLM actually prints:
dataclass-like calls ``KVTransferConfig(kv_role='kv_producer', ...)`` → dict with a ``__class__``
key, enum reprs ``<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>`` → ``"CUDAGraphMode.FULL_AND_PIECEWISE"``,
``inf``/``nan``, ``set()``, ``PosixPath('/m')`` → ``"/m"``, and bare unknown tokens → strings.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import pyparsing as pp

__all__ = ["ELLIPSIS", "parse_pyrepr"]

ELLIPSIS = "..."            # what an elided element (``{..., 'a': 1}``) in a pasted repr parses to
_PATH_CLASSES = {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"}
_NUMBER_WRAPPERS = {"float64", "float32", "float16", "int64", "int32", "np.float64", "np.float32",
                    "np.int64", "np.int32", "numpy.float64", "numpy.int64", "Decimal"}
_ENUM = re.compile(r"^<\s*([A-Za-z_][\w.]*)\s*:.*>$", re.S)
_BARE_STOP = r"\s,:()\[\]{}<>='\""
_COMMA = object()           # comma token inside sequences (a parsed "," string must not look like one)
_ELL = object()             # an elided element, dropped from dicts and calls, "..." elsewhere


def _v(x: Any) -> Any:
    return ELLIPSIS if x is _ELL else x


def _to_number(tok: str) -> int | float:
    t = tok.replace("_", "")
    if re.fullmatch(r"[+-]?\d+", t):
        return int(t)
    return float(t)


def _special_number(tok: str) -> float:
    low = tok.lower().lstrip("+")
    sign = -1.0 if low.startswith("-") else 1.0
    low = low.lstrip("-")
    return math.nan if low == "nan" else sign * math.inf


def _angle(tok: str) -> str:
    m = _ENUM.match(tok)
    if m:
        return m.group(1)
    return tok[1:-1].strip()


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key


class _Kw:
    """A ``name=value`` call argument (kept apart from positional ones until the call is built)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value = name, value


class _Pair:
    __slots__ = ("key", "value")

    def __init__(self, key: Any, value: Any) -> None:
        self.key, self.value = key, value


def _build_call(name: str, args: list[Any]) -> Any:
    pos = [a for a in args if not isinstance(a, _Kw) and a is not _ELL]
    kws = {a.name: a.value for a in args if isinstance(a, _Kw)}
    short = name.rsplit(".", 1)[-1]
    if not kws:
        if short == "set":
            return set(map(_hashable, pos[0])) if pos else set()
        if short == "frozenset":
            return frozenset(map(_hashable, pos[0])) if pos else frozenset()
        if short in ("tuple", "list") and len(pos) <= 1:
            items = list(pos[0]) if pos else []
            return tuple(items) if short == "tuple" else items
        if short == "dict" and not pos:
            return {}
        if len(pos) == 1 and (name in _PATH_CLASSES or short in _PATH_CLASSES):
            return str(pos[0])
        if len(pos) == 1 and (name in _NUMBER_WRAPPERS or short in _NUMBER_WRAPPERS):
            val = pos[0]
            return _to_number(val) if isinstance(val, str) else val
    if short == "dict" and not pos:
        return kws
    out: dict[str, Any] = {"__class__": name}
    if pos:
        out["__args__"] = pos
    out.update(kws)
    return out


def _grammar() -> pp.ParserElement:
    value = pp.Forward()
    lpar, rpar = pp.Suppress("("), pp.Suppress(")")
    lbrk, rbrk = pp.Suppress("["), pp.Suppress("]")
    lbrc, rbrc = pp.Suppress("{"), pp.Suppress("}")
    comma = pp.Literal(",").set_parse_action(pp.replace_with(_COMMA))

    string = pp.Regex(r"""[bBrRuU]{0,2}(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")""")
    string.set_parse_action(lambda t: ast.literal_eval(t[0]))
    number = pp.Regex(r"[+-]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![^" + _BARE_STOP + "])")
    number.set_parse_action(lambda t: _to_number(t[0]))
    special = pp.Regex(r"[+-]?(?:inf(?:inity)?|nan)(?![\w.])", re.I)
    special.set_parse_action(lambda t: _special_number(t[0]))
    const = (pp.Keyword("True").set_parse_action(pp.replace_with(True))
             | pp.Keyword("False").set_parse_action(pp.replace_with(False))
             | pp.Keyword("None").set_parse_action(pp.replace_with(None)))
    ellipsis = pp.Literal("...").set_parse_action(pp.replace_with(_ELL))
    angle = pp.Regex(r"<[^<>]*(?:<[^<>]*>[^<>]*)*>").set_parse_action(lambda t: _angle(t[0]))
    name = pp.Regex(r"[A-Za-z_][\w.]*")
    bare = pp.Regex("[^" + _BARE_STOP + "]+").set_parse_action(lambda t: t[0])

    def seq(item: pp.ParserElement) -> pp.ParserElement:
        """Comma-separated items with an optional trailing comma; keeps the commas as tokens."""
        return pp.Optional(item + pp.ZeroOrMore(comma + item) + pp.Optional(comma))

    kwarg = (pp.Regex(r"([A-Za-z_]\w*)\s*=(?!=)") + value).set_parse_action(
        lambda t: _Kw(t[0].rstrip("= \t"), _v(t[1])))
    call = (name + lpar + pp.Group(seq(kwarg | value)) + rpar).set_parse_action(
        lambda t: [_build_call(t[0], [x for x in t[1] if x is not _COMMA])])

    pair = (value + pp.Suppress(":") + value).set_parse_action(lambda t: _Pair(_v(t[0]), _v(t[1])))
    dict_ = (lbrc + pp.Group(seq(pair | ellipsis)) + rbrc).set_parse_action(
        lambda t: [{_hashable(p.key): p.value for p in t[0] if isinstance(p, _Pair)}])
    set_ = (lbrc + pp.Group(seq(value)) + rbrc).set_parse_action(
        lambda t: [_to_set([_v(x) for x in t[0] if x is not _COMMA])])
    list_ = (lbrk + pp.Group(seq(value)) + rbrk).set_parse_action(
        lambda t: [[_v(x) for x in t[0] if x is not _COMMA]])
    tuple_ = (lpar + pp.Group(seq(value)) + rpar).set_parse_action(lambda t: [_to_tuple(list(t[0]))])

    value <<= (string | angle | dict_ | set_ | list_ | tuple_ | call | number | special | const
               | ellipsis | bare)
    return value


def _to_set(items: list[Any]) -> set[Any] | list[Any]:
    try:
        return set(items)
    except TypeError:
        return items                # unhashable members (dicts): keep them, in order


def _to_tuple(tokens: list[Any]) -> Any:
    """``(x)`` is ``x``; ``(x,)`` and ``(x, y)`` are tuples."""
    items = [_v(x) for x in tokens if x is not _COMMA]
    if len(items) == 1 and tokens[-1] is not _COMMA:
        return items[0]
    return tuple(items)


_VALUE = _grammar()
_DOC = _VALUE + pp.StringEnd()


def parse_pyrepr(text: str) -> Any:
    """Parse one Python repr into plain values; ``ValueError`` (one line) when it is not one."""
    if not text or not text.strip():
        raise ValueError("pyrepr: empty text")
    try:
        return _v(_DOC.parse_string(text.strip(), parse_all=True)[0])
    except pp.ParseBaseException as e:
        snippet = text.strip()[max(0, e.loc - 20): e.loc + 20].replace("\n", " ")
        raise ValueError(f"pyrepr: cannot parse at column {e.loc + 1} near {snippet!r}") from None
    except (SyntaxError, ValueError, RecursionError) as e:
        raise ValueError(f"pyrepr: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
