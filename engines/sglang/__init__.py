"""SGLang (and ``python -m dynamo.sglang``): its log formats, catalogs, flags, metrics and recipe checks."""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter

ADAPTER = EngineAdapter(
    name="sglang",
    display="SGLang",
    backend_types=("sglang",),
    config_key="sglang_config",
    launch_modules=("dynamo.sglang", "sglang.launch_server", "sglang serve"),
    evidence=("Prefill batch", "Decode batch", "The server is fired up and ready to roll!"),
    header_classes=("sglang",),
    metric_prefixes=("sglang:",),
    stats_cadence_s=None,  # a batch line every decode-log-interval steps, not on a clock
    # srtctl backends/sglang.py build_worker_command: always --model-path, --nccl-port (from the system port),
    # --dump-config-to, and the prefill bootstrap port (again after the recipe's own)
    launcher_flags=("model_path", "nccl_port", "dump_config_to", "disaggregation_bootstrap_port"),
    knobs={
        "prefill_token_budget": "chunked-prefill-size",
        "max_running_requests": "max-running-requests",
        "kv_memory_fraction": "mem-fraction-static",
        "cuda_graph_max_batch": "cuda-graph-max-bs",
        "kv_block_size": "page-size",
        "kv_dtype": "kv-cache-dtype",
        "tensor_parallel": "tp-size",
        "data_parallel": "dp-size",
        "expert_parallel": "ep-size",
        "stream_chunk": "stream-interval",
        "pd_role": "disaggregation-mode",
        "transfer_backend": "disaggregation-transfer-backend",
    },
)
