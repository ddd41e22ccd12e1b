"""The coded templates behind the runtime rules. A template reads its thresholds from the rule.

Templates here: role_balance (prefill- vs decode-bound), engine_skew, window_threshold, presence,
absence, capacity, noise_ratio; fault_incident and accuracy are in :mod:`rules.incidents`, startup_stage in
:mod:`rules.startup_rule`, kv_filling in :mod:`rules.kv_trend`, stall_vs_median in :mod:`rules.stall`
(registered here too: ``TEMPLATES`` is the one registry).
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from statistics import median
from typing import Any

import polars as pl

from diag.parsers import engines
from diag.parsers.engine import SAYS
from diag.parsers.faults import TAXONOMY
from diag.parsers.records import Fault, KVExpiry, KVLoadFailure, NixlFailure, Preemption

from . import effective, incidents, kv_trend, stall, startup_rule, validity
from .catalog import Rule
from .finding import Finding
from .present import number
from .runmodel import Endpoint, Run
from .templating import Template, _finding, _loc, empty_logs, log_empty
from .verdict_catalog import token_budget
from .windows import bucketed, median_without, per_engine, step_s, windows

TEMPLATES: dict[str, Template] = {
    "fault_incident": incidents.fault_incident,
    "accuracy": incidents.accuracy,
    "drift": effective.drift,
    "uncaught_exception": incidents.uncaught_exception,
    "startup_stage": startup_rule.startup_stage,
    "run_validity": validity.run_validity,
    "kv_filling": kv_trend.kv_filling,
    "stall_vs_median": stall.stall_vs_median,
}


def template(name: str) -> Callable[[Template], Template]:
    def wrap(fn: Template) -> Template:
        TEMPLATES[name] = fn
        return fn

    return wrap


# ---------------------------------------------------------------- role balance (B001, B002)

def role_series(run: Run, role: str, interval_s: float, budget: float | None = None) -> pl.DataFrame:
    """Per bucket for one role: engines reporting, mean waiting/running/KV per engine, summed tok/s; where the
    engine logs its steps, the mean share of the interval they took (``busy``) and of its token ``budget`` a
    step prefilled (``fill``; null without a budget)."""
    # an endpoint still starting is neither idle nor under-filled: only serving endpoints count
    frames = [e.stats for e in run.endpoints.values() if e.role == role and e.stats.height and e.startup.serving]
    if not frames:
        return pl.DataFrame()
    df = per_engine(pl.concat(frames), interval_s)
    fill = pl.col("new_tokens") / pl.col("steps") / budget if budget else pl.lit(None, pl.Float64)
    return (df.group_by("bucket").agg(
        engines=pl.len(), waiting=pl.col("waiting").mean(), running=pl.col("running").mean(),
        waiting_sum=pl.col("waiting").sum(), kv=pl.col("kv_usage").mean(),
        prompt_tps=pl.col("prompt_tps").sum(), gen_tps=pl.col("gen_tps").sum(),
        busy=pl.col("busy").mean(), fill=fill.mean())
        .sort("bucket"))


def _joined(run: Run, interval_s: float) -> pl.DataFrame:
    pre = role_series(run, "prefill", interval_s, token_budget(run, "prefill"))
    dec = role_series(run, "decode", interval_s)
    if not pre.height or not dec.height:
        return pl.DataFrame()
    # decode engines log on their own clock: take the latest decode state at or before each bucket
    df = pre.join_asof(dec, on="bucket", suffix="_d", strategy="backward",
                       tolerance=timedelta(seconds=3 * interval_s)).drop_nulls("kv_d")
    # causal: each bucket against the plateau and the queue as they stood then (never later data)
    return df.with_columns(plateau=pl.Series(plateau_so_far(df["prompt_tps"].to_list()), dtype=pl.Float64))


def plateau_so_far(values: list[float | None], q: float = 0.9) -> list[float]:
    """At each point, the ``q`` quantile (nearest rank) of the values up to it: a level judged at a
    bucket depends on no later data, so a growing run judges a window as the finished run does."""
    seen: list[float] = []
    out = []
    for v in values:
        if v is not None:
            insort(seen, v)
        out.append(seen[min(len(seen) - 1, round(q * (len(seen) - 1)))] if seen else 0.0)
    return out


def _round(value: Any, digits: int) -> float | None:
    """``value`` rounded, None where the engine logs no such figure (TensorRT-LLM's iteration line has no queue)."""
    return None if value is None else round(float(value), digits)


@template("role_balance")
def role_balance(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    iv = float(p.get("interval_s", 10))
    df = run.derived(("role_balance", iv), lambda: _joined(run, iv))   # B001 and B002 read the same series
    if df.height < 2:
        return []
    plateau = df["plateau"]
    if p["mode"] == "prefill-bound":
        lag = max(1, int(p["rise_lookback_s"] / iv))
        rising = (df["waiting"] - df["waiting"].shift(lag)).fill_null(0.0) >= p["waiting_min"]
        queued = (df["waiting"] >= p["waiting_high"]) | rising
        # an engine that logs no queue figure (TensorRT-LLM's iteration line): saturated, steps back to back
        # with full batches, is the same evidence that arrivals outrun prefill
        saturated_p = df["waiting"].is_null() & (df["busy"] >= p["busy_min"]) & (df["fill"] >= p["batch_fill_min"])
        queued = queued.fill_null(False) | saturated_p.fill_null(False)
        at_plateau = df["prompt_tps"] >= p["plateau_frac"] * plateau
        target = None
        conc = run.top_concurrency()
        d_engines = run.engine_count("decode")
        if conc and d_engines:
            target = conc / d_engines
        under = df["kv_d"] < p["kv_low"]
        if target:
            under = under | (df["running_d"] < p["fill_frac"] * target)
        not_saturated = (df["kv_d"] < p["kv_high"]) & (df["waiting_sum_d"] == 0)
        cond = queued & at_plateau & under & not_saturated
    else:
        saturated = (df["kv_d"] >= p["kv_high"]) | ((df["waiting_sum_d"] > 0) & (df["kv_d"] >= p["waiting_kv_min"]))
        idle = (df["prompt_tps"] < p["idle_frac"] * plateau) | (df["waiting_sum"] == 0)
        cond = saturated & idle
    out = []
    ts = df["bucket"].to_list()
    # a sparse series (a paste, lines cut out): one observation stands for its own cadence
    for w in windows(ts, cond.to_list(), for_s=rule.for_s, interval_s=step_s(df["bucket"], iv),
                     keep_firing_for_s=rule.keep_firing_for_s):
        sub = df[list(w.rows)]
        ev = {
            "window_s": w.seconds, "prefill_waiting_per_engine": _round(sub["waiting"].mean(), 2),
            "prefill_waiting_last": _round(sub["waiting"][-1], 2),
            "prefill_prompt_tps": _round(sub["prompt_tps"].mean(), 1),
            "prefill_prompt_tps_p90": _round(sub["plateau"][-1], 1),
            "decode_running_per_engine": _round(sub["running_d"].mean(), 2),
            "decode_kv_pct": _round(sub["kv_d"].mean(), 1), "decode_waiting": int(sub["waiting_sum_d"].max() or 0),
        }
        if p["mode"] == "prefill-bound" and sub["waiting"].is_null().all():
            budget = token_budget(run, "prefill")
            ev |= {"by": "saturation", "prefill_busy_pct": _round(100 * sub["busy"].mean(), 1),  # type: ignore[operator]
                   "prefill_batch_fill_pct": _round(100 * sub["fill"].mean(), 1),  # type: ignore[operator]
                   "prefill_token_budget": budget}
            msg = (f"prefill saturated: its steps took {number(ev['prefill_busy_pct'], 0)} % of each interval with "
                   f"batches at {number(ev['prefill_batch_fill_pct'], 0)} % of its {run.engine.knob_text('prefill_token_budget')} "
                   f"{number(budget, 0)} (the engine logs no queue figure) and prompt throughput at its plateau "
                   f"({number(ev['prefill_prompt_tps'], 0)} tok/s), while decode is under-filled "
                   f"(KV {number(ev['decode_kv_pct'], 1)} %, {number(ev['decode_running_per_engine'], 1)} "
                   f"running/engine) for {w.seconds:,.0f} s")
        elif p["mode"] == "prefill-bound":
            msg = (f"prefill queue at {number(ev['prefill_waiting_per_engine'], 1)} waiting/engine (last "
                   f"{number(ev['prefill_waiting_last'], 1)}) with prompt throughput at its plateau "
                   f"({number(ev['prefill_prompt_tps'], 0)} tok/s), while decode is under-filled "
                   f"(KV {number(ev['decode_kv_pct'], 1)} %, {number(ev['decode_running_per_engine'], 1)} "
                   f"running/engine) for {w.seconds:,.0f} s")
        else:
            msg = (f"decode saturated (KV {number(ev['decode_kv_pct'], 1)} %, {number(ev['decode_waiting'])} waiting) "
                   f"while prefill "
                   f"runs at {number(ev['prefill_prompt_tps'], 0)} tok/s (p90 {number(ev['prefill_prompt_tps_p90'], 0)}) for {w.seconds:,.0f} s")
        out.append(_finding(rule, msg, first_ts=w.start, last_ts=w.end, open=w.open, evidence=ev))
    return out


# ---------------------------------------------------------------- engine skew (B003)

@template("engine_skew")
def engine_skew(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    iv = float(p.get("interval_s", 10))
    metric = p.get("metric", "running")
    out = []
    for ep in run.endpoints.values():
        if len(ep.engines) < 2 or not ep.stats.height:
            continue
        df = bucketed(ep.stats, iv).group_by("bucket", "engine").agg(pl.col(metric).mean()).sort("bucket")
        wide = df.pivot(on="engine", index="bucket", values=metric).sort("bucket")
        engines = [c for c in wide.columns if c != "bucket"]
        # a bucket can hold a skewed engine only if its busiest engine is >= ratio x its least busy one
        # and some sibling reaches min_load: only those buckets need the exact sibling median
        hi, lo = pl.max_horizontal(engines), pl.min_horizontal(engines)
        reported = pl.sum_horizontal(pl.col(e).is_not_null() for e in engines)
        possible = wide.select((hi >= p["ratio"] * lo) & (hi >= p["min_load"]) & (reported >= 2)).to_series()
        if not possible.any():
            continue
        rows = wide.select(engines).rows()
        ranked = {i: sorted(v for v in rows[i] if v is not None) for i in possible.arg_true().to_list()}
        ts: list[datetime] | None = None   # the buckets' times, read once an engine is skewed in one
        for ei, eng in enumerate(engines):
            cond = [False] * len(rows)
            for i, present in ranked.items():   # the possible buckets with a sibling: the rest are False
                mine = rows[i][ei]
                if mine is not None:
                    med = median_without(present, mine)
                    cond[i] = med >= p["min_load"] and mine >= p["ratio"] * med
            if not any(cond):
                continue
            ts = ts if ts is not None else wide["bucket"].to_list()
            for w in windows(ts, cond, for_s=rule.for_s, interval_s=iv, keep_firing_for_s=rule.keep_firing_for_s):
                sub = [rows[i] for i in w.rows]
                mine = sum(r[ei] for r in sub) / len(sub)
                sib = median(v for r in sub for j, v in enumerate(r) if j != ei and v is not None)
                ratio = mine / sib if sib else None  # a min_load of 0 lets an idle sibling median through
                out.append(_finding(
                    rule, f"engine {eng} of {ep.id} carries {mine:,.1f} {metric} vs a sibling median of {sib:,.1f} "
                    + (f"({ratio:,.1f}x) " if ratio is not None else "") + f"for {w.seconds:,.0f} s",
                    endpoint=ep.id, first_ts=w.start, last_ts=w.end,
                    open=w.open, evidence={"engine": eng, metric: round(mine, 2), "sibling_median": round(sib, 2),
                                           "ratio": None if ratio is None else round(ratio, 2),
                                           "window_s": w.seconds}))
    return out


# ---------------------------------------------------------------- threshold over a window (K001)

def _bridge_refills(cond: list[bool], refill: list[bool]) -> list[bool]:
    """A saturated engine with a standing queue refills the blocks its finished requests free at once:
    one interval between two saturated ones, in which requests still wait and prefill ran (the queue
    being admitted into the freed blocks), is part of the saturation, not a break in it."""
    out = list(cond)
    for i in range(1, len(cond) - 1):
        if not cond[i] and refill[i] and cond[i - 1] and cond[i + 1]:
            out[i] = True
    return out


def _evicting_stretches(buckets: list[datetime], full: list[bool], evictions: list[datetime],
                        step: float) -> list[bool]:
    """Per bucket: whether it lies in a stretch of consecutive full buckets in which (or within one ``step``
    after which) the engine preempted or retracted a request (a logged eviction): the pool was not merely
    high but exhausted, over the whole stretch, queue or not."""
    out = [False] * len(buckets)
    i = 0
    while i < len(buckets):
        if not full[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(buckets) and full[j + 1] and (buckets[j + 1] - buckets[j]).total_seconds() <= 2 * step:
            j += 1
        lo, hi = buckets[i], buckets[j] + timedelta(seconds=2 * step)
        if any(lo <= t < hi for t in evictions):
            out[i:j + 1] = [True] * (j + 1 - i)
        i = j + 1
    return out


@template("window_threshold")
def window_threshold(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    iv = float(p.get("interval_s", 10))
    out = []
    for ep in run.endpoints.values():
        if not ep.stats.height:
            continue
        df = (per_engine(ep.stats, iv).group_by("bucket")
              .agg(kv=pl.col("kv_usage").max(), waiting=pl.col("waiting").sum(),
                   preempt=pl.col("preemptions").fill_null(0).sum(),
                   prompt=pl.col("prompt_tps").fill_null(0).sum()).sort("bucket"))
        full = (df["kv"] >= p["kv_usage"]).fill_null(False).to_list()
        if not any(full):
            continue   # every window needs a full bucket (a refill bridges two): nothing to judge here
        buckets = df["bucket"].to_list()
        step = step_s(df["bucket"], iv)   # a sparse series (a paste, lines cut out): one observation per its cadence
        gap = float(p.get("max_gap_s", 0))
        evicted = _evicting_stretches(buckets, full, [t for _, r in ep.of(Preemption) if (t := r.ts) is not None], step)
        cond = _bridge_refills([f and (w > 0 or n > 0 or e) for f, w, n, e in
                                zip(full, df["waiting"].fill_null(0), df["preempt"], evicted, strict=True)],
                               ((df["waiting"] > 0) & (df["prompt"] > 0)).to_list())
        kv_by_ts = None
        found = windows(buckets, cond, for_s=rule.for_s, interval_s=step, keep_firing_for_s=rule.keep_firing_for_s,
                        max_gap_s=gap)
        # the log cut a window short (it begins or ends inside it: a paste, a run cut off): fire on all the
        # evidence there is, at most short_severity; a window inside the log that ended before for_s did not last
        short = not found and "short_min_intervals" in p
        if short:   # that many consecutive observations, in distinct intervals: the queue stood over real time
            found = [w for w in windows(buckets, cond, for_s=0, interval_s=step, max_gap_s=gap)
                     if len(w.rows) >= int(p["short_min_intervals"]) and (w.rows[0] == 0 or w.open)]
        span = (buckets[-1] - buckets[0]).total_seconds() + step if buckets else 0.0
        for w in found:
            sub = df[list(w.rows)]
            ev: dict[str, Any] = {"kv_pct_min": sub["kv"].min(), "kv_pct_max": sub["kv"].max(),
                                  "waiting_max": int(sub["waiting"].max()), "preemptions": int(sub["preempt"].sum()),
                                  "window_s": w.seconds}
            if kv_by_ts is None:
                kv_by_ts = ep.stats.group_by("ts").agg(pl.col("kv_usage").max()).sort("ts")
            fc = kv_trend.forecast(kv_by_ts, w.start, int(p.get("forecast_samples", 6)))
            msg = (f"KV cache at {ev['kv_pct_min']:,.1f}-{ev['kv_pct_max']:,.1f} % for {w.seconds:,.0f} s with up to "
                   f"{number(ev['waiting_max'])} waiting and {number(ev['preemptions'])} preemptions")
            if any(evicted[i] and not (df["waiting"][i] or df["preempt"][i]) for i in w.rows):
                ev["evicted"] = True   # intervals without a queue or a counted preemption: the evictions logged say it
                msg += "; requests were evicted from the full cache (preemption or retraction lines logged)"
            if fc:
                ev["forecast"] = fc
                msg += (f"; it had risen {fc['from_pct']:,.0f}->{fc['to_pct']:,.0f} % at "
                        f"{fc['kv_rise_pct_per_min']:,.1f} %/min (full in ~{fc['time_to_full_s']:,.0f} s at that rate)")
            if short:
                ev["window_short"] = True
                msg += (f" (the log holds only {span:,.0f} s of stats: short window, every interval in it)"
                        if w.rows[0] == 0 and w.open else
                        f" (the log {'ends' if w.open else 'begins'} inside it: short window, {w.seconds:,.0f} s seen)")
                out.append(replace(_finding(rule, msg, endpoint=ep.id, first_ts=w.start, last_ts=w.end, open=w.open,
                                            evidence=ev), severity=p.get("short_severity", rule.severity)))
                continue
            out.append(_finding(rule, msg, endpoint=ep.id, first_ts=w.start, last_ts=w.end, open=w.open, evidence=ev))
    return out


# ---------------------------------------------------------------- presence of records (K002, E002, E003)

# a connector failing or its thread dying, a block-size mismatch or a transport (NIXL/UCX, Mooncake) error breaks
# KV transfer: E002. The taxonomy's classes say which causes these are (parsers.faults).
KV_FAULTS = frozenset(c.name for c in TAXONOMY if c.cls in ("kv_connector", "transport"))


def _signal(ep: Endpoint, signal: str) -> tuple[Counter[str], list[tuple[str, Any]]]:
    """Counts by type and the (file, record-or-row) items behind them."""
    counts: Counter[str] = Counter()
    items: list[tuple[str, Any]] = []
    if signal == "preemptions":
        if ep.stats.height:
            hit = ep.stats.filter(pl.col("preemptions").fill_null(0) > 0).select("file", "preemptions", "ts", "line")
            for row in hit.iter_rows(named=True):
                counts["stats"] += row["preemptions"]
                items.append((row["file"], row))
        last: dict[str, int] = {}   # per file: the engine's cumulative preemption counter at its last warning
        for f, r in ep.of(Preemption):
            cum = r.cumulative
            # V0 warns at its 1st, 51st, 101st ... preemption with the running total: the total's rise is the count
            counts[f"v0-{r.mode}"] += cum - last[f] if cum is not None and f in last and cum > last[f] else 1
            if cum is not None:
                last[f] = cum
            items.append((f, r))
    elif signal == "kv_failures":
        for f, r in ep.of(NixlFailure):
            counts[r.ftype] += 1
            items.append((f, r))
        said: set[tuple[str, int]] = set()   # (file, line) of the KV failures logged as a line
        for f, r in ep.of(Fault):
            if r.cause not in KV_FAULTS or incidents.ends_a_said_error(f, r, said):
                continue   # a traceback after such a line ends in the same failure's exception: counted once
            if not r.exception:
                said.add((f, r.line))
            counts[r.cause] += 1
            items.append((f, r))
        for f, r in ep.of(KVLoadFailure):
            counts["kv_load_recovered" if r.recovered else "kv_load_failure"] += r.n_requests
            items.append((f, r))
        if ep.kv.height:
            for row in ep.kv.filter(pl.col("failed").fill_null(0) > 0).iter_rows(named=True):
                counts["metrics_failed_transfers"] += int(row["failed"])
                items.append((row["file"], row))
    elif signal == "grammar":
        for f, r in ep.of(Fault):
            if r.cause == "grammar":
                counts["grammar"] += 1
                items.append((f, r))
    elif signal == "kv_expiry":
        for f, r in ep.of(KVExpiry):
            counts[r.event] += 1
            items.append((f, r))
    return counts, items


def _when(item: Any) -> tuple[datetime | None, int | None]:
    if isinstance(item, dict):
        return item.get("ts"), item.get("line")
    return item.ts, item.line


_LABELS = {"stats": "preemptions (stats lines)", "v0-swap": "swap preemptions (V0 warnings)",
           "v0-recompute": "recompute preemptions (V0 warnings)", "kv_load_failure": "requests failed to load their KV",
           "expired": "leases expired", "invalid": "invalid (expired) block reads", "force_freed": "force-freed requests",
           "declined": "declined expired reads", "v0-retract": "retraction warnings",
           **{c.name: c.label for c in TAXONOMY if c.label}}   # fault causes: the taxonomy's labels


@template("presence")
def presence(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    out = []
    for ep in run.endpoints.values():
        counts, items = _signal(ep, p["signal"])
        total = sum(counts.values())
        if total < p.get("min_count", 1):
            continue
        stamps = [t for t in (_when(i)[0] for _, i in items) if t is not None]
        file, first = items[0]
        what = ", ".join(f"{number(n)} {run.engine.says(k) if k in SAYS else _LABELS.get(k, k.replace('_', ' '))}"
                         for k, n in counts.most_common())   # a count's label: as the run's engine says it
        msg = f"{ep.id}: {what}"
        ev: dict[str, Any] = {"counts": dict(counts), "total": total}
        if p["signal"] == "kv_expiry" and run.async_scheduling(ep) and counts.get("invalid"):
            msg += run.engine.says("invalid_blocks_caveat")
            ev[run.engine.knob_key("scheduling_overlap") or "scheduling_overlap"] = True
        if p["signal"] == "kv_failures":
            peers = sorted({dict(i.context).get("remote_host", "") for _, i in items
                            if isinstance(i, NixlFailure) and i.context} - {""})
            if peers:
                ev["remote_hosts"] = peers
        out.append(_finding(rule, msg, endpoint=ep.id, first_ts=min(stamps) if stamps else None,
                            last_ts=max(stamps) if stamps else None, location=_loc(file, _when(first)[1]),
                            evidence=ev))
    return out


# ---------------------------------------------------------------- absence of stats (L001)

@template("absence")
def absence(rule: Rule, run: Run) -> list[Finding]:
    out = []
    logged = {src.path for src in run.sources if src.kind != "prometheus"}
    for ep in run.endpoints.values():
        variants = Counter(ep.variants)
        prom = variants.pop("prom", 0)  # L001 is about the log: Prometheus samples do not count
        if ep.role not in rule.params.get("roles", ("prefill", "decode", "agg")):
            continue
        if empty := empty_logs(run, ep):
            out.append(_empty_log(rule, run, ep, empty, prom))
            continue
        if variants:
            continue
        if not logged.intersection(ep.files):
            continue  # known from metrics alone (a Prometheus server, a telemetry capture): no log to miss

        if not ep.startup.serving:
            continue  # still starting, or ready without a request yet: no stats lines is expected
        since = ep.startup.serving_at
        if since is not None and run.end is not None and \
                (run.end - since).total_seconds() < rule.params.get("grace_s", 30):
            continue  # the benchmark just started: the first 10 s stats line is not due yet
        cause, why = next((said for a in engines.adapters() if a.why_no_stats and (said := a.why_no_stats(ep.facts))),
                          ("unknown", "no stats lines and no reason printed (idle endpoint, or logging above INFO)"))
        where = next((ep.fact_lines[k] for k in ("stats_disabled", *(f for a in engines.adapters() for f in a.stats_facts))
                      if k in ep.fact_lines), None)
        also = f"; Prometheus has {prom} samples for it" if prom else ""
        out.append(_finding(rule, f"{ep.id} has no stats lines: {why}{also}", endpoint=ep.id,
                            location=_loc(*where) if where else _loc(ep.files[0] if ep.files else None, None),
                            evidence={"cause": cause, "engines": len(ep.engines), "prometheus_samples": prom},
                            first_ts=ep.first_ts, last_ts=ep.last_ts))
    return out


def _empty_log(rule: Rule, run: Run, ep: Endpoint, empty: tuple[str, ...], prom: int) -> Finding:
    """An endpoint log of 0 bytes: the whole endpoint unseen, or the engines of one of its files."""
    names, many = ", ".join(p.rsplit("/", 1)[-1] for p in empty), len(empty) > 1
    msg = (f"{ep.id} has no stats lines: its log{'s are' if many else ' is'} empty ({names}: 0 bytes): the "
           "worker wrote nothing there (it never started, or its output went elsewhere)" if log_empty(run, ep) else
           f"{ep.id}: {names} {'are' if many else 'is'} empty (0 bytes): the engines logging there are missing "
           "from its figures")
    return _finding(rule, msg, endpoint=ep.id, location=_loc(empty[0], None), first_ts=run.start, last_ts=run.end,
                    fix="check that the worker started and that its output reaches that file (srun --output); "
                        "diag judges the endpoint without it",
                    evidence={"cause": "log_empty", "files": list(empty), "engines": len(ep.engines),
                              "prometheus_samples": prom})


# ---------------------------------------------------------------- capacity vs concurrency (K003)

@template("capacity")
def capacity(rule: Rule, run: Run) -> list[Finding]:
    conc = run.top_concurrency()
    if not conc:
        return []
    out = []
    for role in ("decode", "agg"):
        eps = [e for e in run.endpoints.values() if e.role == role]
        for ep in eps:
            mc = ep.facts.get("max_concurrency")
            per_engine = mc.get("concurrency") if isinstance(mc, dict) else mc
            if not per_engine or not ep.engines:
                continue
            cap = per_engine * len(ep.engines)
            share = conc / len(eps)
            if cap * rule.params.get("margin", 1.0) < share:
                where = ep.fact_lines.get("max_concurrency")
                out.append(_finding(
                    rule, f"{ep.id} holds {number(cap)} full-length requests ({number(per_engine, 1)} per engine x "
                    f"{len(ep.engines)} engines) but receives up to {number(share)} (concurrency {number(conc)})", endpoint=ep.id,
                    location=_loc(*where) if where else None,
                    evidence={"capacity": round(cap, 1), "share": round(share, 1), "per_engine": per_engine,
                              "engines": len(ep.engines), "concurrency": conc}))
    return out


# ---------------------------------------------------------------- noise ratio (L002)

@template("noise_ratio")
def noise_ratio(rule: Rule, run: Run) -> list[Finding]:
    p = rule.params
    logs = [s for s in run.sources if s.kind in ("worker", "frontend") and not s.error]
    lines = sum(s.counts.lines for s in logs)
    if lines < p["min_lines"]:
        return []
    counts = [s.counts.estimate() for s in logs]
    noise = sum(c.noise_lines for c in counts)
    ansi = sum(c.ansi_lines for c in counts)
    nr, ar = noise / lines, ansi / lines
    if nr <= p["max_noise_ratio"] and ar <= p["max_ansi_ratio"]:
        return []
    kinds: Counter[str] = Counter()
    for c in counts:
        kinds.update({k: v for k, v in c.noise.items() if v})
    exact = all(s.counts.exact for s in logs)
    return [_finding(rule, f"{nr:,.0%} of {number(lines)} log lines are noise and {ar:,.0%} carry ANSI escapes"
                     + ("" if exact else " (estimated from a sample of lines)"),
                     evidence={"lines": lines, "noise_lines": noise, "ansi_lines": ansi, "noise": dict(kinds),
                               "exact": exact})]

