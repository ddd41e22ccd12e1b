"""Time windows over bucketed series: the `for` / `keep_firing_for` semantics of the rules.

A condition must hold in consecutive buckets for at least ``for_s`` seconds to fire (a missing
bucket breaks the run: no stats means no evidence); firing windows closer than
``keep_firing_for_s`` are merged. A window still true at the last bucket of data is *open*.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import compress
from statistics import median

import polars as pl


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    rows: tuple[int, ...]
    open: bool

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def bucketed(frame: pl.DataFrame, interval_s: float) -> pl.DataFrame:
    """Add a ``bucket`` column: timestamps truncated to the stats interval."""
    return frame.filter(pl.col("ts").is_not_null()).with_columns(
        bucket=pl.col("ts").dt.truncate(f"{int(interval_s)}s"))


def engine_rows(stats: pl.DataFrame, engine: str, fold_s: float | None = None) -> pl.DataFrame:
    """One engine's stats rows with requests known, in time order. ``fold_s``: rows an engine logs per batch
    (every N steps, no clock) folded into clock intervals of that length (per interval its first row's time
    and place, the most requests running, the mean throughputs), so a ramp-up of a few seconds is a few
    seconds, not a run of lines."""
    df = stats.filter((pl.col("engine") == engine) & pl.col("running").is_not_null()).sort("ts")
    if fold_s is None:
        return df
    return (bucketed(df, fold_s).group_by("bucket", maintain_order=True)
            .agg(pl.col("ts").first(), pl.col("file").first(), pl.col("line").first(), pl.col("running").max(),
                 pl.col("prompt_tps").mean(), pl.col("gen_tps").mean())
            .drop("bucket"))


def per_engine(frame: pl.DataFrame, interval_s: float) -> pl.DataFrame:
    """One row per bucket and engine (``bucket``, ``file``, ``engine``). An engine that logs more often than the
    interval (a line every few batches, not on a clock) keeps its last state of the bucket (gauges), its mean rate
    (``*_tps``) and its summed preemptions, so sums over engines count each engine once; an engine with one line
    in the bucket keeps that line's values."""
    cols = [c for c in frame.columns if c not in ("ts", "file", "engine", "line")]
    agg = [pl.col(c).mean() if c.endswith("_tps") else
           pl.when(pl.col(c).is_null().all()).then(None).otherwise(pl.col(c).sum()).alias(c) if c == "preemptions"
           else pl.col(c).last() for c in cols]
    return (bucketed(frame, interval_s).sort("ts", maintain_order=True).group_by("bucket", "file", "engine", maintain_order=True)
            .agg(pl.col("ts").last(), *agg))


def cadence_s(ts: pl.Series | Sequence[datetime | None]) -> float | None:
    """A series' own cadence: the median gap (s) between its consecutive distinct times; None with fewer than two.
    The distinct times and their gaps in polars (a column of a dense log holds hundreds of thousands)."""
    times = ts if isinstance(ts, pl.Series) else pl.Series("ts", ts, dtype=pl.Datetime("us", "UTC"))
    gaps = (times.drop_nulls().unique().sort().diff().drop_nulls().dt.total_microseconds() / 1e6).to_list()
    return median(gaps) if gaps else None


def step_s(ts: pl.Series | Sequence[datetime | None], interval_s: float) -> float:
    """The time one observation of a series stands for: its cadence, never less than the stats interval (a
    sparse series, a paste with lines cut out, observes every few intervals; a dense one is bucketed)."""
    return max(interval_s, cadence_s(ts) or interval_s)


def median_without(ranked: list[float], x: float) -> float:
    """``statistics.median`` of the sorted ``ranked`` with one ``x`` taken out (the siblings of the engine that
    reported ``x``), by index: no list built per engine and bucket."""
    k = bisect_left(ranked, x)
    n = len(ranked) - 1

    def at(i: int) -> float:
        return ranked[i] if i < k else ranked[i + 1]
    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def windows(ts: list[datetime], cond: list[bool], *, for_s: float, interval_s: float,
            keep_firing_for_s: float = 0.0, gap_tolerance: int = 1, max_gap_s: float = 0.0) -> list[Window]:
    """Runs of ``cond`` over sorted bucket times that last at least ``for_s``. Two true buckets stay one run
    across a hole without buckets of up to ``gap_tolerance`` intervals, or of ``max_gap_s``, the longer."""
    step = timedelta(seconds=interval_s)
    hole = max(step * (1 + gap_tolerance), timedelta(seconds=max_gap_s))
    if len(ts) != len(cond):
        raise ValueError(f"windows: {len(ts)} times, {len(cond)} conditions")
    runs: list[list[int]] = []
    cur: list[int] = []
    for i in compress(range(len(cond)), cond):   # the true buckets only: a run ends at a false one or a hole
        if cur and (i != cur[-1] + 1 or ts[i] - ts[cur[-1]] > hole):
            runs.append(cur)
            cur = []
        cur.append(i)
    if cur:
        runs.append(cur)
    merged: list[list[int]] = []
    for run in runs:
        if merged and keep_firing_for_s and (ts[run[0]] - ts[merged[-1][-1]]).total_seconds() <= keep_firing_for_s:
            merged[-1].extend(run)
        else:
            merged.append(run)
    out = []
    last = len(ts) - 1
    for run in merged:
        start, end = ts[run[0]], ts[run[-1]] + step
        if (end - start).total_seconds() >= for_s:
            out.append(Window(start, end, tuple(run), open=run[-1] == last))
    return out


# folding per-step rows: tokens and requests summed, the gauges' last value, the busiest batch, the longest step
_STEP_SUMS = ("new_tokens", "ctx_requests", "gen_tokens", "steps", "preemptions")
_STEP_MAX = ("running", "step_ms", "device_step_ms", "dp_share")


def _one_per_group(steps: pl.DataFrame, own_batches: bool) -> pl.DataFrame:
    """Per file, its lowest rank's steps only, unless its ranks schedule their own batches (``own_batches``:
    the role's recipe says so; or a step says its rank fetched only its share of the requests, ``dp_share``):
    the ranks of one tensor-parallel group run one batch, and each may log it (TRT-LLM's
    TLLM_PROFILE_LOG_RANKS=all): one engine, counted once. Equal figures decide nothing: two attention-DP
    ranks may well run equal batches (the KV-sizing dry run)."""
    if own_batches:
        return steps
    keep = []
    for _, part in steps.group_by("file", maintain_order=True):
        if "dp_share" in part.columns and part["dp_share"].any():
            keep.append(part)
        else:
            lowest = min(part["engine"].unique().to_list(), key=lambda e: (len(e), e))
            keep.append(part.filter(pl.col("engine") == lowest))
    return pl.concat(keep) if keep else steps


def fold_steps(frame: pl.DataFrame, interval_s: float, own_batches: bool = False) -> pl.DataFrame:
    """Rows an engine logs once per scheduler step (``steps`` set) folded into one row per stats interval,
    file and engine, stamped at the interval's end as a periodic stats line is (it reports the interval
    before it): tokens and requests summed, their rates the sums over the interval, the most requests one
    step ran, the longest step, the last KV usage, and ``busy``, the share of the interval its steps took.
    Other rows pass unchanged. ``own_batches``: the file's ranks each schedule their own batch."""
    if "steps" not in frame.columns or frame.height == 0 or frame["steps"].is_null().all():
        return frame
    steps, rest = frame.filter(pl.col("steps").is_not_null()), frame.filter(pl.col("steps").is_null())
    steps = _one_per_group(steps, own_batches)
    keep = [c for c in frame.columns if c not in ("ts", "line", "file", "engine", "bucket")]
    busy = (pl.col("step_ms").sum() / (1000.0 * interval_s)).clip(0.0, 1.0)
    agg = [pl.col("line").first(),
           *(busy.alias(c) if c == "busy" else pl.col(c).sum() if c in _STEP_SUMS else
             pl.col(c).max() if c in _STEP_MAX else pl.col(c).drop_nulls().last() for c in keep)]
    folded = (bucketed(steps, interval_s).sort("line", maintain_order=True)
              .group_by("bucket", "file", "engine", maintain_order=True).agg(agg)
              .with_columns(ts=pl.col("bucket") + timedelta(seconds=interval_s),
                            prompt_tps=pl.col("new_tokens") / interval_s, gen_tps=pl.col("gen_tokens") / interval_s)
              .drop("bucket"))
    untimed = steps.filter(pl.col("ts").is_null())
    return pl.concat([rest, folded.select(frame.columns).cast(frame.schema), untimed],  # type: ignore[arg-type]
                     how="vertical").sort("line", nulls_last=True, maintain_order=True)
