"""From one physical line (plus the next, for torn records) to records.

The same :class:`LineParser` serves the bulk and the streaming path; both feed it exactly the
candidate lines (those holding a record trigger, see :data:`TRIGGERS`), in order, so both give
identical records.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from . import engines, faults, frames, native, sites, stages, startup  # noqa: F401  (register their formats)
from . import orchestrator as _orchestrator
from .clean import continuation, logical_lines
from .formats import REGISTRY, LineFormat, formats
from .headers import parse_header
from .plainhead import CSI as _CSI
from .plainhead import simple_head as _simple_head
from .records import Fault, Header, Record
from .sitefaults import bare_fault, located, site_fault
from .timestamps import STAMP_HINT, YearTracker, local_time, parse_iso

for _banner in _orchestrator.BANNER_FORMATS:  # head-less orchestrator lines: verdicts, srun errors
    REGISTRY.setdefault(_banner.name, _banner)
_BANNER_TRIGGERS = tuple(t for f in _orchestrator.BANNER_FORMATS for t in f.triggers)

_SPECIAL = {"traceback-start", "exception-line", "traceback-frame", "native-frame"}
_ERROR_LEVELS = ("ERROR", "CRITICAL")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+(?:, in (?P<fn>[\w.<>]+))?')
# A traceback frame whose path holds one of these ran in a KV connector (each engine names its own).
_CONNECTOR_PATHS = tuple(p for a in engines.adapters() for p in a.connector_paths)
MAX_CALLS = 256     # a traceback's frames kept for judging it (outermost first)
MAX_LINE = 1 << 20   # a physical line is parsed up to 1 MiB: records are short, giant lines are dumps
MAX_JOIN = 1 << 14   # torn records are rejoined only from lines of ordinary length


def _rx_escape(text: str) -> str:
    """Escape a literal for both Python's re and the Rust regex engine polars uses."""
    return "".join("\\" + c if c in r"\.^$|?*+()[]{}" else c for c in text)


# Kinds a line holds at most one of: once one is parsed, no other format is tried on that line.
# Startup facts are not among them (the one-line KV capacity form holds two facts).
_ALONE = frozenset({"stats", "kv_transfer", "nixl_failure", "kv_expiry", "kv_load_failure", "spec_decode",
                    "preemption", "prefix_cache", "fault"})
_ORDER = {"stats": 0, "kv_transfer": 1, "nixl_failure": 1, "kv_expiry": 1, "kv_load_failure": 1,
          "spec_decode": 2, "preemption": 2, "prefix_cache": 2, "startup": 3, "stage": 3, "fault": 4}


def _record_formats() -> list[LineFormat]:
    """Record formats, the most frequent lines first (stats lines dominate a run's logs), but a format ranked
    below 50 before them all (a specific wording a catch-all of another kind would also take)."""
    fmts = [f for f in formats("record") if f.name not in _SPECIAL and f.emits != "lifecycle"]
    return sorted(fmts, key=lambda f: -1 if f.rank < 50 else _ORDER.get(f.emits, 5))


def _trigger_index(fmts: list[LineFormat]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each distinct trigger with the positions of the formats it starts."""
    index: dict[str, list[int]] = {}
    for i, f in enumerate(fmts):
        for t in f.triggers:
            index.setdefault(t, []).append(i)
    return tuple((t, tuple(ix)) for t, ix in index.items())


@cache
def site_literals() -> tuple[str, ...]:
    """The literals of the lines read only to match their log site (:func:`parsers.sitefaults.site_fault`): the
    level words, the triggers of the heads whose level is no word (a glog line's letter) and the phrases of the
    error sites of the engines whose heads carry no level (:func:`parsers.sites.phrases`)."""
    return tuple(dict.fromkeys((*sites.LEVEL_WORDS, *(t for f in formats("header") for t in f.triggers),
                                *sites.phrases())))


def trigger_literals() -> list[str]:
    """Every record format's triggers, and the literals of the lines a log site may name (an ERROR line no
    format takes is read to match its site, :func:`parsers.sitefaults.site_fault`)."""
    seen: dict[str, None] = {}
    for f in formats("record"):
        for t in f.triggers:
            seen.setdefault(t, None)
    for t in site_literals():
        seen.setdefault(t, None)
    return sorted(seen, key=lambda t: (-len(t), t))


# The fast path: a whole physical line that is exactly one well-formed record of an engine's column spec
# (real CSI colours allowed, nothing else around it), for the specs that say how to build it. It gives the
# same record as the general path, which handles everything else (pastes, prefixes, glued and torn records).
_FAST = tuple((spec.literal, re.compile(spec.patterns[-1]), spec.record, spec.stamp)
              for a in engines.adapters() for spec in a.columns if spec.record is not None)
_HEAD_START = re.compile(r"(?:\x1b\[[0-9;]*m)*(?:\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d|\d{4}-\d\d-\d\d|\[|\{)")

TRIGGER_PATTERN = "|".join(_rx_escape(t) for t in trigger_literals())
# The record formats' triggers alone: a candidate line holding none of them is read only for its log site.
FORMAT_TRIGGER_PATTERN = "|".join(_rx_escape(t) for t in trigger_literals() if t not in site_literals())
# In Python, the trigger phrases are looked up by the line's words (:func:`parsers.sites.holds_phrase`), not by
# one alternation of hundreds of literals: the same candidates as TRIGGER_PATTERN gives the native scans.
TRIGGERS = re.compile("|".join(_rx_escape(t) for t in trigger_literals() if t not in sites.phrases()))
# Real escape sequences (clean.py's first three kinds), as a pattern both Python's re and polars read.
ANSI_PATTERN = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x1b"
_ANSI_SEQ = re.compile(ANSI_PATTERN)


def is_candidate(raw: str) -> bool:
    """Whether a physical line holds a record trigger, also when escape sequences split its words
    (the bulk path's rule, :func:`parsers.ingest._bulk_classify`)."""
    if TRIGGERS.search(raw) or sites.holds_phrase(raw):
        return True
    if "\x1b" not in raw:
        return False
    plain = _ANSI_SEQ.sub("", raw)
    return bool(TRIGGERS.search(plain)) or sites.holds_phrase(plain)


# The two heads that stamp nearly every line of a run, matched on the raw line (colours allowed): vLLM's
# month-day and Dynamo's ISO time. A file scanned line by line (:meth:`LineParser.scan_time`) takes their
# time at once; every other line goes the general way (``tests/test_replay_causal.py`` checks both agree).
_SGR = r"(?:\x1b\[[0-9;]*m)*"
_FAST_MD = re.compile(rf"{_SGR}(?:\([^()\x1b]+? pid=\d+\){_SGR} ?)?{_SGR}(?:DEBUG|INFO|WARNING|ERROR|CRITICAL){_SGR} "
                      rf"{_SGR}(\d\d-\d\d \d\d:\d\d:\d\d){_SGR} {_SGR}\[")
_FAST_ISO = re.compile(rf"{_SGR}(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{{1,9}})?Z){_SGR} +{_SGR} *"
                       r"(?:TRACE|DEBUG|INFO|WARN|ERROR)\b")
_STAMP_SHAPE = re.compile(STAMP_HINT)

# Records worth rejoining when torn across two physical lines (structured, one line each).
_JOINABLE = ("stats", "kv_transfer", "nixl_failure", "kv_expiry", "kv_load_failure", "startup")
_JOINABLE_KINDS = frozenset(_JOINABLE)
JOIN_TRIGGERS = re.compile("|".join(
    _rx_escape(t) for f in formats("record") if f.emits in _JOINABLE for t in f.triggers))


@dataclass
class _Traceback:
    """A traceback being read: its first line, stamp and logging call site, its frames, and its level."""

    start: int
    stamp: dict[str, Any]
    source: str | None
    level: str | None
    head: str | None = None        # the class of its lines' head (an engine's: the log sites it may name)
    group: bool = False            # an exception group's: its sub-exceptions' tracebacks go on with its frames
    caught: bool = False           # headed by a line logging an exception its handler caught (faults.CAUGHT)
    in_connector: bool = False
    fns: list[str] = field(default_factory=list)                 # the innermost function names (at most 12)
    calls: list[tuple[str, str]] = field(default_factory=list)   # (path, function), outermost first
    callees: list[str | None] = field(default_factory=list)   # what each frame's code line calls

    def verdict(self, whole: bool) -> dict[str, Any]:
        """The Fault fields its frames give (:mod:`parsers.frames`): the engine always; the phase only of a
        traceback logged at ERROR/CRITICAL or printed bare (exc_info on a warning is no failure)."""
        v = frames.judge(self.calls, whole, self.callees)
        counts = (self.level is None or self.level in _ERROR_LEVELS) and not self.caught
        return {"engine": v.engine, "frame_phase": v.phase if counts else None, "frame_at": v.at if counts else None,
                "exits": v.exits and counts}


def _code_callee(nxt: str | None) -> str | None:
    """What a frame's code line (the physical line ``nxt`` after it, its heads peeled) calls."""
    if not nxt or len(nxt) > MAX_JOIN:
        return None
    pieces = logical_lines(nxt)
    if len(pieces) != 1:
        return None
    msg = parse_header(pieces[0][0]).msg
    return None if _FRAME.match(msg) else frames.callee(msg)


# The heads that carry no level, with their engine: such a line is an error when its message is one of that
# engine's sites logging an error (SGLang's logger).
_LEVELLESS = {f.emits: f.engine for f in formats("header") if f.levelless}


class LineParser:
    """Stateful per file: groups tracebacks with their exception line, and gives vLLM's year-less
    month-day times a year (in line order, so a run over New Year stays ordered) and UTC."""

    def __init__(self, year: int | None = None, tz_offset_s: int = 0) -> None:
        self._formats = _record_formats()
        self._trigger_index = _trigger_index(self._formats)
        self._tracker = YearTracker(year) if year else None
        self._tz = tz_offset_s
        self._last_md: tuple[str | None, datetime | None] = (None, None)  # engines share a second
        self._month: tuple[str | None, int | None] = (None, None)        # the month last seen, its year
        self._tb_open: dict[tuple[str | None, int | None, int | None], _Traceback] = {}   # per process key
        self._caught: dict[tuple[str | None, int | None, int | None], int] = {}   # its last caught exception's line
        self._next: str | None = None   # the physical line after the one being fed (a frame's code line)
        self._native = native.NativeReports()   # a native crash report held while its stack trace goes on

    def set_clock(self, tz_offset_s: int) -> None:
        """Local stamps from now on are ``tz_offset_s`` ahead of UTC."""
        self._tz = tz_offset_s

    def _resolve(self, md: str) -> datetime | None:
        """UTC time of a month-day: the year tracker decides the year when the month changes (a
        wrap needs a new month); within a month the time is computed directly."""
        if md == self._last_md[0]:
            return self._last_md[1]
        ts: datetime | None = None
        if self._tracker is not None:
            if md[:2] == self._month[0] and self._month[1] is not None and len(md) == 14:
                try:
                    ts = datetime(self._month[1], int(md[:2]), int(md[3:5]), int(md[6:8]), int(md[9:11]),
                                  int(md[12:14]), tzinfo=UTC) - timedelta(seconds=self._tz)
                except ValueError:
                    ts = None
            else:
                try:
                    ts = self._tracker.resolve(md, self._tz)
                    self._month = (md[:2], (ts + timedelta(seconds=self._tz)).year)
                except ValueError:
                    ts = None
        self._last_md = (md, ts)
        return ts

    def _stamp(self, hdr: Header, ext_ts: str | None, task: int | None) -> dict[str, Any]:
        iso = ext_ts or hdr.iso
        ts: datetime | None = None
        if iso:
            try:
                ts = parse_iso(iso, self._tz if hdr.local and not ext_ts else 0)
            except ValueError:
                ts = None
        if hdr.md is not None and self._tracker is not None:
            ts = ts or self._resolve(hdr.md)
        return {"ts": ts, "md": hdr.md, "proc": hdr.proc, "task": task}

    def line_time(self, raw: str, *, advance: bool = False) -> datetime | None:
        """The time a physical line is stamped with (its last stamped logical line), by the same heads
        and year as a record on it would get; None for an unstamped line. Any line counts, noise included:
        it is evidence of how far the log's clock went. The year tracker stays where it is, unless
        ``advance`` (every line of a file in order: a month-day after New Year gets the next year)."""
        for text, ext_ts, _ in reversed(logical_lines(raw[:MAX_LINE])):
            hdr = parse_header(text)
            iso = ext_ts or hdr.iso
            if iso:
                try:
                    return parse_iso(iso, self._tz if hdr.local and not ext_ts else 0)
                except ValueError:
                    pass
            if hdr.md is not None and self._tracker is not None:
                if advance:
                    if (ts := self._resolve(hdr.md)) is not None:
                        return ts
                    continue
                try:
                    return self._tracker.peek(hdr.md, self._tz)
                except ValueError:
                    pass
        return None

    def scan_time(self, raw: str) -> datetime | None:
        """:meth:`line_time` of the lines of a file taken in order (``advance``): a line with one stamp, no
        carriage return and one of the two common heads gets its time without the general path."""
        if "\r" not in raw:
            m = _FAST_MD.match(raw) or _FAST_ISO.match(raw)
            if m and not _STAMP_SHAPE.search(raw, 0, m.start(1)) and not _STAMP_SHAPE.search(raw, m.end(1), MAX_LINE):
                if m.re is _FAST_MD:
                    return self._resolve(m[1])
                return parse_iso(m[1])
        return self.line_time(raw, advance=True)

    def parse_message(self, msg: str, line: int, hdr: Header, stamp: dict[str, Any]) -> list[Record]:
        # one pass over the distinct triggers tells which formats to try (in their usual order)
        hit = sorted({i for t, idx in self._trigger_index if t in msg for i in idx})
        out: list[Record] = []
        for i in hit:
            fmt = self._formats[i]
            m = fmt.regex.search(msg)
            if m is None or fmt.parse is None:
                continue
            rec = fmt.parse(m, line, hdr, **stamp)
            if rec is None:
                continue
            if isinstance(rec, list):
                out.extend(rec)
            else:
                out.append(rec)
            if fmt.emits in _ALONE:
                break  # e.g. one fault per line: the first cause in priority order
        return out

    def _feed_piece(self, text: str, ext_ts: str | None, task: int | None, line: int,
                    hdr: Header | None = None) -> list[Record]:
        hdr = hdr or parse_header(text)
        stamp = self._stamp(hdr, ext_ts, task)
        if hdr.cls == "orchestrator":
            ev = _orchestrator.parse_lifecycle(hdr.msg, line, stamp["ts"])
            return [ev] if ev is not None else []
        if hdr.cls == "unknown" and any(t in text for t in _BANNER_TRIGGERS):
            ev = _orchestrator.parse_banner(text, line)
            if ev is not None:
                return [ev]
        msg = hdr.msg
        recs = self._native.feed(msg, self.parse_message(msg, line, hdr, stamp), self._next)
        key = (hdr.proc, hdr.pid, task)
        if any(isinstance(r, Fault) and r.cause in faults.CAUGHT for r in recs):
            self._caught[key] = line
        if "Traceback (most recent call last)" in msg:
            # CPython prints an exception group's sub-exceptions, each with its own traceback, inside the group's
            # ('  + Exception Group Traceback', '|' gutters): their frames go on from the group's
            if not ((tb := self._tb_open.get(key)) is not None and tb.group):
                self._tb_open[key] = self._opened(line, stamp, hdr, key, group="Exception Group" in msg)
            return recs
        frame = _FRAME.match(msg)
        if frame:  # a traceback whose head was cut off still groups from its first frame
            tb = self._tb_open.get(key) or self._tb_open.setdefault(key, self._opened(line, stamp, hdr, key))
            tb.in_connector = tb.in_connector or any(p in frame["path"] for p in _CONNECTOR_PATHS)
            if frame["fn"]:
                tb.fns = [*tb.fns[-11:], frame["fn"]]
                if len(tb.calls) < MAX_CALLS:
                    tb.calls.append((frame["path"], frame["fn"]))
                    tb.callees.append(_code_callee(self._next))
            return recs
        exc = faults.exception_line(msg) if key in self._tb_open else None
        if exc is not None:
            tb = self._tb_open.pop(key)
            exc_text = f"{exc[0]}: {exc[1]}" if exc[1] else exc[0]
            judged = tb.verdict(whole=True)
            judged.pop("exits")   # a whole traceback's exception names its cause
            for i, r in enumerate(recs):
                if isinstance(r, Fault):
                    recs[i] = Fault(r.line, cause=r.cause, message=r.message, exception=exc_text,
                                    traceback_line=tb.start, frames=tuple(tb.fns), ts=r.ts, md=r.md, proc=r.proc,
                                    task=r.task, **judged)
                    break
            else:
                cause = faults.classify(msg) or ("kv_connector" if tb.in_connector
                                                 else faults.classify_exception(*exc))
                recs += site_fault(line, msg, cause, exc, stamp, exception=exc_text, traceback_line=tb.start,
                                    frames=tuple(tb.fns), **judged)
        elif not recs and hdr.level in _ERROR_LEVELS and key not in self._tb_open:
            # logger.exception(e) in V0 prints the exception itself as an ERROR line (then the traceback)
            bare = faults.exception_line(msg)
            if bare is not None:
                text = f"{bare[0]}: {bare[1]}" if bare[1] else bare[0]
                recs += site_fault(line, msg, faults.classify_exception(*bare), bare, stamp, exception=text)
            else:  # an error line no fault format took: the site that printed it, if one is classified
                recs += site_fault(line, msg, None, None, stamp)
        elif not recs and hdr.level is None:
            if hdr.cls in _LEVELLESS and key not in self._tb_open and faults.exception_line(msg) is None:
                recs += site_fault(line, msg, None, None, stamp, only=_LEVELLESS[hdr.cls])
            elif not self._tb_open:  # an exception line quoted alone (no traceback anywhere, no level)
                recs += bare_fault(line, msg, stamp)
        if hdr.source:
            recs = [replace(r, where=hdr.source) if isinstance(r, Fault) else r for r in recs]
        return recs

    def _opened(self, line: int, stamp: dict[str, Any], hdr: Header, key: tuple[str | None, int | None, int | None],
                group: bool = False) -> _Traceback:
        """A traceback opening on ``line``: caught when a line logging a caught exception heads it (it or the
        blank line its message ends with just before)."""
        caught = key in self._caught and 0 < line - self._caught[key] <= 2
        return _Traceback(line, stamp, hdr.source, hdr.level, hdr.cls, group=group, caught=caught)

    def cut_tracebacks(self) -> list[Fault]:
        """At the end of the input: a native crash report still held (:mod:`parsers.native`), and each traceback
        still open (its frames seen, its exception line never) as a fault of cause ``cut_traceback`` carrying its
        frames and its logging call site (the ``file:line`` of its head); the rules judge it by them."""
        out = self._native.flush()
        for tb in self._tb_open.values():
            if tb.fns:
                judged = tb.verdict(whole=False)
                cause = faults.ESCAPED if judged.pop("exits") and not judged["frame_phase"] else faults.CUT
                cut = f"traceback cut before its exception line (innermost frame seen: {tb.fns[-1]})"
                fault = Fault(tb.start, cause=cause.name, message=cut, traceback_line=tb.start,
                              frames=tuple(tb.fns), where=tb.source, **judged, **tb.stamp)
                out.append(located(fault, tb.level, tb.head) if cause is faults.CUT else fault)
        self._tb_open.clear()
        return out

    def _fast(self, line: int, raw: str, nxt: str | None, fast: re.Pattern[str],
              build: Callable[..., Record], stamp: str | None) -> list[Record] | None:
        """The one record of a clean line of a fast pattern, or None to take the general path."""
        if nxt and not _HEAD_START.match(nxt):
            return None  # the next line may be the rest of this record (torn after an optional part)
        text = _CSI.sub("", raw) if "\x1b" in raw else raw
        m = fast.fullmatch(text.rstrip("\r"))
        if m is None:
            return None
        g = m.groupdict()
        if stamp is not None:  # a full local stamp, no month-day
            md, ts = None, local_time(g["stamp"], stamp, self._tz)
        else:
            md = g["md"]
            ts = self._resolve(md) if self._tracker is not None else None
        return [build(g, line, ts, md, g["proc"])]

    def feed(self, line: int, raw: str, nxt: str | None = None, prv: str | None = None) -> tuple[list[Record], bool]:
        """Records of physical line ``line``; True when the next line was consumed (torn record).

        ``prv`` is the previous physical line when that line was not a candidate itself: a record
        torn before its trigger is rejoined from it.
        """
        for literal, fast_rx, build, stamp in _FAST:
            if literal in raw and len(raw) < MAX_JOIN:
                fast = self._fast(line, raw, nxt, fast_rx, build, stamp)
                if fast is not None:
                    return fast, False
        raw = raw[:MAX_LINE]
        if prv is not None and len(prv) > MAX_JOIN:
            prv = None
        if nxt is not None and len(nxt) > MAX_JOIN:
            nxt = None
        simple = _simple_head(raw)
        pieces = [(simple[0], None, None)] if simple is not None else logical_lines(raw)
        self._next = nxt
        out: list[Record] = []
        consumed = False
        for i, (text, ext_ts, task) in enumerate(pieces):
            if (simple is None and i == 0 and prv is not None and JOIN_TRIGGERS.search(text)
                    and parse_header(text).cls == "unknown"):
                back = self._join_back(prv, raw, line - 1)
                if back:
                    out.extend(back)
                    continue
            recs = self._feed_piece(text, ext_ts, task, line, simple[1] if simple is not None else None)
            last = i == len(pieces) - 1
            if (last and nxt and not _HEAD_START.match(nxt) and all(r.kind in _JOINABLE_KINDS for r in recs)
                    and JOIN_TRIGGERS.search(text)):
                joined = self._try_join(text, nxt, task)
                if joined is not None:
                    hdr = parse_header(joined)
                    more = self.parse_message(hdr.msg, line, hdr, self._stamp(hdr, ext_ts, task))
                    if more and (not recs or _richer(more, recs)):
                        recs, consumed = more, True
            out.extend(recs)
        return out, consumed

    def _join_back(self, prv: str, raw: str, line: int) -> list[Record]:
        """Records of ``prv`` + ``raw`` when ``raw`` has no head and completes a record of ``prv``."""
        before = logical_lines(prv)
        if not before:
            return []
        ptext, ext_ts, task = before[-1]
        ctext = _continuation(raw, task)
        if ctext is None:
            return []
        hdr = parse_header(_joined(ptext, ctext))
        if hdr.cls == "unknown":
            return []
        recs = self.parse_message(hdr.msg, line, hdr, self._stamp(hdr, ext_ts, task))
        return [r for r in recs if r.kind in _JOINABLE_KINDS]

    @staticmethod
    def _try_join(text: str, nxt: str, task: int | None = None) -> str | None:
        """The record continued on the next physical line, if that line has no head of its own.

        The continuation is taken raw (ANSI removed, no prefix peeling: "004: Avg..." is the rest of
        "Engine 004", not an srun label), except for the srun label of the torn line's own task.
        """
        ctext = _continuation(nxt, task)
        return None if ctext is None else _joined(text, ctext)


def _continuation(raw: str, task: int | None) -> str | None:
    """``raw`` as the rest of a torn record of srun task ``task``, or None when it starts a record
    of its own (a head, before or after peeling wrapper prefixes, or another task's label)."""
    ctext = continuation(raw, task)
    if not ctext or parse_header(ctext).cls != "unknown":
        return None
    pieces = logical_lines(raw)
    if pieces and parse_header(pieces[0][0]).cls != "unknown":
        return None
    if task is not None and pieces and pieces[0][2] not in (None, task):
        return None  # srun labels every line: a continuation carries its own task's label
    return ctext


def _joined(text: str, ctext: str) -> str:
    """A record and its continuation as one line. A torn record goes on mid-word; an indented continuation
    is a wrapped line (a paste, a narrow terminal) whose wrap stood for one space."""
    if ctext[:1].isspace():
        return f"{text.rstrip()} {ctext.lstrip()}"
    return text + ctext


def _filled(recs: list[Record]) -> int:
    return sum(v is not None for r in recs for v in (getattr(r, f) for f in r.__dataclass_fields__))


def _richer(joined: list[Record], alone: list[Record]) -> bool:
    """A record cut at an optional part parses alone; the joined one then carries more fields."""
    return [r.kind for r in joined] == [r.kind for r in alone] and _filled(joined) > _filled(alone)
