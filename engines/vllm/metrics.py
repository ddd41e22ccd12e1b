"""vLLM's Prometheus vocabulary, in the shape :mod:`diag.parsers.prom_vocab` documents (merged there with the
other engines' and with Dynamo's fallback series). Names without the counter suffix ``_total``."""

from __future__ import annotations

# old name -> current name (vllm-formats.md §3.3)
ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
}

# stats field -> (kind, sources in priority order: (current metric name, required label or None)).
# Since 2026-02 the log's "Avg prompt throughput" counts locally computed tokens only: the
# ``prompt_tokens_by_source{source="local_compute"}`` counter matches it (vLLM 0.33 v1/metrics/loggers.py;
# the other sources are ``local_cache_hit`` and ``external_kv_transfer``); ``prompt_tokens`` counts every
# source, a P/D decode's transferred KV included, so it feeds ``prompt_all`` and the run model takes it as
# computed only where no KV arrives by transfer (rules.endpoints).
FIELDS: dict[str, tuple[str, tuple[tuple[str, tuple[str, str] | None], ...]]] = {
    "running": ("gauge", (("vllm:num_requests_running", None),)),
    "waiting": ("gauge", (("vllm:num_requests_waiting", None),)),
    "kv": ("gauge", (("vllm:kv_cache_usage_perc", None),)),
    "prompt": ("counter", (("vllm:prompt_tokens_by_source", ("source", "local_compute")),)),
    "prompt_all": ("counter", (("vllm:prompt_tokens", None),)),
    "gen": ("counter", (("vllm:generation_tokens", None),)),
    "preempt": ("counter", (("vllm:num_preemptions", None),)),
    "prefix_q": ("counter", (("vllm:prefix_cache_queries", None),)),
    "prefix_h": ("counter", (("vllm:prefix_cache_hits", None),)),
    "ext_q": ("counter", (("vllm:external_prefix_cache_queries", None),)),
    "ext_h": ("counter", (("vllm:external_prefix_cache_hits", None),)),
    # waiting split (vLLM >= 0.31, v1/metrics/loggers.py): ``deferred`` is the log's "Deferred: N reqs"
    # (skipped: KV transfer, LoRA budget, blocked), ``capacity`` the rest; a P/D decode engine's (KV
    # consumer, 0.33) KV loads by stage are the log's "KV fetch: N waiting to start, N in progress, ..."
    "deferred": ("gauge", (("vllm:num_requests_waiting_by_reason", ("reason", "deferred")),)),
    **{f"kv_fetch_{key}": ("gauge", (("vllm:num_requests_kv_fetch_by_stage", ("stage", stage)),))
       for key, stage in (("waiting", "waiting_to_start"), ("running", "in_progress"), ("done", "completed_waiting"))},
}

# P/D KV-connector failure counters, per signal: groups whose increases add up, each group's members
# overlapping (the group counts its largest increase).
# NIXL: up to vLLM 0.30 ``nixl_num_failed_transfers`` and ``nixl_num_failed_notifications`` were
# disjoint; since 0.31 (nixl/stats.py) failed transfers include handshake and notification failures
# and notifications are also counted on their own. The largest of the two is exact since 0.31 and
# still sees every failed interval before it (a lower bound on the count), without a version.
# Mooncake (vLLM >= 0.33, mooncake/stats.py): failed transfers and failed receives are disjoint.
KV_SIGNALS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kv_failures": (("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications"),
                    ("vllm:mooncake_num_failed_transfers",), ("vllm:mooncake_num_failed_recvs",)),
    "kv_expiry": (("vllm:nixl_num_kv_expired_reqs",), ("vllm:mooncake_num_kv_expired_reqs",)),
}
# what the Python paths count besides the exported signals: successful transfers, one observation of the
# connector's transfer-time histogram each (nixl/stats.py, mooncake/stats.py observe every transfer_duration)
KV_COUNTS: dict[str, tuple[tuple[str, ...], ...]] = {
    **KV_SIGNALS,
    "kv_transfers": (("vllm:nixl_xfer_time_seconds_count",), ("vllm:mooncake_xfer_time_seconds_count",)),
}

# run-model latency key -> histogram family (seconds), vllm-formats.md §3: TTFT, inter-token latency,
# end-to-end latency, queue time
LATENCY: dict[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
}

# a gauge every serving engine exports from its start: a target with it is a vLLM engine
PRESENCE = "vllm:num_requests_running"
