"""DIAG-B004 engine-stall: an engine with requests in flight whose throughput collapsed, below a share of its
own median over busy intervals, or (nothing productive to compare with, or too few busy lines for a median)
to nothing at all, over a run of stats lines long enough on the engine's own clock. Registered in
:data:`rules.runtime.TEMPLATES` as ``stall_vs_median``."""

from __future__ import annotations

from typing import Any

import polars as pl

from .catalog import Rule
from .finding import Finding
from .present import number
from .runmodel import Endpoint, Run
from .templating import _finding, _loc
from .windows import cadence_s, engine_rows


def _stalled_runs(df: pl.DataFrame, stalled: list[bool], p: dict[str, Any]) -> list[tuple[int, int]]:
    """[start, end) runs of consecutive stalled lines long enough to be a stall: at least ``min_lines`` lines
    covering at least ``stall_s`` (a line reports the interval before it: the run covers its first line's
    interval too, one cadence of the engine's own series), so a sparse log's two lines a minute apart are a
    stall and a dense log's two lines 5 s apart are not yet."""
    ts = df["ts"]   # read at the runs' ends only (a dense engine has tens of thousands of lines)
    step = cadence_s(ts) or float(p["batch_interval_s"])
    out, start = [], None
    for i, s in enumerate([*stalled, False]):
        if s and start is None:
            start = i
        elif not s and start is not None:
            if i - start < p["min_lines"]:
                start = None
                continue
            first, last = ts[start], ts[i - 1]
            covered = ((last - first).total_seconds() + step if first is not None and last is not None
                       else (i - start) * step)   # lines without a time: each one interval
            if covered >= p["stall_s"]:
                out.append((start, i))
            start = None
    return out


def stall_vs_median(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    out = []
    for ep in run.endpoints.values():
        if not ep.startup.serving:
            continue  # no request served yet: nothing can have stalled
        col = "prompt_tps" if ep.role == "prefill" else "gen_tps"
        for eng in ep.engines:
            df = engine_rows(ep.stats, eng, float(p["batch_interval_s"]) if ep.per_batch_stats else None)
            busy = df.filter(pl.col("running") > 0)
            if busy.height < p["min_lines"]:
                continue
            med = busy[col].median() or 0.0
            if med < p["min_median"] or busy.height < p["min_intervals"] + 2:
                # no productive interval, or too few busy lines for a median: compared with zero instead
                out.extend(_zero_stall(rule, ep, eng, df))
                continue
            stalled = ((df["running"] > 0) & (df[col] < p["stall_frac"] * med)).to_list()
            for a, b in _stalled_runs(df, stalled, p):
                n, sub = b - a, df[a:b]
                out.append(_finding(
                    rule, f"engine {eng} of {ep.id} had {number(sub['running'].mean())} requests running but "
                    f"{col.replace('_tps', '')} throughput {sub[col].mean():,.1f} tok/s, below "
                    f"{p['stall_frac']:,.0%} of its median {med:,.1f}, for {number(n)} consecutive stats lines",
                    endpoint=ep.id, first_ts=sub["ts"][0], last_ts=sub["ts"][-1], open=b == len(stalled),
                    location=_loc(sub["file"][0], sub["line"][0]),
                    evidence={"engine": eng, "intervals": n, "median_tps": round(med, 1),
                              "stalled_tps": round(sub[col].mean(), 1)}))
    return out


def _zero_stall(rule: Rule, ep: Endpoint, eng: str, df: pl.DataFrame) -> list[Finding]:
    """No productive interval to compare with: requests running and throughput below ``min_median`` (prompt and
    generation: nothing moves) over a stall (:func:`_stalled_runs`) is a stall by itself; the longest is reported."""
    p = rule.params
    zero = ((df["running"] > 0) & (df["prompt_tps"].fill_null(0) < p["min_median"])
            & (df["gen_tps"].fill_null(0) < p["min_median"])).to_list()
    runs = _stalled_runs(df, zero, p)
    if not runs:
        return []
    a, b = max(runs, key=lambda r: r[1] - r[0])
    sub, n = df[a:b], b - a
    return [_finding(rule, f"engine {eng} of {ep.id} had {number(sub['running'].mean())} requests running and zero "
                     f"prompt and generation throughput for {number(n)} consecutive stats lines"
                     + (" (every stats line of the log)" if n == df.height else ""),
                     endpoint=ep.id, first_ts=sub["ts"][0], last_ts=sub["ts"][-1], open=b == len(zero),
                     location=_loc(sub["file"][0], sub["line"][0]),
                     evidence={"engine": eng, "intervals": n, "median_tps": 0.0, "stalled_tps": 0.0,
                               "zero_throughput": True, "window_short": n == df.height})]
