"""vLLM (and ``python -m dynamo.vllm``): its log formats, catalogs, flags, metrics and recipe checks."""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter
from diag.parsers.vllm_flags import known_flags

from .silence import why_no_stats

ADAPTER = EngineAdapter(
    name="vllm",
    display="vLLM",
    backend_types=("vllm",),
    config_key="vllm_config",
    launch_modules=("dynamo.vllm", "vllm serve", "vllm.entrypoints"),
    evidence=("Initializing a V1 LLM engine", "vLLM API server version", "EngineCore_DP", "(EngineCore pid="),
    header_classes=("vllm",),
    metric_prefixes=("vllm:",),
    stats_cadence_s=10.0,
    knobs={
        "prefill_token_budget": "max-num-batched-tokens",
        "max_running_requests": "max-num-seqs",
        "kv_memory_fraction": "gpu-memory-utilization",
        "cuda_graph_max_batch": "max-cudagraph-capture-size",
        "kv_block_size": "block-size",
        "kv_dtype": "kv-cache-dtype",
        "tensor_parallel": "tensor-parallel-size",
        "data_parallel": "data-parallel-size",
        "expert_parallel": "enable-expert-parallel",
        "stream_chunk": "stream-interval",
        "api_servers": "api-server-count",
        "transfer_backend": "kv-transfer-config",
    },
    flag_names=known_flags,
    catalogs={"faults": "catalog/faults.toml", "startup": "catalog/startup.toml", "call_sites": "catalog/call_sites.toml"},
    frames={  # V1's EngineCore busy loop, the workers' execute_model it waits on, the engine's construction
        "runtime": ("EngineDeadError", "output_handler", "execute_model", "RPC call", "process_input", "run_busy_loop",
                    "get_output", "sample_tokens", "update_from_output", "synchronize_input_prep"),
        "startup": ("determine_num_available_blocks", "profile_run", "initialize_kv_caches", "from_vllm_config",
                    "wait_for_engine_startup", "run_engine_core", "init_device", "launch_core_engines",
                    "make_async_mp_client", "capture_model"),
        "serving_loop": ("execute_model", "run_busy_loop"),
    },
    metrics_module="diag.engines.vllm.metrics",
    why_no_stats=why_no_stats,
)
