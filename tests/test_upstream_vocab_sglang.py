"""SGLang's wordings, two releases (0.5.23 and 0.4.6.post5): for every format string the SGLang adapter
claims, a log line built from the source's f-string with values filled in (the source file:line is noted
beside it, paths under the wheel's ``sglang/``), and what diag makes of it: the record's kind and fields, the
start-up stage and mark, the fault cause."""

from __future__ import annotations

from typing import Any

import pytest

from diag.parsers.records import Fault, Preemption, StageMark, StatsSample

from helpers import parse_text

H = "[2026-08-12 14:05:14 DP1 TP1 EP1] "     # 0.5.23 scheduler head with DP attention (utils/common.py:2630)
H0 = "[2025-05-20 10:00:01 TP0] "             # 0.4.6 TP-only scheduler head (utils.py:876)

# (release, source, line, expected StatsSample fields)
STATS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("0.5.23", "srt/managers/scheduler_components/metrics_reporter.py:754",
     H + "Prefill batch, #new-seq: 18, #new-token: 16384, #cached-token: 512, token usage: 0.12, #running-req: 3, "
     "#queue-req: 41, #pending-token: 0, cuda graph: False, input throughput (token/s): 15873.20",
     {"variant": "sglang-prefill", "engine": 1, "running": 3, "waiting": 41, "kv_usage": 12.0, "prompt_tps": 15873.2,
      "gen_tps": None, "new_tokens": 16384, "cached_tokens": 512, "cuda_graph": False}),
    ("0.5.23", "metrics_reporter.py:754-772 (P/D prefill, SGLANG_LOG_FORWARD_ITERS, MFU suffix)",
     H + "Prefill batch [77], #new-seq: 4, #new-token: 8192, #cached-token: 0, token usage: 0.30, #running-req: 4, "
     "#queue-req: 9, #pending-token: 128, #replay-token: 64, #bootstrap-req: 2, #inflight-req: 5, #optimistic-req: 1, "
     "cuda graph: True, input throughput (token/s): 100.00, est. prefill TFLOPS/s (per GPU): 12.30",
     {"running": 4, "waiting": 9, "bootstrap_req": 2, "inflight_req": 5, "prompt_tps": 100.0, "cuda_graph": True}),
    ("0.5.23", "scheduler_components/pool_stats_observer.py:104 (SWA + hybrid SSM pools)",
     H + "Prefill batch, #new-seq: 1, #new-token: 2304, #cached-token: 0, full token usage: 0.30, swa token usage: 0.50, "
     "mamba usage: 0.70, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput "
     "(token/s): 49004.48",
     {"kv_usage": 70.0, "running": 0, "waiting": 0}),
    ("0.5.23", "metrics_reporter.py:963, :1038",
     H + "Decode batch, #running-req: 64, #token: 120000, token usage: 0.91, cuda graph: True, gen throughput "
     "(token/s): 2301.10, #queue-req: 0",
     {"variant": "sglang-decode", "engine": 1, "running": 64, "waiting": 0, "kv_usage": 91.0, "gen_tps": 2301.1,
      "prompt_tps": None, "cuda_graph": True}),
    ("0.5.23", "metrics_reporter.py:1022-1028 (P/D decode)",
     H + "Decode batch, #running-req: 128, #full token: 901234, full token usage: 0.45, #swa token: 4096, swa token "
     "usage: 0.10, pre-allocated usage: 0.02, #prealloc-req: 4, #transfer-req: 2, #host-receive-req: 0, "
     "#retracted-req: 1, cuda graph: True, gen throughput (token/s): 5120.33, #queue-req: 7",
     {"running": 128, "waiting": 7, "kv_usage": 45.0, "prealloc_req": 4, "transfer_req": 2, "retracted_req": 1}),
    ("0.5.23", "metrics_reporter.py:1004-1008, pool_stats_observer.py:138 (speculative, HiSparse)",
     H + "Decode batch [10240], #running-req: 8, #gpu token: 100, gpu token usage: 0.40, #cpu token: 900, cpu token "
     "usage: 0.90, accept len: 2.10, accept rate: 0.55, cap len: 1.00, npu graph: False, gen throughput (token/s): "
     "812.50, #queue-req: 1",
     {"running": 8, "waiting": 1, "kv_usage": 40.0, "gen_tps": 812.5, "cuda_graph": False}),
    ("0.5.23", "utils/common.py:2629 (SGLANG_LOG_MS) and scheduler.py:6279-6291 (PP, ATTN_CP, MOE_DP tags)",
     "[2026-08-12 14:05:14.208 DP3 PP0 ATTN_CP0 MOE_DP1 TP3 EP3] Decode batch, #running-req: 2, #token: 40, "
     "token usage: 0.01, cuda graph: True, gen throughput (token/s): 83.17, #queue-req: 0",
     {"engine": 3, "running": 2}),
    ("0.4.6", "srt/managers/scheduler.py:1146 (no P/D: no throughput)",
     H0 + "Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, #running-req: 0, "
     "#queue-req: 0",
     {"variant": "sglang-prefill", "engine": 0, "running": 0, "waiting": 0, "kv_usage": 0.0, "prompt_tps": None,
      "new_tokens": 103, "cached_tokens": 1}),
    ("0.4.6", "srt/managers/scheduler.py:1154-1157 (P/D prefill)",
     H0 + "Prefill batch. #new-seq: 4, #new-token: 4096, #cached-token: 128, token usage: 0.30, #running-req: 0, "
     "#unbootstrapped-req: 2, #queue-req: 9, #transferring-req: 3 ",
     {"running": 0, "waiting": 9, "bootstrap_req": 2, "inflight_req": 3, "kv_usage": 30.0}),
    ("0.4.6", "srt/managers/scheduler.py:1202-1227 (speculative, P/D decode)",
     H0 + "Decode batch. #running-req: 32, #token: 40960, token usage: 0.62, accept len: 1.80, pre-allocated usage: "
     "0.05, cuda graph: True, gen throughput (token/s): 1650.12, #queue-req: 3",
     {"variant": "sglang-decode", "engine": 0, "running": 32, "waiting": 3, "kv_usage": 62.0, "gen_tps": 1650.12,
      "cuda_graph": True}),
]

# (release, source, line, stage, mark, fields)
STAGES: list[tuple[str, str, str, str, str, dict[str, float]]] = [
    ("0.5.23", "srt/model_executor/model_runner.py:1274", H + "Load weight begin. avail mem=178.21 GB",
     "weights", "start", {}),
    ("0.5.23", "model_runner.py:1373",
     H + "Load weight end. elapsed=98.12 s, type=DeepseekV3ForCausalLM, avail mem=96.70 GB, mem usage=81.51 GB.",
     "weights", "done", {"took": 98.12, "memory_gib": 81.51}),
    ("0.5.23", "srt/mem_cache/memory_pool.py:2096",
     H + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1302528, KV size: 42.31 GB",
     "kv_cache", "done", {"tokens": 1302528, "kv_gib": 42.31}),
    ("0.5.23", "srt/mem_cache/kv_cache_configurator.py:499", H + "Memory pool end. avail mem=52.80 GB",
     "kv_cache", "done", {}),
    ("0.5.23", "model_runner_components/cuda_graph_setup.py:685",
     H + "Capture target prefill CUDA graph begin. backend=full, num_tokens=[512, 1024], avail mem=52.60 GB",
     "cuda_graphs", "start", {}),
    ("0.5.23", "cuda_graph_setup.py:758",
     H + "Capture draft verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=52.60 GB",
     "cuda_graphs", "start", {}),
    ("0.5.23", "cuda_graph_setup.py:787",
     H + "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=43.10 s, mem usage=1.92 GB, avail mem=50.68 GB.",
     "cuda_graphs", "done", {"took": 43.1, "memory_gib": 1.92}),
    ("0.5.23", "cuda_graph_setup.py:700",
     H + "Capture target prefill CUDA graph end. elapsed=12.00 s, mem usage=0.50 GB, avail mem=50.18 GB.",
     "cuda_graphs", "done", {"took": 12.0, "memory_gib": 0.5}),
    ("0.5.23", "srt/entrypoints/http_server.py:2600", "[2026-08-12 14:06:00] The server is fired up and ready to roll!",
     "ready", "done", {}),
    ("0.4.6", "srt/model_executor/model_runner.py:502", H0 + "Load weight begin. avail mem=78.50 GB",
     "weights", "start", {}),
    ("0.4.6", "model_runner.py:575",
     H0 + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.20 GB, mem usage=15.30 GB.",
     "weights", "done", {"memory_gib": 15.3}),
    ("0.4.6", "srt/mem_cache/memory_pool.py:274",
     H0 + "KV Cache is allocated. #tokens: 411872, K size: 19.64 GB, V size: 19.64 GB", "kv_cache", "done",
     {"tokens": 411872}),
    ("0.4.6", "model_runner.py:978", H0 + "Memory pool end. avail mem=22.91 GB", "kv_cache", "done", {}),
    ("0.4.6", "model_runner.py:1096",
     H0 + "Capture cuda graph begin. This can take up to several minutes. avail mem=22.80 GB", "cuda_graphs", "start", {}),
    ("0.4.6", "model_runner.py:1101",
     H0 + "Capture cuda graph end. Time elapsed: 24.02 s. mem usage=1.21 GB. avail mem=21.59 GB.", "cuda_graphs", "done",
     {"took": 24.02, "memory_gib": 1.21}),
    ("0.4.6", "srt/entrypoints/http_server.py:898", "[2025-05-20 10:01:00] The server is fired up and ready to roll!",
     "ready", "done", {}),
]

# (release, source, line, cause)
FAULTS: list[tuple[str, str, str, str]] = [
    ("0.5.23", "srt/disaggregation/decode.py:2864, common/conn.py:116",
     H + "Decode transfer failed for request rank=1 decode_req.req.rid='3ce8' decode_req.req.bootstrap_room=16 with "
     "exception KVTransferError(bootstrap_room=16): Request 16 timed out after 300.0s in KVPoll.WaitingForInput",
     "sglang_kv_transfer"),
    ("0.5.23", "srt/disaggregation/prefill.py:1287",
     H + "Prefill transfer failed for request rank=1 req.rid='c564' req.bootstrap_room=21 with exception "
     "KVTransferError(bootstrap_room=21): Failed to send kv chunk of 21 to 10.0.0.9:17001", "sglang_kv_transfer"),
    ("0.4.6", "srt/disaggregation/decode.py:364",
     H0 + "Decode transfer failed for request decode_req.req.rid='9a1f' decode_req.req.bootstrap_room=77 with exception "
     "KVTransferError(bootstrap_room=77): Failed to get kvcache from prefill instance, it might be dead",
     "sglang_kv_transfer"),
    ("0.5.23", "srt/disaggregation/common/conn.py:2895",
     H + "Some requests fail to receive KV Cache transfer done signal after bootstrapping. If a greater mean TTFT is "
     "acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' (10 minutes) to relax the timeout "
     "condition. ", "sglang_kv_wait_timeout"),
    ("0.5.23", "common/conn.py:1322",
     H + "RuntimeError: Page size mismatch: prefill server has page_size=64, but decode server has page_size=32. Both "
     "servers must use the same --page-size value.", "sglang_pd_mismatch"),
    ("0.5.23", "common/conn.py:1331",
     H + "RuntimeError: KV cache dtype mismatch: prefill server has kv_cache_dtype=fp8_e4m3, but decode server has "
     "kv_cache_dtype=auto. Both servers must use the same --kv-cache-dtype value.", "sglang_pd_mismatch"),
    ("0.5.23", "srt/disaggregation/mooncake/conn.py:1319",
     "RuntimeError: PD KV layout mismatch on the whole-envelope path: prefill has 2 KV region(s) with item_lens=[1, 2], "
     "decode has 1 with item_len=3. With --enable-unified-memory both sides must enable it and use the same page size "
     "and model spec.", "sglang_pd_mismatch"),
    ("0.5.23", "srt/disaggregation/nixl/conn.py:736",
     H + "NIXL state layout rejected: peer=decode-0 ['mamba: 2 != 3']", "sglang_pd_mismatch"),
    ("0.5.23", "common/conn.py:1316",
     H + "Error fetching prefill server info from bootstrap: HTTPConnectionPool(host='10.0.0.7', port=8998)",
     "sglang_bootstrap"),
    ("0.5.23", "common/conn.py:1312", H + "Failed to get prefill server info: 503, Service Unavailable",
     "sglang_bootstrap"),
    ("0.5.23", "common/conn.py:2851",
     H + "Could not fetch prefill parallel info from bootstrap_addr: 10.0.0.7:8998", "sglang_bootstrap"),
    ("0.5.23", "srt/disaggregation/decode.py:1212",
     H + "Could not fetch prefill parallel info from 10.0.0.7:8998 after 30 attempts", "sglang_bootstrap"),
    ("0.4.6", "srt/disaggregation/mooncake/conn.py:456",
     H0 + "Prefill Failed to register to bootstrap server: [Errno 111] Connection refused", "sglang_bootstrap"),
    ("0.4.6", "mooncake/conn.py:612",
     H0 + "Could not fetch bootstrap info for engine rank: 0 and target_dp_group: 1", "sglang_bootstrap"),
    ("0.5.23", "srt/disaggregation/nixl/conn.py:1930",
     H + "NIXL transport error for room 8812334455: remote agent decode-3 disconnected", "sglang_transfer_backend"),
    ("0.5.23", "nixl/conn.py:1933", H + "Unexpected transfer worker error for room 8812334455",
     "sglang_transfer_backend"),
    ("0.5.23", "nixl/conn.py:2087", H + "Failed to reload NIXL metadata for remote agent decode-3",
     "sglang_transfer_backend"),
    ("0.5.23", "mooncake/conn.py:1150",
     H + "Prefill transfer kvcache error, layers_current_pp_stage is out of range: layers_current_pp_stage=61, "
     "len(dst_k_ptrs)=30", "sglang_transfer_backend"),
    ("0.5.23", "mooncake/conn.py:1738",
     H + "[10.0.0.9:17001] slice size (1024) exceeds target token slot size (512)", "sglang_transfer_backend"),
    ("0.5.23", "mooncake/conn.py:3004",
     H + "Rejecting state transfers to decode session 10.0.0.9:17001: mamba layout differs", "sglang_transfer_backend"),
    ("0.5.23", "srt/managers/scheduler.py:6372", H + "Scheduler hit an exception: Traceback (most recent call last):",
     "sglang_process_died"),
    ("0.5.23", "srt/managers/tokenizer_manager.py:4043",
     "[2026-08-12 14:05:14] TokenizerManager hit an exception: Traceback (most recent call last):", "sglang_process_died"),
    ("0.5.23", "srt/managers/data_parallel_controller.py:1011",
     "[2026-08-12 14:05:14] DataParallelController hit an exception: Traceback (most recent call last):",
     "sglang_process_died"),
    ("0.5.23", "srt/managers/multi_tokenizer_mixin.py:833",
     "[2026-08-12 14:05:14] MultiDetokenizerRouter hit an exception: Traceback (most recent call last):",
     "sglang_process_died"),
    ("0.5.23", "srt/entrypoints/engine.py:1978",
     "[2026-08-12 14:05:15] Received sigquit from a child process. It usually means the child failed.",
     "sglang_process_died"),
    ("0.5.23", "tokenizer_manager.py:4074",
     "[2026-08-12 14:05:15] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
     "sglang_process_died"),
    ("0.4.6", "srt/managers/scheduler.py:2328", H0 + "Scheduler hit an exception: Traceback (most recent call last):",
     "sglang_process_died"),
    ("0.4.6", "srt/managers/tp_worker_overlap_thread.py:121",
     H0 + "TpModelWorkerClient hit an exception: Traceback (most recent call last):", "sglang_process_died"),
    # an NCCL time-out is torch's own wording on an SGLang process: core's cause takes it
    ("0.5.23", "torch ProcessGroupNCCL watchdog (under SGLang's head)",
     H + "[rank1]:[E812 14:05:14.000] [PG 0 Rank 1] ProcessGroupNCCL's watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.", "nccl"),
]

# (release, source, line): decode retraction, a recompute preemption
RETRACTIONS = [
    ("0.5.23", "srt/managers/scheduler.py:4526",
     H + "KV cache pool is full. Retract requests. #retracted_reqs: 4, #new_tokens_gained: 8192, #new_token_ratio: "
     "0.4210 -> 0.6105"),
    ("0.4.6", "srt/managers/scheduler.py:1518",
     H0 + "Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.3000 -> 0.5000"),
]


def _ids(cases: list[tuple[Any, ...]]) -> list[str]:
    return [f"{c[0]}:{c[1].split(' ')[0]}" for c in cases]


@pytest.mark.parametrize("case", STATS, ids=_ids(STATS))
def test_batch_line(case: tuple[str, str, str, dict[str, Any]]) -> None:
    _, _, line, want = case
    recs = parse_text(line)
    stats = [r for r in recs if isinstance(r, StatsSample)]
    assert len(stats) == 1, recs
    assert {k: getattr(stats[0], k) for k in want} == want


@pytest.mark.parametrize("case", STAGES, ids=_ids(STAGES))
def test_startup_line(case: tuple[str, str, str, str, str, dict[str, float]]) -> None:
    _, _, line, stage, mark, fields = case
    marks = [r for r in parse_text(line) if isinstance(r, StageMark)]
    assert [(m.stage, m.mark) for m in marks] == [(stage, mark)], marks
    assert {k: v for k, v in marks[0].fields if k in fields} == fields


@pytest.mark.parametrize("case", FAULTS, ids=_ids(FAULTS))
def test_fault_line(case: tuple[str, str, str, str]) -> None:
    _, _, line, cause = case
    assert cause in {r.cause for r in parse_text(line) if isinstance(r, Fault)}


@pytest.mark.parametrize("case", RETRACTIONS, ids=_ids(RETRACTIONS))
def test_retraction_is_a_preemption(case: tuple[str, str, str]) -> None:
    recs = parse_text(case[2])
    assert [(type(r), r.mode) for r in recs if isinstance(r, Preemption)] == [(Preemption, "retract")]


def test_both_releases_covered() -> None:
    for table in (STATS, STAGES, FAULTS, RETRACTIONS):
        assert {c[0] for c in table} == {"0.5.23", "0.4.6"}
