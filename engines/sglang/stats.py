"""SGLang's batch lines: ``Prefill batch`` and ``Decode batch``, mapped onto the neutral stats record.

The scheduler logs one line per prefill batch and one per ``decode-log-interval`` decode steps (no clock),
from attention-TP rank 0 of each DP rank. Wordings, by release:

* 0.5.23 ``srt/managers/scheduler_components/metrics_reporter.py:754`` (prefill) and ``:963`` (decode):
  ``Prefill batch{iter}, #new-seq: , #new-token: , #cached-token: , {usage}, #running-req: , #queue-req: ,
  #pending-token: , [#replay-token: ,] [#bootstrap-req: , #inflight-req: , #optimistic-req: ,] cuda graph: ,
  input throughput (token/s): `` and ``Decode batch{iter}, #running-req: , {usage}, [accept len: , accept rate: ,]
  [pre-allocated usage: , #prealloc-req: , #transfer-req: , [#host-receive-req: ,] #retracted-req: ,] cuda graph: ,
  gen throughput (token/s): , #queue-req: ``; ``{iter}`` is `` [N]`` under SGLANG_LOG_FORWARD_ITERS, ``{usage}``
  comes from ``scheduler_components/pool_stats_observer.py:104/119``: ``token usage`` (``#token`` on decode), or
  ``full token usage`` / ``swa token usage`` (SWA models), ``mamba usage`` (hybrid SSM), ``gpu token usage`` /
  ``cpu token usage`` (HiSparse); the graph label is ``cuda graph`` (``cpu``/``npu``/``musa graph`` elsewhere).
* 0.4.6 ``srt/managers/scheduler.py:1146`` / ``:1202``: ``Prefill batch. ... token usage: , #running-req: ,
  [#unbootstrapped-req: ,] #queue-req: [, #transferring-req: ]`` (no throughput) and ``Decode batch. #running-req: ,
  #token: , token usage: , [accept len: ,] [pre-allocated usage: ,] cuda graph: , gen throughput (token/s): ,
  #queue-req: ``.

Neutral mapping: running = #running-req, waiting = #queue-req, kv_usage = the fullest pool's usage x 100 (what
SGLang's own ``token_usage`` gauge reports), prompt_tps = input throughput, gen_tps = gen throughput; the P/D
queues keep their meaning under neutral names (bootstrap_req, inflight_req, prealloc_req, transfer_req,
retracted_req). The engine index is the DP rank of the line's head.
"""

from __future__ import annotations

import re

from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, Preemption, StatsSample

from .heads import dp_rank

_ITER = r"(?: \[(?P<iter>\d+)\])?"
PREFILL = declare(
    "sglang-prefill-batch", "record",
    rf"Prefill batch{_ITER}[.,] (?P<body>.*?#running-req: \d+.*)$",
    samples=[
        # 0.5.23, a P/D prefill server
        "[2025-11-04 05:31:43 DP0 TP0 EP0] Prefill batch, #new-seq: 18, #new-token: 16384, #cached-token: 0, "
        "token usage: 0.12, #running-req: 3, #queue-req: 41, #pending-token: 0, #bootstrap-req: 2, #inflight-req: 5, "
        "#optimistic-req: 0, cuda graph: False, input throughput (token/s): 15873.20",
        # an older 0.5 release (prealloc/inflight, no graph label), as nixl#1983 shows
        "[2026-07-21 08:04:41 TP0 EP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
        "0.01, #running-req: 0, #queue-req: 0, #prealloc-req: 0, #inflight-req: 1, input throughput (token/s): 0.00",
        # 0.4.6 P/D prefill: the period form, no throughput
        "[2025-05-20 10:00:01 DP1 TP1] Prefill batch. #new-seq: 4, #new-token: 4096, #cached-token: 128, token usage: "
        "0.30, #running-req: 0, #unbootstrapped-req: 2, #queue-req: 9, #transferring-req: 3 ",
        # 0.5.23 SWA + iteration counter
        "[2026-08-12 14:05:14 TP0] Prefill batch [8812], #new-seq: 2, #new-token: 2304, #cached-token: 0, full token "
        "usage: 0.02, swa token usage: 0.01, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 49004.48",
    ],
    emits="stats",
    triggers=("Prefill batch",),
    engine="sglang",
    doc="SGLang prefill batch line, one per prefill batch",
)
DECODE = declare(
    "sglang-decode-batch", "record",
    rf"Decode batch{_ITER}[.,] (?P<body>#running-req: \d+.*?gen throughput \(token/s\): [\d.]+.*)$",
    samples=[
        # 0.5.23 P/D decode server, SWA pools
        "[2025-11-04 05:32:13 DP1 TP1 EP1] Decode batch, #running-req: 128, #full token: 901234, full token usage: "
        "0.45, #swa token: 4096, swa token usage: 0.10, pre-allocated usage: 0.02, #prealloc-req: 0, #transfer-req: 2, "
        "#retracted-req: 0, cuda graph: True, gen throughput (token/s): 5120.33, #queue-req: 7",
        "[2025-11-04 05:32:23 DP0 TP0 EP0] Decode batch, #running-req: 64, #token: 120000, token usage: 0.91, "
        "cuda graph: True, gen throughput (token/s): 2301.10, #queue-req: 0",
        # 0.4.6: the period form
        "[2025-05-20 10:00:11 TP0] Decode batch. #running-req: 32, #token: 40960, token usage: 0.62, pre-allocated "
        "usage: 0.05, cuda graph: True, gen throughput (token/s): 1650.12, #queue-req: 0",
        # 0.5.23 iteration counter, hybrid SSM, speculative decoding
        "[2026-08-12 14:05:20 DP2 TP2 EP2] Decode batch [10240], #running-req: 8, #full token: 5120, full token usage: "
        "0.05, mamba num: 8, mamba usage: 0.40, accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput "
        "(token/s): 812.50, #queue-req: 1",
    ],
    emits="stats",
    triggers=("Decode batch",),
    engine="sglang",
    doc="SGLang decode batch line, every decode-log-interval decode steps",
)

# pool usage segments (fractions): the fullest is the engine's KV usage; HiSparse logs only its device pool
_POOL_USAGE = ("token usage", "full token usage", "swa token usage", "mamba usage")
_DEVICE_USAGE = "gpu token usage"
_COUNTS = {"#new-token": "new_tokens", "#cached-token": "cached_tokens", "#bootstrap-req": "bootstrap_req",
           "#unbootstrapped-req": "bootstrap_req", "#inflight-req": "inflight_req", "#transferring-req": "inflight_req",
           "#prealloc-req": "prealloc_req", "#transfer-req": "transfer_req", "#retracted-req": "retracted_req"}


_FIELD_SEP = re.compile(r", | (?=#[\w-]+: )")   # a comma, or a '#key: ' opening the next field without one


def _fields(body: str) -> dict[str, str]:
    """The ``key: value`` segments of a batch line's body."""
    out = {}
    for seg in _FIELD_SEP.split(body):
        key, sep, value = seg.strip().partition(": ")
        if sep and value:
            out[key] = value.strip().rstrip(",")
    return out


def _count(text: str | None) -> int | None:
    """A count field's value (None where a damaged line holds no whole number)."""
    return int(text) if text and text.isdigit() else None


def _num(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _kv_usage(f: dict[str, str]) -> float | None:
    usages = [u for k in _POOL_USAGE if (u := _num(f.get(k))) is not None]
    if not usages and (u := _num(f.get(_DEVICE_USAGE))) is not None:
        usages = [u]
    return round(max(usages) * 100, 6) if usages else None


def _record(m: re.Match[str], line: int, hdr: Header, variant: str, kw: dict[str, object]) -> StatsSample:
    f = _fields(m["body"])
    counts = {col: int(v) for key, col in _COUNTS.items() if (v := f.get(key)) is not None and v.isdigit()}
    graph = next((v for k, v in f.items() if k.endswith(" graph") and v in ("True", "False")), None)
    queue = f.get("#queue-req")
    # a prefill line says nothing of generation, a decode line nothing of prompt throughput
    prompt = _num(f.get("input throughput (token/s)")) if variant == "sglang-prefill" else None
    gen = _num(f.get("gen throughput (token/s)")) if variant == "sglang-decode" else None
    return StatsSample(
        line, variant=variant, engine=dp_rank(hdr.source), prompt_tps=prompt, gen_tps=gen,
        running=_count(f.get("#running-req")), waiting=_count(queue),
        kv_usage=_kv_usage(f), cuda_graph=None if graph is None else graph == "True",
        **counts, **kw)  # type: ignore[arg-type]


@record_parser(PREFILL)
def _prefill(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return _record(m, line, hdr, "sglang-prefill", kw)


@record_parser(DECODE)
def _decode(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return _record(m, line, hdr, "sglang-decode", kw)


RETRACT = declare(
    "sglang-retract", "record",
    r"(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\.) #retracted_reqs: (?P<n>\d+)",
    samples=[
        # 0.5.23 managers/scheduler.py:4526 (warning): the decode batch outgrew the KV pool
        "[2026-08-12 14:30:00 DP3 TP3 EP3] KV cache pool is full. Retract requests. #retracted_reqs: 4, "
        "#new_tokens_gained: 8192, #new_token_ratio: 0.4210 -> 0.6105",
        # 0.4.6 managers/scheduler.py:1518 (info)
        "[2025-05-20 10:10:00 TP0] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.3000 -> 0.5000",
    ],
    emits="preemption",
    triggers=("Retract requests", "Decode out of memory happened"),
    engine="sglang",
    doc="SGLang's decode retraction: requests sent back to the queue for KV memory (a recompute preemption)",
)


@record_parser(RETRACT)
def _retract(m: re.Match[str], line: int, hdr: Header, **kw: object) -> Preemption:
    return Preemption(line, mode="retract", **kw)  # type: ignore[arg-type]
