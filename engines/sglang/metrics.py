"""SGLang's Prometheus series (``sglang:``), in the shape of core's vocabulary (:mod:`diag.parsers.prom_vocab`).

Names from the wheels' metrics collectors: 0.5.23 ``sglang/srt/observability/metrics_collector.py`` (scheduler
gauges from line 365, P/D queues 583-701, token counters 1033 and 1856-1941, latency histograms 838 and
2041-2068) and 0.4.6 ``sglang/srt/metrics/collector.py`` (160-492). Counters are named without ``_total`` (core's
:func:`~diag.parsers.prom_vocab.canonical` strips it). The scheduler's series carry ``tp_rank``, ``pp_rank``,
``moe_ep_rank`` and, with DP attention, ``dp_rank`` (metrics_collector.py:1383-1392): the DP rank is the engine.
Gauges are fractions where core's are (``token_usage`` 0..1 like ``vllm:kv_cache_usage_perc``).
"""

from __future__ import annotations

# old name -> current name: 0.4.6 spelled the prefill inflight queue "infight" (collector.py:231)
ALIASES: dict[str, str] = {
    "sglang:num_prefill_infight_queue_reqs": "sglang:num_prefill_inflight_queue_reqs",
}

# stats field -> (kind, sources in priority order: (metric, required (label, value) or None)), as core's FIELDS.
# ``realtime_tokens{mode}`` (0.5.23) counts tokens as the scheduler computes them, every log interval
# (prefill_compute: computed prompt tokens, the log's "input throughput"; decode: generated tokens);
# ``prompt_tokens`` / ``generation_tokens`` count at request finish (both releases).
FIELDS: dict[str, tuple[str, tuple[tuple[str, tuple[str, str] | None], ...]]] = {
    "running": ("gauge", (("sglang:num_running_reqs", None),)),
    "waiting": ("gauge", (("sglang:num_queue_reqs", None),)),
    "kv": ("gauge", (("sglang:token_usage", None),)),
    "prompt": ("counter", (("sglang:realtime_tokens", ("mode", "prefill_compute")),)),
    "prompt_all": ("counter", (("sglang:prompt_tokens", None),)),
    "gen": ("counter", (("sglang:realtime_tokens", ("mode", "decode")), ("sglang:generation_tokens", None))),
    "preempt": ("counter", (("sglang:num_retracted_requests", None),)),
    "bootstrap_req": ("gauge", (("sglang:num_prefill_bootstrap_queue_reqs", None),)),
    "inflight_req": ("gauge", (("sglang:num_prefill_inflight_queue_reqs", None),)),
    "prealloc_req": ("gauge", (("sglang:num_decode_prealloc_queue_reqs", None),)),
    "transfer_req": ("gauge", (("sglang:num_decode_transfer_queue_reqs", None),)),
    "retracted_req": ("gauge", (("sglang:num_retracted_reqs", None),)),
}

# P/D KV-transfer failure counters per signal (groups whose increases add up): requests whose bootstrap
# (handshake with the peer) failed and requests whose KV transfer failed are disjoint.
KV_SIGNALS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kv_failures": (("sglang:num_bootstrap_failed_reqs",), ("sglang:num_transfer_failed_reqs",)),
}
# SGLang counts no successful transfers; its transfer speed and latency are gauges
# (sglang:kv_transfer_speed_gb_s, sglang:kv_transfer_latency_ms), not counts.
KV_COUNTS: dict[str, tuple[tuple[str, ...], ...]] = {**KV_SIGNALS}

# run-model key -> histogram family (seconds), as core's LATENCY
LATENCY: dict[str, str] = {
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
    "e2e": "sglang:e2e_request_latency_seconds",
    "queue": "sglang:queue_time_seconds",
}

# a scrape holding this series is an SGLang scheduler's (both releases)
PRESENCE = "sglang:num_running_reqs"
ENGINE_LABELS = ("dp_rank",)
