"""Latency histograms -> per-interval quantiles from bucket deltas (parsers.histogram), the one
implementation behind every metric source: numbers computed by hand on a small histogram, the same
numbers through an exposition, a ``raw_prometheus.jsonl`` capture and a Tachometer file, and the
sample scenario's telemetry (Tachometer and AIPerf) read into the same figures."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from loading import tail_json

from diag.parsers.histogram import bucket_delta, interval_quantiles, quantile
from diag.parsers.prometheus import StatsConverter, parse_exposition
from diag.prom import capture_logs
from diag.telemetry import telemetry_logs

ROOT = Path(__file__).resolve().parents[1]
INF = float("inf")
# cumulative counts of one histogram at two scrapes: the interval observed 4, 8, 7 and 1 requests in
# (0, 0.1], (0.1, 0.5], (0.5, 1] and (1, +Inf): cumulative deltas 4, 12, 19, 20
PREV = ((0.1, 1.0), (0.5, 3.0), (1.0, 5.0), (INF, 6.0))
CUR = ((0.1, 5.0), (0.5, 15.0), (1.0, 24.0), (INF, 26.0))


def test_quantiles_by_hand() -> None:
    delta = bucket_delta(PREV, CUR)
    assert delta == ((0.1, 4.0), (0.5, 12.0), (1.0, 19.0), (INF, 20.0))
    # rank q x 20 inside its bucket, linearly: p50 rank 10 in (0.1, 0.5] holding ranks 4..12
    assert quantile(0.5, delta) == pytest.approx(0.1 + 0.4 * (10 - 4) / 8)        # 0.4
    assert quantile(0.9, delta) == pytest.approx(0.5 + 0.5 * (18 - 12) / 7)        # 0.928571...
    assert quantile(0.1, delta) == pytest.approx(0.1 * 2 / 4)                      # the first bucket starts at 0
    assert quantile(0.99, delta) == 1.0        # rank 19.8 lies in +Inf: the largest finite bound
    assert interval_quantiles({"ttft": PREV}, {"ttft": CUR}) == pytest.approx(
        {"ttft_p50_s": 0.4, "ttft_p90_s": 0.5 + 3 / 7, "ttft_p99_s": 1.0})


def test_resets_and_empty_intervals() -> None:
    restarted = ((0.1, 2.0), (0.5, 2.0), (1.0, 3.0), (INF, 4.0))  # counts went down: a new process
    assert bucket_delta(CUR, restarted) == restarted
    assert quantile(0.5, restarted) == pytest.approx(0.1 * 2 / 2)
    assert bucket_delta(((1.0, 3.0), (INF, 3.0)), ((0.5, 1.0), (1.0, 4.0), (INF, 4.0))) == \
        ((0.5, 1.0), (1.0, 4.0), (INF, 4.0))  # other bounds: counted from the start
    assert bucket_delta(None, CUR) is None
    assert quantile(0.5, bucket_delta(CUR, CUR)) is None                   # no observations
    assert quantile(0.5, ((0.1, 1.0), (0.5, 3.0))) is None                 # no +Inf bucket
    assert quantile(0.0, ((0.1, 0.0), (0.5, 2.0), (INF, 2.0))) == 0.0
    assert interval_quantiles(None, {"itl": CUR}) == {}


def _exposition(counts: tuple[tuple[float, float], ...], family: str = "vllm:time_to_first_token_seconds") -> str:
    lines = [f"# HELP {family} TTFT", f"# TYPE {family} histogram"]
    for le, c in counts:
        le_text = "+Inf" if le == INF else str(le)
        lines.append(f'{family}_bucket{{engine="0",le="{le_text}",model_name="m"}} {c}')
    lines += [f'{family}_count{{engine="0",model_name="m"}} {counts[-1][1]}',
              f'{family}_sum{{engine="0",model_name="m"}} 1.0',
              '# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running{engine="0",model_name="m"} 3',
              '# TYPE vllm:generation_tokens counter', 'vllm:generation_tokens_total{engine="0",model_name="m"} 10']
    return "\n".join(lines) + "\n"


T0 = datetime(2026, 8, 12, 14, 0, tzinfo=UTC)


def test_exposition_scrapes_carry_the_quantiles() -> None:
    conv = StatsConverter()
    assert conv.add(T0, parse_exposition(_exposition(PREV)), 1) == []  # the baseline
    (row,) = conv.add(T0 + timedelta(seconds=10), parse_exposition(_exposition(CUR)), 2)
    assert row.latency == pytest.approx({"ttft_p50_s": 0.4, "ttft_p90_s": 0.5 + 3 / 7, "ttft_p99_s": 1.0})
    # the renamed inter-token histogram (vllm:time_per_output_token_seconds) is the same ITL
    old = StatsConverter()
    old.add(T0, parse_exposition(_exposition(PREV, "vllm:time_per_output_token_seconds")), 1)
    (row,) = old.add(T0 + timedelta(seconds=10), parse_exposition(_exposition(CUR, "vllm:time_per_output_token_seconds")), 2)
    assert row.latency == pytest.approx({"itl_p50_s": 0.4, "itl_p90_s": 0.5 + 3 / 7, "itl_p99_s": 1.0})


def test_capture_and_tachometer_give_the_same_quantiles(tmp_path: Path) -> None:
    """raw_prometheus.jsonl (exposition text, histogram lines kept by the field filter) and a Tachometer
    file (bucket rows with ``le`` inline) through the same code: the hand-computed numbers."""
    jsonl = tmp_path / "raw_prometheus.jsonl"
    jsonl.write_text("".join(json.dumps({"timestamp_ns": int((T0 + timedelta(seconds=10 * k)).timestamp() * 1e9),
                                         "endpoint_url": "http://n1:7500/metrics", "role": "prefill",
                                         "worker_id": "prefill_0_n1", "text": _exposition(c)}) + "\n"
                             for k, c in enumerate((PREV, CUR))))
    (log,) = capture_logs(jsonl)
    rows = []
    for k, counts in enumerate((PREV, CUR)):
        ts = int((T0 + timedelta(seconds=10 * k)).timestamp() * 1e9)
        rows += [{"scraper_endpoint": "backend_prefill0_rank0", "timestamp_ns": ts, "worker_role": "prefill",
                  "worker_index": "0", "hostname": "n1", "metric_value": c,
                  "metric_name": f'vllm:time_to_first_token_seconds{{engine="0",le="{"+Inf" if le == INF else le}",'
                                 'model_name="m"}'} for le, c in counts]
        rows.append({"scraper_endpoint": "backend_prefill0_rank0", "timestamp_ns": ts, "worker_role": "prefill",
                     "worker_index": "0", "hostname": "n1", "metric_value": 10.0 * (k + 1),
                     "metric_name": 'vllm:generation_tokens_total{engine="0",model_name="m"}'})
    path = tmp_path / "tachometer" / "final.parquet"
    path.parent.mkdir()
    pl.DataFrame(rows).write_parquet(path)
    (tach,) = telemetry_logs([path], "tachometer")
    want = {"ttft_p50_s": 0.4, "ttft_p90_s": 0.5 + 3 / 7, "ttft_p99_s": 1.0}
    assert [r.latency for r in log.records] == [pytest.approx(want)]
    assert [r.latency for r in tach.records] == [pytest.approx(want)]


def test_sample_telemetry_latency() -> None:
    """The prefill-bound scenario's captures: prefill engines' TTFT (queue-bound: its requests wait behind
    about 200 others at ~17k prompt tok/s, minutes), decode's inter-token latency (47 running at ~1.9k
    tok/s per engine: ~25 ms a step), the same from Tachometer and from AIPerf."""
    tach = tail_json(ROOT / "samples" / "telemetry" / "prefill-bound-tachometer")
    aiperf = tail_json(ROOT / "samples" / "telemetry" / "prefill-bound-aiperf")
    lat = {e["id"]: e["stats"]["latency_s"] for e in tach["endpoints"]}
    # AIPerf's export carries the TTFT/ITL histograms only (not the coarse e2e one)
    assert {e["id"]: {k: v for k, v in e["stats"]["latency_s"].items()} for e in aiperf["endpoints"]} == \
        {k: {m: f for m, f in v.items() if m != "e2e"} for k, v in lat.items()}
    assert lat["decode-w0"]["itl"] == {"p50": 0.022, "p90": 0.0433, "p99": 0.0493, "p90_max": 0.0449}
    assert lat["prefill-w0"]["ttft"] == {"p50": 106.6667, "p90": 149.3333, "p99": 158.9333, "p90_max": 149.3333}
    assert 0.0245 * 1.4 < lat["decode-w0"]["itl"]["p90_max"] < 0.05  # a step of ~25 ms, observations to 1.5x
    assert set(lat["prefill-w0"]) == {"ttft", "e2e"} and "ttft" not in lat["decode-w0"]
