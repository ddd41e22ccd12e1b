"""KV usage trends: the time-to-full forecast DIAG-K001 carries, and DIAG-K004 kv-cache-filling (an
engine's KV usage rising at every stats line toward 100 % before any queue forms). Registered in
:data:`rules.runtime.TEMPLATES` as ``kv_filling``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from .catalog import Rule
from .finding import Finding
from .present import number
from .runmodel import Run
from .templating import _finding, _loc


def forecast(kv: pl.DataFrame, before: datetime, samples: int) -> dict[str, Any] | None:
    """Slope of the endpoint's KV usage over the last ``samples`` times before ``before``
    (``kv``: max KV per timestamp, sorted)."""
    df = kv.filter(pl.col("ts") < before).tail(samples)
    if df.height < 3:
        return None
    t0 = df["ts"][0]
    xs = [(t - t0).total_seconds() for t in df["ts"]]
    ys = df["kv_usage"].to_list()
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var  # % per second
    if slope <= 0:
        return None
    return {"kv_rise_pct_per_min": round(slope * 60, 2),
            "time_to_full_s": round(max(0.0, (100 - ys[-1]) / slope), 0), "from_pct": ys[0], "to_pct": ys[-1]}


def _rising_runs(kv: list[float | None], ok: list[bool]) -> list[tuple[int, int]]:
    """[start, end) runs of consecutive stats lines where KV usage rose at every line and ``ok`` held (a
    line without KV usage, as some stats lines are, ends a run)."""
    runs, start = [], None
    for i in range(len(kv)):
        here = bool(ok[i]) and kv[i] is not None
        if here and start is not None and kv[i] > kv[i - 1]:  # type: ignore[operator]
            continue
        if start is not None and i - start > 1:
            runs.append((start, i))
        start = i if here else None
    if start is not None and len(kv) - start > 1:
        runs.append((start, len(kv)))
    return runs


def kv_filling(rule: Rule, run: Run) -> list[Finding]:
    """An engine whose KV usage rises at every stats line while nobody waits yet and ends at or above
    ``kv_usage``: running requests grow their KV each token, and nothing is released; at 100 % the
    engine preempts (V1 recomputes) or, on old builds, stalls. The forecast says when."""
    p = rule.params
    out = []
    for ep in run.endpoints.values():
        if not ep.stats.height:
            continue
        best: tuple[float, pl.DataFrame, str] | None = None
        for (eng,), part in ep.stats.filter(pl.col("ts").is_not_null()).group_by(["engine"], maintain_order=True):
            df = part.sort("ts")
            ok = ((df["running"] > 0) & (df["waiting"].fill_null(0) == 0)
                  & (df["preemptions"].fill_null(0) == 0)).to_list()
            for a, b in _rising_runs(df["kv_usage"].to_list(), ok):
                sub = df[a:b]
                if sub.height >= p["min_intervals"] and sub["kv_usage"][-1] >= p["kv_usage"] and \
                        (best is None or sub["kv_usage"][-1] > best[0]):
                    best = (sub["kv_usage"][-1], sub, str(eng))
        if best is None:
            continue
        last, sub, eng = best
        fc = forecast(sub.select("ts", "kv_usage"), sub["ts"][-1] + timedelta(seconds=1), sub.height)
        ev: dict[str, Any] = {"engine": eng, "intervals": sub.height, "kv_pct_from": sub["kv_usage"][0],
                              "kv_pct_to": last, "running": int(sub["running"][-1])}
        msg = (f"engine {eng} of {ep.id}: KV cache rose at each of {number(sub.height)} stats lines, "
               f"{sub['kv_usage'][0]:,.1f} -> {last:,.1f} %, with {number(ev['running'])} running and nobody waiting yet")
        if fc:
            ev["forecast"] = fc
            msg += f"; at {fc['kv_rise_pct_per_min']:,.1f} %/min it is full in ~{fc['time_to_full_s']:,.0f} s"
        out.append(_finding(rule, msg, endpoint=ep.id, first_ts=sub["ts"][0], last_ts=sub["ts"][-1],
                            open=sub["ts"][-1] == ep.stats["ts"].max(), location=_loc(sub["file"][0], sub["line"][0]),
                            evidence=ev))
    return out
