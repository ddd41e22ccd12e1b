"""vLLM (and ``python -m dynamo.vllm``): its log formats, catalogs, flags, metrics and recipe checks."""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter

from .flags import classify, known_flags
from .heads import PLAIN_HEAD, TZ_PROBE
from .kv import KV_COLUMNS
from .phrases import PHRASES
from .recipe import engine_gpus, parse_build, read_recipe
from .silence import STATS_FACTS, why_no_stats
from .startup import role_from_head
from .stats import V1_COLUMNS

ADAPTER = EngineAdapter(
    name="vllm",
    display="vLLM",
    backend_types=("vllm",),
    config_key="vllm_config",
    launch_modules=("dynamo.vllm", "vllm serve", "vllm.entrypoints"),
    evidence=("Initializing a V1 LLM engine", "vLLM API server version", "EngineCore_DP", "(EngineCore pid="),
    header_classes=("vllm", "lmcache", "router"),   # its own heads, LMCache's inside it, its router's
    metric_prefixes=("vllm:",),
    stats_cadence_s=10.0,
    knobs={
        "prefill_token_budget": "max-num-batched-tokens",
        "running_cap": "max-num-seqs",
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
        "ssm_cache_dtype": "mamba-ssm-cache-dtype",
        "max_context_len": "max-model-len",
        "stats_off": "disable-log-stats",
        "scheduling_overlap": "async-scheduling",
        "dp_hybrid_lb": "data-parallel-hybrid-lb",
    },
    rule_catalogs=("catalog/config.toml",),
    checks_module="diag.engines.vllm.checks",
    flag_names=known_flags,
    format_modules=("diag.engines.vllm.heads", "diag.engines.vllm.stats", "diag.engines.vllm.startup",
                    "diag.engines.vllm.kv"),
    columns=(V1_COLUMNS, KV_COLUMNS),
    plain_head=PLAIN_HEAD,
    connector_paths=("kv_transfer", "kv_connector"),   # vllm/distributed/kv_transfer/kv_connector/...
    tz_probe=TZ_PROBE,
    role_from_text=role_from_head,
    classify_flag=classify,
    recipe_build=parse_build,
    read_recipe=read_recipe,
    engine_gpus=engine_gpus,
    integer_flags=dict.fromkeys(("prefill_context_parallel_size", "max_num_batched_tokens", "max_num_seqs",
                                 "max_cudagraph_capture_size", "api_server_count", "block_size"), 1),
    hooks_module="diag.engines.vllm.knowledge",
    launch_data="data/launch.toml",
    fact_flags={"api_server_count": "api_server_count", "async_scheduling": "async_scheduling"},
    fact_env={"ssm_conv_layout": "VLLM_SSM_CONV_STATE_LAYOUT"},
    engine_proc=r"(?:EngineCore|Worker)_DP(\d+)",
    kv_roles={"kv_producer": "prefill", "kv_consumer": "decode"},
    # KV loads not started or in progress (vLLM >= 0.32, P/D decode), else the deferred requests (>= 0.31:
    # skipped for a KV transfer, LoRA budget or a blocked status)
    waiting_kv=(("kv_fetch_waiting", "kv_fetch_running"), ("deferred",)),
    shown_facts=("version", "architecture", "kv_role", "kv_memory_gib", "kv_cache_tokens", "max_concurrency",
                 "max_model_len", "async_scheduling", "api_server_count", "stats_disabled", "ssm_conv_layout"),
    # by construction, not by configuration (srtctl's launcher gives each process its own)
    per_process_flags=frozenset({"data_parallel_address", "data_parallel_start_rank", "device_ids",
                                 "data_parallel_rpc_port", "data_parallel_size_local"}),
    catalogs={"faults": "catalog/faults.toml", "startup": "catalog/startup.toml", "call_sites": "catalog/call_sites.toml",
              "sites": "catalog/sites.generated.jsonl",
              "srtctl_fields": "data/srtctl_fields.toml", "frames": "catalog/frames.toml"},
    frames={  # V1's EngineCore busy loop, the workers' execute_model it waits on, the engine's construction
        "runtime": ("EngineDeadError", "output_handler", "execute_model", "RPC call", "process_input", "run_busy_loop",
                    "get_output", "sample_tokens", "update_from_output", "synchronize_input_prep",
                    "cmpl-"),   # a request id (cmpl-/chatcmpl-) in a fault line: it was serving
        "startup": ("determine_num_available_blocks", "profile_run", "initialize_kv_caches", "from_vllm_config",
                    "wait_for_engine_startup", "run_engine_core", "init_device", "launch_core_engines",
                    "make_async_mp_client", "capture_model"),
    },
    metrics_module="diag.engines.vllm.metrics",
    why_no_stats=why_no_stats,
    stats_facts=STATS_FACTS,
    phrases=PHRASES,
    fact_keys=("async_scheduling", "api_server_count", "max_model_len", "ssm_conv_layout"),
)
