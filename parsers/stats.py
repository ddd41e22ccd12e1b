"""Periodic engine stats lines: vLLM V1 / V0 / Rust frontend (SGLang's batch lines: diag.engines.sglang)."""

from __future__ import annotations

import re

from .formats import declare, record_parser
from .records import Header, Preemption, PrefixCacheRate, SpecDecode, StatsSample

# The segments in the order vllm/v1/metrics/loggers.py writes them: one pass of this pattern takes nearly
# every stats line; the bulk path tries it first, and V1's any-order pattern (4x slower in polars' regex
# engine) only on the lines it did not take. Same group names as V1.
V1_ORDERED = (
    r"(?:(?:Engine (?P<engine>\d+)|(?P<n_agg>\d+) Engines Aggregated): )?"
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: (?P<gen>[\d.]+) tokens/s, "
    r"Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs"
    r"(?:, Deferred: (?P<deferred>\d+) reqs)?(?:, Preemptions: (?P<preempt>\d+))?"
    r"(?:, KV fetch: (?P<kvf_wait>\d+) waiting to start, (?P<kvf_run>\d+) in progress, "
    r"(?P<kvf_done>\d+) completed waiting)?,? [A-Z]{2,5} KV cache usage: (?P<kv>[\d.]+)%\.?"
    r"(?:, Prefix cache hit rate: (?P<prefix>[\d.]+)%)?(?:, Corrupted: (?P<corrupted>\d+) reqs)?"
    r"(?:, External prefix cache hit rate: (?P<ext>[\d.]+)%)?(?:, MM cache hit rate: (?P<mm>[\d.]+)%)?")

V1 = declare(
    "vllm-v1-stats", "record",
    r"(?:(?:Engine (?P<engine>\d+)|(?P<n_agg>\d+) Engines Aggregated): )?"
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: (?P<gen>[\d.]+) tokens/s, "
    r"Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs"
    # then the optional segments (vllm/v1/metrics/loggers.py appends each to a list), in any order; an
    # unknown segment is skipped (a segment holds no ", "); the KV device is GPU, or XPU, CPU, ...
    r"(?:,? (?:Deferred: (?P<deferred>\d+) reqs"
    r"|KV fetch: (?P<kvf_wait>\d+) waiting to start, (?P<kvf_run>\d+) in progress, (?P<kvf_done>\d+) completed waiting"
    r"|Preemptions: (?P<preempt>\d+)|[A-Z]{2,5} KV cache usage: (?P<kv>[\d.]+)%"
    r"|Prefix cache hit rate: (?P<prefix>[\d.]+)%|Corrupted: (?P<corrupted>\d+) reqs"
    r"|External prefix cache hit rate: (?P<ext>[\d.]+)%|MM cache hit rate: (?P<mm>[\d.]+)%"
    r")|, [A-Z][\w ]{0,40}: [\w./% ]*)*\.?",
    samples=[
        "(APIServer pid=3646) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 95.9%, "
        "Prefix cache hit rate: 0.0%",
        "(APIServer pid=7) INFO 08-06 12:35:06 [loggers.py:271] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 812.4 tokens/s, Running: 96 reqs, Waiting: 12 reqs, Deferred: 1 reqs, "
        "Preemptions: 3, GPU KV cache usage: 97.2%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 99.8%",
        "INFO 02-03 09:00:01 [loggers.py:80] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 3.1 "
        "tokens/s, Running: 1 reqs, Waiting: 0 reqs GPU KV cache usage: 0.4%.",
        "(APIServer pid=9) INFO 10-20 10:00:00 [loggers.py:259] 8 Engines Aggregated: Avg prompt throughput: 1.0 "
        "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, "
        "Prefix cache hit rate: 0.0%, MFU: 11.3 TF/s/GPU 772.8 GB/s/GPU",
        # vLLM >= 0.32 P/D decode engine while KV loads are pending (v1/metrics/loggers.py:302-308)
        "(APIServer pid=1) INFO 08-12 14:05:14 [loggers.py:336] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 1510.2 tokens/s, Running: 48 reqs, Waiting: 6 reqs, KV fetch: 2 waiting to start, "
        "3 in progress, 1 completed waiting, GPU KV cache usage: 63.1%, Prefix cache hit rate: 0.0%",
        "(APIServer pid=1) INFO 08-12 14:05:14 [loggers.py:336] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
        "Avg generation throughput: 51.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, XPU KV cache usage: 3.1%",
    ],
    emits="stats",
    triggers=("Avg prompt", "Engines Aggregated", "Engine 0", "Engine 1", "tokens/s, Running", " reqs, GPU KV"),
    doc="V1 LoggingStatLogger line, every VLLM_LOG_STATS_INTERVAL (10 s) per engine; idle intervals go to DEBUG",
)


def _f(v: str | None) -> float | None:
    return None if v is None else float(v)


def _i(v: str | None) -> int | None:
    return None if v is None else int(v)


@record_parser(V1)
def _v1(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return v1_record(m, line, **kw)


def v1_record(m: re.Match[str], line: int, **kw: object) -> StatsSample:
    """A V1 stats record from a match holding the V1 pattern's groups (also the line parser's fast path)."""
    return StatsSample(
        line, variant="v1", engine=_i(m["engine"]), n_aggregated=_i(m["n_agg"]),
        prompt_tps=float(m["prompt"]), gen_tps=float(m["gen"]), running=int(m["running"]),
        waiting=int(m["waiting"]), deferred=_i(m["deferred"]), preemptions=_i(m["preempt"]),
        kv_usage=_f(m["kv"]), prefix_hit=_f(m["prefix"]), corrupted=_i(m["corrupted"]),
        ext_hit=_f(m["ext"]), mm_hit=_f(m["mm"]), kv_fetch_waiting=_i(m["kvf_wait"]),
        kv_fetch_running=_i(m["kvf_run"]), kv_fetch_done=_i(m["kvf_done"]), **kw,  # type: ignore[arg-type]
    )


def v1_from_groups(g: dict[str, str | None], line: int, ts: object, md: str | None,
                   proc: str | None) -> StatsSample:
    """The fast path's constructor: the same record as :func:`v1_record`, positional and cheap."""
    e, na, d, p, c = g["engine"], g["n_agg"], g["deferred"], g["preempt"], g["corrupted"]
    x, h, mm, kv = g["ext"], g["prefix"], g["mm"], g["kv"]
    fw, fr, fd = g["kvf_wait"], g["kvf_run"], g["kvf_done"]
    return StatsSample(
        line, "v1", None if e is None else int(e), None if na is None else int(na),
        float(g["prompt"]), float(g["gen"]), int(g["running"]), int(g["waiting"]),  # type: ignore[arg-type]
        None if d is None else int(d), None if p is None else int(p),
        None if kv is None else float(kv),  # type: ignore[arg-type]
        None if h is None else float(h), None if x is None else float(x), None if mm is None else float(mm),
        None if c is None else int(c), kv_fetch_waiting=None if fw is None else int(fw),
        kv_fetch_running=None if fr is None else int(fr), kv_fetch_done=None if fd is None else int(fd),
        ts=ts, md=md, proc=proc)  # type: ignore[arg-type]


V0 = declare(
    "vllm-v0-stats", "record",
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: (?P<gen>[\d.]+) tokens/s, "
    r"(?:[A-Z][\w /]{0,40}:\s?[\d.]+ ?[a-z]{1,3}, ){0,4}"   # timing fields of some 2024 builds (Max iteration time)
    r"Running: (?P<running>\d+) reqs, Swapped: (?P<swapped>\d+) reqs, Pending: (?P<pending>\d+) reqs, "
    r"GPU KV cache usage: (?P<kv>[\d.]+)%, CPU KV cache usage: (?P<cpu>[\d.]+)%\.?",
    samples=[
        "INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 311.2 "
        "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 84.9%, CPU KV cache usage: 0.0%",
        "INFO 05-22 10:01:12 [metrics.py:229] Avg prompt throughput: 250.3 tokens/s, Avg generation throughput: 12.0 "
        "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 0.3%, CPU KV cache usage: 0.0%.",
        # https://github.com/vllm-project/vllm/issues/2731
        "INFO 02-01 06:36:05 llm_engine.py:921] Avg prompt throughput: 382.6 tokens/s, Avg generation throughput: "
        "118.5 tokens/s, Max iteration time: 386.7 ms, Avg time/tok:149.4 ms, Running: 35 reqs, Swapped: 0 reqs, "
        "Pending: 115 reqs, GPU KV cache usage: 99.0%, CPU KV cache usage: 0.0%",
    ],
    emits="stats",
    triggers=("Avg prompt throughput",),
    doc="V0 engine (every 5 s); Pending is the waiting queue",
)


@record_parser(V0)
def _v0(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return StatsSample(
        line, variant="v0", prompt_tps=float(m["prompt"]), gen_tps=float(m["gen"]), running=int(m["running"]),
        waiting=int(m["pending"]), swapped=int(m["swapped"]), kv_usage=float(m["kv"]), cpu_kv=float(m["cpu"]),
        **kw,  # type: ignore[arg-type]
    )


RUST = declare(
    "vllm-rust-stats", "record",
    r"Avg prompt tput: (?P<prompt>[\d.]+) toks/s, Avg generation tput: (?P<gen>[\d.]+) toks/s, "
    r"Reqs Running: (?P<running>\d+), Waiting: (?P<waiting>\d+)(?:, Deferred: (?P<deferred>\d+) reqs)?"
    r"(?:, Preemptions: (?P<preempt>\d+))?, GPU KV cache used: (?P<kv>[\d.]+)%"
    r"(?:, Prefix cache hit rate: (?P<prefix>[\d.]+)%)?(?:, External prefix cache hit rate: (?P<ext>[\d.]+)%)?",
    samples=[
        "(RustFrontend pid=12) INFO 09-01 11:00:00 [log_stats.rs:88] Avg prompt tput: 16000.0 toks/s, Avg generation "
        "tput: 0.0 toks/s, Reqs Running: 4, Waiting: 30, GPU KV cache used: 12.5%, Prefix cache hit rate: 0.0%",
        "(RustFrontend pid=12) INFO 09-01 11:00:10 [log_stats.rs:88] Avg prompt tput: 0.0 toks/s, Avg generation tput: "
        "2100.5 toks/s, Reqs Running: 64, Waiting: 0, Preemptions: 2, GPU KV cache used: 71.0%, Prefix cache hit rate: "
        "0.0%, External prefix cache hit rate: 98.0%",
    ],
    emits="stats",
    triggers=("Avg prompt tput",),
    doc="VLLM_USE_RUST_FRONTEND=1 wording; no Engine prefix",
)


@record_parser(RUST)
def _rust(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return StatsSample(
        line, variant="rust", prompt_tps=float(m["prompt"]), gen_tps=float(m["gen"]), running=int(m["running"]),
        waiting=int(m["waiting"]), deferred=_i(m["deferred"]), preemptions=_i(m["preempt"]),
        kv_usage=float(m["kv"]), prefix_hit=_f(m["prefix"]), ext_hit=_f(m["ext"]), **kw,  # type: ignore[arg-type]
    )


SPEC = declare(
    "vllm-spec-decode", "record",
    r"SpecDecoding metrics: (?:Draft acceptance rate: (?P<old_rate>[\d.]+|nan)%, )?(?:Mean acceptance length: "
    r"(?P<mal>[\d.]+|nan), )?(?:Accepted throughput: [\d.]+ tokens/s, Drafted throughput: [\d.]+ tokens/s, )?"
    r"Accepted: (?P<acc>\d+) tokens, Drafted: (?P<dr>\d+) tokens(?:, Per-position acceptance rate: [\d., na]+?)?"
    r"(?:, Avg Draft acceptance rate: (?P<rate>[\d.]+|nan)%)?\s*$",
    samples=[
        "(APIServer pid=12) INFO 05-02 08:00:00 [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 2.20, "
        "Accepted throughput: 12.50 tokens/s, Drafted throughput: 31.10 tokens/s, Accepted: 125 tokens, Drafted: 311 "
        "tokens, Per-position acceptance rate: 0.615, 0.415, 0.169, Avg Draft acceptance rate: 40.0%",
        "INFO 05-24 10:00:00 [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: 62.1%, Mean acceptance "
        "length: 2.24, Accepted: 500 tokens, Drafted: 805 tokens, Per-position acceptance rate: 0.800, 0.442",
    ],
    emits="spec_decode",
    triggers=("SpecDecoding metrics",),
)


@record_parser(SPEC)
def _spec(m: re.Match[str], line: int, hdr: Header, **kw: object) -> SpecDecode:
    rate = m["rate"] or m["old_rate"]
    return SpecDecode(line, mean_acceptance_len=_f(m["mal"]) if m["mal"] != "nan" else None,
                      acceptance_rate=None if rate in (None, "nan") else float(rate),
                      accepted=int(m["acc"]), drafted=int(m["dr"]), **kw)  # type: ignore[arg-type]


V0_PREEMPT = declare(
    "vllm-v0-preemption", "record",
    r"Sequence group \S+ is preempted by (?:PreemptionMode\.)?(?P<mode>\w+) mode because there is not enough KV "
    r"cache space(?:.*?total_num_cumulative_preemption=(?P<cum>\d+))?",
    samples=[
        "WARNING 11-27 02:04:48 scheduler.py:1481] Sequence group cmpl-f5a9-0 is preempted by PreemptionMode.SWAP mode "
        "because there is not enough KV cache space. This can affect the end-to-end performance. "
        "total_num_cumulative_preemption=1",
        "WARNING 03-02 10:00:00 [scheduler.py:1560] Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. total_num_cumulative_preemption=51",
    ],
    emits="preemption",
    triggers=("is preempted by",),
)


@record_parser(V0_PREEMPT)
def _v0_preempt(m: re.Match[str], line: int, hdr: Header, **kw: object) -> Preemption:
    return Preemption(line, mode=m["mode"].lower(), cumulative=_i(m["cum"]), **kw)  # type: ignore[arg-type]


V0_PREFIX = declare(
    "vllm-v0-prefix-cache", "record", r"Prefix cache hit rate: GPU: (?P<gpu>[\d.]+)%, CPU: (?P<cpu>[\d.]+)%",
    samples=[
        "INFO 08-12 10:31:07 metrics.py:471] Prefix cache hit rate: GPU: 38.46%, CPU: 0.00%",
        "(VllmWorkerProcess pid=12) INFO 01-09 09:12:01 [metrics.py:472] Prefix cache hit rate: GPU: 0.00%, CPU: 0.00%",
    ],
    emits="prefix_cache",
    triggers=("Prefix cache hit rate: GPU",),
    doc="V0 logs the prefix-cache rates on a line of their own after each stats line",
)


@record_parser(V0_PREFIX)
def _v0_prefix(m: re.Match[str], line: int, hdr: Header, **kw: object) -> PrefixCacheRate:
    return PrefixCacheRate(line, gpu=float(m["gpu"]), cpu=float(m["cpu"]), **kw)  # type: ignore[arg-type]
