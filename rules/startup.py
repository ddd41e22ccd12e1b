"""An endpoint's startup timeline: which stage it reached, when each stage ended, what each took.

The stages and the lines that evidence them are catalog data (``parsers/catalog/startup.toml``); the
lines arrive as :class:`StageMark` records. A stage ends at its last line (every engine of the endpoint
has gone through it, as far as the log shows); the time it took runs from the end of the stage before
it, so the stages partition the startup. The phase decides which rules may judge the endpoint: one
that is still ``starting`` (or ``ready`` but not yet sent a request) has no stats lines by design,
which is neither missing stats (DIAG-L001) nor a stall (DIAG-B004); DIAG-S001 judges its stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from diag.parsers.records import Lifecycle, Record, StageMark
from diag.parsers.stages import BY_NAME, STAGES

from .serving import BENCHMARK_EVENTS, first_work

PHASES = ("unknown", "starting", "ready", "serving")
_FACTS = ("memory_gib", "kv_gib", "tokens", "concurrency", "compile_s", "init_s")


@dataclass(frozen=True)
class StageSpan:
    """One stage of one endpoint: ``end`` is None while it is under way."""

    stage: str
    start: datetime | None               # the end of the stage before it (else its first line)
    end: datetime | None                 # its last line
    reported_s: float | None = None      # what the log itself says the stage took (slowest engine)
    progress: tuple[int, int] | None = None   # done/total of the latest progress bar
    facts: tuple[tuple[str, Any], ...] = ()
    where: tuple[str, int] | None = None      # (file, line) of its first line

    @property
    def label(self) -> str:
        return BY_NAME[self.stage].label

    def duration_s(self, now: datetime | None = None) -> float | None:
        """Seconds it took (or, under way, has taken as of ``now``)."""
        end = self.end or now
        if self.start is None or end is None:
            return None
        return max(0.0, (end - self.start).total_seconds())


@dataclass(frozen=True)
class Startup:
    """The stages an endpoint went through, in catalog order, and its phase."""

    stages: tuple[StageSpan, ...] = ()
    phase: str = "unknown"               # unknown (no startup lines) | starting | ready | serving
    started_at: datetime | None = None
    ready_at: datetime | None = None
    serving_at: datetime | None = None
    until: datetime | None = None        # the endpoint's last line, or the orchestrator's: how far the evidence goes

    def as_of(self, now: datetime | None) -> datetime | None:
        """Until when a stage under way has lasted: the endpoint's own last line (noise included) or the
        orchestrator's that waits for it, never past ``now``."""
        if self.until is None or now is None:
            return self.until or now
        return min(self.until, now)

    def finished(self, span: StageSpan) -> bool:
        """The stage is over: a later stage began (its last line so far may not be its last line)."""
        return span.end is not None and span is not self.stages[-1]

    @property
    def current(self) -> StageSpan | None:
        """The stage under way (or the last one reached)."""
        return self.stages[-1] if self.stages else None

    @property
    def serving(self) -> bool:
        """Judged like a serving endpoint: it served a request, or no startup line says otherwise."""
        return self.phase in ("serving", "unknown")

    def span(self, stage: str) -> StageSpan | None:
        return next((s for s in self.stages if s.stage == stage), None)

    def to_dict(self, now: datetime | None) -> dict[str, Any]:
        cur = self.current
        return {
            "phase": self.phase,
            "stage": cur.stage if cur else None,
            "started_at": _iso(self.started_at), "ready_at": _iso(self.ready_at),
            "serving_at": _iso(self.serving_at),
            "ready_after_s": _secs(self.started_at, self.ready_at),
            "stages": [{"stage": s.stage, "label": s.label, "start": _iso(s.start), "end": _iso(s.end),
                        "duration_s": _round(s.duration_s(self.as_of(now))), "open": s.end is None,
                        "reported_s": _round(s.reported_s),
                        "progress": list(s.progress) if s.progress else None, "facts": dict(s.facts)}
                       for s in self.stages],
        }


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _secs(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else round(max(0.0, (b - a).total_seconds()), 1)


@dataclass
class _Acc:
    first: datetime | None = None
    last: datetime | None = None
    last_mark: str = ""
    reported: float | None = None
    progress: tuple[int, int] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    where: tuple[str, int] | None = None


def _marks(records: Sequence[tuple[str, Record]]) -> list[tuple[datetime | None, str, StageMark]]:
    """(time, file, mark); a mark without a time (a tqdm bar) takes its file's last time before it."""
    out = []
    last: dict[str, datetime | None] = {}
    for file, r in records:
        if r.ts is not None:
            last[file] = r.ts
        if isinstance(r, StageMark):
            out.append((r.ts or last.get(file), file, r))
    return out


def build_startup(eid: str, records: Sequence[tuple[str, Record]], stats: pl.DataFrame, kv: pl.DataFrame,
                  lifecycle: Sequence[tuple[str, Lifecycle]] = (), until: datetime | None = None) -> Startup:
    """The startup timeline of endpoint ``eid`` from its (file, record) pairs, its stats and KV rows and
    the orchestrator's events; ``until``: how far its evidence goes (:meth:`Startup.as_of`)."""
    acc: dict[str, _Acc] = {}
    for ts, file, mark in _marks(records):
        a = acc.setdefault(mark.stage, _Acc())
        if a.where is None:
            a.where = (file, mark.line)
        if ts is not None:
            a.first = ts if a.first is None or ts < a.first else a.first
            a.last = ts if a.last is None or ts > a.last else a.last
        a.last_mark = mark.mark
        took = mark.get("took")
        if took is not None and (a.reported is None or took > a.reported):
            a.reported = float(took)
        if mark.mark == "progress" and mark.get("total"):
            a.progress = (int(mark.get("done") or 0), int(mark.get("total")))
        for k in _FACTS:
            if (v := mark.get(k)) is not None:
                a.facts[k] = v
    launched = [ev.ts for _, ev in lifecycle if ev.event == "worker_start" and ev.ts is not None
                and f"{ev.get('mode')}-w{ev.get('index')}" == eid]
    started = min(launched) if launched else None
    if "process" in acc:
        p = acc["process"]
        started = min(t for t in (started, p.first) if t is not None) if (started or p.first) else None
    elif started is not None:
        acc["process"] = _Acc(first=started, last=started, last_mark="start")
    ready_ev = next((ev.ts for _, ev in lifecycle if ev.event == "ready" and ev.ts is not None), None)
    bench_ev = next((ev.ts for _, ev in lifecycle if ev.event in BENCHMARK_EVENTS and ev.ts), None)
    ready_at = acc["ready"].last if "ready" in acc else None
    if ready_at is None and acc and ready_ev is not None:
        ready_at = ready_ev
    if ready_at is None and stats.height and acc:
        ready_at = stats["ts"].min()  # stats lines come from a running API server
    serving_at = first_work(stats, kv)
    if serving_at is None and ready_at is not None and bench_ev is not None:
        serving_at = max(ready_at, bench_ev)
    if not acc and serving_at is None:
        # a log that has said nothing yet (a live or replayed launch's first seconds) is starting
        return Startup(phase="starting" if not records and not stats.height else "unknown", until=until)
    reached = [s for s in STAGES if s.name in acc and s.name not in ("ready", "serving")]
    spans: list[StageSpan] = []
    prev_end = started
    for s in reached:
        a = acc[s.name]
        done = a.last_mark == "done" or s is not reached[-1] or ready_at is not None
        start = prev_end if prev_end is not None else a.first
        end = a.last if done else None
        if start is not None and end is not None and end < start:
            end = start   # engines interleave: a stage can end before the one before it did
        spans.append(StageSpan(s.name, start, end, a.reported, a.progress, tuple(a.facts.items()), a.where))
        prev_end = end or prev_end
    if ready_at is not None:
        spans.append(StageSpan("ready", prev_end or ready_at, max(ready_at, prev_end or ready_at),
                               where=acc["ready"].where if "ready" in acc else None))
        if serving_at is not None:
            spans.append(StageSpan("serving", spans[-1].end, max(serving_at, spans[-1].end or serving_at)))
    elif spans and spans[-1].end is not None:
        # every line of the furthest stage says it finished: the endpoint is in the next stage
        nxt = STAGES[BY_NAME[spans[-1].stage].order + 1]
        if nxt.name not in ("ready", "serving"):
            spans.append(StageSpan(nxt.name, spans[-1].end, None))
        else:
            spans.append(StageSpan("ready", spans[-1].end, None))
    phase = "serving" if serving_at is not None else "ready" if ready_at is not None else "starting"
    return Startup(tuple(spans), phase, started, ready_at, serving_at, until)
