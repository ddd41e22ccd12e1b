"""Telemetry captures of a sample run, as srt-slurm 2.x and AIPerf write them (telemetry-formats.md).

The generator's hidden per-engine series (the values its logs print every 10 s) are scraped 1 s after
each stats interval ends, as a worker's ``/metrics`` would show them: gauges as the last interval left
them, counters as running totals (``vllm:prompt_tokens`` counts a decode engine's transferred prompt
tokens too, as in ``raw_prometheus.jsonl``). Two run directories without logs hold them:

* ``<name>-tachometer/logs/tachometer/raw/scrape/final.parquet``: Tachometer's long format
  (labels inside ``metric_name``, ``_total`` kept, histogram columns, metadata columns) with a coarse
  ``vllm:e2e_request_latency_seconds`` histogram per engine and the latency histograms below.
* ``<name>-aiperf/logs/artifacts/<bench>/server_metrics_export.parquet``: AIPerf's export (one column
  per label, Dynamo's ``dynamo_component``, counters and histogram buckets as deltas from the first
  scrape, no ``_total``).

Latency histograms, with vLLM's bucket bounds (vllm-formats.md §3): a prefill engine's
``vllm:time_to_first_token_seconds`` (its requests finished in the interval, each waiting behind the queue
the interval ended with: (waiting + 1) x mean prompt / prompt tok/s), a decode engine's
``vllm:inter_token_latency_seconds`` (one observation per generated token, a step of running / gen tok/s).
Each interval's observations spread evenly over [0.5, 1.5] x that centre; counts are rounded cumulative.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

GAUGES = (("vllm:num_requests_running", "running", "requests"), ("vllm:num_requests_waiting", "waiting", "requests"),
          ("vllm:kv_cache_usage_perc", "kv", "ratio"))
COUNTERS = (("vllm:num_preemptions", "pre", None), ("vllm:prompt_tokens", "ptok", "tokens"),
            ("vllm:generation_tokens", "gtok", "tokens"))
LATENCY_LE = (1.0, 5.0, 20.0, 60.0, None)  # seconds; None is +Inf
TTFT_LE = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
           80.0, 160.0, 640.0, 2560.0)
ITL_LE = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
HISTOGRAMS = {"prefill": ("vllm:time_to_first_token_seconds", TTFT_LE),
              "decode": ("vllm:inter_token_latency_seconds", ITL_LE)}
META = ("frontend_index", "hostname", "job_id", "run_name", "worker_index", "worker_process", "worker_role")


def _scrape_times(hidden: dict[int, list[tuple[datetime, dict]]]) -> list[datetime]:
    ticks = sorted({t for rows in hidden.values() for t, _ in rows})
    if not ticks:
        return []
    return [ticks[0] - timedelta(seconds=9)] + [t + timedelta(seconds=1) for t in ticks]


def _values(prom_engine: Any, role: str, hidden: dict[int, list[tuple[datetime, dict]]], t: datetime) -> dict:
    return {e: prom_engine(role, [x for x in rows if x[0] <= t]) for e, rows in hidden.items()}


class _Latency:
    """One engine's latency histogram as it accumulates: float counts per bound (+Inf last) and sum."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds, self.cum, self.sum = bounds, [0.0] * (len(bounds) + 1), 0.0

    def observe(self, n: float, centre: float) -> None:
        """``n`` observations spread evenly over [0.5, 1.5] x ``centre``."""
        for i, le in enumerate(self.bounds):
            self.cum[i] += n * min(1.0, max(0.0, (le - 0.5 * centre) / centre))
        self.cum[-1] += n
        self.sum += n * centre

    def rows(self) -> list[tuple[str, float | None, float]]:
        """(le as exposed, upper bound or None for +Inf, rounded cumulative count) per bucket."""
        les = [*(str(le) for le in self.bounds), "+Inf"]
        return [(le, up, float(round(c))) for le, up, c in zip(les, [*self.bounds, None], self.cum, strict=True)]


def _observe(hist: _Latency, role: str, v: dict, prev: dict, dt: float, mean_len: tuple[int, int]) -> None:
    if role == "prefill" and (dp := v["ptok"] - prev["ptok"]) > 0:
        hist.observe(dp / mean_len[0], (v["waiting"] + 1) * mean_len[0] / (dp / dt))
    elif role == "decode" and (dg := v["gtok"] - prev["gtok"]) > 0 and v["running"] > 0:
        hist.observe(dg, v["running"] / (dg / dt))


def write(name: str, job: int, procs: list[Any], logs: dict, prom_engine: Any, model: str, bench: str,
          out: Path, seed: int, mean_len: tuple[int, int]) -> list[Path]:
    """Write both captures of one run under ``out`` (``mean_len``: the mean prompt and output lengths);
    the paths written."""
    rng = random.Random(seed)
    tach: list[dict] = []
    aip: list[dict] = []
    ranks: dict[tuple[str, int], int] = {}
    for p in procs:
        rank = ranks[(p.role, p.idx)] = ranks.get((p.role, p.idx), -1) + 1
        endpoint = f"backend_{p.role}{p.idx}_rank{rank}"
        url = f"http://{p.ip}:{7500 + p.port_idx}/metrics"
        meta = {"frontend_index": "", "hostname": p.node, "job_id": str(job), "run_name": name,
                "worker_index": str(p.idx), "worker_process": str(rank), "worker_role": p.role}
        hidden = logs[p.key].hidden
        ref: dict[int, dict] | None = None
        family, bounds = HISTOGRAMS.get(p.role, ("", ()))
        hists = {e: _Latency(bounds) for e in hidden}
        prev: tuple[datetime, dict] | None = None
        for t in _scrape_times(hidden):
            vals = _values(prom_engine, p.role, hidden, t)
            ts_ns = int(t.timestamp()) * 10**9 + t.microsecond * 1000 + rng.randint(0, 50_000_000)
            ref = ref if ref is not None else vals
            for e, v in vals.items():
                if prev is not None:
                    _observe(hists[e], p.role, v, prev[1][e], (t - prev[0]).total_seconds(), mean_len)
                labels = {"engine": str(e), "model_name": model}
                flat = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
                base = {"scraper_endpoint": endpoint, "histogram_bucket_lower": None, "histogram_bucket_upper": None,
                        "histogram_sum": None, "histogram_count": None,
                        "time_since_start": 0.0, "timestamp_ns": ts_ns, **meta}
                for metric, key, _ in GAUGES:
                    tach.append({**base, "metric_name": f"{metric}{{{flat}}}", "metric_value": float(v[key])})
                for metric, key, _ in COUNTERS:
                    tach.append({**base, "metric_name": f"{metric}_total{{{flat}}}", "metric_value": float(v[key])})
                done = v["gtok"] / float(mean_len[1])  # requests' worth of generated tokens
                lower = 0.0
                for le in LATENCY_LE:
                    share = 1.0 if le is None else min(1.0, le / 60.0)
                    tach.append({**base, "metric_name": "vllm:e2e_request_latency_seconds{" + flat +
                                 (f',le="{le}"' if le is not None else ',le="+Inf"') + "}",
                                 "metric_value": float(round(done * share)), "histogram_bucket_lower": lower,
                                 "histogram_bucket_upper": le, "histogram_sum": done * 30.0,
                                 "histogram_count": float(round(done))})
                    lower = le if le is not None else lower
                comp = "prefill" if p.role == "prefill" else "backend"
                if family:
                    total = hists[e].cum[-1]
                    lower = 0.0
                    for le_text, upper, count in hists[e].rows():
                        inline = ",".join(f'{k}="{x}"' for k, x in sorted({**labels, "le": le_text}.items()))
                        stats = {"histogram_bucket_lower": lower, "histogram_bucket_upper": upper,
                                 "histogram_sum": hists[e].sum, "histogram_count": float(round(total))}
                        tach.append({**base, "metric_name": f"{family}{{{inline}}}", "metric_value": count,
                                     **(stats if upper is not None else {})})  # +Inf: the columns stay null
                        lower = upper if upper is not None else lower
                        aip.append({"endpoint_url": url, "metric_name": family, "metric_type": "histogram",
                                    "unit": "seconds", "description": None, "timestamp_ns": ts_ns,
                                    "dynamo_component": comp, "engine": str(e), "model_name": model, "value": None,
                                    # deltas from the reference (first) scrape, which holds no observations yet
                                    "sum": hists[e].sum, "count": float(round(total)),
                                    "bucket_le": le_text, "bucket_count": count})
                for metric, key, unit in (*GAUGES, *COUNTERS):
                    counter = (metric, key, unit) in COUNTERS
                    aip.append({"endpoint_url": url, "metric_name": metric,
                                "metric_type": "counter" if counter else "gauge", "unit": unit,
                                "description": None, "timestamp_ns": ts_ns, "dynamo_component": comp,
                                "engine": str(e), "model_name": model,
                                "value": float(max(v[key] - ref[e][key], 0) if counter else v[key]),
                                "sum": None, "count": None, "bucket_le": None, "bucket_count": None})
            prev = (t, vals)
    f64, utf8 = pl.Float64, pl.Utf8
    tach_schema = {"scraper_endpoint": utf8, "metric_name": utf8, "metric_value": f64,
                   "histogram_bucket_lower": f64, "histogram_bucket_upper": f64, "histogram_sum": f64,
                   "histogram_count": f64, "time_since_start": f64, "timestamp_ns": pl.Int64,
                   **dict.fromkeys(META, utf8)}
    aip_schema = {"endpoint_url": utf8, "metric_name": utf8, "metric_type": utf8, "unit": utf8, "description": utf8,
                  "timestamp_ns": pl.Int64, "dynamo_component": utf8, "engine": utf8, "model_name": utf8,
                  "value": f64, "sum": f64, "count": f64, "bucket_le": utf8, "bucket_count": f64}
    frame = pl.DataFrame(tach, schema=tach_schema)
    # one writer for every endpoint: seconds since its first row; shutdown compaction appends
    # metric_name_clean and sorts by name and time
    frame = frame.with_columns(time_since_start=(pl.col("timestamp_ns") - pl.col("timestamp_ns").min()) / 1e9)
    frame = frame.with_columns(metric_name_clean=pl.col("metric_name").str.extract(r"^([^{]*)")).sort(
        "metric_name", "time_since_start", maintain_order=True)
    t_path = out / f"{name}-tachometer" / "logs" / "tachometer" / "raw" / "scrape" / "final.parquet"
    a_path = out / f"{name}-aiperf" / "logs" / "artifacts" / bench / "server_metrics_export.parquet"
    for path, df, codec in ((t_path, frame, "zstd"), (a_path, pl.DataFrame(aip, schema=aip_schema), "snappy")):
        path.parent.mkdir(parents=True, exist_ok=True)
        df.write_parquet(path, compression=codec, statistics=False)
    return [t_path, a_path]
