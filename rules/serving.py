"""Whether an endpoint had served, and from when: the evidence that an engine's start-up was over.

An endpoint has served once a stats interval shows work (running requests, prompt or generation
throughput above 0; log lines and Prometheus samples alike, from its stats frame), a KV transfer
succeeded, a request was preempted, its HTTP server came up, a request or access line was logged in
its files, or the orchestrator started the benchmark. :func:`served` gathers it once per endpoint
(:func:`rules.endpoints.build_endpoints`); :mod:`rules.incidents` asks :meth:`Served.before` whether a
fault came after it (a runtime death) or before any of it (a start-up failure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

import polars as pl

from diag.parsers.records import Lifecycle, Preemption, Record, StartupFact

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


@dataclass(frozen=True)
class Served:
    """An endpoint's serving evidence: its earliest stamped time, per file its first line (for faults
    without a time), and whether request lines were counted in its files (evidence without a place)."""

    at: datetime | None = None
    lines: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    requests: bool = False

    def before(self, ts: datetime | None, file: str, line: int) -> bool:
        """Whether the endpoint had served before a fault at ``ts`` (``file``:``line``)."""
        if self.requests or (ts is not None and self.at is not None and self.at <= ts):
            return True
        first = self.lines.get(file)
        return first is not None and first < line


def _evidence(records: Sequence[tuple[str, Record]], stats: pl.DataFrame, kv: pl.DataFrame
              ) -> Iterable[tuple[datetime | None, str, int]]:
    """(time, file, line) of placed serving evidence: every record's, the stats and KV frames' first per file."""
    for file, r in records:
        if isinstance(r, Preemption) or (isinstance(r, StartupFact) and r.key == "serving"):
            yield r.ts, file, r.line
    for frame, work in ((stats, BUSY), (kv, TRANSFERRED)):   # per file: its earliest row with work
        if frame.height:
            yield from frame.filter(work).group_by("file").agg(pl.col("ts").min(), pl.col("line").min()) \
                .select("ts", "file", "line").iter_rows()


def served(records: Sequence[tuple[str, Record]], stats: pl.DataFrame, kv: pl.DataFrame,
           lifecycle: Sequence[tuple[str, Lifecycle]], requests: bool) -> Served:
    """An endpoint's :class:`Served` from its records, stats and KV frames, the orchestrator's events
    (the benchmark's start) and whether its files logged request or access lines."""
    times: list[datetime] = [ev.ts for _, ev in lifecycle if ev.event in BENCHMARK_EVENTS and ev.ts is not None]
    lines: dict[str, int] = {}
    for ts, file, line in _evidence(records, stats, kv):
        if ts is not None:
            times.append(ts)
        lines[file] = min(line, lines.get(file, line))
    return Served(min(times) if times else None, MappingProxyType(lines), requests)
