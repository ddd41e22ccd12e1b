"""Headless core of `diag watch`: the run pipeline on the collecting thread → an immutable Snapshot.

:class:`WatchState` lives in the collecting thread; each :meth:`WatchState.step` runs one step of
the same :class:`diag.pipeline.Pipeline` as ``diag tail -f`` (poll, assemble, analyze) and turns its
:class:`~diag.report.Report` into a frozen :class:`Snapshot` that the widgets (or ``--once``) only read. Memory is bounded: per-endpoint
sparkline series are ring buffers of 10 s points over 60 min, periodic samples older than the
retention horizon are dropped from the model, other records are capped per log, and the snapshot
keeps a fixed number of recent records per endpoint. No Textual here.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple

import polars as pl

from diag.parsers.ingest import ParsedLog
from diag.parsers.records import Fault, KVTransfer, Lifecycle, SpecDecode, StartupFact, StatsSample
from diag.rules.endpoints import engine_index
from diag.rules.engine import fold_cascades, key, same
from diag.rules.finding import Finding, severity_rank
from diag.rules.incidents import DEATH, FATAL
from diag.rules.present import duration, number
from diag.rules.runmodel import Endpoint, Run
from diag.rules.settings import Settings

from ..pipeline import Pipeline
from ..report import NO_FIGURES, EndpointSummary, EngineFigures, Report
from ..sources import MultiSource, ReplaySource
from . import WINDOWS
from .records import RecordLine, record_line, stats_line
from .ring import SERIES_POINTS, STEP_S, Point, Ring

EVENTS_KEEP = 150                   # recent non-periodic records per endpoint in a snapshot
STATS_KEEP = 24                     # recent stats lines per endpoint in a snapshot
CLOSED_KEEP = 100                   # findings that closed during the session
EVENTS_CAP = 5000                   # non-periodic records kept per log (startup facts, lifecycle: all)
PERIODIC = (StatsSample, KVTransfer, SpecDecode)
PINNED = (StartupFact, Lifecycle)
TERMINAL_STAGES = ("completed", "failed", "killed", "timeout")
RECENT_S = 120.0                    # a window that ended this close to the latest data is still open

LOG_KEEP = 500                      # findings-log entries (openings and closings) kept in a session


@dataclass(frozen=True)
class EngineRow:
    """An engine (DP rank): its figures over its endpoint's window (the row's figures are their sums);
    ``last_ts``/``age_s`` of its last sample of any time."""

    engine: str
    figures: EngineFigures
    last_ts: datetime | None
    age_s: float | None
    dead: bool = False                  # its process logged a fatal fault or a death (rules.incidents)...
    dead_at: datetime | None = None     # ... first at this time


@dataclass(frozen=True)
class EndpointRow:
    s: EndpointSummary
    age_s: float | None
    series: tuple[Point, ...]
    engine_names: tuple[str, ...] = ()  # the order of each point's ``engine_kv``

    @property
    def id(self) -> str:
        return self.s.id

    @property
    def role(self) -> str:
        return self.s.role


@dataclass(frozen=True)
class FindingRow:
    f: Finding
    state: str          # open | closed
    role: str | None    # role of the finding's endpoint (None: the whole run)
    consequences: tuple[Finding, ...] = ()   # findings on other endpoints this one caused (folded under it)
    roles: frozenset[str | None] = frozenset()  # its own role and its consequences' (the role filter)

    @property
    def key(self) -> tuple[str, str | None, str]:
        return key(self.f)


@dataclass(frozen=True)
class LogEntry:
    """A finding that opened (or was there at the start) or closed, as of the run's time ``at``."""

    seq: int
    at: datetime | None
    event: str          # open | close | start
    f: Finding


class Limit(NamedTuple):
    """A rule's threshold, as configured: a cell past it takes the rule's severity style."""

    value: float
    severity: str
    code: str


# cell -> (rule, parameter): the thresholds the endpoint table highlights against (catalog, settings)
LIMIT_PARAMS = {"kv": ("DIAG-K001", "kv_usage"), "kv_rising": ("DIAG-K004", "kv_usage"),
                "wait": ("DIAG-B001", "waiting_high"), "pre": ("DIAG-K002", "min_count")}


def limits_of(settings: Settings) -> Mapping[str, Limit]:
    out = {}
    for cell, (code, param) in LIMIT_PARAMS.items():
        rule = settings.rule(code)
        out[cell] = Limit(float(rule.params[param]), rule.severity, code)
    return MappingProxyType(out)


@dataclass(frozen=True)
class TableCells:
    """Every endpoint's table cells (rich Texts, by column key) for one sparkline window: made off the
    UI thread by ``render.with_table``."""

    window: int
    cells: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Snapshot:
    """Everything a frame shows; built in the collecting thread, never mutated."""

    seq: int
    now: datetime | None
    label: str
    header: tuple[tuple[str, str], ...]
    endpoints: tuple[EndpointRow, ...]
    findings: tuple[FindingRow, ...]
    engines: Mapping[str, tuple[EngineRow, ...]]
    records: Mapping[str, tuple[RecordLine, ...]]
    opened: tuple[Finding, ...] = ()
    closed: tuple[Finding, ...] = ()
    errors: tuple[str, ...] = ()
    done: bool = False
    kv_threshold: float = 95.0          # DIAG-K001's kv_usage, as configured
    limits: Mapping[str, Limit] = field(default_factory=lambda: MappingProxyType({}))  # LIMIT_PARAMS, as configured
    mode: str = "live"                  # live | replay | finished (a finished run's logs will not grow)
    isl_osl: tuple[int | None, int | None] = (None, None)  # the benchmark's lengths: tok/s -> req/s
    verdict: str | None = None          # the run verdict's class (the columns it rests on come first)
    log: tuple[LogEntry, ...] = ()      # findings opened and closed this session, oldest first
    table: TableCells | None = field(default=None, compare=False)  # the endpoint table's cells, made
    # off the UI thread for one window (TableCells); None: the screen makes them

    def endpoint(self, eid: str) -> EndpointRow | None:
        return next((e for e in self.endpoints if e.id == eid), None)

    def __repr__(self) -> str:  # the generated one formats every ring point: seconds for a long run
        return (f"Snapshot(seq={self.seq}, now={self.now}, endpoints={len(self.endpoints)}, "
                f"findings={len(self.findings)}, done={self.done})")

    def all_records(self) -> tuple[RecordLine, ...]:
        return tuple(sorted((r for rs in self.records.values() for r in rs), key=_ts_key))


def _ts_key(r: RecordLine) -> tuple[bool, datetime, int]:
    return r.ts is None, r.ts or datetime.min.replace(tzinfo=UTC), r.line


def compact(logs: Iterable[ParsedLog], horizon: datetime | None, cap: int | None = None) -> dict[str, ParsedLog]:
    """Trimmed copies (by path) of the logs that hold periodic samples older than ``horizon`` or more than
    ``cap`` other records (startup facts and lifecycle events always stay). The logs themselves are not
    touched: the runs built from them earlier keep them whole (the source adopts the copies)."""
    cap = EVENTS_CAP if cap is None else cap
    out: dict[str, ParsedLog] = {}
    for log in logs:
        cols = {}
        if horizon is not None:  # extracted stats/KV rows: the same horizon
            for name in ("stats", "kv"):
                frame = getattr(log, name)
                if frame.height:
                    kept = frame.filter(pl.col("ts").is_null() | (pl.col("ts") >= horizon))
                    if kept.height != frame.height:
                        cols[name] = kept
        recs = log.records
        keep = [r for r in recs if not (horizon is not None and isinstance(r, PERIODIC) and r.ts is not None
                                        and r.ts < horizon)]
        events = [i for i, r in enumerate(keep) if not isinstance(r, (*PERIODIC, *PINNED))]
        if len(events) > cap:
            gone = set(events[: len(events) - cap])
            keep = [r for i, r in enumerate(keep) if i not in gone]
        if cols or len(keep) != len(recs):
            out[log.path] = replace(log, records=keep, **cols)
    return out


def dropped(before: Iterable[ParsedLog], after: Mapping[str, ParsedLog]) -> int:
    """How many records and rows the copies of :func:`compact` left out."""
    return sum(lg.n_records - after[lg.path].n_records for lg in before if lg.path in after)


def dead_engines(ep: Endpoint) -> dict[str, datetime | None]:
    """The engines (DP ranks) whose process logged a fatal fault or its death, with the first such time."""
    out: dict[str, datetime | None] = {}
    for _, r in ep.of(Fault):
        rank = engine_index(r.proc or "")  # type: ignore[attr-defined]
        if rank is not None and r.cause in DEATH | FATAL:  # type: ignore[attr-defined]
            out.setdefault(rank, r.ts)
    return out


def _engines(ep: Endpoint, summary: EndpointSummary | None) -> list[EngineRow]:
    """Each engine's row over the window its endpoint's row is taken over (``summary.per_engine``: the
    engines' means add up to the row's), its age from its last sample of any time."""
    dead = dead_engines(ep)
    figures = summary.per_engine if summary is not None else {}
    last: dict[str, datetime | None] = {}
    if ep.stats.height:
        latest = ep.stats.sort("ts", nulls_last=False).group_by("engine", maintain_order=True).agg(pl.col("ts").last())
        last = dict(latest.select("engine", "ts").iter_rows())
    names = sorted({*last, *ep.engines, *dead}, key=lambda e: (len(e), e))
    return [EngineRow(e, figures.get(e, NO_FIGURES), last.get(e), None, e in dead, dead.get(e)) for e in names]


def recent_records(ep: Endpoint) -> tuple[RecordLine, ...]:
    """The endpoint's last timed events and stats lines in time order (noise lines never become records;
    an untimed line, a startup stage's progress, is in the log, not here)."""
    events: list[RecordLine] = []
    for file, r in reversed(ep.records):
        if r.ts is not None and not isinstance(r, PERIODIC):
            events.append(record_line(ep.id, file, r))
            if len(events) >= EVENTS_KEEP:
                break
    stats = [stats_line(ep.id, row) for row in ep.stats.tail(STATS_KEEP).iter_rows(named=True)]
    return tuple(sorted(events + stats, key=_ts_key))




def _short_build(b: str) -> str:
    parts = b.split()
    return " ".join(p[:12] if len(p) > 16 and all(c in "0123456789abcdef" for c in p) else p for p in parts)


def header(report: Report, now: datetime | None) -> tuple[tuple[str, str], ...]:
    """Job, model, topology, build, stage, elapsed, the verdict, the useful tok/s (and per GPU) the engines
    measured over the verdict's steady window, where the queue stands, the benchmark's tok/s at the
    verdict's point (else its best so far): both figures, each labelled."""
    run = report.run
    base = dict(report.header)
    stage = base.get("stage", "unknown")
    rows = [("job", base.get("job", "-")), ("model", base.get("model", "-")),
            ("topology", base.get("topology", "-")), ("build", _short_build(run.build or "unknown")),
            ("stage", stage)]
    end = run.clock if stage in TERMINAL_STAGES or now is None else now
    if run.start and end:
        rows.append(("elapsed", duration(coarse=True, s=(end - run.start).total_seconds())))
    v = report.verdict
    if v is not None:
        rows.append(("verdict", f"{v.label} · {v.confidence}" + (f" @{number(v.concurrency)}" if v.concurrency else "")
                     + (f" ({'; '.join(v.confidence_reasons)})" if v.confidence_reasons else "")))
    tp: dict[str, Any] = report.throughput or {}
    engines = tp.get("engines") or {}
    tps = number(engines.get("tps"))   # the useful tok/s the engines measured (report.throughput)
    if engines.get("per_working_gpu") is not None:
        tps += f" · {number(engines['per_working_gpu'])}/GPU ({number(tp['working_gpus'])} GPUs)"
    window = tp.get("window")
    rows.append(("tok/s", tps + (f" over {window['label']}" if window else "")))
    if report.balance:
        b = report.balance
        rows.append(("queue", f"P {number(b['prefill_waiting_per_engine'], 1)} · D {number(b['decode_waiting_per_engine'], 1)}"
                              f" /eng · D KV {number(b['decode_kv_pct'], 1)} %"))
    bench = tp.get("benchmark")
    if bench is not None:   # the benchmark's at the verdict's point, else its best so far
        text = f"{number(bench['tps'])} tok/s @{number(tp['concurrency'])}"
        if bench["per_working_gpu"] is not None:
            text += f" · {number(bench['per_working_gpu'])}/GPU"
        rows.append(("bench", text))
    elif (tpg := report.tokens_per_gpu) is not None:
        text = f"{number(tpg['total_token_throughput'])} tok/s @{number(tpg['concurrency'])}"
        if "per_working_gpu" in tpg:
            text += f" · {number(tpg['per_working_gpu'])}/GPU"
        rows.append(("bench", text))
    return tuple(rows)


class WatchState:
    """The mutable side of the TUI, owned by the collecting thread; :meth:`step` is serialized."""

    def __init__(self, source: Any, *, settings: Settings | None = None,
                 clock: Callable[[Run], datetime | None] | None = None,
                 retain_s: float | None = 3600.0) -> None:
        self.source = source
        self.pipeline = Pipeline(source, settings or Settings(), clock)
        self.retain_s = retain_s
        self.lock = threading.Lock()
        self.rings: dict[str, Ring] = {}
        self.findings: list[Finding] = []
        self.closed: dict[tuple[str, str | None, str], Finding] = {}
        self.report: Report | None = None
        self.latest: datetime | None = None
        self.records: dict[str, tuple[RecordLine, ...]] = {}
        self.engine_rows: dict[str, list[EngineRow]] = {}
        self.seq = 0
        self.last_step_s = 0.0
        self.log: deque[LogEntry] = deque(maxlen=LOG_KEEP)
        self._log_seq = 0
        self.limits = limits_of(self.pipeline.settings)
        self.kv_threshold = self.limits["kv"].value
        self._pending: tuple[list[Finding], list[Finding]] = ([], [])

    @property
    def run(self) -> Run | None:
        return self.report.run if self.report is not None else None

    def step(self) -> Snapshot:
        """One pipeline step: poll the source; when records arrived, compact the retained history,
        re-assemble and re-analyze; return a new snapshot."""
        with self.lock:
            t0 = time.monotonic()
            changes = self.source.poll()
            for _, r in changes.records:
                if r.ts is not None and (self.latest is None or r.ts > self.latest):
                    self.latest = r.ts
            for _, stats, kv in changes.rows:
                for cols in (stats, kv):
                    t = cols["ts"].max() if cols.height else None
                    if t is not None and (self.latest is None or t > self.latest):  # type: ignore[operator]
                        self.latest = t  # type: ignore[assignment]
            if changes and self.retain_s is not None and self.latest is not None:
                now = self.source.now() or datetime.now(tz=UTC)
                trimmed = compact(self.source.logs(), min(self.latest, now) - timedelta(seconds=self.retain_s))
                if trimmed:
                    self.source.adopt(trimmed)
            update = self.pipeline.consume(changes)
            if update.report is not None:
                self._apply(update.report, update.opened, update.closed)
            snap = self._snapshot()
            self.last_step_s = time.monotonic() - t0
            return snap

    def _apply(self, report: Report, opened: tuple[Finding, ...], closed: tuple[Finding, ...]) -> None:
        findings = list(report.findings)
        if self.report is not None:
            rekeyed = {(c.code, c.endpoint) for c in closed if any(same(c, g) for g in findings)}
            op = [f for f in opened if (f.code, f.endpoint) not in rekeyed]
            cl = [c for c in closed if (c.code, c.endpoint) not in rekeyed]
            self._pending = (self._pending[0] + op, self._pending[1] + cl)
            now_keys = {key(f) for f in findings}
            for f in cl:
                if key(f) not in now_keys:
                    self.closed[key(f)] = f
            for k in now_keys:
                self.closed.pop(k, None)
            while len(self.closed) > CLOSED_KEEP:
                self.closed.pop(next(iter(self.closed)))
            self._log("open", op, report.now)
            self._log("close", cl, report.now)
        else:
            self._log("start", findings, report.now)
        self.findings, self.report = findings, report
        endpoints = report.run.endpoints
        for gone in set(self.rings) - set(endpoints):
            del self.rings[gone]
        for ep in endpoints.values():
            self.rings.setdefault(ep.id, Ring()).update(ep.stats)
        self.records = {ep.id: recent_records(ep) for ep in endpoints.values()}
        self.engine_rows = {ep.id: _engines(ep, report.endpoint(ep.id)) for ep in endpoints.values()}

    def _log(self, event: str, findings: list[Finding], now: datetime | None) -> None:
        for f in findings:
            at = (f.last_ts if event == "close" else f.first_ts) or now
            self._log_seq += 1
            self.log.append(LogEntry(self._log_seq, at, event, f))

    def _finding_rows(self, run: Run) -> tuple[FindingRow, ...]:
        """Open first (firing at the end of the data, a standing condition, or ended less than
        RECENT_S before its endpoint's, or the run's, latest record), then closed (the data moved on,
        or no longer reported); each most severe first."""
        role = {e.id: e.role for e in run.endpoints.values()}
        latest = {e.id: e.last_ts for e in run.endpoints.values()}
        run_end = run.end

        def is_open(f: Finding) -> bool:
            ref = latest.get(f.endpoint or "") or run_end
            if f.open or f.last_ts is None or ref is None:
                return True
            return (ref - f.last_ts).total_seconds() <= RECENT_S

        causes, folded = fold_cascades(self.findings)
        live = [FindingRow(f, "open" if is_open(f) else "closed", role.get(f.endpoint or ""), causes.get(key(f), ()),
                           frozenset({role.get(f.endpoint or ""), *(role.get(c.endpoint or "") for c in causes.get(key(f), ()))}))
                for f in self.findings if key(f) not in folded]
        gone = [FindingRow(f, "closed", role.get(f.endpoint or ""), roles=frozenset({role.get(f.endpoint or "")}))
                for f in self.closed.values()]
        rows = live + gone
        epoch = datetime.min.replace(tzinfo=UTC)
        rows.sort(key=lambda r: (r.state != "open", -severity_rank(r.f.severity),
                                 -(r.f.last_ts or epoch).timestamp() if r.state == "closed" else 0.0))
        return tuple(rows)

    def _snapshot(self) -> Snapshot:
        report = self.report
        assert report is not None
        run, now = report.run, report.now
        rows = []
        for s in report.endpoints:
            last = run.endpoints[s.id].stats["ts"].max() if s.samples else None
            age = (now - last).total_seconds() if now is not None and last is not None else None  # type: ignore[operator]
            ring = self.rings[s.id]
            rows.append(EndpointRow(s, None if age is None else max(0.0, age), tuple(ring.points),
                                    tuple(ring.engines)))
        engines = {eid: tuple(_aged(r, now) for r in rs) for eid, rs in self.engine_rows.items()}
        self.seq += 1
        opened, closed = self._pending
        self._pending = ([], [])
        return Snapshot(
            seq=self.seq, now=now, label=self.source.label, header=header(report, now),
            endpoints=tuple(rows), findings=self._finding_rows(run), engines=MappingProxyType(engines),
            records=MappingProxyType(dict(self.records)), opened=tuple(opened), closed=tuple(closed),
            errors=(*run.errors, *self.source.errors), done=self.source.finished,
            kv_threshold=self.kv_threshold, limits=self.limits, mode=run_mode(self.source, report.stage),
            isl_osl=run.isl_osl(), log=tuple(self.log),
            verdict=report.verdict.cls if report.verdict is not None else None)


def run_mode(source: Any, stage: str) -> str:
    """``replay`` (``replayed`` once at its end), ``finished`` (a read or followed run whose orchestrator
    logged its end: its logs will not grow), else ``live``."""
    first = source.sources[0] if isinstance(source, MultiSource) else source
    if isinstance(first, ReplaySource):
        return "replayed" if source.finished else "replay"
    return "finished" if source.finished or stage in TERMINAL_STAGES else "live"


def by_code(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    """Findings grouped by code, most severe code first (one toast per code)."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.code, []).append(f)
    return dict(sorted(groups.items(), key=lambda kv: -max(severity_rank(f.severity) for f in kv[1])))


def _aged(r: EngineRow, now: datetime | None) -> EngineRow:
    if now is None or r.last_ts is None:
        return r
    return replace(r, age_s=max(0.0, (now - r.last_ts).total_seconds()))


def memory_footprint(state: WatchState) -> dict[str, int]:
    """Sizes of everything that grows with time (the bound test checks these)."""
    return {"ring_points": sum(len(r.points) for r in state.rings.values()),
            "max_ring": max((len(r.points) for r in state.rings.values()), default=0),
            "model_records": sum(s.n_records for s in state.source.logs()),
            "snapshot_records": sum(len(v) for v in state.records.values()),
            "closed": len(state.closed)}


__all__ = ["SERIES_POINTS", "STEP_S", "WINDOWS", "EndpointRow", "EngineRow", "FindingRow", "LogEntry", "Point", "RecordLine", "Ring", "Snapshot",
           "WatchState", "compact", "dropped", "memory_footprint"]
