"""Grammars for cold structured values: CLI flag strings, concurrency lists, ``{name}`` templates.

These run on recipe values and on orchestrator ``Command:`` lines, never on the hot log path, so
they are written with pyparsing for clarity and good error positions.

* :func:`parse_flag_string` turns ``--a 1 --b --no-c "x y"`` into ``{"a": 1, "b": True, "c": False}``.
* :func:`parse_command` keeps the positionals too (``python3 -m dynamo.vllm ...``).
* :func:`normalize_flag` maps ``--No-Enable-Prefix-Caching`` to ``("enable_prefix_caching", True)``.
* :func:`parse_concurrencies` reads ``"64x128x256"`` (srtctl's list syntax), ints and lists.
* :func:`template_fields` / :func:`render_template` handle ``{node}`` / ``{conc}`` placeholders.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyparsing as pp

__all__ = [
    "FlagSyntaxError", "ParsedCommand", "coerce_scalar", "normalize_flag", "parse_command",
    "parse_concurrencies", "parse_flag_string", "render_template", "template_fields", "tokenize",
]


class FlagSyntaxError(ValueError):
    """A flag string or list that cannot be parsed; ``col`` is 1-based within the string."""

    def __init__(self, msg: str, col: int | None = None) -> None:
        super().__init__(msg)
        self.col = col


# --- shell-like words ------------------------------------------------------------------------------

def _braced(depth: int) -> str:
    """Regex for a ``{...}`` group nested up to ``depth`` levels, quotes respected (unquoted JSON)."""
    atom = r"""[^{}"']|"(?:[^"\\]|\\.)*"|'[^']*'"""
    rx = r"\{(?:" + atom + r")*\}"
    for _ in range(depth - 1):
        rx = r"\{(?:" + atom + "|" + rx + r")*\}"
    return rx


_SQ = pp.QuotedString("'", multiline=True, unquote_results=True)
_DQ = pp.QuotedString('"', esc_char="\\", multiline=True, unquote_results=True)
_BRACED = pp.Regex(_braced(6))  # `--kv-transfer-config {"kv_role": "kv_both"}` as logged without quotes
_BARE = pp.Regex(r"(?:[^\s'\"\\{]|\\.)+").set_parse_action(lambda t: re.sub(r"\\(.)", r"\1", t[0]))
_WORD = pp.Combine(pp.OneOrMore(_BRACED | _SQ | _DQ | _BARE | pp.Literal("{")))
_WORDS = pp.ZeroOrMore(_WORD) + pp.StringEnd()

_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_INT = re.compile(r"^[+-]?\d+$")


def tokenize(text: str) -> list[str]:
    """Split a command line like a POSIX shell would (quotes, backslashes, line continuations)."""
    return list(_tokens(text.replace("\\\r\n", " ").replace("\\\n", " ")))


@functools.lru_cache(maxsize=512)
def _tokens(text: str) -> tuple[str, ...]:
    """The grammar's words (~20 ms a launch line: remembered, as follow mode re-reads the same lines)."""
    try:
        return tuple(_WORDS.parse_string(text, parse_all=True))
    except pp.ParseBaseException as exc:
        raise FlagSyntaxError(f"unbalanced quote or stray text near column {exc.col}", exc.col) from None


def coerce_scalar(text: str) -> Any:
    """``"8"`` -> 8, ``"0.9"`` -> 0.9; anything else stays a string."""
    if _INT.match(text):
        return int(text)
    if _NUMBER.match(text):
        return float(text)
    return text


def normalize_flag(name: str) -> tuple[str, bool]:
    """Canonical snake_case name and whether it was a ``no-`` negation.

    ``--max-num-seqs`` / ``max_num_seqs`` -> ``("max_num_seqs", False)``;
    ``no-enable-prefix-caching`` -> ``("enable_prefix_caching", True)``. Dotted JSON sub-keys
    (``--compilation-config.mode``) keep their dots.
    """
    key = name.strip().lstrip("-").replace("-", "_").lower()
    if key.startswith("no_") and len(key) > 3:
        return key[3:], True
    return key, False


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not _NUMBER.match(tok)


@dataclass
class ParsedCommand:
    """A command line split into positionals and normalised flags (in order of appearance)."""

    positionals: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)  # canonical -> flag as written


def _add(flags: dict[str, Any], key: str, value: Any) -> None:
    if key in flags:
        prev = flags[key]
        flags[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
    else:
        flags[key] = value


def parse_command(text: str | Iterable[str], aliases: Mapping[str, str] | None = None,
                  strict: bool = True) -> ParsedCommand:
    """Parse ``prog -m mod --a 1 --b --no-c --d=x -tp 4`` into positionals and normalised flags.

    A flag followed by another flag (or nothing) is boolean: ``True``, or ``False`` for a ``no-``
    negation. Values are coerced to int/float when they look numeric; repeated flags collect into a
    list. ``aliases`` maps short spellings (``tp``) to long ones (``tensor-parallel-size``). JSON
    values logged without quotes (``--kv-transfer-config {"kv_role": "kv_both"}``) stay one value.
    With ``strict=False`` an unbalanced quote (a truncated log line) falls back to splitting on spaces.
    """
    if isinstance(text, str):
        try:
            toks = tokenize(text)
        except FlagSyntaxError:
            if strict:
                raise
            toks = text.split()
    else:
        toks = list(text)
    out = ParsedCommand()
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not _is_flag(tok) or tok == "--":
            out.positionals.append(tok)
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        if not eq and re.fullmatch(r"-O\d", name):  # vLLM's -O3 spelling of the compilation level
            name, eq, inline = "-O", "=", name[2:]
        bare = name.lstrip("-")
        if aliases and bare in aliases:
            bare = aliases[bare]
        key, negated = normalize_flag(bare)
        if negated:  # BooleanOptionalAction negations never take a value
            value: Any = False
            i += 1
        elif eq:
            value = coerce_scalar(inline)
            i += 1
        elif i + 1 < len(toks) and not _is_flag(toks[i + 1]):
            value = coerce_scalar(toks[i + 1])
            i += 2
        else:
            value = True
            i += 1
        out.spelled.setdefault(key, name)
        _add(out.flags, key, value)
    return out


def parse_flag_string(text: str | Iterable[str], aliases: Mapping[str, str] | None = None,
                      strict: bool = True) -> dict[str, Any]:
    """Flags of a command-line fragment as a normalised dict (positionals dropped)."""
    return parse_command(text, aliases, strict).flags


# --- concurrency lists -----------------------------------------------------------------------------

_CONC_INT = pp.Word(pp.nums).set_parse_action(lambda t: int(t[0]))
_CONC = pp.DelimitedList(_CONC_INT, delim=pp.one_of("x X ,")) + pp.StringEnd()


def parse_concurrencies(value: Any) -> list[int]:
    """``"64x128x256"``, ``"4096"``, ``512``, ``[1, 2, "4"]`` -> a list of ints.

    Raises :class:`FlagSyntaxError` for anything else (an unsubstituted ``{conc}`` included).
    """
    if value is None:
        return []
    if isinstance(value, bool):
        raise FlagSyntaxError(f"concurrency must be a number, not {value!r}")
    if isinstance(value, int):
        return [value]
    if isinstance(value, float) and value.is_integer():
        return [int(value)]
    if isinstance(value, list | tuple):
        out: list[int] = []
        for item in value:
            out.extend(parse_concurrencies(item))
        return out
    if isinstance(value, str):
        try:
            return list(_CONC.parse_string(value.strip(), parse_all=True))
        except pp.ParseBaseException as exc:
            raise FlagSyntaxError(f"not a concurrency list like '64x128x256': {value!r}", exc.col) from None
    raise FlagSyntaxError(f"concurrency must be a number or 'AxBxC' string, not {value!r}")


# --- {name} templates ------------------------------------------------------------------------------

_IDENT = pp.Word(pp.alphas + "_", pp.alphanums + "_")
_FIELD = pp.Suppress("{") + _IDENT("name") + pp.Suppress("}")
_FIELD.leave_whitespace()


def template_fields(text: str) -> list[str]:
    """Names of ``{name}`` placeholders in ``text`` (JSON braces like ``{"a": 1}`` are not fields)."""
    if "{" not in text:
        return []
    return [t.name for t, _s, _e in _FIELD.scan_string(text)]


def render_template(text: str, values: Mapping[str, Any]) -> Any:
    """Substitute known placeholders; unknown ones (``{node}`` at submit time) are left as they are.

    When ``text`` is exactly one placeholder, the value keeps its type (``"{tp}"`` -> ``8``).
    """
    if "{" not in text:
        return text
    whole = re.fullmatch(r"\{([A-Za-z_]\w*)\}", text)
    if whole and whole.group(1) in values:
        return values[whole.group(1)]
    pieces: list[str] = []
    last = 0
    for toks, start, end in _FIELD.scan_string(text):
        if toks.name in values:
            pieces.append(text[last:start])
            pieces.append(str(values[toks.name]))
            last = end
    pieces.append(text[last:])
    return "".join(pieces)
