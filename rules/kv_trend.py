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


def _rising_runs(kv: list[float | None], ok: list[bool], dip: float = 0.0) -> list[tuple[int, int]]:
    """[start, end) runs of two or more consecutive stats lines where ``ok`` held and KV usage never fell by more
    than ``dip`` points from one line to the next (monotone-ish: a finished request's blocks freed, a usage
    rounded to whole percent); a line without KV usage, as some stats lines are, ends a run."""
    runs, start = [], None
    for i in range(len(kv)):
        here = bool(ok[i]) and kv[i] is not None
        if here and start is not None and kv[i] >= kv[i - 1] - dip:  # type: ignore[operator]
            continue
        if start is not None and i - start > 1:
            runs.append((start, i))
        start = i if here else None
    if start is not None and len(kv) - start > 1:
        runs.append((start, len(kv)))
    return runs


def _ramp_up(running: list[int], a: int, b: int, frac: float) -> bool:
    """Whether KV rose over lines [a, b) because requests were being admitted, not because running ones grew:
    the line before was idle (nothing running: start-up or an idle spell), or the run began with fewer than
    ``frac`` of the requests it ended with."""
    return (a > 0 and running[a - 1] == 0) or running[a] < frac * running[b - 1]


def kv_filling(rule: Rule, run: Run) -> list[Finding]:
    """An engine whose KV usage rises over consecutive stats lines while nobody waits yet, by at least ``rise_pp``
    points to ``kv_usage`` % or more, full within ``horizon_s`` at the fitted rate: running requests grow their KV
    each token, and nothing is released; at 100 % the engine preempts (V1 recomputes) or, on old builds, stalls.
    A rise that is a ramp-up (requests admitted after idle) is not this."""
    p = rule.params
    out = []
    for ep in run.endpoints.values():
        if not ep.stats.height:
            continue
        best: tuple[float, pl.DataFrame, str, dict[str, Any]] | None = None
        for (eng,), part in ep.stats.filter(pl.col("ts").is_not_null()).group_by(["engine"], maintain_order=True):
            top = part["kv_usage"].max()
            if top is None or top < p["kv_usage"]:   # a run must end at kv_usage or above: none can here
                continue
            df = part.sort("ts")
            ok = ((df["running"].fill_null(0) > 0) & (df["waiting"].fill_null(0) == 0)
                  & (df["preemptions"].fill_null(0) == 0)).to_list()
            running = df["running"].fill_null(0).to_list()
            kv = df["kv_usage"].to_list()
            for a, b in _rising_runs(kv, ok, float(p.get("dip_pp", 0.0))):
                # judged on the lists first: most runs are short or shallow, and a frame slice costs ~10 us
                if b - a < p["min_intervals"] or kv[b - 1] < p["kv_usage"] or kv[b - 1] - kv[a] < p["rise_pp"] \
                        or _ramp_up(running, a, b, float(p["ramp_running_frac"])):
                    continue
                sub = df[a:b]
                fc = forecast(sub.select("ts", "kv_usage"), sub["ts"][-1] + timedelta(seconds=1), sub.height)
                if fc is None or fc["time_to_full_s"] > p["horizon_s"]:
                    continue   # flat in time (every line on one second), or too slow to matter
                if best is None or kv[b - 1] > best[0]:
                    best = (kv[b - 1], sub, str(eng), fc)
        if best is None:
            continue
        last, sub, eng, fc = best
        ev: dict[str, Any] = {"engine": eng, "intervals": sub.height, "kv_pct_from": sub["kv_usage"][0],
                              "kv_pct_to": last, "running": int(sub["running"][-1]), "forecast": fc}
        msg = (f"engine {eng} of {ep.id}: KV cache rose over {number(sub.height)} stats lines, "
               f"{sub['kv_usage'][0]:,.1f} -> {last:,.1f} %, with {number(ev['running'])} running and nobody waiting "
               f"yet; at {fc['kv_rise_pct_per_min']:,.1f} %/min it is full in ~{fc['time_to_full_s']:,.0f} s")
        out.append(_finding(rule, msg, endpoint=ep.id, first_ts=sub["ts"][0], last_ts=sub["ts"][-1],
                            open=sub["ts"][-1] == ep.stats["ts"].max(), location=_loc(sub["file"][0], sub["line"][0]),
                            evidence=ev))
    return out
