"""Fault lines: engine and worker death, OOM, KV capacity at startup, hangs, exceptions.

The taxonomy is data: message patterns and exception type names to a cause and its class, with
sample lines the tests run; core's ``catalog/faults.toml`` merged with every engine adapter's
(``ADAPTER.catalogs["faults"]``), ordered by rank, then core before the engines, then file order. One root cause fans out into many lines
(every API server, every client); this module only classifies lines. Tracebacks are grouped with their exception line by the line parser, and
folding a fan-out into one finding is the rules engine's job.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.abc import Traversable
from pathlib import Path

from . import engines, sites
from .formats import declare, record_parser
from .records import Fault, Header

TAXONOMY_PATH = Path(__file__).with_name("catalog") / "faults.toml"
PHASES = ("startup", "serving", "any")   # when a cause can happen (catalog/faults.toml's header)


@dataclass(frozen=True)
class Cause:
    """One entry of the fault taxonomy (``catalog/faults.toml``, or an engine's)."""

    name: str
    cls: str                         # oom | kv_capacity | config | cuda | collective | transport | ...
    text: str                        # what the cause means, for findings
    fatal: bool = False              # kills the engine by itself: an incident's root cause
    death: bool = False              # reports a process death
    phase: str = "any"               # startup / serving: can only happen before / while serving
    triggers: tuple[str, ...] = ()
    pattern: str | None = None
    exceptions: tuple[str, ...] = ()
    samples: tuple[str, ...] = ()
    rank: int = 50                   # priority band (see catalog/faults.toml)
    label: str | None = None         # a count of it in a finding ("transport (NIXL/UCX) error(s)")
    engine: str | None = None        # the adapter whose catalog declares it; None: core's
    owner: str | None = None         # who owns the fix (rules/catalog/postmortem.toml); None: its class's owner
    teardown: bool = False           # what a failure's teardown produces: a consequence, never a root cause
    specific: bool = False           # a specific wording a catch-all record format (a bare "UCX ERROR") would
                                     # also take: its line format is tried before the frequent kinds
    site_class: str | None = None    # the generic cause of this class of log site (parsers.sites)
    fatal_raised: bool = False       # raised (an exception, not a logged line) it kills the engine: a raise site
                                     # of its class ends the loop that raised it (a KV pool exhausted mid-batch)
    why: str = ""                    # why it stays hand-written beside the log sites (its reason as a fallback)
    sites: tuple[str, ...] = ()      # the extracted log sites whose lines it takes (ids; tools/logsites.py)
    caught: bool = False             # it logs an exception its handler caught, the process going on: the
                                     # traceback it heads ends no loop, whatever code its frames ran through


def _read(path: Traversable, engine: str | None) -> list[Cause]:
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    out = []
    for entry in data["cause"]:
        cause = Cause(entry["name"], entry["class"], entry["text"], bool(entry.get("fatal", False)),
                      bool(entry.get("death", False)), entry.get("phase", "any"), tuple(entry.get("triggers", ())),
                      entry.get("pattern"), tuple(entry.get("exceptions", ())), tuple(entry["samples"]),
                      int(entry["rank"]), entry.get("label"), engine, entry.get("owner"),
                      bool(entry.get("teardown", False)), bool(entry.get("specific", False)),
                      entry.get("site_class"), bool(entry.get("fatal_raised", False)), entry.get("why", ""),
                      tuple(entry.get("sites", ())), bool(entry.get("caught", False)))
        if not cause.why:
            raise ValueError(f"fault cause {cause.name!r} needs a `why`: the reason it stays beside the log sites")
        if len(cause.samples) < 2:
            raise ValueError(f"fault cause {cause.name!r} needs at least two sample lines")
        if cause.phase not in PHASES:
            raise ValueError(f"fault cause {cause.name!r}: phase {cause.phase!r} is none of {', '.join(PHASES)}")
        if cause.pattern is None and not cause.exceptions and cause.site_class is None:
            raise ValueError(f"fault cause {cause.name!r} has neither a pattern, exception names nor a site class")
        out.append(cause)
    return out


def _load_taxonomy() -> tuple[Cause, ...]:
    """Core's causes and every adapter's, by rank (stable: core first, then adapters in registry order)."""
    causes = _read(TAXONOMY_PATH, None)
    for adapter, path in engines.catalog_files("faults"):
        causes += _read(path, adapter.name)
    names = [c.name for c in causes]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"fault causes declared twice: {', '.join(dupes)}")
    return tuple(sorted(causes, key=lambda c: c.rank))


# The fault classes rules read (a cause of any catalog, core's or an engine's, is one of them): the classes a
# reader gives a log site, but benign (a benign site is no fault).
CLASSES = tuple(c for c in sites.SITE_CLASSES if c != "benign")

TAXONOMY: tuple[Cause, ...] = _load_taxonomy()
if _unknown := sorted({f"{c.name}: {c.cls}" for c in TAXONOMY if c.cls not in CLASSES}):
    raise ValueError(f"fault causes of an unknown class: {', '.join(_unknown)}")
# An exception that matches no cause: DIAG-E005 names it.
UNCLASSIFIED = Cause("exception", "unknown", "an unclassified exception", samples=("", ""), exceptions=("*",))
# A traceback whose exception line never came (the excerpt or the log ends inside it): its frames
# tell where it was raised; rules/incidents.py takes one in start-up code as a start-up failure.
CUT = Cause("cut_traceback", "unknown", "an exception (its traceback cut before the exception line)",
            samples=("", ""), exceptions=("*",))
# A cut traceback from the top of a module run as a program (parsers.frames ``top``): its exception, whatever it
# was, ended the program.
ESCAPED = Cause("escaped_traceback", "death", "a program ended on an exception (a traceback from its top, its "
                "exception line cut)", death=True, samples=("", ""), exceptions=("*",))
CAUSES: dict[str, Cause] = {c.name: c for c in (*TAXONOMY, UNCLASSIFIED, CUT, ESCAPED)}
TEARDOWN = frozenset(c.name for c in TAXONOMY if c.teardown)
CAUGHT = frozenset(c.name for c in TAXONOMY if c.caught)
_BY_EXCEPTION: dict[str, str] = {e: c.name for c in TAXONOMY for e in c.exceptions}
# A line matched to a log site (parsers.sites) takes its class's generic cause: one per site class but benign.
SITE_CAUSES: dict[str, str] = {c.site_class: c.name for c in TAXONOMY if c.site_class}
if _no_cause := sorted(set(sites.SITE_CLASSES) - {"benign"} - SITE_CAUSES.keys()):
    raise ValueError(f"site classes without a generic fault cause: {', '.join(_no_cause)}")

# Declared without an engine tag, an engine's causes too: their triggers are words core's samples and rule
# texts quote (an engine's death), not a line format only that engine's adapter may name.
_FAULT_FORMATS = []
for _c in TAXONOMY:
    if _c.pattern is not None:
        _name = f"{_c.engine}-fault-{_c.name.removeprefix(_c.engine + '_')}" if _c.engine else f"fault-{_c.name}"
        _FAULT_FORMATS.append((_c.name, declare(_name, "record", _c.pattern, samples=list(_c.samples),
                                                emits="fault", triggers=_c.triggers, engine=_c.engine,
                                                rank=10 if _c.specific else 50)))

# An exception line at the end of a traceback: "pkg.mod.SomeError: message".
EXCEPTION = declare(
    "exception-line", "record",
    r"^\s*(?:[A-Za-z_][\w]*\.)*(?P<exc>(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt|Timeout))(?:\(\))?(?::\s*(?P<emsg>.*))?$",
    samples=[
        "(EngineCore_DP0 pid=1) ERROR 08-06 12:00:00 [core.py:1] RuntimeError: HCCL HcclCommInitRootInfo error code 7",
        "ERROR 11-25 09:00:00 [engine.py:135] AssertionError()",
    ],
    emits="fault",
    triggers=("Error", "Exception", "Interrupt", "Timeout"),
    doc="only taken as a fault when it closes an open traceback of the same process",
)
TRACEBACK = declare(
    "traceback-start", "record", r"Traceback \(most recent call last\)",
    samples=[
        "(APIServer pid=480795) ERROR 03-16 00:55:10 [async_llm.py:538] Traceback (most recent call last):",
        "  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] EngineCore hit an exception: Traceback "
        "(most recent call last):",
    ],
    emits="traceback",
    triggers=("Traceback (most recent call last)",),
)


FRAME = declare(
    "traceback-frame", "record", r'^\s*File "(?P<path>[^"]+)", line \d+, in ',
    samples=[
        '(Worker_TP7 pid=481423)   File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/'
        'kv_connector/v1/p2p/p2p_nccl_engine.py", line 513, in send_sync',
        'ERROR 03-10 08:07:20 [core.py:302]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", '
        'line 294, in run_engine_core',
    ],
    emits="traceback",
    triggers=('File "',),
    doc="a traceback frame: groups a traceback whose head was cut, and tells KV-connector code apart",
)


def classify(msg: str) -> str | None:
    """The fault cause of a message, or None."""
    for cause, fmt in _FAULT_FORMATS:
        if any(t in msg for t in fmt.triggers) and fmt.regex.search(msg):
            return cause
    return None


def _fault_parser(cause: str):
    def parse(m: re.Match[str], line: int, hdr: Header, **kw: object) -> Fault:
        return Fault(line, cause=cause, message=m.string.strip()[:500], **kw)  # type: ignore[arg-type]

    return parse


for _cause, _fmt in _FAULT_FORMATS:
    record_parser(_fmt)(_fault_parser(_cause))


def exception_line(msg: str) -> tuple[str, str] | None:
    """(exception name, message) when ``msg`` is the last line of a traceback."""
    if not any(t in msg for t in EXCEPTION.triggers):
        return None
    m = EXCEPTION.regex.match(msg)
    if not m:
        return None
    return m["exc"], (m["emsg"] or "").strip()


def classify_exception(exc: str, message: str) -> str:
    """The cause of a traceback's exception line: its message first, then its type, else unclassified."""
    by_message = classify(f"{exc}: {message}")
    if by_message is not None:
        return by_message
    return _BY_EXCEPTION.get(exc, UNCLASSIFIED.name)
