"""Periodic engine stats lines: SGLang batch lines (vLLM's are in its adapter)."""

from __future__ import annotations

import re

from .formats import declare, record_parser
from .records import Header, StatsSample

SGLANG_PREFILL = declare(
    "sglang-prefill-batch", "record",
    r"Prefill batch[.,]? .*?#running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+)",
    samples=[
        "[2025-11-04 05:31:43 DP0 TP0 EP0] Prefill batch, #new-seq: 18, #new-token: 16384, #cached-token: 0, "
        "token usage: 0.12, #running-req: 3, #queue-req: 41, #prealloc-req: 0, #inflight-req: 0, "
        "input throughput (token/s): 15873.20",
        "[2026-07-21 08:04:41 TP0 EP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
        "0.01, #running-req: 0, #queue-req: 0, #prealloc-req: 0, #inflight-req: 1, input throughput (token/s): 0.00",
    ],
    emits="stats",
    triggers=("Prefill batch",),
)
SGLANG_DECODE = declare(
    "sglang-decode-batch", "record",
    r"Decode batch[.,]? #running-req: (?P<running>\d+),.*?gen throughput \(token/s\): (?P<gen>[\d.]+)",
    samples=[
        "[2025-11-04 05:32:13 DP1 TP1 EP1] Decode batch, #running-req: 128, #full token: 901234, full token usage: "
        "0.45, #prealloc-req: 0, #transfer-req: 2, #retracted-req: 0, gen throughput (token/s): 5120.33, #queue-req: 7",
        "[2025-11-04 05:32:23 DP0 TP0 EP0] Decode batch, #running-req: 64, #token: 120000, token usage: 0.91, "
        "gen throughput (token/s): 2301.10, #queue-req: 0",
    ],
    emits="stats",
    triggers=("Decode batch",),
)
_TOKEN_USAGE = re.compile(r"(?:full )?token usage: ([\d.]+)")
_INPUT_TPUT = re.compile(r"input throughput \(token/s\): ([\d.]+)")
_QUEUE = re.compile(r"#queue-req: (\d+)")
_DP = re.compile(r"\bDP(\d+)\b")


def _sglang_engine(source: str | None) -> int | None:
    m = _DP.search(source or "")
    return int(m.group(1)) if m else None


@record_parser(SGLANG_PREFILL)
def _sgl_prefill(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    text = m.string
    usage = _TOKEN_USAGE.search(text)
    tput = _INPUT_TPUT.search(text)
    return StatsSample(
        line, variant="sglang-prefill", engine=_sglang_engine(hdr.source),
        prompt_tps=float(tput.group(1)) if tput else None, gen_tps=0.0, running=int(m["running"]),
        waiting=int(m["queue"]), kv_usage=float(usage.group(1)) * 100 if usage else None,
        **kw,  # type: ignore[arg-type]
    )


@record_parser(SGLANG_DECODE)
def _sgl_decode(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    text = m.string
    usage = _TOKEN_USAGE.search(text)
    queue = _QUEUE.search(text)
    return StatsSample(
        line, variant="sglang-decode", engine=_sglang_engine(hdr.source), prompt_tps=0.0,
        gen_tps=float(m["gen"]), running=int(m["running"]), waiting=int(queue.group(1)) if queue else None,
        kv_usage=float(usage.group(1)) * 100 if usage else None, **kw,  # type: ignore[arg-type]
    )
