"""Figures that mean what their labels say (issue 33), over every sample run: the headline tok/s per GPU
is the benchmark's at the verdict's point, or the engines' beside it, each labelled; a P/D decode's prompt
tokens (recomputed after a preemption, or KV received by transfer) never count as useful throughput, and
prompt tokens are split by source where the engine splits them (vllm:prompt_tokens_by_source); every
column of the endpoint table, titled "figures over W", is over W; the verdict's confidence drops, with
its reasons, where the evidence is thin, incomplete or in conflict."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT
from loading import report_of

from diag.parsers.records import Preemption
from diag.report import Report
from diag.rules.confidence import weighed
from diag.rules.verdict_catalog import verdict_catalog
from diag.rules.verdict_figures import in_window
from diag.throughput import AGREE_FRAC, throughput, throughput_text, tokens_per_gpu
from diag.tui.state import header as watch_header

from helpers import run_diag

RUNS = ROOT / "samples" / "runs"
RUN_NAMES = sorted(p.name for p in RUNS.iterdir())
PARAMS = verdict_catalog().params
TEXT_ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _bench_at_point(report: Report) -> float | None:
    v = report.verdict
    assert v is not None
    return next((b.total_token_throughput for b in report.run.benchmark
                 if v.concurrency and b.concurrency == v.concurrency and b.total_token_throughput), None)


def _row(text: str, endpoint: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.startswith(endpoint + " "))


# ------------------------------------------------------------------ the headline throughput
@pytest.mark.parametrize("name", RUN_NAMES)
def test_header_tok_s_per_gpu_is_the_benchmarks_at_the_verdicts_point(name: str) -> None:
    """tail's `throughput` and watch's `tok/s`/`bench` rows: the benchmark's result at the verdict's
    point, per working GPU, labelled; the engines' figure beside it when it differs by more than 2 %."""
    report = report_of(RUNS / name)
    v, tp = report.verdict, report.throughput
    tail, watch = dict(report.header), dict(watch_header(report, report.now))
    bench = _bench_at_point(report)
    if bench is None:   # no result at the point (cut short, stuck): the engines' figure, so labelled
        assert tp is None or tp["benchmark"] is None
        if tp is not None:
            assert "(engines; no benchmark result" in tail["throughput"]
        return
    assert v is not None and tp is not None
    per_gpu = bench / tp["working_gpus"]
    head = re.match(r"([\d,]+) tok/s total at concurrency ([\d,]+) \(benchmark\); ([\d,]+) tok/s per working GPU",
                    tail["throughput"])
    assert head, tail["throughput"]
    assert (_num(head[1]), _num(head[2])) == (round(bench), v.concurrency)
    assert abs(_num(head[3]) - per_gpu) <= 0.5
    shown = re.match(r"([\d,]+) tok/s @([\d,]+) · ([\d,]+)/GPU$", watch["bench"])
    assert shown and _num(shown[2]) == v.concurrency and abs(_num(shown[3]) - per_gpu) <= 0.5, watch["bench"]
    engines = re.match(r"([\d,]+) · ([\d,]+)/GPU \(\d+ GPUs\) over C=", watch["tok/s"])
    if engines is None:   # the engines' figure unknown (stats-missing-dynamo: no token counters)
        assert watch["tok/s"].startswith("- over C="), watch["tok/s"]
        return
    if abs(_num(engines[2]) - per_gpu) > AGREE_FRAC * per_gpu:
        assert "; engines " in tail["throughput"], tail["throughput"]
    else:
        assert "; engines " not in tail["throughput"] and tp["agree"]


def test_kv_exhaustion_headline_counts_no_recomputed_prompt() -> None:
    """watch showed 126,783 tok/s (7,924/GPU) at C=4,096: decode's recomputed prompt tokens counted;
    the benchmark's own result there is 107,971 (6,748/GPU)."""
    report = report_of(RUNS / "kv-exhaustion")
    assert report.throughput is not None
    eng = report.throughput["engines"]
    watch = dict(watch_header(report, report.now))
    assert watch["tok/s"] == "108,240 · 6,765/GPU (16 GPUs) over C=4,096 steady"
    assert watch["bench"] == "107,971 tok/s @4,096 · 6,748/GPU"
    assert eng["excluded_prompt_tps"] == pytest.approx(18_530, abs=1)
    everything = sum((s.prompt_tps_mean or 0) + (s.gen_tps_mean or 0) for s in report.endpoints)
    assert everything == pytest.approx(126_783, abs=1) and everything - eng["tps"] == pytest.approx(18_543, abs=2)
    res = run_diag("tail", str(RUNS / "kv-exhaustion"), env=TEXT_ENV)
    assert ("throughput  107,971 tok/s total at concurrency 4,096 (benchmark); 6,748 tok/s per working GPU (16); "
            "benchmark's best 116,024 tok/s at concurrency 1,024 (7,252 per working GPU)") in res.stdout


def test_both_figures_are_shown_when_they_differ() -> None:
    """Where the engines' useful tok/s and the benchmark's differ by more than 2 % the header shows both."""
    report = report_of(RUNS / "kv-exhaustion")
    run, v = report.run, report.verdict
    assert v is not None and report.throughput is not None
    lower = replace(run, benchmark=tuple(replace(b, total_token_throughput=0.9 * b.total_token_throughput)
                                         if b.concurrency == v.concurrency else b for b in run.benchmark))
    tp = throughput(lower, v, report.throughput["window"])
    assert tp is not None and not tp["agree"]
    assert throughput_text(tp, tokens_per_gpu(lower)).startswith(
        "97,174 tok/s total at concurrency 4,096 (benchmark); 6,073 tok/s per working GPU (16); "
        "engines 108,240 tok/s over C=4,096 steady (6,765 per working GPU)")


# ------------------------------------------------------------------ decode's prompt tokens
def test_decode_prompt_tokens_are_not_useful_on_the_log_path() -> None:
    """kv-exhaustion: decode computes 18,530 prompt tok/s again (preempted requests recomputed); its
    column says so, the useful throughput leaves them out."""
    report = report_of(RUNS / "kv-exhaustion")
    dec = report.endpoint("decode-w0")
    assert dec is not None and dec.prompt_tps_mean == pytest.approx(18_530, abs=1)
    assert report.throughput is not None
    eng = report.throughput["engines"]
    prefill = sum(s.prompt_tps_mean or 0 for s in report.endpoints if s.role == "prefill")
    assert eng["prompt_tps"] == pytest.approx(prefill, abs=1)
    assert eng["tps"] == pytest.approx(prefill + (dec.gen_tps_mean or 0), abs=1)
    assert report.throughput["agree"]


def test_decode_prompt_tokens_are_not_useful_on_the_prometheus_path() -> None:
    """stats-missing (vLLM 0.26: vllm:prompt_tokens counts every source): decode showed 'prompt tok/s
    103,533', the KV it received by transfer, where the log path shows 0; now unknown ('-'), kept as
    prompt_all_tps, never counted."""
    report = report_of(RUNS / "stats-missing")
    dec = report.endpoint("decode-w0")
    assert dec is not None and dec.prompt_tps_mean is None and dec.gen_tps_mean == pytest.approx(12_947, abs=1)
    stats = report.run.endpoints["decode-w0"].stats
    assert stats["prompt_tps"].null_count() == stats.height and stats["prompt_all_tps"].drop_nulls().len() > 0
    assert all(s.prompt_tps_mean and s.prompt_tps_mean > 25_000 for s in report.endpoints if s.role == "prefill")
    assert report.throughput is not None and report.throughput["agree"]
    assert report.throughput["engines"]["tps"] == pytest.approx(115_828, abs=1)
    healthy = report_of(RUNS / "healthy").endpoint("decode-w0")   # the log path: decode computes none
    assert healthy is not None and healthy.prompt_tps_mean == 0
    res = run_diag("tail", str(RUNS / "stats-missing"), env=TEXT_ENV)
    row = _row(res.stdout, "decode-w0")
    assert "-" in row and "103,533" not in res.stdout


def _capture(path: Path) -> None:
    """A P/D run's Prometheus capture from vLLM >= 0.33: every prompt counter split by source. Prefill
    computes 10,000 prompt tok/s per engine; decode receives 9,990 per engine by KV transfer, computes
    10 itself and generates 1,000."""
    t0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
    rows = []
    for k in range(13):
        for role, port in (("prefill", 7500), ("decode", 7600)):
            text = ""
            for engine in (0, 1):
                labels = f'engine="{engine}",model_name="m"'
                local, moved, gen = (100_000 * k, 0, 20 * k) if role == "prefill" else (100 * k, 99_900 * k, 10_000 * k)
                text += (f"vllm:prompt_tokens_total{{{labels}}} {local + moved}\n"
                         + "".join(f'vllm:prompt_tokens_by_source_total{{{labels},source="{source}"}} {n}\n'
                                   for source, n in (("local_compute", local), ("local_cache_hit", 0),
                                                     ("external_kv_transfer", moved)))
                         + f"vllm:generation_tokens_total{{{labels}}} {gen}\n"
                         f"vllm:num_requests_running{{{labels}}} {4 if role == 'prefill' else 100}\n"
                         f"vllm:num_requests_waiting{{{labels}}} 0\n"
                         f"vllm:kv_cache_usage_perc{{{labels}}} {0.05 if role == 'prefill' else 0.5}\n"
                         f"vllm:num_preemptions_total{{{labels}}} 0\n")
            rows.append({"timestamp_ns": int((t0 + timedelta(seconds=10 * k)).timestamp() * 1e9),
                         "endpoint_url": f"http://n1:{port}/metrics", "role": role, "worker_id": f"{role}_0_n1",
                         "text": text})
    path.mkdir(parents=True)
    (path / "raw_prometheus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_prompt_tokens_split_by_source(tmp_path: Path) -> None:
    """vllm:prompt_tokens_by_source: each side's computed prompt tokens (decode's 10 tok/s per engine, not
    the 9,990 it received by transfer); the useful tok/s are prefill's prompt and decode's generation."""
    _capture(tmp_path / "logs")
    report = report_of(tmp_path)
    pre, dec = report.endpoint("prefill-w0"), report.endpoint("decode-w0")
    assert pre is not None and dec is not None
    assert (pre.prompt_tps_mean, dec.prompt_tps_mean, dec.gen_tps_mean) == (20_000, 20, 2_000)
    assert report.run.endpoints["decode-w0"].stats["prompt_all_tps"].null_count() == dec.window_samples
    assert report.throughput is not None
    eng = report.throughput["engines"]
    assert (eng["tps"], eng["prompt_tps"], eng["gen_tps"], eng["excluded_prompt_tps"]) == (22_000, 20_000, 2_000, 20)


# ------------------------------------------------------------------ columns over the titled window
@pytest.mark.parametrize("name", RUN_NAMES)
def test_every_endpoint_column_is_over_the_titled_window(name: str) -> None:
    """Each endpoint's samples, preemptions, rates and queues are its stats rows in its window (the run
    verdict's unless marked as its own), and its side's preemptions are the verdict's."""
    report = report_of(RUNS / name)
    v = report.verdict
    assert v is not None
    for s in report.endpoints:
        if s.window is None:
            assert (s.window_samples, s.preemptions, s.prompt_tps_mean) == (0, 0, None)
            continue
        rows = in_window(report.run.endpoints[s.id].stats, datetime.fromisoformat(s.window["start"]),
                         datetime.fromisoformat(s.window["end"]))
        assert s.window_samples == rows.height > 0
        start, end = datetime.fromisoformat(s.window["start"]), datetime.fromisoformat(s.window["end"])
        lines = sum(1 for _, r in report.run.endpoints[s.id].of(Preemption) if r.ts and start <= r.ts <= end)
        assert s.preemptions == rows["preemptions"].fill_null(0).sum() + lines   # stats, and lines of their own
        means = rows.group_by("engine").agg(pl.col("gen_tps", "running").mean())
        for mean, col in ((s.gen_tps_mean, "gen_tps"), (s.running_mean, "running")):
            want = means[col].drop_nulls()
            assert (mean is None) == (want.len() == 0)
            assert mean is None or mean == pytest.approx(want.sum())
    decode = [s for s in report.endpoints if s.role == v.figures.get("decode_role")]
    if v.window is not None and v.figures.get("decode") and all(s.window and s.window["label"] != "active"
                                                                 for s in decode):
        assert sum(s.preemptions for s in decode) == v.figures["decode"]["preemptions"]


def test_kv_exhaustion_preempt_column_is_the_verdicts() -> None:
    """The table titled 'figures over C=4,096 steady' counted the whole run's 2,108 preemptions in its
    preempt column against the verdict's 934; its samples column counted the whole run too."""
    res = run_diag("tail", str(RUNS / "kv-exhaustion"), env=TEXT_ENV)
    assert "figures over C=4,096 steady" in res.stdout and "934 preemptions" in res.stdout
    row = _row(res.stdout, "decode-w0")   # ... samples prompt gen running wait KV preempt last-seen stage health
    assert (row[-11], row[-5]) == ("300", "934")
    assert "2,108" not in " ".join(row) and "952" not in " ".join(row)
    doc = json.loads(run_diag("tail", str(RUNS / "kv-exhaustion"), "--format", "json").stdout)
    stats = next(e["stats"] for e in doc["endpoints"] if e["id"] == "decode-w0")
    assert (stats["preemptions"], stats["samples"]) == (934, 300)


def test_unknown_figures_are_not_zero() -> None:
    """stats-missing-dynamo: the workers expose only their KV gauge; the table showed 0 prompt, gen,
    running and waiting where nothing is known."""
    report = report_of(RUNS / "stats-missing-dynamo")
    for s in report.endpoints:
        assert (s.prompt_tps_mean, s.gen_tps_mean, s.running_mean, s.waiting_mean, s.waiting_peak) == (None,) * 5
        assert s.kv_mean is not None
    assert report.throughput is not None and report.throughput["engines"]["tps"] is None
    assert dict(watch_header(report, report.now))["tok/s"] == "- over C=1,024 steady"


# ------------------------------------------------------------------ confidence from the evidence
def test_unknown_inputs_lower_the_confidence() -> None:
    """stats-missing-dynamo was 'healthy (high confidence) ... no queue standing' with decode waiting '-'."""
    v = report_of(RUNS / "stats-missing-dynamo").verdict
    assert v is not None and v.cls == "healthy" and v.confidence == "low"
    assert v.confidence_reasons == ("1 Prometheus sample per engine in the 3m02s steady window",
                                    "prefill waiting, decode waiting, decode running unknown")
    res = run_diag("tail", str(RUNS / "stats-missing-dynamo"), env=TEXT_ENV)
    assert "healthy (low confidence: 1 Prometheus sample per engine in the 3m02s steady window; prefill waiting, decode " \
           "waiting, decode running unknown) at concurrency 1,024" in " ".join(res.stdout.split())


def test_thin_samples_lower_the_confidence() -> None:
    """stats-missing was high confidence on 8 Prometheus samples per endpoint: one scrape per engine in
    its steady window."""
    v = report_of(RUNS / "stats-missing").verdict
    assert v is not None and v.cls == "healthy" and v.confidence == "medium"
    assert v.confidence_reasons == ("1 Prometheus sample per engine in the 3m02s steady window",)
    assert v.to_dict()["confidence_reasons"] == list(v.confidence_reasons)


def test_conflicting_throughput_lowers_the_confidence() -> None:
    """The engines measuring 108,240 useful tok/s where the benchmark says 20 % less is a conflict."""
    report = report_of(RUNS / "kv-exhaustion")
    v = report.verdict
    assert v is not None and v.confidence == "high" and v.confidence_reasons == ()
    bench = next(b for b in report.run.benchmark if b.concurrency == v.concurrency)
    low = replace(bench, total_token_throughput=0.8 * (bench.total_token_throughput or 0))
    assert weighed(v.cls, "high", v.figures, low, PARAMS) == (
        "medium", ("the engines' 108,240 tok/s and the benchmark's 86,377 differ by 25 %",))
    assert weighed(v.cls, "high", v.figures, bench, PARAMS) == ("high", ())


@pytest.mark.parametrize("name", RUN_NAMES)
def test_confidence_follows_the_evidence(name: str) -> None:
    """Every sample run: a load verdict with an input unknown or fewer than min_window_samples per engine
    is not high, and says why; the facts (invalid, startup-stuck) keep theirs."""
    v = report_of(RUNS / name).verdict
    assert v is not None
    if v.cls in ("invalid", "startup-stuck", "unknown"):
        assert v.confidence_reasons == ()
        return
    fig = v.figures
    unknown = [k for side, key in (("prefill", "waiting"), ("decode", "waiting"), ("decode", "kv"), ("decode", "running"))
               if ((fig.get(side) or {}).get(key) or {}).get("mean") is None for k in (f"{side} {key}",)]
    thin = min(fig[side]["samples"] / fig[side]["engines"] for side in ("prefill", "decode") if fig.get(side))
    if unknown or thin < PARAMS["min_window_samples"]:
        assert v.confidence != "high" and v.confidence_reasons, (v.confidence, v.confidence_reasons)
    else:
        assert v.confidence_reasons == ()
