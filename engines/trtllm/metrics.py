"""TensorRT-LLM's Prometheus series (``trtllm_``), in the shape of core's vocabulary (:mod:`diag.parsers.prom_vocab`).

Names from ``tensorrt_llm/metrics/collector.py`` (``MetricsCollector``, prefix ``trtllm_``; the commit read is in
``data/sources.toml``) and, for the KV-transfer counter, Dynamo's ``prometheus_names.trtllm_additional``
(ai-dynamo-runtime 1.6.1). ``python -m dynamo.trtllm`` registers both collectors with labels ``model_name`` and
``engine_type="trtllm"`` and exposes every ``trtllm_`` series on the worker's metrics endpoint
(dynamo/trtllm/workers/llm_worker.py 847-898), where Dynamo's own labels name the endpoint. No series carries a
rank: one worker is one engine. Counters are named without ``_total`` (core's
:func:`~diag.parsers.prom_vocab.canonical` strips it).

The iteration gauges come from ``log_iteration_stats``: ``num_requests_running`` is the executor's
``numActiveRequests``, ``num_requests_waiting`` its ``numQueuedRequests`` and ``kv_cache_utilization`` used over
max KV blocks (0..1, like ``vllm:kv_cache_usage_perc``). The token counters grow when a request finishes
(``log_request_metrics_dict``), so they count every prompt token of the request, cached or transferred ones
included: ``prompt_all``, as SGLang's ``prompt_tokens``.
"""

from __future__ import annotations

ALIASES: dict[str, str] = {}

# stats field -> (kind, sources in priority order: (metric, required (label, value) or None)), as core's FIELDS
FIELDS: dict[str, tuple[str, tuple[tuple[str, tuple[str, str] | None], ...]]] = {
    "running": ("gauge", (("trtllm_num_requests_running", None),)),
    "waiting": ("gauge", (("trtllm_num_requests_waiting", None),)),
    "kv": ("gauge", (("trtllm_kv_cache_utilization", None),)),
    "prompt_all": ("counter", (("trtllm_prompt_tokens", None),)),
    "gen": ("counter", (("trtllm_generation_tokens", None),)),
}

# TensorRT-LLM exports no failed-transfer counter; Dynamo counts the successful ones (one per request moved).
KV_SIGNALS: dict[str, tuple[tuple[str, ...], ...]] = {}
KV_COUNTS: dict[str, tuple[tuple[str, ...], ...]] = {"kv_transfers": (("trtllm_kv_transfer_success",),)}

# run-model key -> histogram family (seconds), as core's LATENCY; TPOT is the collector's inter-token latency
LATENCY: dict[str, str] = {
    "ttft": "trtllm_time_to_first_token_seconds",
    "itl": "trtllm_time_per_output_token_seconds",
    "e2e": "trtllm_e2e_request_latency_seconds",
    "queue": "trtllm_request_queue_time_seconds",
}

# a target with this gauge is a TensorRT-LLM engine (set from its first iteration stats on)
PRESENCE = "trtllm_num_requests_running"
