"""One endpoint's plotted series for `diag watch`: 10 s points in a bounded ring (no Textual)."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import polars as pl

STEP_S = 10                         # one sparkline point per 10 s
SERIES_POINTS = 60 * 60 // STEP_S   # 60 min of points per endpoint


class Point(NamedTuple):
    """One 10 s slot of an endpoint: its engines' latest values summed (KV averaged), the
    preemptions logged in the slot, and each engine's KV % in the order of :attr:`Ring.engines`."""

    t: float                        # epoch s, the end of the slot
    prompt: float | None            # prompt tok/s
    gen: float | None               # generation tok/s
    kv: float | None                # KV % (engines' mean)
    running: float | None = None
    waiting: float | None = None
    preempt: int = 0
    engine_kv: tuple[float | None, ...] = ()


class Ring:
    """One endpoint's plotted series: 10 s points (engines' latest values summed, KV averaged,
    preemptions counted per slot, and each engine's KV), bounded to ``maxlen`` points."""

    def __init__(self, maxlen: int = SERIES_POINTS) -> None:
        self.points: deque[Point] = deque(maxlen=maxlen)
        self.engines: list[str] = []

    def update(self, stats: pl.DataFrame) -> None:
        df = stats.filter(pl.col("ts").is_not_null())
        if self.points:  # the last few points may have been partial: recompute them
            since = datetime.fromtimestamp(self.points[-1][0] - 3 * STEP_S, tz=UTC)
            df = df.filter(pl.col("ts") > since - timedelta(seconds=2 * STEP_S))
        else:
            since = None
        if df.is_empty():
            return
        lo = df["ts"].min().replace(microsecond=0)  # type: ignore[union-attr]
        hi = df["ts"].max()
        start = datetime.fromtimestamp((lo.timestamp() // STEP_S + 1) * STEP_S, tz=UTC)  # type: ignore[union-attr]
        if since is not None:
            start = max(start, since)
        end = datetime.fromtimestamp((hi.timestamp() // STEP_S + 1) * STEP_S, tz=UTC)  # type: ignore[union-attr]
        grid = pl.DataFrame({"b": pl.datetime_range(start, end, f"{STEP_S}s", time_zone="UTC", time_unit="us",
                                                    eager=True)})
        engines = df.select(pl.col("engine").cast(pl.String)).unique()
        for e in sorted(engines["engine"].drop_nulls(), key=lambda e: (len(e), e)):
            if e not in self.engines:
                self.engines.append(e)
        cols = ["ts", "engine", "prompt_tps", "gen_tps", "kv_usage", "running", "waiting"]
        joined = (grid.join(engines, how="cross").sort("b")
                  .join_asof(df.select(cols).with_columns(pl.col("engine").cast(pl.String)).sort("ts"),
                             left_on="b", right_on="ts", by="engine", strategy="backward",
                             tolerance=f"{2 * STEP_S}s", check_sortedness=False))
        agg = (joined.group_by("b").agg(pl.col("ts").count().alias("n"), pl.col("prompt_tps").sum(),
                                        pl.col("gen_tps").sum(), pl.col("kv_usage").mean(),
                                        pl.col("running").sum(), pl.col("waiting").sum()).sort("b"))
        step_us = STEP_S * 1_000_000
        preempt = dict(df.select(((pl.col("ts").dt.epoch("us") + step_us - 1) // step_us * STEP_S).alias("b"),
                                 pl.col("preemptions").fill_null(0))
                       .group_by("b").agg(pl.col("preemptions").sum()).iter_rows())
        per_engine: dict[float, dict[str, float]] = {}
        for b, e, kv in joined.filter(pl.col("kv_usage").is_not_null()).select("b", "engine", "kv_usage").iter_rows():
            per_engine.setdefault(b.timestamp(), {})[e] = kv
        first = agg["b"][0].timestamp() if agg.height else None
        while self.points and first is not None and self.points[-1][0] >= first:
            self.points.pop()
        for b, n, p, g, kv, run, wait in agg.select("b", "n", "prompt_tps", "gen_tps", "kv_usage", "running",
                                                    "waiting").iter_rows():
            t = b.timestamp()
            if not n:
                self.points.append(Point(t, None, None, None, preempt=int(preempt.get(int(t), 0))))
                continue
            kvs = per_engine.get(t, {})
            self.points.append(Point(t, p, g, kv, run, wait, int(preempt.get(int(t), 0)),
                                     tuple(kvs.get(e) for e in self.engines)))
