"""Whole logs in the newest upstream shapes (vLLM 0.33, Dynamo 1.6): what diag makes of a start-up, a
P/D decode engine's stats with KV-fetch segments, JSON-formatted records and escape-split lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from loading import load_run
from test_ingest import _assert_same

from diag.parsers.records import StatsSample

from helpers import parse_text

E = "(EngineCore_DP0 pid=123) INFO 08-12 "
STARTUP_033 = f"""(APIServer pid=1) INFO 08-12 14:00:00 [startup.py:38]{" "}
       \x1b[1m█     █     █▄   ▄█\x1b[0m
 \x1b[93m▄▄\x1b[0m \x1b[94m▄█\x1b[0m \x1b[1m█     █     █ ▀▄▀ █\x1b[0m  version \x1b[1m0.33.0\x1b[0m
  \x1b[93m█\x1b[0m\x1b[94m▄█▀\x1b[0m \x1b[1m█     █     █     █\x1b[0m  model   \x1b[1mQwen/Qwen3-30B-A3B\x1b[0m
   \x1b[94m▀▀\x1b[0m  \x1b[1m▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\x1b[0m
{E}14:00:05 [core.py:101] Initializing a V1 LLM engine (v0.33.0) with config: model='Qwen/Qwen3-30B-A3B'
{E}14:00:10 [gpu_model_runner.py:4979] Starting to load model Qwen/Qwen3-30B-A3B...
{E}14:00:40 [default_loader.py:507] Loading weights took 29.50 seconds
{E}14:00:41 [gpu_model_runner.py:5089] Model loading took 56.90 GiB memory and 30.100000 seconds
{E}14:00:42 [monitor.py:40] Starting torch.compile
{E}14:00:50 [backends.py:1188] Dynamo bytecode transform time: 7.80 s
{E}14:01:30 [backends.py:418] Compiling a graph for compile range (1, 8192) takes 38.20 s
{E}14:01:42 [monitor.py:62] torch.compile took 60.12 s in total
{E}14:01:50 [gpu_worker.py:773] Available KV cache memory: 61.73 GiB
{E}14:01:51 [kv_cache_utils.py:1148] GPU KV cache size: 1,312,768 tokens, Maximum concurrency for 9,216 tokens per request: 142.45x
{E}14:02:05 [gpu_model_runner.py:6517] Graph capturing finished in 13 secs, took 2.10 GiB
{E}14:02:06 [core.py:396] init engine (profile, create kv cache, warmup model) took 84.20 s (compilation: 60.12 s)
(APIServer pid=1) INFO 08-12 14:02:08 [entry.py:139] Starting vLLM server on http://0.0.0.0:8000
(APIServer pid=1) INFO:     Application startup complete.
"""


def _decode_log(n: int) -> str:
    """A 0.33 P/D decode engine's stats: KV-fetch segments while loads are pending, optional parts coming and going."""
    out = []
    for i in range(n):
        fetch = f"KV fetch: {i % 4} waiting to start, {i % 3} in progress, {i % 2} completed waiting, " if i % 5 else ""
        pre = f"Preemptions: {i}, " if i % 7 == 3 else ""
        out.append(f"(APIServer pid=1) INFO 08-12 14:{10 + i // 6:02d}:{(i % 6) * 10:02d} [loggers.py:336] Engine 000: "
                   f"Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {1000 + i}.0 tokens/s, Running: "
                   f"{40 + i % 9} reqs, Waiting: {i % 5} reqs, {fetch}{pre}GPU KV cache usage: {50 + i % 40}.0%, "
                   "Prefix cache hit rate: 0.0%")
    return "\n".join(out) + "\n"


def test_a_033_startup_gives_compile_time_to_the_compile_stage(tmp_path: Path) -> None:
    log = tmp_path / "decode_0.log"
    log.write_text(STARTUP_033, encoding="utf-8")
    ep = next(iter(load_run(str(log)).endpoints.values()))
    assert ep.facts["version"] == "0.33.0" and ep.facts["model"] == "Qwen/Qwen3-30B-A3B"
    su = ep.startup
    compile_, kv = su.span("compile"), su.span("kv_cache")
    assert compile_.duration_s() == 61.0 and compile_.reported_s == 60.12   # 14:00:41 -> 14:01:42
    assert kv.duration_s() == 9.0                                             # 14:01:42 -> 14:01:51


def test_kv_fetch_decode_log_gives_every_sample_on_both_paths(tmp_path: Path) -> None:
    text = _decode_log(60)
    stats = [r for r in parse_text(text) if isinstance(r, StatsSample)]
    assert len(stats) == 60
    assert [s.kv_fetch_waiting for s in stats[:6]] == [None, 1, 2, 3, 0, None]
    assert stats[3].preemptions == 3 and stats[59].kv_usage == 69.0
    assert _assert_same(text.encode(), 4096, 7) == 60


def test_async_scheduling_defaults_by_version(tmp_path: Path) -> None:
    log = tmp_path / "decode_0.log"
    log.write_text(STARTUP_033, encoding="utf-8")
    run = load_run(str(log))
    assert run.async_scheduling(next(iter(run.endpoints.values())))   # no line says so: 0.33's default is on
    log.write_text(STARTUP_033.replace("0.33.0", "0.11.0"), encoding="utf-8")
    run = load_run(str(log))
    assert not run.async_scheduling(next(iter(run.endpoints.values())))


@pytest.mark.parametrize("stamp", ['"asctime": "2026-08-12 14:05:14,123"', '"created": 1786543514.123'])
def test_json_formatter_records_parse_with_their_time(stamp: str) -> None:
    line = ('{' + stamp + ', "levelname": "INFO", "name": "vllm.v1.metrics.loggers", "message": "Engine 000: Avg '
            'prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 3 reqs, Waiting: 0 '
            'reqs, GPU KV cache usage: 4.0%"}')
    (rec,) = parse_text(line)
    assert isinstance(rec, StatsSample) and rec.kv_usage == 4.0 and rec.ts is not None
    assert rec.ts.isoformat().startswith("2026-08-12T")


def test_a_stats_line_with_escapes_between_its_words() -> None:
    line = ("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 08-12 14:05:14 [loggers.py:257] \x1b[1mEngine\x1b[0m 000: "
            "\x1b[1mAvg\x1b[0m prompt throughput: 0.0 \x1b[1mtokens/s\x1b[0m, Avg generation throughput: 1.0 "
            "\x1b[1mtokens/s\x1b[0m, Running: 3 reqs, Waiting: 0 \x1b[1mreqs\x1b[0m, GPU KV cache usage: 4.0%\n")
    assert [r.kind for r in parse_text(line)] == ["stats"]
    assert _assert_same(line.encode(), 4096, 3) == 1


def test_kv_rise_runs_skip_stats_lines_without_kv_usage() -> None:
    """A stats line may carry no KV-usage segment: it ends a rising run instead of breaking the rule."""
    from diag.rules.kv_trend import _rising_runs

    assert _rising_runs([10.0, None, 20.0, 30.0, 40.0, None], [True] * 6) == [(2, 5)]
    assert _rising_runs([None, None], [True, True]) == []
