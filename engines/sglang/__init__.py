"""SGLang (and ``python -m dynamo.sglang``): its log formats, catalogs, flags, metrics and recipe checks."""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter

from .flags import known_flags
from .knobs import knob_share
from .phrases import PHRASES
from .recipe import engine_gpus, parse_build

ADAPTER = EngineAdapter(
    name="sglang",
    display="SGLang",
    backend_types=("sglang",),
    config_key="sglang_config",
    launch_modules=("dynamo.sglang", "sglang.launch_server", "sglang serve"),
    # literals only SGLang's logs write: its batch lines, its ready line, its start-up and death wordings, the
    # launch's argument dump (0.4.6 entrypoints/engine.py:123 f"{server_args=}"; 0.5.23 engine.py:311 a dict)
    evidence=("Prefill batch", "Decode batch", "The server is fired up and ready to roll!", "server_args=ServerArgs(",
              "server_args={'", "Load weight begin. avail mem=", "Scheduler hit an exception"),
    header_classes=("sglang",),
    format_modules=("diag.engines.sglang.heads", "diag.engines.sglang.stats", "diag.engines.sglang.startup"),
    catalogs={"faults": "catalog/faults.toml", "startup": "catalog/startup.toml",
              "sites": "catalog/sites.generated.jsonl", "srtctl_fields": "data/srtctl_fields.toml",
              "frames": "catalog/frames.toml"},
    metric_prefixes=("sglang:",),
    stats_cadence_s=None,  # a batch line every decode-log-interval steps, not on a clock
    stats_variants=("sglang-prefill", "sglang-decode"),
    knob_share=knob_share,
    metrics_module="diag.engines.sglang.metrics",
    # decode requests whose KV is being allocated or received from prefill (#prealloc-req, #transfer-req)
    waiting_kv=(("prealloc_req", "transfer_req"),),
    recipe_build=parse_build,
    engine_gpus=engine_gpus,
    engine_proc=r"DP(\d+)\b",   # a line's rank tags ("DP3 TP3 EP3"): its DP rank is the engine
    # srtctl backends/sglang.py build_worker_command: always --model-path, --nccl-port (from the system port),
    # --dump-config-to, the prefill bootstrap port (again after the recipe's own), and on a multi-node worker
    # --dist-init-addr (the leader's address)
    launcher_flags=("model_path", "nccl_port", "dump_config_to", "disaggregation_bootstrap_port", "dist_init_addr"),
    integer_flags=dict.fromkeys(("tp_size", "dp_size", "pp_size", "ep_size"), 1),
    knobs={
        "prefill_token_budget": "chunked-prefill-size",
        "running_cap": "max-running-requests",
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
        "ssm_cache_dtype": "mamba-ssm-dtype",
        "max_context_len": "context-length",
    },
    rule_catalogs=("catalog/config.toml",),
    checks_module="diag.engines.sglang.checks",
    flag_names=known_flags,
    phrases=PHRASES,
    frames={  # the scheduler: run_event_loop, event_loop_overlap, run_batch
        "runtime": ("event_loop", "run_batch", "rid="),   # rid=: a request id in a fault line
    },
)
