"""TensorRT-LLM's wordings: for every format string the TensorRT-LLM adapter claims, a log line built by filling
the source's own f-string or printf format (the file and commit are in engines/trtllm/data/sources.toml), and
what diag makes of it: the record, its neutral figures, its time on the log's clock (no offset here)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from diag.parsers.records import StageMark, StartupFact, StatsSample

from helpers import parse_text


def _py_head(rank: int | None = None, torch_rank: int | None = None, sev: str = "[I]") -> str:
    """tensorrt_llm/logger.py: '[%(asctime)s] %(message)s' (datefmt %m/%d/%Y-%H:%M:%S) over Logger.log's
    '[TRT-LLM] [MPI_Rank {rank}] {severity} ' (world > 1) or '[TRT-LLM] {severity} '; the PyTorch backend's
    '[_torch][RANK N] ' after it as srt-slurm's worker logs show."""
    asctime = datetime(2026, 8, 19, 14, 11, 49).strftime("%m/%d/%Y-%H:%M:%S")
    mpi = f"[MPI_Rank {rank}] " if rank is not None else ""
    tag = f"[_torch][RANK {torch_rank}] " if torch_rank is not None else ""
    return f"[{asctime}] [TRT-LLM] {mpi}{sev} {tag}"


def _native_head(rank: int | None = None) -> str:
    """cpp/include/tensorrt_llm/common/logger.h getPrefix: '%s %s %s ' / '%s %s %s [%d] ' of
    getCurrentTimestamp() ('%m-%d-%Y %H:%M:%S' + '.' + 6-digit microseconds), '[TRT-LLM]', the level name."""
    ts = datetime(2026, 8, 19, 14, 11, 49).strftime("%m-%d-%Y %H:%M:%S") + f".{208:06d}"
    return f"{ts} [TRT-LLM] [I] " + (f"[{rank}] " if rank is not None else "")


def _iter_new(states: dict[str, int], kv: str = "0.250", dev: str = "4.1ms") -> str:
    """py_executor.py profile_step, the stored version: its f-string, values filled in."""
    return (f"iter = {12}, "
            f"global_rank = {3}, "
            f"rank = {3}, "
            f"num_scheduled_requests = {5}, "
            f"kv_cache_util = {kv}, "
            f"currank_total_requests = {7}/"
            f"{64}, "
            f"host_step_time = {9.5}ms, "
            f"prev_device_step_time = {dev}, "
            f"timestamp = {'2026-08-19 14:11:49'}, "
            f"states = {states}")


def _iter_old(states: dict[str, int]) -> str:
    """py_executor.py profile_step at 9521caf4 (release 1.0's form)."""
    return (f"iter = {57}, "
            f"global_rank = {0}, "
            f"rank = {0}, "
            f"currank_total_requests = {0}/{256}, "
            f"host_step_time = {11.2}ms, "
            f"prev_device_step_time = {'10.9ms'}, "
            f"timestamp = {'2026-08-19 14:11:49'}, "
            f"num_scheduled_requests: {64}, "
            f"states = {states}")


AT = datetime(2026, 8, 19, 14, 11, 49, tzinfo=UTC)
NEW_STATES = {"num_ctx_requests": 1, "num_ctx_tokens": 8192, "num_generation_tokens": 4, "cached_kv_tokens": 0}
OLD_STATES = {"num_ctx_requests": 0, "num_ctx_tokens": 0, "num_generation_tokens": 64}

LINES: list[tuple[str, str, type, dict[str, Any]]] = [
    ("py_executor.py profile_step (kv_cache_util), PyTorch rank tag", _py_head(torch_rank=3) + _iter_new(NEW_STATES),
     StatsSample, {"variant": "trtllm-iter", "engine": 3, "running": 5, "kv_usage": 25.0, "new_tokens": 8192,
                   "ctx_requests": 1, "gen_tokens": 4, "step_ms": 9.5, "device_step_ms": 4.1, "steps": 1,
                   "prompt_tps": None, "gen_tps": None, "waiting": None, "ts": AT}),
    ("py_executor.py profile_step, an engine's first step (N/A), logger.py MPI rank",
     _py_head(rank=3) + _iter_new(NEW_STATES, kv="N/A", dev="N/A"),
     StatsSample, {"kv_usage": None, "device_step_ms": None, "running": 5, "ts": AT}),
    ("py_executor.py profile_step at 9521caf4, logger.py single rank", _py_head() + _iter_old(OLD_STATES),
     StatsSample, {"engine": 0, "running": 64, "gen_tokens": 64, "new_tokens": 0, "step_ms": 11.2,
                   "device_step_ms": 10.9, "kv_usage": None, "ts": AT}),
    ("_util.py KvCacheCreator", _py_head(torch_rank=0) + f"Estimated max tokens in KV cache : {1048576}",
     StartupFact, {"key": "kv_cache_tokens", "value": 1048576, "ts": AT}),
    ("common/logger.h with a rank, the KV size through the C++ head", _native_head(2) +
     f"Estimated max tokens in KV cache : {262144}",
     StartupFact, {"key": "kv_cache_tokens", "value": 262144, "ts": AT.replace(microsecond=208)}),
    # start-up stages (catalog/startup.toml), each f-string filled in
    ("_util.py configure_kv_cache_capacity, the weights in", _py_head(torch_rank=0) +
     f"Memory used after loading model weights (inside torch) in memory usage profiling: {61.4172:.2f} GiB",
     StageMark, {"stage": "weights", "mark": "done", "fields": (("memory_gib", 61.42),), "ts": AT}),
    ("_util.py configure_kv_cache_capacity, the tokens form", _py_head(torch_rank=0) +
     f"Estimated max tokens in KV cache : {1048576}",
     StageMark, {"stage": "kv_cache", "mark": "done", "fields": (("tokens", 1048576),)}),
    ("_util.py configure_kv_cache_capacity, the memory form", _py_head(rank=1) +
     f"Estimated max memory in KV cache : {(120.6 * 2**30) / 2**30:.2f} GiB",
     StageMark, {"stage": "kv_cache", "mark": "done", "fields": (("kv_gib", 120.6),)}),
    ("kv_cache_transceiver.py create_kv_cache_transceiver (UCX)", _py_head(torch_rank=2) +
     "Using UCX kv-cache transceiver. If your devices are not in the same domain, please consider setting "
     "UCX_CUDA_IPC_ENABLE_MNNVL=n, UCX_RNDV_SCHEME=put_zcopy and/or unset UCX_NET_DEVICES upon server "
     "hangs or lower-than-expected performance.",
     StageMark, {"stage": "kv_connector", "mark": "done"}),
    ("model_engine.py warmup, current", _py_head(torch_rank=0) +
     f"Run generation-only CUDA graph warmup for batch size={128}, draft_len={0}, max_seq_len={9217}",
     StageMark, {"stage": "cuda_graphs", "mark": "start"}),
    ("model_engine.py warmup, older", _py_head(rank=0) + f"Run generation only CUDA graph warmup for batch size={64}",
     StageMark, {"stage": "cuda_graphs", "mark": "start"}),
]


@pytest.mark.parametrize(("where", "line", "kind", "want"), LINES, ids=[w for w, *_ in LINES])
def test_every_claimed_wording_is_read(where: str, line: str, kind: type, want: dict[str, Any]) -> None:
    (rec,) = [r for r in parse_text(line + "\n") if isinstance(r, kind)]
    assert {k: getattr(rec, k) for k in want} == want, where
