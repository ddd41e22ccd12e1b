"""SGLang's start-up facts: the scheduler's limits line, logged once by TP rank 0 when it is ready
(0.5.23 ``srt/managers/scheduler.py:1269``, 0.4.6 ``scheduler.py:334``): ``max_total_num_tokens=N,
chunked_prefill_size=N, max_prefill_tokens=N, max_running_requests=N, context_len=N, available_gpu_mem=X GB``.
The values are one DP rank's (under dp attention the server-wide budgets are already divided). Its KV pool
over the context length is the rank's capacity in full-length requests, the figure vLLM prints as
``Maximum concurrency for N tokens per request``."""

from __future__ import annotations

import re

from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, StartupFact

LIMITS = declare(
    "sglang-scheduler-limits", "record",
    r"max_total_num_tokens=(?P<tok>\d+), chunked_prefill_size=(?P<cps>-?\d+|None), max_prefill_tokens=\d+, "
    r"max_running_requests=(?P<mrr>\d+), context_len=(?P<ctx>\d+)",
    samples=[
        "[2026-12-04 08:08:28 DP0 TP0 EP0] max_total_num_tokens=262144, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=128, context_len=9236, available_gpu_mem=23.88 GB",
        "[2025-05-20 09:59:20 TP0] max_total_num_tokens=411872, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4097, context_len=131072",
    ],
    emits="startup",
    triggers=("max_total_num_tokens=",),
    engine="sglang",
    doc="the scheduler's limits per DP rank: its KV pool in tokens, its batch and prefill budgets",
)


@record_parser(LIMITS)
def _limits(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
    tokens, context = int(m["tok"]), int(m["ctx"])
    return StartupFact(line, key="max_concurrency",
                       value={"tokens_per_request": context, "concurrency": round(tokens / context, 2) if context else None},
                       **kw)  # type: ignore[arg-type]
