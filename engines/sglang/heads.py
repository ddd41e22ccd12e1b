"""SGLang's record head: ``[date time<rank tags>] message``.

``sglang/srt/utils/common.py`` configure_logger (0.5.23; ``srt/utils.py`` in 0.4.6) formats every record
as ``[%(asctime)s{maybe_ms}{prefix}] %(message)s`` with ``datefmt="%Y-%m-%d %H:%M:%S"``; ``maybe_ms`` is
``.%(msecs)03d`` under SGLANG_LOG_MS. The scheduler's prefix (``scheduler.py`` configure_scheduler_logging)
is `` DP{dp}`` (with DP attention), `` PP{pp}``, `` ATTN_CP{cp}``, `` MOE_DP{moe_dp}``, `` TP{tp}``, `` EP{ep}``,
each only when that size is above one; the HTTP server's records have none. Releases of 2024 (0.2/0.3) wrote the
time alone (``[16:43:29 TP0] message``). The head carries no level: a line is an error when its message is one of
SGLang's error sites (``levelless``).
"""

from __future__ import annotations

import re

from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header

SGLANG = declare(
    "sglang-record", "header",
    r"^\[(?:(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)|\d\d:\d\d:\d\d)(?P<src>(?: [A-Z][A-Z_]*\d+)*)\] "
    r"(?P<msg>.*)$",
    samples=[
        "[2025-11-04 05:31:43 DP0 TP0 EP0] Prefill batch, #new-seq: 18, #new-token: 16384, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0, #prealloc-req: 0, #inflight-req: 0, input throughput (token/s): 0.00",
        "[2026-07-21 08:04:41 TP0 EP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=23.12 GB",
        "[2026-08-12 14:05:14.208 DP3 PP0 ATTN_CP0 MOE_DP1 TP3 EP3] Memory pool end. avail mem=11.20 GB",
        # https://github.com/sgl-project/sglang/issues/1270 (2024: the time alone)
        "[04:40:55 TP0] Decode batch. #running-req: 2, #token: 1024, token usage: 0.00, gen throughput (token/s): "
        "213.62, #queue-req: 0",
    ],
    emits="sglang",
    engine="sglang",
    lead="[",
    rank=30,
    levelless=True,
    doc="SGLang's logger: date and time (milliseconds under SGLANG_LOG_MS; the time alone before 0.4), the "
        "scheduler's rank tags; no level",
)


@record_parser(SGLANG)
def _head(m: re.Match[str], text: str) -> Header:
    tags = m["src"].strip() or None
    # the rank tags name the scheduler process, as vLLM's (EngineCore_DP3 pid=N) prefix does (ADAPTER.engine_proc)
    return Header("sglang", None, iso=m["iso"], source=tags, msg=m["msg"], proc=tags)


_DP = re.compile(r"(?<![\w])DP(\d+)\b")


def dp_rank(source: str | None) -> int:
    """The engine index of a record: its DP rank tag (DP attention), else 0 (one TP group logs the stats:
    only attention-TP rank 0 writes the batch lines)."""
    m = _DP.search(source or "")
    return int(m.group(1)) if m else 0
