"""Log-site extractor: every error/warning log call and raise message of the engines' released sources, as data.

    python tools/logsites.py [--wheels DIR] [--mirrors DIR] [--git OWNER/NAME=PATH] [--saved DIR] [--out DIR]
                             [ENGINE-RELEASE ...]

Reads the pinned sources of ``tools/logsites.toml`` (wheels from PyPI via ``pip download --no-deps``, looked up
under ``--wheels`` first; public repositories at a pinned commit from a git dir; files saved one by one from a
repository too large to fetch, exactly those a committed manifest ``tools/data/logsites/sources/*.tsv`` lists
with their commits) and writes one JSON-lines file
per (engine, release), ``tools/data/logsites/<engine>-<release>.jsonl``, one site a line:

- ``id``: 12 hex digits, a hash of engine, package-relative file, enclosing function and normalised pattern (an
  ordinal is added for a repeated pattern in one function), so a site keeps its id across releases while its text
  and place are unchanged; ``engine``, ``package`` (distribution or repository), ``release``;
- ``file`` (package-relative: ``vllm/v1/engine/core.py``), ``line``, ``function`` (``Class.method``,
  ``<module>`` at top level), ``level`` (error / warning / exception / critical / raise), ``exception`` (the
  raised type, raises only), ``exc_info`` (true when the log call attaches a traceback);
- ``pattern``: the line the site prints, literal text with typed holes ``{int}`` ``{float}`` ``{hex}`` ``{str}``
  ``{any}`` (``{{``/``}}`` are literal braces; ``null`` when the message is not text the source spells, e.g.
  ``logger.error(e)``), ``holes`` (their types, in order), ``format`` (the raw message expression as written),
  ``extractor`` (``ast`` for Python, ``regex`` for C++/Rust, a line-level reading marked as such).

Python is read with :mod:`ast`: ``logger.error/warning/warn/warning_once/error_once/exception/critical/fatal``
on any receiver bound to a logger (``logger``, ``log``, ``_logger``, ``logging``, ``self.logger`` and every name
assigned from ``getLogger``/``init_logger``/``get_logger``, or such a call itself), ``warnings.warn`` (level
warning, ``exception`` its category), argparse's ``parser.error`` (level raise, ``SystemExit``) and every
``raise X(...)`` with a message; the message is a literal, an f-string, ``"..." % args``, ``"...".format()``,
a concatenation of those, or a local variable assigned one of those earlier in the function. ``%d``→int, ``%.1f``→float, ``%s``/``%r``→any,
``{x:.2f}``→float, ``{x:d}``→int, other f-string fields→any. A log call with no arguments prints its ``%`` as is.
C++ (``NIXL_ERROR << ...``, ``LOG(ERROR) << ...``, ``TLLM_LOG_ERROR("%s", ...)``, ``throw X("...")``) and Rust
(``error!``/``warn!``/``tracing::…!``/``anyhow!``/``bail!``/``panic!``, anyhow's ``.context("...")`` and
``.with_context(|| format!(...))``, ``{}`` holes; an unqualified ``error!`` inside ``Err(...)``/``ok_or(...)`` builds
the error returned, a raise) are read by regular expressions.

It prints a summary: sites per engine/release/level, and per engine how many ids of a release recur in the next.
:func:`pattern_regex` and :func:`example_line` (``diag.parsers.sites``, shared with the matcher) turn a pattern
into a matcher and a sample line.

Long because the three readers (Python, C++, Rust) share the pattern language, the id and the data format,
and the tool stays one command (about 650 lines).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import string
import subprocess
import sys
import tomllib
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from fnmatch import fnmatch
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_vocab import download  # tools/ is not a package

from diag.parsers.sites import PATTERN_TOKEN, example_line, holes_of, pattern_regex  # noqa: F401  (tests, matching)

ROOT = Path(__file__).resolve().parent.parent
PINS = Path(__file__).with_suffix(".toml")
OUT = ROOT / "tools" / "data" / "logsites"

LEVELS = {"error": "error", "error_once": "error", "warning": "warning", "warn": "warning",
          "warning_once": "warning", "exception": "exception", "critical": "critical", "fatal": "critical"}
LOGGER_NAMES = frozenset({"logger", "log", "_logger", "_log", "LOGGER", "_LOGGER", "logging"})
LOGGER_FACTORIES = frozenset({"getLogger", "init_logger", "get_logger", "getChild"})


@dataclass(frozen=True)
class Site:
    """One place in a source that prints a message at error/warning level or raises one."""

    id: str
    engine: str
    package: str
    release: str
    file: str
    line: int
    function: str
    level: str
    exception: str | None
    exc_info: bool
    pattern: str | None
    holes: list[str]
    format: str
    extractor: str


# ------------------------------------------------------------------------------------------------ patterns

def _esc(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _spec_type(spec: str, conversion: int | str | None = None) -> str:
    """The hole type of a ``format()``/f-string/Rust field from its format spec."""
    if conversion in ("r", "a", ord("r"), ord("a")):
        return "any"
    kind = spec[-1:]
    if kind in ("d", "n"):
        return "int"
    if kind in ("e", "E", "f", "F", "g", "G") or re.fullmatch(r".*\.\d+", spec):
        return "float"
    if kind in ("x", "X", "o", "b"):
        return "hex"
    if kind == "s":
        return "str"
    return "any"


_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|ll|[hlLzjtq])?([diouxXeEfFgGcrsap%])")
_PERCENT_TYPE = {"d": "int", "i": "int", "u": "int", "o": "int", "x": "hex", "X": "hex", "p": "hex",
                 "e": "float", "E": "float", "f": "float", "F": "float", "g": "float", "G": "float"}


def percent_pattern(fmt: str) -> str:
    """A printf/%-format string as a pattern: ``%d``/``%zu``/``%ld``→``{int}``, ``%.2f``→``{float}``, ``%p``→``{hex}``,
    ``%s``→``{any}``."""
    out, pos = [], 0
    for m in _PERCENT.finditer(fmt):
        out.append(_esc(fmt[pos:m.start()]))
        code = m.group(1)
        out.append("%" if code == "%" else "{" + _PERCENT_TYPE.get(code, "any") + "}")
        pos = m.end()
    out.append(_esc(fmt[pos:]))
    return "".join(out)


def brace_pattern(fmt: str) -> str:
    """A ``str.format``/Rust ``format!`` string as a pattern: each ``{field:spec}`` a typed hole."""
    out = []
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return _esc(fmt)
    for literal, field, spec, conversion in parsed:
        out.append(_esc(literal))
        if field is not None:
            out.append("{" + _spec_type(spec or "", conversion) + "}")
    return "".join(out)


def site_id(engine: str, file: str, function: str, pattern: str | None, ordinal: int = 0) -> str:
    norm = " ".join((pattern or "").split())
    key = "\x1f".join([engine, file, function, norm] + ([str(ordinal)] if ordinal else []))
    return hashlib.sha1(key.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------------------ Python

def _message(node: ast.expr, strings: dict[str, ast.expr], args: bool) -> str | None:
    """The pattern of a message expression, or None when it spells no text (a variable, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return percent_pattern(node.value) if args else _esc(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(_esc(str(part.value)))
            elif isinstance(part, ast.FormattedValue):
                spec = part.format_spec
                text = "".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant)) if isinstance(
                    spec, ast.JoinedStr) else ""
                out.append("{" + _spec_type(text, part.conversion) + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        return percent_pattern(node.left.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left, strings, args), _message(node.right, strings, args)
        if left is None and right is None:
            return None
        return (left if left is not None else "{any}") + (right if right is not None else "{any}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return brace_pattern(node.func.value.value)
    if isinstance(node, ast.Name) and node.id in strings:
        return _message(strings.pop(node.id), strings, args)  # popped: a self-referencing name resolves once
    return None


def _is_logger(node: ast.expr, loggers: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in loggers
    if isinstance(node, ast.Attribute):  # self.logger, cls._logger, module.logger
        return node.attr in loggers
    if isinstance(node, ast.Call):  # logging.getLogger(__name__).warning(...)
        return _called(node) in LOGGER_FACTORIES
    return False


def _called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def _logger_names(tree: ast.Module) -> set[str]:
    names = set(LOGGER_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _called(
                node.value) in LOGGER_FACTORIES:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
    return names


class _Visitor(ast.NodeVisitor):
    def __init__(self, loggers: set[str]) -> None:
        self.loggers = loggers
        self.scope: list[str] = []
        self.strings: dict[str, ast.expr] = {}  # name -> last message-like value assigned in this function
        self.found: list[tuple[int, str, str, str | None, bool, str | None, str]] = []

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.strings
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            self.strings = {}
        self.generic_visit(node)
        self.scope.pop()
        self.strings = saved

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(
                node.value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call)):
            self.strings[node.targets[0].id] = node.value
        self.generic_visit(node)

    def _add(self, line: int, level: str, msg: ast.expr | None, exc_info: bool, exception: str | None,
             args: bool) -> None:
        pattern = _message(msg, dict(self.strings), args) if msg is not None else None
        fmt = ast.unparse(msg) if msg is not None else ""
        self.found.append((line, ".".join(self.scope) or "<module>", level, exception, exc_info, pattern, fmt))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LEVELS and _is_logger(func.value, self.loggers):
            exc_info = func.attr == "exception" or any(
                k.arg == "exc_info" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords)
            msg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "msg"), None)
            self._add(node.lineno, LEVELS[func.attr], msg, exc_info, None, len(node.args) > 1)
        elif isinstance(func, ast.Attribute) and func.attr == "warn" and ast.unparse(func.value) == "warnings" \
                and node.args:  # printed as `file:line: Category: message`
            category = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "category"), None)
            self._add(node.lineno, "warning", node.args[0], False,
                      ast.unparse(category) if category is not None else "UserWarning", False)
        elif isinstance(func, ast.Attribute) and func.attr == "error" and node.args and \
                ast.unparse(func.value).endswith("parser"):  # argparse: `prog: error: message`, exit 2
            self._add(node.lineno, "raise", node.args[0], False, "SystemExit", False)
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and (exc.args or exc.keywords) and isinstance(exc.func, (ast.Name, ast.Attribute)):
            msg = exc.args[0] if exc.args else next(
                (k.value for k in exc.keywords if k.arg in ("msg", "message", "detail")), None)
            if msg is not None:
                self._add(node.lineno, "raise", msg, False, ast.unparse(exc.func), False)
        self.generic_visit(node)


def python_sites(source: str) -> list[tuple[int, str, str, str | None, bool, str | None, str]]:
    """(line, function, level, exception, exc_info, pattern, format) of every site of a Python module."""
    tree = ast.parse(source)
    visitor = _Visitor(_logger_names(tree))
    visitor.visit(tree)
    return visitor.found


# ------------------------------------------------------------------------------------------------ C++ / Rust

_STR = r'"(?:[^"\\\n]|\\.)*"'
_CPP_STREAM = re.compile(r"\b(NIXL_(ERROR|WARN|FATAL|PERROR)|LOG\((ERROR|WARNING|FATAL)\)|LOG_(ERROR|WARN|FATAL)"
                         r"|LOG_IF\((ERROR|WARNING|FATAL),[^;]*?\))\s*<<(?P<body>[^;]*);")
_CPP_CALL = re.compile(r"\b(TLLM_LOG_(ERROR|WARNING|EXCEPTION)|TLLM_THROW|TLLM_CHECK_WITH_INFO"
                       r"|throw\s+(?P<exc>[\w:]+))\s*\((?P<body>[^;]*)\)\s*;")
_RUST = re.compile(r"\b(?:tracing::|log::|anyhow::)?(error|warn|anyhow|bail|panic)!\s*\((?P<body>[^;]*?)\)\s*;?")
_RUST_CONTEXT = re.compile(r"\.(with_context|context)\s*\(")
# where an unqualified error! builds an error (Dynamo's crate::error!, anyhow's alias) instead of logging one
_RUST_ERROR_VALUE = re.compile(r"(?:\bErr|\bok_or|\bok_or_else\s*\(\s*\|\|)\s*\(\s*$")
_CPP_LEVEL = {"ERROR": "error", "WARN": "warning", "WARNING": "warning", "FATAL": "critical", "PERROR": "error",
              "EXCEPTION": "exception"}
_NAME = r"([~\w]+(?:<[^<>;{}()]*>)?(?:::[~\w]+(?:<[^<>;{}()]*>)?)*)"  # ns::Class<T>::method
_FUNC_HEAD = re.compile(_NAME + r"\s*\([^;{}]*\)[^;{}()]*$")
_CTOR_HEAD = re.compile(_NAME + r"\s*\([^;{}]*\)\s*(?:noexcept\s*)?:(?!:).*$", re.DOTALL)
_LAMBDA_HEAD = re.compile(r"\](?:\s*\([^()]*\))?[^();{}\]]*$")
_FN_HEAD = re.compile(r"\bfn\s+(\w+)[^{;]*$")
_TYPE_HEAD = re.compile(r"\b(?:impl(?:<[^{]*?>)?\s+(?:[\w:<>, ]+\s+for\s+)?|class\s+|struct\s+)([\w:]+)[^;{}]*$")
_CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "match", "else"}


def _strip(text: str) -> str:
    """Comments and string contents blanked (same length), so braces and heads can be found."""
    def blank(m: re.Match[str]) -> str:
        quote = m.group(0)[0]
        return re.sub(r"[^\n]", " ", m.group(0)) if quote == "/" else quote + " " * (len(m.group(0)) - 2) + quote
    return re.sub(r"//[^\n]*|/\*.*?\*/|" + _STR + r"|'(?:[^'\\\n]|\\.)'", blank, text, flags=re.DOTALL)


def _functions(text: str, rust: bool) -> list[tuple[int, int, str]]:
    """(start, end, qualified name) of each function body of a C++/Rust source, read by brace depth."""
    clean = _strip(text)
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[int, tuple[str, str] | None, int]] = []  # (brace, (kind, name), where its head began)
    last = 0
    for i, ch in enumerate(clean):
        if ch == "{":
            head = clean[last:i].strip()
            ctor = None if rust else _CTOR_HEAD.search(head)
            fm = _FN_HEAD.search(head) if rust else ctor or _FUNC_HEAD.search(head)
            tm = _TYPE_HEAD.search(head) if "(" not in head else None  # not `f(struct sockaddr *a)`
            name = None
            if ctor and (re.search(r"[\w>]$", head) or _LAMBDA_HEAD.search(head)):
                # a member's brace initialiser or a lambda in a constructor's initialiser list
                name = ("init", re.sub(r"<[^<>]*>", "", ctor.group(1)).replace("::", "."))
            elif not rust and _LAMBDA_HEAD.search(head):
                pass
            elif tm:
                name = ("type", tm.group(1).split("::")[-1])
            elif fm and fm.group(1).split("::")[-1] not in _CONTROL:
                name = ("fn", re.sub(r"<[^<>]*>", "", fm.group(1)).replace("::", "."))
            stack.append((i, name, last))
            last = i + 1
        elif ch == "}":
            if stack:
                start, name, head_start = stack.pop()
                if name and name[0] in ("fn", "init"):
                    owner = [n[1] for _, n, _ in stack if n and n[0] == "type"]
                    funcs = [n[1] for _, n, _ in stack if n and n[0] == "fn"] if name[0] == "fn" else []
                    out.append((start, i, ".".join([*owner[-1:], *funcs, name[1]])))
                if name and name[0] == "init":
                    last = head_start  # the constructor's head goes on to its body
                    continue
            last = i + 1
        elif ch == ";":
            last = i + 1
    return out


_FORMAT_CALL = re.compile(r"\s*(?:[\w:]*::)?(StrFormat|format|fmt::format)\s*\((?P<args>.*)\)\s*", re.DOTALL)


def _joined(arg: str, brace: bool, sep: str) -> str | None:
    """The pattern of one argument: a literal (adjacent literals joined) as a printf- or brace-style format, a
    ``StrFormat(...)``/``fmt::format(...)`` call by its format, or parts joined by ``sep`` (``<<``, ``+``) with
    each non-literal part a hole; None when no part is a literal."""
    out, literal = [], False
    parts = _split_top(arg, sep)
    for part in parts:
        strings = re.findall(_STR, part)
        call = _FORMAT_CALL.fullmatch(part)
        if strings and re.fullmatch(r"\s*(?:" + _STR + r"\s*)+", part):
            text = "".join(_unquote(s) for s in strings)
            out.append((brace_pattern(text) if brace else percent_pattern(text)) if len(parts) == 1 else _esc(text))
            literal = True
        elif call and (inner := _joined(_split_top(call.group("args"), ",")[0], call.group(1) != "StrFormat", "+")):
            out.append(inner)
            literal = True
        elif part.strip() not in ("std::endl", "endl", ""):
            out.append("{any}")
    return "".join(out) if literal else None


def _split_top(body: str, sep: str) -> list[str]:
    parts, depth, cur, i = [], 0, [], 0
    masked = _strip(body)
    while i < len(body):
        ch = masked[i]
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and masked.startswith(sep, i):
            parts.append("".join(cur))
            cur, i = [], i + len(sep)
            continue
        cur.append(body[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unquote(literal: str) -> str:
    try:
        return json.loads(literal)
    except ValueError:
        return literal[1:-1]


def _first_literal(body: str, brace: bool) -> str | None:
    """The pattern of the first argument that spells text, printf- or brace-style."""
    for arg in _split_top(body, ","):
        pattern = _joined(arg, brace, "+")
        if pattern is not None:
            return pattern
    return None


def native_sites(source: str, rust: bool) -> list[tuple[int, str, str, str | None, bool, str | None, str]]:
    """The sites of a C++ or Rust source, read line-level by regular expressions (``extractor = "regex"``)."""
    funcs = _functions(source, rust)
    masked = _strip(source)
    found = []
    matchers = [_RUST] if rust else [_CPP_STREAM, _CPP_CALL]
    for rx in matchers:
        for m in rx.finditer(masked):
            body = source[m.start("body"):m.end("body")]
            start = m.start()
            exception = None
            if rx is _RUST:
                macro = m.group(1)
                if macro == "error" and not masked[:start].endswith("::") and _RUST_ERROR_VALUE.search(
                        masked[max(0, start - 40):start]):
                    macro = "error-value"   # Err(error!("...")): the error returned, not a log call
                level = {"error": "error", "warn": "warning"}.get(macro, "raise")
                exception = None if macro in ("error", "warn") else macro.replace("-value", "") + "!"
                pattern = _first_literal(body, brace=True)
            elif rx is _CPP_STREAM:
                level = _CPP_LEVEL[next(g for g in m.groups()[1:5] if g)]
                pattern = _joined(body, False, "<<")
            else:
                head = m.group(1)
                level = _CPP_LEVEL[m.group(2)] if m.group(2) else "raise"
                exception = m.group("exc") or ("TLLM_THROW" if head == "TLLM_THROW" else
                                               "TLLM_CHECK_WITH_INFO" if head.startswith("TLLM_CHECK") else None)
                if head.startswith("TLLM_CHECK"):
                    body = ",".join(_split_top(body, ",")[1:])
                pattern = _first_literal(body, brace=False)
                if pattern is None and m.group("exc"):
                    continue
            found.append(_native_site(source, funcs, start, m.end(), level, exception, pattern))
    if rust:
        found += [_native_site(source, funcs, start, end, "raise", kind, pattern)
                  for start, end, kind, pattern in _rust_contexts(source, masked)]
    return sorted(found)


def _native_site(source: str, funcs: list[tuple[int, int, str]], start: int, end: int, level: str,
                 exception: str | None, pattern: str | None) -> tuple[int, str, str, str | None, bool, str | None, str]:
    inside = [f for f in funcs if f[0] < start < f[1]]
    function = max(inside, key=lambda f: f[0])[2] if inside else "<file>"
    line = source.count("\n", 0, start) + 1
    return line, function, level, exception, False, pattern, " ".join(source[start:end].split())[:300]


def _rust_contexts(source: str, masked: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, kind, pattern) of each anyhow ``.context("...")`` / ``.with_context(|| format!(...))`` with
    a literal message: the text an error gains as it is passed up (printed before its causes)."""
    for m in _RUST_CONTEXT.finditer(masked):
        depth, end = 0, None
        for i in range(m.end() - 1, len(masked)):
            depth += masked[i] == "("
            depth -= masked[i] == ")"
            if depth == 0:
                end = i
                break
        if end is None:
            continue
        body = source[m.end():end]
        literal = re.search(_STR, body)
        if literal is None:
            continue
        formatted = re.search(r"\bformat!\s*\(\s*$", body[:literal.start()]) is not None
        text = _unquote(literal.group(0))
        yield m.start() + 1, end + 1, m.group(1), brace_pattern(text) if formatted else _esc(text)


# ------------------------------------------------------------------------------------------------ sources

NATIVE = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".cu", ".rs")


def sites_of(engine: str, package: str, release: str, files: Iterable[tuple[str, str]]) -> list[Site]:
    """Every site of the (path, text) files of one package of one release, with stable ids."""
    out: list[Site] = []
    for path, text in files:
        if path.endswith(".py"):
            try:
                found, extractor = python_sites(text.lstrip("\ufeff")), "ast"
            except SyntaxError as exc:
                print(f"logsites: {package} {path}: not parsed ({exc.msg})", file=sys.stderr)
                continue
        elif path.endswith(NATIVE):
            found, extractor = native_sites(text, rust=path.endswith(".rs")), "regex"
        else:
            continue
        seen: Counter[tuple[str, str]] = Counter()
        for line, function, level, exception, exc_info, pattern, fmt in found:
            norm = " ".join((pattern or fmt).split())
            ordinal = seen[(function, norm)]
            seen[(function, norm)] += 1
            sid = site_id(engine, path, function, pattern if pattern is not None else "\x00" + fmt, ordinal)
            out.append(Site(sid, engine, package, release, path, line, function, level, exception, exc_info,
                            pattern, holes_of(pattern) if pattern else [], fmt, extractor))
    return out


def _wheel(spec: str, wheels: Path) -> Path:
    name, _, version = spec.partition("==")
    found = sorted(wheels.rglob(f"{name.replace('-', '_')}-{version}-*.whl"))
    return found[0] if found else download(spec, wheels / "logsites")


def wheel_files(wheel: Path, packages: list[str]) -> Iterator[tuple[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.split("/", 1)[0] in packages and name.endswith((".py", *NATIVE)):
                yield name, zf.read(name).decode("utf-8", "replace")


def git_files(gitdir: Path, commit: str, include: list[str], exclude: list[str]) -> Iterator[tuple[str, str]]:
    names = subprocess.run(["git", "-C", str(gitdir), "ls-tree", "-r", "--name-only", commit], check=True,
                           capture_output=True, text=True).stdout.split("\n")
    for name in names:
        if name.endswith((".py", *NATIVE)) and any(fnmatch(name, g) for g in include) and not any(
                fnmatch(name, g) for g in exclude):
            shown = subprocess.run(["git", "-C", str(gitdir), "show", f"{commit}:{name}"], capture_output=True)
            if shown.returncode == 0:
                yield name, shown.stdout.decode("utf-8", "replace")


def manifest(path: Path) -> list[dict[str, str]]:
    """The provenance list of a ``files`` source: one row per file read (repository, path, commit, the characters
    read of the file's total), tab-separated under a header line of column names; ``#`` lines are comments."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    head, *rows = (ln.split("\t") for ln in lines)
    return [dict(zip(head, row, strict=True)) for row in rows]


def listed_files(root: Path, rows: list[dict[str, str]]) -> Iterator[tuple[str, str]]:
    """The (path, text) of each file a manifest lists, read from ``root`` (a copy saved file by file)."""
    for row in rows:
        path = root / row["path"]
        if not path.is_file():
            raise OSError(f"{path}: listed in the manifest but not saved")
        yield row["path"], path.read_text(encoding="utf-8")


def extract(source: dict, wheels: Path, mirrors: Path, gits: dict[str, Path], saved: Path = Path()) -> list[Site]:
    """The sites of one pinned source of ``logsites.toml``."""
    engine, release = source["engine"], source["release"]
    if "files" in source:
        rows = manifest(OUT / source["manifest"])
        return sites_of(engine, rows[0]["repo"] if rows else source["files"], release,
                        listed_files(saved / source["files"], rows))
    if "git" in source:
        gitdir = gits.get(source["git"], mirrors / source["git"].replace("/", "+") / "repo")
        return sites_of(engine, source["git"], release,
                        git_files(gitdir, source["commit"], source["include"], source.get("exclude", [])))
    out = []
    for spec in source["wheels"]:
        out += sites_of(engine, spec.partition("==")[0], release,
                        wheel_files(_wheel(spec, wheels), source["packages"]))
    return out


def _unesc(pattern: str) -> str:
    return pattern.replace("{{", "{").replace("}}", "}")


def write(sites: list[Site], path: Path, sources: list[str]) -> None:
    """The data file: a header line (engine, release, package when only one, the sources read), then one site a
    line without what the header or the site itself tells: engine, release, package, extractor (by the file's
    suffix), holes (from the pattern) and a plain literal's ``format`` (``repr`` of its text, as written)."""
    packages = sorted({s.package for s in sites})
    head = {"engine": sites[0].engine if sites else "", "release": sites[0].release if sites else "",
            **({"package": packages[0]} if len(packages) == 1 else {}),
            "sources": sources, "generated_by": "tools/logsites.py"}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(head, ensure_ascii=False) + "\n")
        for site in sites:
            row = {k: v for k, v in asdict(site).items() if v not in (None, False, []) and k not in (
                "engine", "release", "extractor", "holes") and not (k == "package" and len(packages) == 1)}
            if site.pattern is not None and site.format == repr(_unesc(site.pattern)) and not site.holes:
                del row["format"]
            fh.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def load(path: Path) -> list[Site]:
    """The sites of one data file, every column restored."""
    head, *rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    out = []
    for row in rows:
        pattern = row.get("pattern")
        out.append(Site(**{"exception": None, "exc_info": False, "pattern": None, "package": head.get("package"),
                           "format": repr(_unesc(pattern or "")),
                           **row, "engine": head["engine"], "release": head["release"],
                           "holes": holes_of(pattern) if pattern else [],
                           "extractor": "ast" if row["file"].endswith(".py") else "regex"}))
    return out


def summary(tables: dict[tuple[str, str], list[Site]]) -> list[str]:
    lines = [f"{'engine':9} {'release':30} {'sites':>6} {'text':>6}  by level"]
    for (engine, release), sites in tables.items():
        levels = Counter(s.level for s in sites)
        texts = sum(s.pattern is not None for s in sites)
        lines.append(f"{engine:9} {release:30} {len(sites):6} {texts:6}  "
                     + ", ".join(f"{k} {v}" for k, v in sorted(levels.items())))
    by_source: dict[tuple[str, frozenset[str]], list[tuple[str, set[str]]]] = {}
    for (engine, release), sites in tables.items():  # releases of one engine read from the same packages
        by_source.setdefault((engine, frozenset(s.package for s in sites)), []).append(
            (release, {s.id for s in sites}))
    for (engine, _), releases in by_source.items():
        for (a, ids_a), (b, ids_b) in pairwise(releases):
            lines.append(f"{engine}: {len(ids_a & ids_b)} of {len(ids_a)} site ids of {a} unchanged in {b}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="ENGINE-RELEASE to (re)write (default: every pinned source)")
    ap.add_argument("--wheels", type=Path, default=Path("/work/wheels"))
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--git", action="append", default=[], help="OWNER/NAME=PATH: the git dir of a repository")
    ap.add_argument("--saved", type=Path, default=Path("/work/wheels/logsites/src"),
                    help="where the files of a files source were saved (DIR/<files>/<path>)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    pins = tomllib.loads(PINS.read_text(encoding="utf-8"))
    gits = {k: Path(v) for k, _, v in (g.partition("=") for g in args.git)}
    tables: dict[tuple[str, str], list[Site]] = {}
    for source in pins["source"]:
        name = f"{source['engine']}-{source['release']}"
        path = args.out / f"{name}.jsonl"
        if args.only and name not in args.only:
            if path.exists():
                tables[(source["engine"], source["release"])] = load(path)
            continue
        try:
            sites = extract(source, args.wheels, args.mirrors, gits, args.saved)
        except (OSError, subprocess.CalledProcessError, SystemExit) as exc:
            print(f"logsites: {name}: not read ({exc})", file=sys.stderr)
            continue
        write(sites, path, [f"{source['git']}@{source['commit']}"] if "git" in source else
              [f"tools/data/logsites/{source['manifest']}"] if "files" in source else source["wheels"])
        tables[(source["engine"], source["release"])] = sites
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(sites)} sites, "
              f"{path.stat().st_size / 1e6:.2f} MB")
    print("\n".join(summary(tables)))
    for gone in pins.get("unavailable", []):
        print(f"unavailable: {gone['engine']}: {gone['what']}: {gone['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
