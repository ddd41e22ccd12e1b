"""Tachometer Parquet and AIPerf server-metrics exports: the sample generator's captures of the
prefill-bound run read into the same endpoints, engines and runtime findings as that run's logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from loading import report_of, tail_json

from diag.parsers.telemetry import aiperf_jsonl, aiperf_parquet, tachometer_parquet
from diag.report import window_figures
from diag.telemetry import telemetry_logs

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "samples" / "runs" / "prefill-bound"
TACH = ROOT / "samples" / "telemetry" / "prefill-bound-tachometer"
AIPERF = ROOT / "samples" / "telemetry" / "prefill-bound-aiperf"
RUNTIME = ("DIAG-B", "DIAG-K001", "DIAG-K002", "DIAG-E")


def _endpoints(doc: dict) -> dict[str, tuple[str, int, int]]:
    return {e["id"]: (e["role"], e["engines"], e["samples"]) for e in doc["endpoints"]}


def _runtime(doc: dict) -> set[tuple[str, str]]:
    return {(f["code"], f.get("endpoint") or "") for f in doc["findings"] if f["code"].startswith(RUNTIME)}


@pytest.fixture(scope="module")
def from_logs() -> dict:
    return tail_json(RUN)


@pytest.mark.parametrize("capture", [TACH, AIPERF], ids=["tachometer", "aiperf"])
def test_capture_reads_into_the_logs_endpoints(capture: Path, from_logs: dict) -> None:
    doc = tail_json(capture)
    assert _endpoints(doc) == _endpoints(from_logs)
    assert _runtime(doc) == _runtime(from_logs) == {("DIAG-B001", "")}
    assert not [f for f in doc["findings"] if f["code"] == "DIAG-L001"]  # no log, so no log missing stats
    # the capture has no benchmark output, so its verdict window is its active one; over the logs' window
    # (C=2048 steady) every figure of every endpoint is the logs' own
    window = from_logs["endpoints"][0]["stats"]["window"]
    assert window["label"] == "C=2,048 steady"
    start, end = datetime.fromisoformat(window["start"]), datetime.fromisoformat(window["end"])
    logs, capture = report_of(RUN).run, report_of(capture).run
    for eid, ep in capture.endpoints.items():
        want, got = window_figures(logs.endpoints[eid], start, end), window_figures(ep, start, end)
        # each side's own rate (decode's vllm:prompt_tokens also counts transferred prompts; prefill's few
        # first tokens a second are rounded in the log lines)
        rate = "prompt_tps_mean" if ep.role == "prefill" else "gen_tps_mean"
        assert got[rate] == pytest.approx(want[rate], rel=1e-3), (eid, rate)
        for key in ("running_mean", "waiting_mean", "waiting_peak", "kv_mean", "kv_peak"):
            # gauges: a scrape and a stats line at the window's edges may fall on either side of it
            assert got[key] == pytest.approx(want[key], rel=0.02), (eid, key)
    assert doc["verdict"]["class"] == from_logs["verdict"]["class"] == "prefill-bound"


def test_tachometer_reads_only_the_metrics_diag_uses(tmp_path: Path) -> None:
    (path,) = (TACH / "logs" / "tachometer").rglob("final.parquet")
    df = pl.read_parquet(path)
    # a family diag does not read (vLLM's prompt-length histogram), as Tachometer writes its rows
    unread = df.filter(pl.col("metric_name").str.starts_with("vllm:e2e_request_latency_seconds{")).with_columns(
        metric_name=pl.col("metric_name").str.replace("vllm:e2e_request_latency_seconds", "vllm:request_prompt_tokens"),
        metric_name_clean=pl.lit("vllm:request_prompt_tokens"))
    wider = tmp_path / "tachometer" / "final.parquet"
    wider.parent.mkdir()
    pl.concat([df, unread]).write_parquet(wider)
    procs = tachometer_parquet(wider)
    kept = sum(len(s) for p in procs for _, s in p.scrapes)
    assert kept == df.height < df.height + unread.height  # the unread family is filtered out in the scan
    assert {s.metric for p in procs for _, ss in p.scrapes for s in ss} == {
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens",
        "vllm:e2e_request_latency_seconds_bucket", "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket"}
    dec = [p for p in procs if p.role == "decode"]
    assert sorted((p.key, p.index, p.node) for p in dec) == [
        ("backend_decode0_rank0", 0, "gb200-r03-n14"), ("backend_decode0_rank1", 0, "gb200-r03-n15")]


def test_counter_reset_in_a_capture(tmp_path: Path) -> None:
    """A restarted engine's counter goes down: the increase since the restart is its new value."""
    rows = []
    for k, tokens in enumerate([1000.0, 2000.0, 300.0, 1300.0]):
        for name, value in (("vllm:generation_tokens_total", tokens), ("vllm:num_requests_running", 4.0)):
            rows.append({"scraper_endpoint": "backend_decode2_rank0", "metric_name": name + '{engine="0"}',
                         "metric_value": value, "timestamp_ns": (1_760_000_000 + 10 * k) * 10**9,
                         "worker_role": "decode", "worker_index": "2", "hostname": "n1"})
    path = tmp_path / "tachometer" / "out-0.parquet"
    path.parent.mkdir()
    pl.DataFrame(rows).write_parquet(path)
    (log,) = telemetry_logs([path], "tachometer")
    assert (log.info.role, log.info.index, log.info.node) == ("decode", 2, "n1")
    assert [r.gen_tps for r in log.records] == [100.0, 30.0, 100.0]
    assert log.records[0].ts == datetime.fromtimestamp(1_760_000_010, tz=UTC)


def test_aiperf_jsonl_matches_its_parquet(tmp_path: Path) -> None:
    (path,) = AIPERF.rglob("server_metrics_export.parquet")
    df = pl.read_parquet(path)
    lines = []
    for (url, ts), part in df.group_by(["endpoint_url", "timestamp_ns"], maintain_order=True):
        metrics: dict[str, list] = {}
        hists: dict[tuple, dict] = {}
        for row in part.iter_rows(named=True):
            labels = {k: row[k] for k in ("dynamo_component", "engine", "model_name")}
            if row["bucket_le"] is None:
                metrics.setdefault(row["metric_name"], []).append({"labels": labels, "value": row["value"]})
                continue
            key = (row["metric_name"], *labels.values())
            if key not in hists:  # one sample per histogram: {labels, buckets: {le: count}, sum, count}
                hists[key] = {"labels": labels, "buckets": {}, "sum": row["sum"], "count": row["count"]}
                metrics.setdefault(row["metric_name"], []).append(hists[key])
            hists[key]["buckets"][row["bucket_le"]] = row["bucket_count"]
        lines.append(json.dumps({"endpoint_url": url, "timestamp_ns": ts, "metrics": metrics}))
    from_jsonl, problems = aiperf_jsonl([*lines, "{torn"])
    assert problems == [f"line {len(lines) + 1}: not a server-metrics record (JSONDecodeError)"]
    from_parquet = aiperf_parquet(path)
    assert [(p.key, p.role, p.index, len(p.scrapes)) for p in from_jsonl] == \
        [(p.key, p.role, p.index, len(p.scrapes)) for p in from_parquet]
    assert [sorted((s.name, s.value, *sorted(s.labels.items())) for _, ss in p.scrapes for s in ss)
            for p in from_jsonl] == [sorted((s.name, s.value, *sorted(s.labels.items()))
                                            for _, ss in p.scrapes for s in ss) for p in from_parquet]
    assert [(p.role, p.index) for p in from_parquet] == [("prefill", 0), ("prefill", 1), ("prefill", 2),
                                                         ("prefill", 3), ("decode", 0), ("decode", 0)]
