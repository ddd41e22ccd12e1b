"""Tracebacks judged by their frames: which engine's code they ran in, and whether that was its start-up or serving.

The tables are data (``catalog/frames.toml``, core's: the interpreter's entry points, Dynamo's runtime and an
engine without an adapter yet; each adapter's catalog ``frames``: its packages and functions, with the source
file each is defined in). A frame belongs to a table when its module (the path after ``site-packages/``, else
from the last directory named like a table's package) lies in one of the table's packages.

A traceback's phase is decided by walking its frames from the outermost: the first frame a table names
``startup`` or ``serving`` decides (``run_busy_loop -> ... -> forward`` is serving, ``__init__ ->
_initialize_kv_caches -> ... -> forward`` start-up); ``neutral`` frames and frames no table knows do not.
Construction inside an engine's package counts as start-up while no unknown frame of that engine came before
it. A process entry (a ``neutral`` function with ``loops``: it sets its process up, builds the engine, then runs
its loop) decides by what it called: a callee its ``loops`` name (the loop, its teardown) or a table names lets
the walk go on; any other callee ran before the loop, so the traceback is start-up. Its callee is the call on its
code line (a decorator's wrapper may stand between it and the next frame), else the next frame. A traceback
whose outermost frame is a ``top`` one (a module run as a program) escaped it (``exits``). A traceback's engine is the owner of its outermost
frame in an engine's package. A function with a ``cut`` phase gives it to a traceback cut at its frame (the
innermost seen, no exception line, its code line unseen) that no frame decided: its table says what an exception
through it alone means.

A C++ stack trace (:func:`judge_native`) is judged the same way by its demangled symbols: a symbol belongs to the
table whose package names its outermost namespace (``tensorrt_llm::`` to TensorRT-LLM's), a table's ``native``
rows (glob patterns over the qualified name) give its phase, and a constructor (``Class::Class``) in an engine's
namespace is construction.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from importlib.abc import Traversable
from pathlib import Path

from . import engines

CORE_TABLE = Path(__file__).with_name("catalog") / "frames.toml"
PHASES = ("startup", "serving", "neutral")
_ROOTS = ("site-packages/", "dist-packages/")


@dataclass(frozen=True)
class Function:
    """One function a table names: its phase, the modules it is limited to (empty: any of the table's) and
    whether it decides only as a whole traceback's innermost frame."""

    name: str
    phase: str
    files: tuple[str, ...] = ()
    innermost: bool = False
    loops: tuple[str, ...] = ()   # a process entry's callees that run once it is up (glob patterns)
    top: bool = False             # a module run as a program (runpy): a traceback from it escaped the program
    cut: str | None = None        # the phase of a traceback cut at this frame (its callee unseen) the walk left open

    def after_start(self, callee: str) -> bool:
        """Whether an entry's ``callee`` runs once the process is up (its loop or teardown)."""
        return any(fnmatchcase(callee, p) for p in self.loops)


@dataclass(frozen=True)
class Table:
    """The frames of one owner: an engine (its adapter's name), Dynamo, or the neutral entry points."""

    owner: str
    packages: tuple[str, ...]
    engine: bool
    functions: dict[str, tuple[Function, ...]]
    native: tuple[tuple[str, str], ...] = ()   # (glob over a C++ qualified name, phase)

    def lookup(self, fn: str, module: str, last: bool) -> Function | None:
        for f in self.functions.get(fn, ()):
            if (not f.files or any(module.endswith(x) for x in f.files)) and (last or not f.innermost):
                return f
        return None


@dataclass(frozen=True)
class Verdict:
    """What a traceback's frames say: the engine whose code it ran in, its phase (startup | serving) and the
    frame that decided it (``module:function``); None where they do not tell."""

    engine: str | None = None
    phase: str | None = None
    at: str | None = None
    exits: bool = False   # its outermost frame is a program's top: the exception ended the program


def _table(owner: str, data: dict, engine: bool) -> Table:
    functions: dict[str, list[Function]] = {}
    for row in data.get("function", ()):
        if row["phase"] not in PHASES:
            raise ValueError(f"frames table {owner}: {row['name']} has phase {row['phase']!r}, none of {PHASES}")
        functions.setdefault(row["name"], []).append(
            Function(row["name"], row["phase"], tuple(row.get("files", ())), bool(row.get("innermost", False)),
                     tuple(row.get("loops", ())), bool(row.get("top", False)), row.get("cut")))
    native = []
    for row in data.get("native", ()):
        if row["phase"] not in PHASES:
            raise ValueError(f"frames table {owner}: {row['symbol']} has phase {row['phase']!r}, none of {PHASES}")
        native.append((row["symbol"], row["phase"]))
    return Table(owner, tuple(data.get("packages", ())), engine, {k: tuple(v) for k, v in functions.items()},
                 tuple(native))


def _load(path: Traversable | Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


@cache
def tables() -> tuple[tuple[Table, ...], tuple[str, ...]]:
    """Every frames table (the adapters' first: an adapter's replaces core's table of its name) and the
    construction patterns."""
    core = _load(CORE_TABLE)
    own = [_table(a.name, _load(path), True) for a, path in engines.catalog_files("frames")]
    mine = {t.owner for t in own}
    rest = [_table(t["owner"], t, bool(t.get("engine", False))) for t in core["table"] if t["owner"] not in mine]
    return (*own, *rest), tuple(core["construction"])


@cache
def _by_package() -> dict[str, Table]:
    return {pkg: t for t in tables()[0] for pkg in t.packages}


def module_of(path: str) -> tuple[str | None, str]:
    """A frame path's package (a table's, or the one under ``site-packages/``) and its module path from there."""
    p = path.replace("\\", "/")
    for root in _ROOTS:
        if (i := p.rfind(root)) >= 0:
            module = p[i + len(root):]
            return module.split("/", 1)[0], module
    known = _by_package()
    parts = p.split("/")
    for j in range(len(parts) - 2, -1, -1):
        if parts[j] in known:
            return parts[j], "/".join(parts[j:])
    return None, p


# The function a frame's code line calls (``engine_core.run_busy_loop()`` -> run_busy_loop); a raise calls none.
_CALL = re.compile(r"^\s*(?!raise\b)(?:return\s+|[\w.\[\], ]+\s*=\s*)?(?:await\s+)?(?:[\w]+\.)*(?P<fn>\w+)\(")


def callee(code: str) -> str | None:
    """The function a traceback's code line calls, None when it calls none (or raises)."""
    m = _CALL.match(code)
    return m["fn"] if m else None


def _entry_verdict(entry: Function, nxt: str | None, named: bool) -> str | None:
    """What a process entry's callee ``nxt`` says: None to go on walking (no callee, one that runs once the
    process is up, a construction or one a table names: the walk decides), else start-up."""
    if nxt is None or entry.after_start(nxt) or named or any(fnmatchcase(nxt, c) for c in tables()[1]):
        return None
    return "startup"


def judge(calls: Sequence[tuple[str, str]], whole: bool = False,
          callees: Sequence[str | None] = ()) -> Verdict:
    """The engine and phase of a traceback's frames ``calls`` ((path, function), outermost first); ``whole``:
    its exception line was seen, so the last frame is the one that raised; ``callees``: what each frame's code
    line calls (:func:`callee`; None or missing where unknown)."""
    all_tables, construction = tables()
    anywhere = [t for t in all_tables if not t.packages]
    modules = [module_of(path) for path, _ in calls]
    owners = [_by_package().get(package) if package else None for package, _ in modules]
    engine = next((t.owner for t in owners if t is not None and t.engine), None)
    exits = bool(calls) and any(f.top for t in anywhere for f in t.functions.get(calls[0][1], ()))
    unknown: set[str] = set()   # engines with a frame no table names, outer to the one at hand
    for i, ((_, fn), (_, module), table) in enumerate(zip(calls, modules, owners, strict=True)):
        fn = fn.rsplit(".", 1)[-1]
        last = whole and i == len(calls) - 1
        found = next((f for t in ([table] if table else []) + anywhere if (f := t.lookup(fn, module, last))), None)
        own = table.owner if table is not None and table.engine else None   # the engine whose package it is in
        if found is None and own is not None and own not in unknown and any(fnmatchcase(fn, c) for c in construction):
            found = Function(fn, "startup")
        if found is not None and found.phase != "neutral":
            return Verdict(engine, found.phase, f"{module}:{fn}", exits)
        if found is not None and found.loops:
            nxt, named = _callee_of(calls, i, callees[i] if i < len(callees) else None, anywhere)
            if (via := _entry_verdict(found, nxt, named)) is not None:
                return Verdict(engine, via, f"{module}:{fn} -> {nxt}", exits)
            if i == len(calls) - 1 and nxt is not None and _serving_named(table, nxt) is not None:
                return Verdict(engine, "serving", f"{module}:{fn} -> {nxt}", exits)
        if found is None and own is not None:
            unknown.add(own)
        if (found is not None and found.cut and not whole and i == len(calls) - 1
                and (callees[i] if i < len(callees) else None) is None):
            return Verdict(engine, found.cut, f"{module}:{fn}", exits)
    return Verdict(engine, exits=exits)


def _serving_named(table: Table | None, fn: str) -> Function | None:
    """The serving function of ``table`` named ``fn`` (whatever module), if any."""
    return next((f for f in (table.functions.get(fn, ()) if table else ()) if f.phase == "serving"), None)


def _callee_of(calls: Sequence[tuple[str, str]], i: int, code: str | None,
               anywhere: list[Table]) -> tuple[str | None, bool]:
    """The function frame ``i`` called (its code line's call, else the next frame's: a decorator's wrapper may
    stand between) and whether a table names it."""
    if code is not None:
        return code, any(code in t.functions for t in tables()[0])
    if i + 1 >= len(calls):
        return None, False
    path, fn = calls[i + 1]
    fn = fn.rsplit(".", 1)[-1]
    package, module = module_of(path)
    owner = _by_package().get(package) if package else None
    return fn, any(t.lookup(fn, module, False) for t in ([owner] if owner else []) + anywhere)


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def native_name(symbol: str) -> str:
    """A demangled C++ symbol's qualified name: its argument list, qualifiers and template arguments dropped
    (``ns::Cls<int>::run(char const*) const`` -> ``ns::Cls::run``)."""
    name = symbol.replace("(anonymous namespace)", "anon")
    while (shorter := _TEMPLATE_ARGS.sub("", name)) != name:
        name = shorter
    return name.split("(", 1)[0].strip()


def judge_native(symbols: Sequence[str]) -> Verdict:
    """The engine and phase of a C++ stack trace's demangled ``symbols`` (innermost first, as backtraces print
    them), walked from the outermost: the first a table's ``native`` rows name start-up or serving decides; a
    constructor in an engine's namespace is start-up while no symbol of that engine outer to it is unknown."""
    by_package = _by_package()
    engine: str | None = None
    unknown: set[str] = set()
    for name in map(native_name, reversed(symbols)):
        parts = name.split("::")
        table = by_package.get(parts[0]) if len(parts) > 1 else None
        if table is None:
            continue
        engine = engine or (table.owner if table.engine else None)
        phase = next((ph for pattern, ph in table.native if fnmatchcase(name, pattern)), None)
        if phase is None and table.engine and table.owner not in unknown and parts[-1] == parts[-2]:
            phase = "startup"
        if phase is not None and phase != "neutral":
            return Verdict(engine, phase, name)
        if phase is None and table.engine:
            unknown.add(table.owner)
    return Verdict(engine)
