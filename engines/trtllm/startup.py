"""TensorRT-LLM's start-up facts: the KV cache it sized.

``tensorrt_llm/_torch/pyexecutor/_util.py`` (the KV-cache creator; the same f-string in the seven stored versions
that hold it) logs, once
the sizing dry run has measured the free memory, ``logger.info(f"Estimated max tokens in KV cache :
{kv_cache_max_tokens}")`` (capped by ``kv_cache_config.max_tokens``), the tokens the real engine's KV cache is
then created for: one rank's, each rank printing its own.
"""

from __future__ import annotations

import re

from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, StartupFact

KV_TOKENS = declare(
    "trtllm-kv-tokens", "record",
    r"Estimated max tokens in KV cache : (?P<tok>\d+)\s*$",
    samples=[
        "[08/19/2026-14:08:02] [TRT-LLM] [I] [_torch][RANK 0] Estimated max tokens in KV cache : 1048576",
        "[TRT-LLM] [MPI_Rank 2] [I] Estimated max tokens in KV cache : 262144",
    ],
    emits="startup",
    triggers=("Estimated max tokens in KV cache",),
    engine="trtllm",
    doc="the tokens TensorRT-LLM's KV cache is created for, per rank, after the sizing dry run",
)


@record_parser(KV_TOKENS)
def _kv_tokens(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StartupFact:
    return StartupFact(line, key="kv_cache_tokens", value=int(m["tok"]), **kw)  # type: ignore[arg-type]
