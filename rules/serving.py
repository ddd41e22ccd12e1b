"""Whether an endpoint had become ready, and from when: the evidence that an engine's start-up was over.

An endpoint is ready once its log shows it: a stats line (idle or not: only a running server logs them;
log lines and Prometheus samples alike, from its stats frame), a KV-transfer metrics line, a preempted
request, its HTTP server or Dynamo registration up (``Application startup complete``, ``Uvicorn running
on``, ``Registered endpoint 'generate'``, an engine's own ready line), or the orchestrator saw the workers
ready or started the benchmark; request or access lines in its files say it served, without a place.
:func:`served` gathers it once per endpoint (:func:`rules.endpoints.build_endpoints`); :mod:`rules.incidents`
asks :meth:`Served.before` whether a fault came after it (a runtime death).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from diag.parsers.records import Lifecycle, Preemption, Record, StageMark, StartupFact

# a stats interval with work in it, a KV transfer that moved blocks
BUSY = ((pl.col("running").fill_null(0) > 0) | (pl.col("prompt_tps").fill_null(0) > 0)
        | (pl.col("gen_tps").fill_null(0) > 0))
TRANSFERRED = pl.col("transfers").fill_null(0) > 0
# the orchestrator's "Server is healthy - starting benchmark" and "Running <name> benchmark"
BENCHMARK_EVENTS = ("healthy", "benchmark_start")


def first_work(stats: pl.DataFrame, kv: pl.DataFrame) -> datetime | None:
    """The time of the first stats line with work in it, or of the first successful KV transfer."""
    times = [f["ts"].min() for f in (stats.filter(BUSY), kv.filter(TRANSFERRED)) if f.height]
    stamped = [t for t in times if t is not None]
    return min(stamped) if stamped else None  # type: ignore[type-var, return-value]


# the orchestrator's "All workers ready", "Server is healthy - starting benchmark" and "Running <name> benchmark"
READY_EVENTS = ("ready", *BENCHMARK_EVENTS)
# the start-up stages whose last line is a ready server: its HTTP server's, Dynamo's registration, the engine's own
READY_STAGES = ("registration", "ready")


@dataclass(frozen=True)
class Readiness:
    """One piece of evidence that an endpoint was ready: where it is and what it is."""

    ts: datetime | None
    file: str
    line: int
    what: str


@dataclass(frozen=True)
class Served:
    """An endpoint's readiness evidence (per kind and file, its earliest) and whether request lines were
    counted in its files (evidence without a place)."""

    evidence: tuple[Readiness, ...] = ()
    requests: bool = False

    def before(self, ts: datetime | None, file: str, line: int) -> Readiness | None:
        """The evidence that the endpoint was ready before a fault at ``ts`` (``file``:``line``), if any:
        stamped earlier, or earlier in the same file."""
        return next((r for r in self.evidence
                     if (ts is not None and r.ts is not None and r.ts <= ts) or (r.file == file and r.line < line)),
                    None)


def _evidence(records: Sequence[tuple[str, Record]], stats: pl.DataFrame, kv: pl.DataFrame
              ) -> Iterable[Readiness]:
    """Placed readiness evidence: every such record's, the stats and KV frames' first row per file."""
    for file, r in records:
        if isinstance(r, Preemption):
            yield Readiness(r.ts, file, r.line, "a preempted request")
        elif (isinstance(r, StartupFact) and r.key == "serving") or \
                (isinstance(r, StageMark) and r.stage in READY_STAGES and r.mark == "done"):
            yield Readiness(r.ts, file, r.line, "the server's ready line")
    for frame, what in ((stats, "a stats line"), (kv, "a KV-transfer metrics line")):
        if frame.height:
            for ts, file, line in frame.group_by("file").agg(pl.col("ts").min(), pl.col("line").min()) \
                    .select("ts", "file", "line").iter_rows():
                yield Readiness(ts, file, line, what)


def served(records: Sequence[tuple[str, Record]], stats: pl.DataFrame, kv: pl.DataFrame,
           lifecycle: Sequence[tuple[str, Lifecycle]], requests: bool) -> Served:
    """An endpoint's :class:`Served` from its records, stats and KV frames, the orchestrator's events
    (the workers ready, the benchmark's start) and whether its files logged request or access lines."""
    marks = [Readiness(ev.ts, file, ev.line, "the orchestrator saw the workers ready")
             for file, ev in lifecycle if ev.event in READY_EVENTS and ev.ts is not None][:1]
    by_kind: dict[tuple[str, str], Readiness] = {}
    for r in _evidence(records, stats, kv):
        seen = by_kind.get((r.what, r.file))
        if seen is None or r.line < seen.line:
            by_kind[(r.what, r.file)] = r
    return Served((*marks, *by_kind.values()), requests)
