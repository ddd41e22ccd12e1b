"""The verdict's measurements: each benchmark point's windows and the figures over a window.

Windows: each benchmark point's measured window is cut into warm-up, steady state and drain
(:func:`point_phases`, see ``rules/catalog/verdicts.toml``'s header); a run without points is judged
over its active intervals (:func:`active_window`). Figures (:func:`figures`) come from the steady
window only, never from the idle tail after the run: per side, rates as per-engine means summed,
queues and KV as per-sample statistics, decode's utilisation against its capacity. :mod:`rules.verdict`
judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import polars as pl

from diag.parsers import engines
from diag.parsers.records import BenchResult, Preemption

from .runmodel import Endpoint, Run
from .verdict_catalog import DECODING, _r, verdict_catalog

BUCKET_S = 10.0   # the window bucket of an engine whose stats lines come every N batches, not on a clock
EMPTY_FIGURES: Mapping[str, Any] = {"window_s": None, "prefill": {}, "decode": {}, "decode_role": None,
                                    "decode_util": None}
FIGURE_COLS = ("prompt_tps", "gen_tps", "running", "waiting", "kv_usage", "preemptions", "kv_fetch_waiting",
               "kv_fetch_running", "deferred", "busy")


# ------------------------------------------------------------------ windows
def _lifetime_s(bench: BenchResult) -> float | None:
    """One request's life at this point: median E2E latency, else TTFT + OSL x TPOT."""
    if bench.median_e2el_ms:
        return bench.median_e2el_ms / 1000.0
    if bench.median_ttft_ms is not None and bench.median_tpot_ms is not None and (bench.osl or 0) > 0:
        return (bench.median_ttft_ms + bench.median_tpot_ms * (bench.osl or 0)) / 1000.0
    return None


def point_phases(bench: BenchResult, end: datetime, p: Mapping[str, float]) -> list[dict[str, Any]]:
    """warm-up, steady and drain of a point whose measured window is [bench.started, end]."""
    start = bench.started
    assert start is not None
    span = max(0.0, (end - start).total_seconds())
    life = _lifetime_s(bench) or p["default_lifetime_frac"] * span
    warm = round(min(max(life, default_interval_s()), p["warmup_max_frac"] * span))
    drain = round(min(max(life, default_interval_s()), p["drain_max_frac"] * span)) if bench.complete else 0
    s0, s1 = start + timedelta(seconds=warm), end - timedelta(seconds=drain)
    out = [{"phase": "warm-up", "start": start, "end": s0}, {"phase": "steady", "start": s0, "end": s1}]
    if drain:
        out.append({"phase": "drain", "start": s1, "end": end})
    return out


def active_window(run: Run, endpoints: Sequence[Endpoint] | None = None) -> tuple[datetime, datetime] | None:
    """First to last stats interval in which any request ran or waited (a run without points), over the
    run's endpoints or the ones given."""
    eps = run.endpoints.values() if endpoints is None else endpoints
    ran = pl.col("running").fill_null(0) + pl.col("waiting").fill_null(0) > 0   # an engine may log no queue
    frames = [ep.stats.filter(ran & pl.col("ts").is_not_null())["ts"]
              for ep in eps if ep.stats.height]
    ts = [t for s in frames if len(s) for t in (s.min(), s.max())]
    if not ts:
        return None
    return min(ts) - timedelta(seconds=interval_s(run)), max(ts)  # type: ignore[type-var, operator, return-value]


# ------------------------------------------------------------------ figures
def _role_stats(run: Run, role: str, start: datetime, end: datetime) -> pl.DataFrame:
    """The stats samples of a role whose interval's midpoint lies in [start, end], one row per sample."""
    frames = [ep.stats.select([pl.col("ts"), pl.col("engine").cast(pl.Utf8),
                               *[pl.col(c).cast(pl.Float64) for c in FIGURE_COLS if c in ep.stats.columns]])
              .with_columns(endpoint=pl.lit(ep.id))
              for ep in run.endpoints.values() if ep.role == role and ep.stats.height]
    if not frames:
        return pl.DataFrame()
    return in_window(pl.concat(frames, how="diagonal_relaxed"), start, end)


def in_window(stats: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """The stats samples whose interval (the :func:`default_interval_s` before each line) has its midpoint in
    [start, end]."""
    mid = pl.col("ts") - timedelta(seconds=default_interval_s() / 2)
    return stats.filter(pl.col("ts").is_not_null() & (mid >= start) & (mid <= end))


@cache
def default_interval_s() -> float:
    """The seconds a stats line reports (the interval before it) where no run says: the default engine's
    stats cadence."""
    return engines.default().stats_cadence_s or BUCKET_S


def interval_s(run: Run) -> float:
    """The seconds one of the run's stats lines reports: its engine's stats cadence, else the default's."""
    return run.engine.stats_cadence_s or default_interval_s()


def known_sum(values: pl.Series) -> float | None:
    """The sum of the known values; None when none is known (a sum of unknowns is not 0)."""
    return None if values.null_count() == values.len() else float(values.sum())


def _side(df: pl.DataFrame, waiting_kv: Sequence[Sequence[str]] = ()) -> dict[str, Any]:
    """Figures of one side over a window: per-engine means summed for rates, per-sample statistics for
    queues and KV; ``waiting_kv``: the engine's columns of requests waiting for their KV transfer, best first
    (its adapter's)."""
    if not df.height:
        return {}
    per_engine = (df.group_by("endpoint", "engine").agg(pl.col("prompt_tps").mean(), pl.col("gen_tps").mean())
                  .sort("endpoint", "engine"))   # a fixed order: the float sums are the same every run
    out = {"engines": per_engine.height, "samples": df.height,
           "prompt_tps": _r(known_sum(per_engine["prompt_tps"])), "gen_tps": _r(known_sum(per_engine["gen_tps"]))}
    for col, key in (("waiting", "waiting"), ("running", "running"), ("kv_usage", "kv")):
        s = df[col].drop_nulls()
        out[key] = {"mean": _r(s.mean(), 2), "p90": _r(s.quantile(0.9), 2), "peak": _r(s.max(), 2)} if len(s) \
            else {"mean": None, "p90": None, "peak": None}
    out["preemptions"] = int(df["preemptions"].fill_null(0).sum()) if "preemptions" in df.columns else 0
    if "busy" in df.columns and (busy := df["busy"].drop_nulls()).len():   # an engine that logs its steps
        out["busy"] = {"mean": _r(busy.mean(), 3), "peak": _r(busy.max(), 3)}
    for cols in waiting_kv:   # logged only when not zero: a null beside a value is 0
        present = [c for c in cols if c in df.columns and df[c].drop_nulls().len()]
        if present:
            kv_wait = df.select(pl.sum_horizontal(pl.col(present).fill_null(0)))[:, 0]
            out["waiting_kv"] = {"mean": _r(kv_wait.mean(), 2), "peak": _r(kv_wait.max(), 2)}
            break
    return out


def figures(run: Run, start: datetime, end: datetime, cap: Mapping[str, Any]) -> dict[str, Any]:
    """Prefill and decode figures over [start, end], with decode's utilisation against its capacity."""
    kv = run.engine.waiting_kv
    pre = _side(_role_stats(run, "prefill", start, end), kv)
    role, dec = next(((role, f) for role in DECODING if (f := _side(_role_stats(run, role, start, end), kv))),
                     ("decode", {}))
    for side, fig in ((role, dec), ("prefill", pre)):
        if fig:   # preemptions logged as lines of their own (an SGLang retraction, a V0 warning) count too
            fig["preemptions"] += sum(1 for ep in run.endpoints.values() if ep.role == side
                                      for _, r in ep.of(Preemption) if r.ts is not None and start <= r.ts <= end)
    util = None
    if dec:
        parts = [dec["kv"]["mean"] / 100.0] if dec["kv"]["mean"] is not None else []
        batch = cap.get("batch_cap") or p_batch_default()
        if dec["running"]["mean"] is not None:
            parts.append(dec["running"]["mean"] / batch)
        util = _r(max(parts), 3) if parts else None
    out = {"window_s": _r((end - start).total_seconds(), 0), "prefill": pre, "decode": dec,
           "decode_role": role, "decode_util": util, "useful": useful(pre, dec, role)}
    if requests := request_figures(run, start, end):
        out["requests"] = requests
    return out


def useful(pre: Mapping[str, Any], dec: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The tokens per second the measured work delivered, what a benchmark counts (each prompt once, each
    output token once): the prompt tokens the prompt side computed and the tokens the generating side
    generated. A P/D decode's own prompt tokens are the same prompts again (recomputed after a preemption,
    or KV received by transfer where the engine does not split them): ``excluded_prompt_tps``, never
    counted. ``tps`` is None when either part is unknown."""
    prompt = (pre if role == "decode" else dec).get("prompt_tps")
    gen = dec.get("gen_tps")
    out = {"tps": None if prompt is None or gen is None else _r(prompt + gen), "prompt_tps": prompt, "gen_tps": gen}
    if role == "decode":
        out["excluded_prompt_tps"] = dec.get("prompt_tps")
    return out


def request_figures(run: Run, start: datetime, end: datetime) -> dict[str, Any]:
    """Requests finished and failed over [start, end] by Dynamo's request counters: the frontends' (every
    request once), else the generating side's workers; {} without them."""
    counts = run.request_counts().filter((pl.col("ts") >= start) & (pl.col("ts") <= end))
    for side in ("frontend", *DECODING):
        part = counts.filter(pl.col("endpoint").str.starts_with(side))
        if part.height:
            return {"source": side, "requests": int(part["requests"].sum()), "errors": int(part["errors"].sum())}
    return {}


def p_batch_default() -> float:
    """The batch scale when the run's batch cap (running_cap) is unknown (see the catalog's ``batch_cap_default``)."""
    return float(verdict_catalog().params["batch_cap_default"])


__all__ = ["EMPTY_FIGURES", "active_window", "default_interval_s", "figures", "in_window", "interval_s", "known_sum",
           "point_phases", "request_figures", "useful"]
