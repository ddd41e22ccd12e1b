"""TensorRT-LLM (``python -m dynamo.trtllm``): its log heads, its iteration log as the run model's stats, its
executor's log sites, and the node's local clock its lines are written in. Formats from TensorRT-LLM's source
(``data/sources.toml`` names each file and the commit read)."""

from __future__ import annotations

from diag.parsers.engine import EngineAdapter

from .clock import offset_of
from .iterlog import ITER_COLUMNS
from .phrases import PHRASES
from .recipe import engine_gpus, own_batches, parse_build

ADAPTER = EngineAdapter(
    name="trtllm",
    display="TensorRT-LLM",
    backend_types=("trtllm",),
    config_key="trtllm_config",
    launch_modules=("dynamo.trtllm", "trtllm-serve"),
    # literals only TensorRT-LLM's logs write: its logger's prefix (tensorrt_llm/logger.py, common/logger.h) and
    # its iteration line (py_executor.py)
    evidence=("[TRT-LLM] [I] ", "[TRT-LLM] [W] ", "[TRT-LLM] [E] ", "currank_total_requests = "),
    header_classes=("trtllm",),
    format_modules=("diag.engines.trtllm.heads", "diag.engines.trtllm.iterlog", "diag.engines.trtllm.startup"),
    # its classified log sites (tools/site_catalog.py from catalog/sites.toml)
    catalogs={"sites": "catalog/sites.generated.jsonl", "faults": "catalog/faults.toml", "startup": "catalog/startup.toml"},
    # a line per scheduler step, folded by the run model into intervals of this length (rules.windows.fold_steps)
    stats_cadence_s=10.0,
    stats_variants=("trtllm-iter",),
    columns=(ITER_COLUMNS,),
    # KvCacheCreator.configure_kv_cache_capacity (_torch/pyexecutor/_util.py) runs the executor on dummy requests
    # before the real engine exists, then logs "Estimated max tokens in KV cache": those steps are no service
    warmup_until="kv_cache_tokens",
    clock_offset=offset_of,
    phrases=PHRASES,
    rule_catalogs=("catalog/config.toml",),
    checks_module="diag.engines.trtllm.checks",
    metrics_module="diag.engines.trtllm.metrics",
    metric_prefixes=("trtllm_",),
    recipe_build=parse_build,
    # srtctl's identity.frameworks key (src/srtctl/core/fingerprint.py FRAMEWORK_PACKAGES, srt-slurm c88ef73)
    framework="tensorrt_llm",
    # srtctl writes the role's trtllm_config to /logs/trtllm_config_<mode>.yaml and passes that file
    # (backends/trtllm.py build_worker_command: dynamo.trtllm --extra-engine-args, trtllm-serve --config)
    config_file_flags=("extra_engine_args", "config"),
    engine_gpus=engine_gpus,
    own_batches=own_batches,
    # its fields as srtctl's trtllm_config writes them (the real recipes' decode stream_interval)
    knobs={"stream_chunk": "stream_interval", "stats_on": "print_iter_log", "tensor_parallel": "tensor_parallel_size",
           "prefill_token_budget": "max_num_tokens"},
)
