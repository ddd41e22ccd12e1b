"""Benchmark results: benchmark.out blocks, accuracy lines, sa-bench JSONs (head+tail), roll-up."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from diag.parsers.benchmark import (
    BENCH_OUT_FORMATS,
    BenchmarkFormatError,
    parse_accuracy,
    parse_benchmark_out,
    parse_result_filename,
    read_rollup,
    read_sa_bench_json,
)


def _block(
    succ: int,
    dur: float,
    inp: int,
    out: int,
    rps: float,
    otps: float,
    peak: float,
    ttps: float,
    ttft: tuple[float, float, float],
    tpot: tuple[float, float, float],
    itl: tuple[float, float, float],
    e2el: tuple[float, float, float],
) -> str:
    rows = [
        "============ Serving Benchmark Result ============",
        f"{'Successful requests:':<40} {succ:<10}",
        f"{'Benchmark duration (s):':<40} {dur:<10.2f}",
        f"{'Total input tokens:':<40} {inp:<10}",
        f"{'Total generated tokens:':<40} {out:<10}",
        f"{'Request throughput (req/s):':<40} {rps:<10.2f}",
        f"{'Output token throughput (tok/s):':<40} {otps:<10.2f}",
        f"{'Peak output token throughput (tok/s):':<40} {peak:<10.2f}",
        f"{'Total Token throughput (tok/s):':<40} {ttps:<10.2f}",
    ]
    for name, header, vals in (
        ("TTFT", "Time to First Token", ttft),
        ("TPOT", "Time per Output Token (excl. 1st token)", tpot),
        ("ITL", "Inter-token Latency", itl),
        ("E2EL", "End-to-end Latency", e2el),
    ):
        rows.append(f"{header:-^50}")
        rows.append(f"{f'Mean {name} (ms):':<40} {vals[0]:<10.2f}")
        rows.append(f"{f'Median {name} (ms):':<40} {vals[1]:<10.2f}")
        rows.append(f"{f'P99 {name} (ms):':<40} {vals[2]:<10.2f}")
    rows.append("=" * 50)
    return "\n".join(rows)


def _preamble(c: int, warm: bool) -> str:
    n = c * (2 if warm else 10)
    rate = "250.0" if warm else "inf"
    return "\n".join(
        [
            f"Namespace(backend='dynamo', max_concurrency={c}, num_prompts={n}, request_rate={rate})",
            "Starting initial single prompt test run...",
            "Initial test run completed. Starting main benchmark run...",
            f"Traffic request rate: {rate}",
            "Burstiness factor: 1.0 (Poisson process)",
            f"Maximum request concurrency: {c}",
            "SA-Bench shared aiohttp session: connector_limit=0 limit_per_host=0 ttl_dns_cache=300",
        ]
    )


BENCH_OUT = "\n".join(
    [
        "SA-Bench Config: endpoint=http://localhost:8000; isl=8192; osl=1024; concurrencies=64x128x256; "
        "req_rate=inf",
        "Verifying endpoint...",
        '{"id":"chatcmpl-1","choices":[{"message":{"content":"Hello! How can"}}]}',
        _preamble(64, True),
        _block(
            128,
            20.51,
            1048576,
            131072,
            6.24,
            6390.44,
            7012.0,
            57515.08,
            (812.4, 640.2, 2890.1),
            (9.1, 8.8, 14.2),
            (9.0, 8.7, 30.5),
            (10120.3, 9950.8, 14010.9),
        ),
        "Running benchmark with concurrency: 64",
        "2026-08-06 12:40:01",
        "+ python3 -u /srtctl-benchmarks/sa-bench/benchmark_serving.py --model qwen --max-concurrency 64 "
        "--save-result",
        _preamble(64, False),
        _block(
            640,
            93.97,
            5242880,
            589910,
            6.81,
            6278.02,
            6651.0,
            62071.37,
            (1211.8, 980.6, 4200.3),
            (9.84, 9.61, 15.02),
            (9.79, 9.55, 48.31),
            (11250.2, 11102.4, 15933.0),
        ),
        "+ set +x",
        "2026-08-06 12:41:40",
        "Completed benchmark with concurrency: 64",
        "-----------------------------------------",
        _preamble(128, True),
        _block(
            256,
            30.02,
            2097152,
            262144,
            8.53,
            8732.1,
            9100.0,
            78590.3,
            (1500.0, 1200.0, 5000.0),
            (12.0, 11.5, 18.0),
            (12.0, 11.0, 60.0),
            (13800.0, 13600.0, 19000.0),
        ),
        "Running benchmark with concurrency: 128",
        "2026-08-06 12:42:20",
        _preamble(128, False),
        _block(
            1280,
            150.31,
            10485760,
            1179648,
            8.52,
            7848.23,
            8402.0,
            77609.5,
            (2210.5, 1890.0, 7103.4),
            (14.2, 13.9, 21.7),
            (14.1, 13.6, 75.9),
            (16725.0, 16511.1, 22902.3),
        ),
        "Completed benchmark with concurrency: 128",
        "-----------------------------------------",
        _preamble(256, True),
        _block(
            512,
            40.0,
            4194304,
            524288,
            12.8,
            13107.2,
            14000.0,
            117964.8,
            (3000.0, 2500.0, 9000.0),
            (18.0, 17.0, 30.0),
            (18.0, 17.0, 90.0),
            (21000.0, 20500.0, 30000.0),
        ),
        "Running benchmark with concurrency: 256",
        "2026-08-06 12:45:02",
        _preamble(256, False),
        "slurmstepd: error: *** STEP 2752632.9 ON nodeA CANCELLED AT 2026-08-06T13:00:00 DUE TO TIME "
        "LIMIT ***",
    ]
)


def test_benchmark_out_last_section_wins() -> None:
    res = parse_benchmark_out(BENCH_OUT)
    assert [r.concurrency for r in res] == [64, 128, 256]
    r64, r128, r256 = res
    assert r64.source == "benchmark.out" and r64.complete
    assert (r64.successful_requests, r64.duration_s, r64.total_input_tokens, r64.total_output_tokens) == (
        640,
        93.97,
        5242880,
        589910,
    )
    assert (
        r64.request_throughput,
        r64.output_throughput,
        r64.peak_output_throughput,
        r64.total_token_throughput,
    ) == (6.81, 6278.02, 6651.0, 62071.37)
    assert (r64.mean_ttft_ms, r64.median_ttft_ms, r64.p99_ttft_ms) == (1211.8, 980.6, 4200.3)
    assert (r64.mean_tpot_ms, r64.median_tpot_ms, r64.p99_tpot_ms) == (9.84, 9.61, 15.02)
    assert (r64.mean_itl_ms, r64.median_itl_ms, r64.p99_itl_ms) == (9.79, 9.55, 48.31)
    assert (r64.mean_e2el_ms, r64.median_e2el_ms, r64.p99_e2el_ms) == (11250.2, 11102.4, 15933.0)
    lines = BENCH_OUT.splitlines()
    assert lines[r64.line - 1] == "Maximum request concurrency: 64"
    assert lines[r64.line - 2] == "Burstiness factor: 1.0 (Poisson process)"
    assert "request_rate=inf" in lines[r64.line - 6]  # the real run, not the warmup
    assert r128.successful_requests == 1280 and r128.p99_ttft_ms == 7103.4
    # the real run at 256 was cut by the time limit: no numbers, and the warmup's are not reported
    assert not r256.complete and r256.successful_requests is None and r256.output_throughput is None


def test_benchmark_out_sglang_and_percentiles() -> None:
    text = "\n".join(
        [
            "============ Serving Benchmark Result ============",
            "Backend:                                 sglang    ",
            "Traffic request rate:                    inf       ",
            "Max request concurrency:                 1         ",
            "Successful requests:                     50        ",
            "Benchmark duration (s):                  890.81    ",
            "Total input tokens:                      204800    ",
            "Total generated tokens:                  76800     ",
            "Request throughput (req/s):              0.06      ",
            "Output token throughput (tok/s):         86.21     ",
            "Total token throughput (tok/s):          316.12    ",
            "----------------End-to-End Latency----------------",
            "Mean E2E Latency (ms):                   17813.70  ",
            "P90 E2E Latency (ms):                    18381.57  ",
            "---------------Time to First Token----------------",
            "Mean TTFT (ms):                          249.77    ",
            "P99 TTFT (ms):                           405.75    ",
            "==================================================",
        ]
    )
    (r,) = parse_benchmark_out(text)
    assert (r.concurrency, r.successful_requests, r.total_token_throughput) == (1, 50, 316.12)
    assert (r.mean_e2el_ms, r.mean_ttft_ms, r.p99_ttft_ms) == (17813.70, 249.77, 405.75)
    assert r.get("p90_e2el_ms") == 18381.57
    assert r.get("traffic_request_rate") == math.inf
    assert r.get("backend") is None  # text values are not kept
    assert parse_benchmark_out("no results here\n") == []


GSM8K_OUT = """\
Running GSM8K evaluation: 1319 questions, 5-shot
Results:
Model: qwen35
Num questions: 1319
Accuracy: 0.881
Invalid responses: 0.002
Total latency: 92.404 s
Running GSM8K evaluation: 1319 questions, 5-shot
Accuracy: 0.031
Invalid responses: 0.412
"""

SGLANG_REPEAT = """\
Writing report to /tmp/gsm8k_qwen35.html
====================
Repeat: 5, mean: 0.880
Scores: ['0.881', '0.879', '0.883', '0.877', '0.880']
Mean latency: 61.220 s
====================
"""

LM_EVAL = """\
|Tasks|Version|     Filter     |n-shot|  Metric   |   |Value |   |Stderr|
|-----|------:|----------------|-----:|-----------|---|-----:|---|-----:|
|gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.9500|±  |0.0060|
|     |       |strict-match    |     5|exact_match|↑  |0.9477|±  |0.0061|
"""


def test_accuracy() -> None:
    acc = parse_accuracy(GSM8K_OUT)
    assert [(a.task, a.metric, a.value, a.run) for a in acc] == [
        ("gsm8k", "accuracy", 0.881, 0),
        ("gsm8k", "invalid_rate", 0.002, 0),
        ("gsm8k", "accuracy", 0.031, 1),
        ("gsm8k", "invalid_rate", 0.412, 1),
    ]
    assert acc[0].line == 5

    rep = parse_accuracy(SGLANG_REPEAT)
    assert rep[0].metric == "mean_score" and rep[0].value == 0.88 and rep[0].task == "gsm8k"
    assert [(a.metric, a.value, a.run) for a in rep[1:]] == [
        ("score", 0.881, 0),
        ("score", 0.879, 1),
        ("score", 0.883, 2),
        ("score", 0.877, 3),
        ("score", 0.88, 4),
    ]

    lm = parse_accuracy(LM_EVAL)
    assert [(a.task, a.filter, a.n_shot, a.metric, a.value, a.stderr) for a in lm] == [
        ("gsm8k", "flexible-extract", 5, "exact_match", 0.95, 0.006),
        ("gsm8k", "strict-match", 5, "exact_match", 0.9477, 0.0061),
    ]

    pct = parse_accuracy("Score: 88.0%\n", task="gpqa")
    assert (pct[0].task, pct[0].metric, pct[0].value) == ("gpqa", "score", 0.88)


def _sa_bench(n_requests: int, *, old_keys: bool = False, latency_first: bool = False) -> dict:
    head = {
        "date": "20260806-124140",
        "backend": "dynamo",
        "model_id": "qwen35",
        "tokenizer_id": "/model",
        "num_prompts": 640,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 64,
        "duration": 93.97,
        "completed": 638,
        ("total_input" if old_keys else "total_input_tokens"): 5242880,
        ("total_output" if old_keys else "total_output_tokens"): 589910,
        "request_throughput": 6.79,
        "request_goodput": None,
        "output_throughput": 6278.02,
        "peak_output_tokens_per_s": 6651.0,
        "total_token_throughput": 62071.37,
    }
    arrays = {
        "input_lens": [8192] * n_requests,
        "output_lens": [1024] * n_requests,
        "ttfts": [1.21] * n_requests,
        "itls": [[0.0098] * 40 for _ in range(n_requests)],
        "generated_texts": ['text with "mean_ttft_ms": 99999.0, inside'] * n_requests,
        "errors": [""] * n_requests,
    }
    tail: dict = {}
    for m, (mean, med, p99) in {
        "ttft": (1211.8, 980.6, 4200.3),
        "tpot": (9.84, 9.61, 15.02),
        "itl": (9.79, 9.55, 48.31),
        "e2el": (11250.2, 11102.4, 15933.0),
    }.items():
        tail.update({f"mean_{m}_ms": mean, f"median_{m}_ms": med, f"std_{m}_ms": 1.5})
        if old_keys:
            tail[f"percentiles_{m}_ms"] = [[50.0, med], [99.0, p99]]
        else:
            tail[f"p99_{m}_ms"] = p99
    return {**tail, **arrays, **head} if latency_first else {**head, **arrays, **tail}


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    d = tmp_path / "sa-bench_isl_8192_osl_1024"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize("latency_first", [False, True])
def test_sa_bench_json_large_reads_head_and_tail(tmp_path: Path, latency_first: bool) -> None:
    p = _write(
        tmp_path,
        "results_concurrency_64_gpus_18_ctx_10_gen_8.json",
        _sa_bench(3000, latency_first=latency_first),
    )
    size = p.stat().st_size
    assert size > 1_000_000
    # corrupt the middle: a reader that parsed the whole file would fail
    raw = bytearray(p.read_bytes())
    mid = size // 2
    raw[mid : mid + 64] = b"\x00<<not json>>" * 4 + b"\x00" * 12
    p.write_bytes(bytes(raw))
    r = read_sa_bench_json(p)
    assert r.source == "sa-bench-json"
    assert (r.concurrency, r.successful_requests, r.num_prompts, r.failed_requests) == (64, 638, 640, 2)
    assert (r.duration_s, r.total_input_tokens, r.total_output_tokens) == (93.97, 5242880, 589910)
    assert (r.output_throughput, r.peak_output_throughput, r.total_token_throughput) == (
        6278.02,
        6651.0,
        62071.37,
    )
    assert (r.mean_ttft_ms, r.median_ttft_ms, r.p99_ttft_ms) == (1211.8, 980.6, 4200.3)
    assert (r.p99_tpot_ms, r.p99_itl_ms, r.mean_e2el_ms) == (15.02, 48.31, 11250.2)
    assert r.get("std_ttft_ms") == 1.5 and r.request_goodput is None
    assert (r.total_gpus, r.prefill_gpus, r.decode_gpus, r.isl, r.osl) == (18, 10, 8, 8192, 1024)
    assert r.model == "qwen35"


def test_sa_bench_json_small_and_old_keys(tmp_path: Path) -> None:
    p = _write(tmp_path, "results_concurrency_64_gpus_8.json", _sa_bench(4, old_keys=True))
    r = read_sa_bench_json(p)
    assert (r.total_input_tokens, r.total_output_tokens) == (5242880, 589910)
    assert (r.p99_ttft_ms, r.p99_e2el_ms, r.get("p50_itl_ms")) == (4200.3, 15933.0, 9.55)
    assert (r.total_gpus, r.prefill_gpus, r.decode_gpus) == (8, None, None)
    big = _write(tmp_path, "results_concurrency_32_gpus_8.json", _sa_bench(3000, old_keys=True))
    rb = read_sa_bench_json(big, head_bytes=4096, tail_bytes=4096)
    assert (rb.total_input_tokens, rb.p99_ttft_ms, rb.concurrency) == (5242880, 4200.3, 64)


def test_sa_bench_json_errors(tmp_path: Path) -> None:
    full = json.dumps(_sa_bench(3000))
    trunc = tmp_path / "results_concurrency_64_gpus_18.json"
    trunc.write_text(full[: len(full) * 2 // 3])
    with pytest.raises(BenchmarkFormatError, match="truncated") as e:
        read_sa_bench_json(trunc)
    assert "\n" not in str(e.value)
    small = tmp_path / "results_concurrency_8_gpus_18.json"
    small.write_text('{"max_concurrency": 8, "completed": ')
    with pytest.raises(BenchmarkFormatError, match="invalid JSON"):
        read_sa_bench_json(small)
    wrong = tmp_path / "results_concurrency_9_gpus_18.json"
    wrong.write_text('{"hello": "world"}')
    with pytest.raises(BenchmarkFormatError, match="no benchmark summary"):
        read_sa_bench_json(wrong)
    with pytest.raises(ValueError):
        read_sa_bench_json(tmp_path / "missing.json")


def test_result_filenames() -> None:
    assert parse_result_filename(
        "logs/sa-bench_isl_8192_osl_1024/results_concurrency_4096_gpus_24_ctx_16_gen_8.json"
    ) == {
        "concurrency": 4096,
        "total_gpus": 24,
        "prefill_gpus": 16,
        "decode_gpus": 8,
        "isl": 8192,
        "osl": 1024,
    }
    assert parse_result_filename("results_concurrency_64_gpus_8.json") == {"concurrency": 64, "total_gpus": 8}
    assert parse_result_filename("x/isl_1024_osl_1024_concurrency_128_req_rate_inf.json") == {
        "concurrency": 128,
        "isl": 1024,
        "osl": 1024,
    }
    assert parse_result_filename("sa-bench_isl_1024_osl_128/concurrency_16.json") == {
        "concurrency": 16,
        "isl": 1024,
        "osl": 128,
    }


def test_rollup(tmp_path: Path) -> None:
    data = {
        "benchmark_type": "sa-bench",
        "timestamp": "2026-08-06T13:20:00Z",
        "config": {"model": "qwen35", "isl": 8192, "osl": 1024},
        "runs": [
            {
                "concurrency": 64,
                "throughput_toks": 6278.02,
                "request_throughput": 6.81,
                "ttft_mean_ms": 1211.8,
                "ttft_p99_ms": 4200.3,
                "tpot_mean_ms": 9.84,
                "tpot_p99_ms": 15.02,
                "itl_mean_ms": 9.79,
                "itl_p99_ms": 48.31,
                "e2el_mean_ms": 11250.2,
                "completed_requests": 640,
                "total_input_tokens": 5242880,
                "total_output_tokens": 589910,
            },
            {"concurrency": 128, "throughput_toks": 7848.23, "ttft_mean_ms": None},
        ],
    }
    p = tmp_path / "benchmark-rollup.json"
    p.write_text(json.dumps(data, indent=2))
    roll = read_rollup(p)
    assert (roll.benchmark_type, roll.model, roll.isl, roll.osl) == ("sa-bench", "qwen35", 8192, 1024)
    r = roll.runs[0]
    assert (r.source, r.concurrency, r.output_throughput, r.successful_requests) == (
        "rollup",
        64,
        6278.02,
        640,
    )
    assert (r.mean_ttft_ms, r.p99_ttft_ms, r.p99_tpot_ms, r.p99_itl_ms, r.mean_e2el_ms) == (
        1211.8,
        4200.3,
        15.02,
        48.31,
        11250.2,
    )
    assert (roll.runs[1].concurrency, roll.runs[1].mean_ttft_ms, roll.runs[1].isl) == (128, None, 8192)
    p.write_text('{"runs": 3}')
    with pytest.raises(BenchmarkFormatError, match="not a benchmark roll-up"):
        read_rollup(p)
    p.write_text('{"runs": [')
    with pytest.raises(BenchmarkFormatError, match="invalid JSON"):
        read_rollup(p)


def test_bench_out_formats_match_their_samples() -> None:
    for fmt in BENCH_OUT_FORMATS:
        assert len(fmt.samples) >= 2
        for s in fmt.samples:
            assert fmt.regex.match(s), (fmt.name, s)
            assert any(t in s for t in fmt.triggers), (fmt.name, s)


def test_nan_values(tmp_path: Path) -> None:
    data = _sa_bench(2)
    data["mean_itl_ms"] = float("nan")
    p = _write(tmp_path, "results_concurrency_64_gpus_8.json", data)
    assert math.isnan(read_sa_bench_json(p).mean_itl_ms)


def test_benchmark_out_time_windows_and_the_in_block_concurrency_field() -> None:
    """bench.sh's `date` lines bound each measured run; vLLM's block repeats the concurrency as a field."""
    text = "\n".join([
        "Maximum request concurrency: 512", "Warmup run completed.",
        "Running benchmark with concurrency: 512", "Wed Aug 12 14:12:14 UTC 2026",
        "Maximum request concurrency: 512",
        "============ Serving Benchmark Result ============",
        "Successful requests:                     4096      ",
        "Maximum request concurrency:             512       ",
        "Benchmark duration (s):                  222.61    ",
        "==================================================",
        "Wed Aug 12 14:15:57 UTC 2026", "Completed benchmark with concurrency: 512",
        "Running benchmark with concurrency: 1024", "Wed Aug 12 14:16:10 CEST 2026",   # zone unknown: no time
        "Maximum request concurrency: 1024",
    ])
    r512, r1024 = parse_benchmark_out(text)
    assert (r512.concurrency, r512.successful_requests, r512.duration_s, r512.complete) == (512, 4096, 222.61, True)
    assert (r512.started.isoformat(), r512.ended.isoformat()) == ("2026-08-12T14:12:14+00:00",
                                                                 "2026-08-12T14:15:57+00:00")
    assert (r1024.started, r1024.ended, r1024.complete) == (None, None, False)


def test_sa_bench_json_window_is_date_minus_duration(tmp_path: Path) -> None:
    data = _sa_bench(2) | {"date": "20260812-141557", "duration": 60.5}
    r = read_sa_bench_json(_write(tmp_path, "results_concurrency_64_gpus_8.json", data))
    assert (r.started.isoformat(), r.ended.isoformat()) == ("2026-08-12T14:14:56.500000+00:00",
                                                           "2026-08-12T14:15:57+00:00")
